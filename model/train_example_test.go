package model_test

import (
	"context"
	"fmt"
	"log"
	"math"

	"github.com/x/kernels"
	"github.com/x/kernels/ref"
	"github.com/x/model"
)

// ExampleNewTrainable shows one step with LoRA and a loss computed by the
// caller: reference log-probs with the adapters off, a forward with saved
// activations, the per-token d loss / d logp, a backward and an AdamW
// step. (Accumulate with a Loss does the same on the backend.)
func ExampleNewTrainable() {
	ctx := context.Background()
	m, err := model.Load("testdata/tiny_tied_f32", ref.Backend{})
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	lora := model.LoRAConfig{R: 4, Alpha: 8}
	if err := model.AttachLoRA(m, lora, 42); err != nil {
		log.Fatal(err)
	}
	tr, err := model.NewTrainable(m, model.TrainOptions{})
	if err != nil {
		log.Fatal(err)
	}
	opt, err := model.NewAdamW(m.Backend, tr.Params(), model.DefaultAdamWConfig(1e-3))
	if err != nil {
		log.Fatal(err)
	}
	// Prompt of 3 tokens, completion of 4; the third completion token is a
	// tool response and takes no loss.
	seqs := []model.TrainSeq{{IDs: []int32{5, 17, 99, 3, 250, 7, 42}, Start: 3, Mask: []bool{true, true, false, true}}}
	refLogp, _, err := tr.LogProbs(ctx, seqs, false) // KL reference: adapters off
	if err != nil {
		log.Fatal(err)
	}
	logp, _, err := tr.Forward(ctx, seqs)
	if err != nil {
		log.Fatal(err)
	}
	advantage := float32(1.5)
	dlogp := [][]float32{make([]float32, len(logp[0]))}
	for i := range dlogp[0] {
		dlogp[0][i] = -advantage / 3 // loss = −A·mean(logp) over the 3 scored tokens
	}
	if err := tr.Backward(ctx, dlogp); err != nil {
		log.Fatal(err)
	}
	st, err := opt.Step()
	if err != nil {
		log.Fatal(err)
	}
	tr.ZeroGrad()
	fmt.Println("trainable tensors:", len(tr.Params()))
	fmt.Println("fresh adapter equals reference:", logp[0][0] == refLogp[0][0])
	fmt.Println("optimizer step:", st.Step, "gradient non-zero:", st.GradNorm > 0)
	// Output:
	// trainable tensors: 28
	// fresh adapter equals reference: true
	// optimizer step: 1 gradient non-zero: true
}

// ExampleTrainable_Accumulate is one GRPO step with the loss on the
// backend: the clipped objective with dapo's normalisation (each scored
// token weighs 1/N), one advantage per sequence, a KL term against the
// reference (adapters off), and the per-token statistics the trainer logs.
func ExampleTrainable_Accumulate() {
	ctx := context.Background()
	m, err := model.Load("testdata/tiny_tied_f32", ref.Backend{})
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	if err := model.AttachLoRA(m, model.LoRAConfig{R: 4, Alpha: 8}, 42); err != nil {
		log.Fatal(err)
	}
	tr, err := model.NewTrainable(m, model.TrainOptions{Temperature: 0.7})
	if err != nil {
		log.Fatal(err)
	}
	// Two rollouts of one prompt; the second has a tool response (masked).
	seqs := []model.TrainSeq{
		{IDs: []int32{5, 17, 99, 3, 250, 7}, Start: 3},
		{IDs: []int32{5, 17, 99, 8, 31, 64, 2}, Start: 3, Mask: []bool{true, false, true, true}},
	}
	refLogp, err := tr.RefLogProbs(ctx, seqs)
	if err != nil {
		log.Fatal(err)
	}
	n := 3 + 3 // scored tokens after masks
	weight := make([][]float32, len(seqs))
	for s := range seqs {
		weight[s] = make([]float32, seqs[s].Scored())
		for i := range weight[s] {
			weight[s][i] = 1 / float32(n)
		}
	}
	res, err := tr.Accumulate(ctx, seqs, model.Loss{
		LossParams: kernels.LossParams{Objective: kernels.ObjectiveClipped, EpsLow: 0.2, EpsHigh: 0.28, Beta: 0.04},
		SeqAdv:     []float32{0.7, -0.7},
		Weight:     weight,
		RefLogP:    refLogp, // OldLogP nil: on-policy, the ratio is 1
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("scored tokens:", res.Tokens)
	fmt.Println("loss ≈ 0:", math.Abs(res.Loss) < 1e-6, "(advantages cancel on-policy; the gradient does not)")
	fmt.Println("ratio:", res.Ratio[0][0], "KL at the start:", res.KL[0][0])
	fmt.Println("masked token:", res.LogP[1][1])
	// Output:
	// scored tokens: 6
	// loss ≈ 0: true (advantages cancel on-policy; the gradient does not)
	// ratio: 1 KL at the start: 0
	// masked token: 0
}
