// Command learnexp runs one learning experiment: a task of package
// learning, warm-started, evaluated, trained by GRPO with the settings
// given, and evaluated again, printing one summary line (the experiments
// behind DESIGN.md's "Why policies collapsed to doing less").
//
//	go run ./examples/internal/learning/cmd/learnexp -task kv -loss grpo
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"

	"github.com/x/examples/internal/learning"
	"github.com/x/examples/internal/wordlegame"
	"github.com/x/grpo"
	"github.com/x/model"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "learnexp:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("learnexp", flag.ContinueOnError)
	task := fs.String("task", "kv", "guess16, guess8, button, kv, kv-guessing, kv-partial, wordleN (the first N words of the demo's list)")
	kvValues := fs.Int("kv-values", 2, "the kv tasks' stores draw from this many values (2..8)")
	kvKeys := fs.Int("kv-keys", 0, "the kv tasks' rows ask for this many keys (0: all six)")
	kvGames := fs.Int("kv-games", 0, "the kv tasks' expert games (0: 2048)")
	kvSplit := fs.Bool("kv-split", false, "the kv tasks' values are two-piece words (KVOptions.Split)")
	kvEcho := fs.Bool("kv-echo", false, "the kv expert names the value twice before its submit (KVOptions.Echo)")
	tag := fs.String("tag", "", "label printed with the summary")
	s := learning.Settings{}
	fs.Uint64Var(&s.Seed, "seed", 1, "seed")
	fs.IntVar(&s.Threads, "threads", 2, "threads")
	fs.IntVar(&s.SFTSteps, "sft-steps", 30, "SFT steps")
	fs.Float64Var(&s.SFTLR, "sft-lr", 3e-3, "SFT lr")
	fs.IntVar(&s.SFTBatch, "sft-batch", 8, "expert games per SFT step")
	sftSched := fs.String("sft-schedule", "cosine", "SFT lr schedule after its 10 % warmup (constant, linear, cosine)")
	fs.IntVar(&s.SFTLogEvery, "sft-log", 0, "print the SFT loss every this many steps (with -v)")
	fs.IntVar(&s.Steps, "steps", 20, "GRPO steps")
	fs.IntVar(&s.Prompts, "prompts", 4, "rows per step")
	fs.IntVar(&s.G, "g", 8, "rollouts per row")
	fs.IntVar(&s.LoRARank, "lora", 16, "LoRA rank (-1: every weight)")
	fs.IntVar(&s.SampledEval, "sampled", 4, "sampled eval games per eval row")
	fs.StringVar(&s.CacheDir, "cache", os.Getenv("LEARN_CACHE"), "warm-start cache folder")
	fs.StringVar(&s.OutputDir, "out", "", "GRPO output folder")
	verbose := fs.Bool("v", false, "print every step")
	fs.IntVar(&s.Show, "show", 0, "print this many greedy games (with -v)")
	lr := fs.Float64("lr", 1e-3, "GRPO lr")
	sched := fs.String("schedule", "linear", "lr schedule")
	beta := fs.Float64("beta", 0, "KL weight")
	temp := fs.Float64("temp", 1, "temperature")
	topk := fs.Int("topk", 0, "top-k")
	loss := fs.String("loss", "dapo", "loss type")
	scale := fs.String("scale", "group", "scale_rewards")
	maskTrunc := fs.Bool("mask-trunc", false, "mask truncated completions")
	entropy := fs.Float64("entropy-coef", 0, "entropy bonus")
	iters := fs.Int("iters", 1, "num_iterations")
	penalty := fs.Float64("penalty", 0, "reward per failed tool call (e.g. -0.1)")
	words := fs.String("words", wordlegame.DefaultWordList, "wordle word list")
	rewards := fs.String("rewards", "recipe", "wordle rewards: recipe, trl, win")
	if err := fs.Parse(args); err != nil {
		return err
	}
	t, err := pickTask(*task, *words, *rewards, learning.KVOptions{Rows: 48, Values: *kvValues, Keys: *kvKeys, Games: *kvGames, Split: *kvSplit, Echo: *kvEcho})
	if err != nil {
		return err
	}
	s.SFTSchedule = model.ScheduleKind(*sftSched)
	if *penalty != 0 {
		p := *penalty
		t.Rewards = append(t.Rewards, learning.Reward{Name: "failures", Weight: 1, Fn: func(_ context.Context, r *grpo.Rollout) (float64, error) {
			return p * float64(r.ToolFailures), nil
		}})
	}
	if *beta > 0 && s.LoRARank < 0 {
		return fmt.Errorf("-beta needs LoRA")
	}
	s.Config = func(c *grpo.Config) {
		c.LearningRate, c.LRSchedule, c.Beta = *lr, model.ScheduleKind(*sched), *beta
		c.Temperature, c.TopK = float32(*temp), *topk
		c.LossType, c.ScaleRewards = grpo.LossType(*loss), grpo.ScaleRewards(*scale)
		c.MaskTruncatedCompletions, c.EntropyCoef, c.NumIterations = *maskTrunc, *entropy, *iters
	}
	if *verbose {
		s.Log = os.Stderr
	}
	res, err := learning.Run(ctx, t, s)
	if err != nil {
		return err
	}
	n := len(res.Steps)
	q := max(n/4, 1)
	fmt.Printf("%s %s seed %d | before %s | after %s | reward %.3f->%.3f calls %.2f->%.2f zero-std %.2f->%.2f entropy %.3f->%.3f kl %.4f | sft %s grpo %s | %s\n",
		t.Name, *tag, s.Seed, res.Before, res.After,
		res.Window(grpo.MetricReward, 0, q), res.Window(grpo.MetricReward, n-q, n),
		res.Window(grpo.MetricToolsCallFrequency, 0, q), res.Window(grpo.MetricToolsCallFrequency, n-q, n),
		res.Window(grpo.MetricFracRewardZeroStd, 0, q), res.Window(grpo.MetricFracRewardZeroStd, n-q, n),
		res.Window(grpo.MetricEntropy, 0, q), res.Window(grpo.MetricEntropy, n-q, n),
		res.Window(grpo.MetricKL, n-q, n), res.SFTTime.Round(1e9), res.GRPOTime.Round(1e9), strings.Join(os.Args[1:], " "))
	return nil
}

func pickTask(name, words, rewards string, kv learning.KVOptions) (learning.Task, error) {
	switch {
	case name == "guess16":
		return learning.GuessTask(16), nil
	case name == "guess8":
		return learning.GuessTask(8), nil
	case name == "button":
		return learning.ButtonTask(32), nil
	case name == "kv":
		return learning.KVTask(kv), nil
	case name == "kv-guessing":
		kv.Guessing = true
		return learning.KVTask(kv), nil
	case name == "kv-partial":
		kv.Partial = true
		return learning.KVTask(kv), nil
	case strings.HasPrefix(name, "wordle"):
		var n int
		if _, err := fmt.Sscanf(name, "wordle%d", &n); err != nil {
			return learning.Task{}, fmt.Errorf("-task %q: %w", name, err)
		}
		ws, err := wordlegame.ParseWords(words)
		if err != nil {
			return learning.Task{}, err
		}
		if n < 1 || n > len(ws) {
			return learning.Task{}, fmt.Errorf("-task %q: 1..%d words", name, len(ws))
		}
		if _, ok := learning.WordleRewards[rewards]; !ok {
			return learning.Task{}, fmt.Errorf("-rewards %q: want recipe, trl, win or recipe-no-invalid", rewards)
		}
		return learning.WordleTask(ws[:n], rewards), nil
	}
	return learning.Task{}, fmt.Errorf("unknown task %q", name)
}
