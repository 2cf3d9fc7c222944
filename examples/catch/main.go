// Command catch trains a small Qwen3 to play OpenSpiel's Catch from a text
// grid, with two tools, move (left or right) and stay: a short SFT warm
// start on a scripted player's games, then GRPO rewarded 1 per catch. It
// prints the catch rate, playing greedily from every ball column, before
// and after GRPO.
//
//	go run ./examples/catch               # the embedded small Qwen3
//	go run ./examples/catch -model DIR    # a Hugging Face Qwen3 folder
package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/x/env"
	"github.com/x/examples/internal/catchgame"
	"github.com/x/examples/internal/ckpt"
	"github.com/x/examples/internal/cli"
	"github.com/x/grpo"
	"github.com/x/grpo/warmstart"
	"github.com/x/kernels/cpu"
	"github.com/x/model"
	"github.com/x/tokenizer"
)

func main() { cli.Main("catch", run) }

func run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("catch", flag.ContinueOnError)
	fs.SetOutput(out)
	modelDir := fs.String("model", "", "Hugging Face Qwen3 folder; empty: the embedded small Qwen3")
	sftSteps := fs.Int("sft-steps", 40, "SFT warm-start steps on the scripted player's games (0: none)")
	steps := fs.Int("steps", 10, "GRPO steps")
	g := fs.Int("generations", 4, "rollouts per game")
	lr := fs.Float64("lr", 1e-3, "GRPO learning rate")
	rank := fs.Int("lora-rank", 16, "LoRA rank for GRPO")
	outDir := fs.String("out", "catch-out", "output folder (metrics.jsonl, plot.png, completions.jsonl)")
	maxLen := fs.Int("max-completion", 1024, "token budget of a game, model and tool tokens together (a game is about 700)")
	seed := fs.Uint64("seed", 1, "seed")
	hidden := fs.Int("hidden", 0, "hidden size of the embedded model (0: 128)")
	threads := fs.Int("threads", 0, "CPU threads (0: all)")
	checkpoints := ckpt.Register(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := checkpoints.Check(); err != nil {
		return err
	}
	if *g < 2 || *steps < 0 || *sftSteps < 0 || *lr <= 0 || *rank < 1 || *maxLen < 1 {
		return fmt.Errorf("want -generations ≥ 2, -steps ≥ 0, -sft-steps ≥ 0, -lr > 0, -lora-rank ≥ 1, -max-completion ≥ 1")
	}

	be := cpu.New(*threads)
	defer be.Close()
	pol, err := warmstart.Load(warmstart.Options{Dir: *modelDir, Hidden: *hidden, Seed: *seed}, be)
	if err != nil {
		return err
	}
	defer pol.Close()
	fmt.Fprintln(out, "model:", pol.Description)

	cfg := grpo.DefaultConfig()
	cfg.NumGenerations, cfg.PerDeviceTrainBatchSize = *g, 5**g // the five ball columns each step
	cfg.MaxSteps, cfg.LearningRate, cfg.LRSchedule, cfg.Seed = *steps, *lr, model.ScheduleConstant, *seed
	cfg.Temperature, cfg.TopK = 0.8, 10                                 // TRL's Wordle recipe: a small model's tail tokens break its tool calls
	cfg.MaxCompletionLength, cfg.MaxToolCallingIterations = *maxLen, 10 // nine moves, one spare
	cfg.EnableThinking, cfg.GradientCheckpointing = tokenizer.ThinkingOff, *modelDir != ""
	cfg.OutputDir, cfg.LoggingSteps, cfg.LogCompletions = *outDir, 1, true
	checkpoints.GRPO(&cfg)
	if *sftSteps > 0 {
		sc := grpo.DefaultSFTConfig()
		sc.MaxSteps, sc.LearningRate, sc.BatchSize, sc.Seed = *sftSteps, 3e-3, 5, *seed
		sc.MaxLength, sc.EnableThinking, sc.GradientCheckpointing, sc.Progress = 2048, tokenizer.ThinkingOff, *modelDir != "", out
		if *modelDir != "" {
			sc.LoRA = &model.LoRAConfig{R: *rank, Alpha: 2 * float64(*rank)}
		}
		// Played under GRPO's settings but SFT's length: a whole game is
		// worth imitating even where -max-completion would cut it.
		play := cfg
		play.MaxCompletionLength = sc.MaxLength
		convs, err := catchgame.Conversations(ctx, grpo.PlayOptions{Tokenizer: pol.Tokenizer, Config: &play})
		if err != nil {
			return err
		}
		if _, err := warmstart.SFT(ctx, pol, convs, sc); err != nil {
			return fmt.Errorf("SFT: %w", err)
		}
	}

	tr, err := grpo.NewTrainer(pol.Model, pol.Tokenizer, cfg,
		grpo.WithEnv(catchgame.NewFactory(*seed)),
		grpo.WithReward("caught", 1, catchgame.Reward("")),
		grpo.WithLoRA(model.LoRAConfig{R: *rank, Alpha: 2 * float64(*rank)}),
		grpo.WithProgress(out))
	if err != nil {
		return err
	}
	defer tr.Close()

	games := catchgame.Rows(5)
	before, err := catchRate(ctx, tr, games)
	if err != nil {
		return fmt.Errorf("evaluate: %w", err)
	}
	if err := checkpoints.ResumeGRPO(tr, out); err != nil {
		return err
	}
	if err := tr.Train(ctx, grpo.NewDataset(games)); err != nil {
		return err
	}
	after, err := catchRate(ctx, tr, games)
	if err != nil {
		return fmt.Errorf("evaluate: %w", err)
	}
	fmt.Fprintf(out, "caught, greedy, one game from each column: %d/5 before GRPO, %d/5 after\n", before, after)
	return nil
}

// catchRate plays each row once, greedily, and counts the catches.
func catchRate(ctx context.Context, tr *grpo.Trainer, rows []env.Row) (int, error) {
	rep, err := tr.Evaluate(ctx, rows, grpo.EvalOptions{NumGenerations: 1, Greedy: true})
	if err != nil {
		return 0, err
	}
	defer rep.Release()
	n := 0
	for _, r := range rep.Rollouts {
		if c, ok := r.Env.(*catchgame.Catch); ok && r.Err == nil && catchgame.Caught(&c.Game) {
			n++
		}
	}
	return n, nil
}
