// Command multienv trains one model on two environments in one run, as
// TRL's multi-environment example does: each dataset row names its env in
// the "environment" column (Wordle or Catch), the trainer routes the row's
// rollouts to that env's pool and renders only that env's tools, and each
// env has its own reward functions, which return grpo.ErrNoScore for the
// other env's rollouts (TRL's None: left out of that function's mean and
// of the baseline). metrics.jsonl then has rewards/<function>/mean per
// function, each over its own env's rollouts.
//
//	go run ./examples/multienv
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
	"github.com/x/examples/internal/wordlegame"
	"github.com/x/grpo"
	"github.com/x/grpo/warmstart"
	"github.com/x/kernels/cpu"
	"github.com/x/model"
	"github.com/x/tokenizer"
)

func main() { cli.Main("multienv", run) }

// The env names rows use in their "environment" column.
const (
	wordleEnv = "wordle"
	catchEnv  = "catch"
)

func run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("multienv", flag.ContinueOnError)
	fs.SetOutput(out)
	modelDir := fs.String("model", "", "Hugging Face Qwen3 folder; empty: the embedded small Qwen3")
	sftSteps := fs.Int("sft-steps", 80, "SFT warm-start steps on expert games of both envs (0: none)")
	steps := fs.Int("steps", 10, "GRPO steps")
	g := fs.Int("generations", 4, "rollouts per row")
	lr := fs.Float64("lr", 1e-3, "GRPO learning rate")
	maxLen := fs.Int("max-completion", 1024, "token budget of one episode")
	outDir := fs.String("out", "multienv-out", "output folder (metrics.jsonl, plot.png, completions.jsonl)")
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
	if *g < 2 || *steps < 0 || *sftSteps < 0 || *lr <= 0 || *maxLen < 1 {
		return fmt.Errorf("want -generations ≥ 2, -steps ≥ 0, -sft-steps ≥ 0, -lr > 0, -max-completion ≥ 1")
	}
	words, err := wordlegame.ParseWords(wordlegame.DefaultWordList)
	if err != nil {
		return err
	}

	be := cpu.New(*threads)
	defer be.Close()
	pol, err := warmstart.Load(warmstart.Options{Dir: *modelDir, Hidden: *hidden, Seed: *seed}, be)
	if err != nil {
		return err
	}
	defer pol.Close()
	fmt.Fprintln(out, "model:", pol.Description)

	// Rows of both envs, alternating: a Wordle word, a Catch column, ...
	var rows []env.Row
	catches := catchgame.Rows(len(words))
	for i, r := range wordlegame.Rows(words) {
		r[env.EnvironmentColumn] = wordleEnv
		catches[i][env.EnvironmentColumn] = catchEnv
		rows = append(rows, r, catches[i])
	}

	cfg := grpo.DefaultConfig()
	cfg.NumGenerations, cfg.PerDeviceTrainBatchSize = *g, 4**g // four rows per step
	cfg.MaxSteps, cfg.LearningRate, cfg.LRSchedule, cfg.Seed = *steps, *lr, model.ScheduleConstant, *seed
	cfg.Temperature, cfg.TopK = 0.8, 10 // TRL's Wordle recipe: a small model's tail tokens break its tool calls
	cfg.MaxCompletionLength, cfg.MaxToolCallingIterations = *maxLen, 10
	cfg.EnableThinking, cfg.GradientCheckpointing = tokenizer.ThinkingOff, *modelDir != ""
	cfg.OutputDir, cfg.LoggingSteps, cfg.LogCompletions = *outDir, 1, true
	checkpoints.GRPO(&cfg)

	if *sftSteps > 0 {
		sc := grpo.DefaultSFTConfig()
		sc.MaxSteps, sc.LearningRate, sc.BatchSize, sc.Seed = *sftSteps, 3e-3, 8, *seed
		sc.MaxLength, sc.EnableThinking, sc.GradientCheckpointing, sc.Progress = 2048, tokenizer.ThinkingOff, *modelDir != "", out
		if *modelDir != "" {
			sc.LoRA = &model.LoRAConfig{R: 16, Alpha: 32}
		}
		// The expert games are played under GRPO's settings but SFT's
		// length: a whole game is worth imitating even where -max-completion
		// would cut it.
		play := cfg
		play.MaxCompletionLength = sc.MaxLength
		po := grpo.PlayOptions{Tokenizer: pol.Tokenizer, Config: &play}
		wc, err := wordlegame.Conversations(ctx, words, words, po)
		if err != nil {
			return err
		}
		cc, err := catchgame.Conversations(ctx, po)
		if err != nil {
			return err
		}
		if _, err := warmstart.SFT(ctx, pol, append(wc, cc...), sc); err != nil {
			return fmt.Errorf("SFT: %w", err)
		}
	}

	tr, err := grpo.NewTrainer(pol.Model, pol.Tokenizer, cfg,
		grpo.WithEnvs(map[string]env.Factory{
			wordleEnv: wordlegame.LocalFactory(words),
			catchEnv:  catchgame.NewFactory(*seed),
		}),
		grpo.WithReward("wordle_win", 1, wordlegame.Reward(wordleEnv, wordlegame.WinReward)),
		grpo.WithReward("wordle_greens", 1, wordlegame.Reward(wordleEnv, wordlegame.GreensReward)),
		grpo.WithReward("wordle_invalid", 1, wordlegame.Invalid(wordleEnv)),
		grpo.WithReward("catch_caught", 1, catchgame.Reward(catchEnv)),
		grpo.WithLoRA(model.LoRAConfig{R: 16, Alpha: 32}),
		grpo.WithProgress(out))
	if err != nil {
		return err
	}
	defer tr.Close()
	if err := checkpoints.ResumeGRPO(tr, out); err != nil {
		return err
	}
	if err := tr.Train(ctx, grpo.NewDataset(rows)); err != nil {
		return err
	}

	rep, err := tr.Evaluate(ctx, rows, grpo.EvalOptions{NumGenerations: 1, Greedy: true})
	if err != nil {
		return fmt.Errorf("evaluate: %w", err)
	}
	defer rep.Release()
	won, games, caught, drops := 0, 0, 0, 0
	for _, r := range rep.Rollouts {
		switch e := r.Env.(type) {
		case *wordlegame.Wordle:
			games++
			if e.Game.Won {
				won++
			}
		case *catchgame.Catch:
			drops++
			if catchgame.Caught(&e.Game) {
				caught++
			}
		}
	}
	fmt.Fprintf(out, "after GRPO, greedy: Wordle won %d/%d, Catch caught %d/%d\n", won, games, caught, drops)
	for _, name := range []string{"wordle_win", "catch_caught"} {
		fmt.Fprintf(out, "eval %s: %.3f (over its own env's rollouts)\n", grpo.RewardMeanName(name), rep.Metrics[grpo.EvalPrefix+grpo.RewardMeanName(name)])
	}
	return nil
}
