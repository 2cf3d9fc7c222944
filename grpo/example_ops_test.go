package grpo_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/x/grpo"
	"github.com/x/kernels/cpu"
	"github.com/x/model"
	"github.com/x/tokenizer"
)

// A MetricsWriter writes one JSON line per step with the keys in order,
// and a Progress shows the key figures; both are Callbacks.
func ExampleMetricsWriter() {
	w := grpo.NewMetricsWriter(os.Stdout)
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { start = start.Add(5 * time.Second); return start }
	p := grpo.NewProgress(os.Stdout, 10, grpo.ProgressOptions{Mode: grpo.ProgressLines, Description: "grpo", LineEvery: 5, Now: clock})
	callbacks := []grpo.Callback{w.Callback(), p.Callback()}
	for step := 1; step <= 2; step++ {
		m := grpo.Metrics{grpo.MetricReward: 0.25 * float64(step), grpo.MetricLoss: 0.01, grpo.RewardMeanName("win"): 0.5}
		for _, cb := range callbacks {
			if err := cb(step, m); err != nil {
				fmt.Println(err)
			}
		}
	}
	// Output:
	// {"step":1,"loss":0.01,"reward":0.25,"rewards/win/mean":0.5}
	// grpo step 1/10 (10%) reward 0.25 loss 0.01 elapsed 5s eta 45s
	// {"step":2,"loss":0.01,"reward":0.5,"rewards/win/mean":0.5}
}

// SFT warm-starts a model on expert conversations (with tool calls) before
// GRPO; the adapters it trains are then the ones GRPO trains on.
func ExampleSFT() {
	ctx := context.Background()
	m, err := model.Load("Qwen3-0.6B", cpu.New(0))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer m.Close()
	tok, err := tokenizer.Load("Qwen3-0.6B/tokenizer.json")
	if err != nil {
		fmt.Println(err)
		return
	}
	data, err := grpo.LoadConversations("expert-games.jsonl") // {"messages": [...], "tools": [...]} per line
	if err != nil {
		fmt.Println(err)
		return
	}
	cfg := grpo.DefaultSFTConfig()
	cfg.LoRA = &model.LoRAConfig{R: 16, Alpha: 32}
	cfg.LearningRate, cfg.NumEpochs = 1e-4, 2
	cfg.OutputDir, cfg.SaveSteps = "out/sft", 50
	cfg.Progress = os.Stderr
	rep, err := grpo.SFT(ctx, m, tok, data, cfg)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("final loss", rep.History[len(rep.History)-1].Metrics[grpo.MetricLoss])
}
