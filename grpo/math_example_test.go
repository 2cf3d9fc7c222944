package grpo_test

import (
	"fmt"
	"math"

	"github.com/x/grpo"
)

func ExampleConfig_Validate() {
	cfg := grpo.DefaultConfig()
	cfg.NumGenerations = 3 // 8 completions per generation are not whole groups of 3
	cfg.LossType = grpo.LossType("ppo")
	cfg.ISCorrectionClipMin = 4 // above ISCorrectionClipMax 3
	fmt.Println(cfg.Validate())
	// Output:
	// grpo: config GenerationBatchSize (generation_batch_size): 8 (= PerDeviceTrainBatchSize 8 × StepsPerGeneration 1) is not a multiple of NumGenerations 3: a generation must hold whole groups; change one of them
	// grpo: config LossType (loss_type): "ppo": use one of [dapo grpo bnpo dr_grpo cispo sapo luspo vespo]
	// grpo: config ISCorrectionClipMin (vllm_importance_sampling_clip_min): vllm_importance_sampling_clip_min (4) must be less than vllm_importance_sampling_clip_max (3)
}

func ExampleComputeAdvantages() {
	// Two prompts, G = 4: rewards from a RewardTable's Total; the last
	// rollout failed on every attempt and is left out.
	rewards := []float64{1, 0, 0, 1, 1, 1, 1, math.NaN()}
	ok := []bool{true, true, true, true, true, true, true, false}
	adv, err := grpo.ComputeAdvantages(rewards, ok, 4, grpo.ScaleGroup)
	if err != nil {
		panic(err)
	}
	for i, a := range adv.A {
		fmt.Printf("%.4f %v\n", a, adv.Loss[i])
	}
	fmt.Printf("frac_reward_zero_std %.3f\n", grpo.FracRewardZeroStd(adv))
	// Output:
	// 0.8659 true
	// -0.8659 true
	// -0.8659 true
	// 0.8659 true
	// 0.0000 true
	// 0.0000 true
	// 0.0000 true
	// 0.0000 false
	// frac_reward_zero_std 0.429
}
