// Command guess is guess-the-number over the trainer: a small Qwen3 finds
// a hidden number in 1..max through a guess tool whose replies say
// "higher" or "lower". A short SFT warm start on binary-search games comes
// first (a model with random weights cannot call a tool), then GRPO with
// the env's own reward (fewer guesses pay more). It prints the games won,
// greedily, before SFT, after SFT and after GRPO.
//
//	go run ./examples/guess
//	go run ./examples/guess -model DIR    # a Hugging Face Qwen3 folder
//	go run -tags cuda ./examples/guess -device cuda   # on GPU 0 (needs cuda.h to build, a GPU to run)
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/x/env"
	"github.com/x/env/guess"
	"github.com/x/examples/internal/ckpt"
	"github.com/x/examples/internal/cli"
	"github.com/x/grpo"
	"github.com/x/grpo/warmstart"
	"github.com/x/kernels/device"
	"github.com/x/model"
	"github.com/x/tokenizer"
)

func main() { cli.Main("guess", run) }

func run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("guess", flag.ContinueOnError)
	fs.SetOutput(out)
	modelDir := fs.String("model", "", "Hugging Face Qwen3 folder; empty: the embedded small Qwen3")
	maxN := fs.Int("max", 16, "the hidden number is in 1..max")
	sftGames := fs.Int("sft-games", 8, "binary-search games the warm start sees")
	sftSteps := fs.Int("sft-steps", 60, "SFT warm-start steps (0: none)")
	steps := fs.Int("steps", 10, "GRPO steps")
	g := fs.Int("generations", 8, "rollouts per hidden number")
	lr := fs.Float64("lr", 1e-3, "GRPO learning rate")
	evalGames := fs.Int("eval", 16, "games each evaluation plays")
	outDir := fs.String("out", "guess-out", "output folder (metrics.jsonl, plot.png, completions.jsonl)")
	seed := fs.Uint64("seed", 1, "seed")
	hidden := fs.Int("hidden", 0, "hidden size of the embedded model (0: 128)")
	threads := fs.Int("threads", 0, "CPU threads (0: all)")
	dev := fs.String("device", "cpu", "where the model runs: cpu, cuda (GPU 0) or cuda:N (GPU N; needs a binary built with -tags cuda)")
	checkpoints := ckpt.Register(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := checkpoints.Check(); err != nil {
		return err
	}
	switch {
	case *maxN < 2 || *maxN > 1000:
		return fmt.Errorf("-max %d: want 2..1000", *maxN)
	case *g < 2 || *steps < 0 || *sftSteps < 0 || *sftGames < 1 || *evalGames < 1 || *lr <= 0:
		return fmt.Errorf("want -generations ≥ 2, -steps ≥ 0, -sft-steps ≥ 0, -sft-games ≥ 1, -eval ≥ 1, -lr > 0")
	}
	rules := guess.Rules{Max: *maxN}

	be, closeBackend, err := device.Open(*dev, device.Options{Threads: *threads})
	if err != nil {
		return fmt.Errorf("-device: %w", err)
	}
	defer func() { _ = closeBackend() }()
	pol, err := warmstart.Load(warmstart.Options{Dir: *modelDir, Hidden: *hidden, Seed: *seed}, be)
	if err != nil {
		return err
	}
	defer pol.Close()
	fmt.Fprintln(out, "model:", pol.Description)

	cfg := grpo.DefaultConfig()
	cfg.NumGenerations, cfg.PerDeviceTrainBatchSize = *g, 4**g // four numbers per step
	cfg.MaxSteps, cfg.LearningRate, cfg.LRSchedule, cfg.Seed = *steps, *lr, model.ScheduleConstant, *seed
	cfg.Temperature, cfg.TopK = 0.8, 10 // TRL's Wordle recipe: a small model's tail tokens break its tool calls
	cfg.MaxCompletionLength, cfg.MaxToolCallingIterations = 256, 8
	cfg.EnableThinking, cfg.GradientCheckpointing = tokenizer.ThinkingOff, *modelDir != ""
	cfg.OutputDir, cfg.LoggingSteps, cfg.LogCompletions = *outDir, 1, true
	checkpoints.GRPO(&cfg)
	lora := model.LoRAConfig{R: 16, Alpha: 32}
	newTrainer := func() (*grpo.Trainer, error) {
		return grpo.NewTrainer(pol.Model, pol.Tokenizer, cfg,
			grpo.WithEnv(guess.NewFactory(guess.Options{Rules: rules, Seed: *seed})), // its reward is the env's own
			grpo.WithLoRA(lora),
			grpo.WithProgress(out))
	}
	evalRows := seedRows(1_000_000, *evalGames)

	// Before SFT; the evaluation's fresh adapters (B = 0) are removed so the
	// warm start can train every weight of the embedded model.
	tr, err := newTrainer()
	if err != nil {
		return err
	}
	before, err := won(ctx, tr, evalRows)
	tr.Close()
	model.DetachLoRA(pol.Model)
	if err != nil {
		return fmt.Errorf("evaluate: %w", err)
	}
	if *sftSteps > 0 {
		convs, err := warmstart.Conversations(ctx, guess.NewFactory(guess.Options{Rules: rules}), seedRows(0, *sftGames), binarySearch,
			grpo.PlayOptions{Tokenizer: pol.Tokenizer, Config: &cfg})
		if err != nil {
			return err
		}
		sc := grpo.DefaultSFTConfig()
		sc.MaxSteps, sc.LearningRate, sc.BatchSize, sc.Seed = *sftSteps, 3e-3, 8, *seed
		sc.EnableThinking, sc.GradientCheckpointing, sc.Progress = tokenizer.ThinkingOff, *modelDir != "", out
		if *modelDir != "" {
			sc.LoRA = &lora
		}
		if _, err := warmstart.SFT(ctx, pol, convs, sc); err != nil {
			return fmt.Errorf("SFT: %w", err)
		}
	}
	if tr, err = newTrainer(); err != nil {
		return err
	}
	defer tr.Close()
	afterSFT, err := won(ctx, tr, evalRows)
	if err != nil {
		return fmt.Errorf("evaluate: %w", err)
	}
	rep, err := warmstart.Check(ctx, tr, evalRows[:min(4, len(evalRows))], warmstart.CheckOptions{})
	fmt.Fprintln(out, "warm start check:", rep)
	if err != nil && !errors.Is(err, warmstart.ErrNoSignal) {
		return err
	} else if err != nil {
		fmt.Fprintln(out, "warning:", err)
	}
	rows := make([]env.Row, *maxN)
	for i := range rows {
		rows[i] = env.Row{"target": int64(i + 1)}
	}
	if err := checkpoints.ResumeGRPO(tr, out); err != nil {
		return err
	}
	if err := tr.Train(ctx, grpo.NewDataset(rows)); err != nil {
		return err
	}
	afterGRPO, err := won(ctx, tr, evalRows)
	if err != nil {
		return fmt.Errorf("evaluate: %w", err)
	}
	fmt.Fprintf(out, "games won, greedy, of %d: %d before SFT, %d after SFT, %d after GRPO\n", *evalGames, before, afterSFT, afterGRPO)
	return nil
}

// won plays each row once, greedily, and counts the games found.
func won(ctx context.Context, tr *grpo.Trainer, rows []env.Row) (int, error) {
	rep, err := tr.Evaluate(ctx, rows, grpo.EvalOptions{NumGenerations: 1, Greedy: true})
	if err != nil {
		return 0, err
	}
	defer rep.Release()
	n := 0
	for _, r := range rep.Rollouts {
		if e, ok := r.Env.(*guess.Env); ok && r.Err == nil && e.Game.Found {
			n++
		}
	}
	return n, nil
}

// seedRows are n games with hidden numbers drawn from seeds first, first+1, ...
func seedRows(first, n int) []env.Row {
	rows := make([]env.Row, n)
	for i := range rows {
		rows[i] = env.Row{"seed": int64(first + i)}
	}
	return rows
}

// binarySearch is the warm start's expert, a grpo.Script: it guesses the
// middle of the range the replies so far leave, and says the number once
// the game is won.
func binarySearch(ctx context.Context, r *grpo.Rollout) (tokenizer.Message, error) {
	e, ok := r.Env.(*guess.Env)
	if !ok {
		return tokenizer.Message{}, fmt.Errorf("binary search plays guess.Env, not %T", r.Env)
	}
	if e.Game.Done() {
		if !e.Game.Found {
			return tokenizer.Message{}, fmt.Errorf("binary search lost (target %d)", e.Game.Target)
		}
		return grpo.TextTurn(fmt.Sprintf("Found it: the number is %d.", e.Game.Target)), nil
	}
	lo, hi := 1, e.Game.Rules.Max
	for _, m := range r.Completion {
		if len(m.ToolCalls) == 0 {
			continue
		}
		var a guess.GuessArgs
		if err := json.Unmarshal(m.ToolCalls[0].Arguments, &a); err != nil {
			return tokenizer.Message{}, err
		}
		if e.Game.Target > a.Number {
			lo = a.Number + 1
		} else {
			hi = a.Number - 1
		}
	}
	args, err := json.Marshal(guess.GuessArgs{Number: (lo + hi) / 2})
	if err != nil {
		return tokenizer.Message{}, err
	}
	return grpo.CallTurn("guess", string(args)), nil
}
