// Command echo is the smallest GRPO program, like TRL's echo example: the
// env has one tool, echo, and owns its reward (0.1 per character of the
// last message echoed, env/echo), so the trainer needs no reward function;
// each dataset row's "prompt" asks the model to echo a word.
//
//	go run ./examples/echo                 # the embedded small Qwen3, a short SFT warm start first
//	go run ./examples/echo -model DIR      # a Hugging Face Qwen3 folder
//
// A model with random weights cannot call a tool, so with no -model a few
// steps of supervised fine-tuning on scripted echo calls come first.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/x/env"
	"github.com/x/env/echo"
	"github.com/x/examples/internal/ckpt"
	"github.com/x/examples/internal/cli"
	"github.com/x/grpo"
	"github.com/x/grpo/warmstart"
	"github.com/x/kernels/cpu"
	"github.com/x/model"
	"github.com/x/tokenizer"
)

func main() { cli.Main("echo", run) }

// words are what the prompts ask the model to echo.
var words = []string{"hello", "wordle", "catch", "gopher", "tokens", "reward", "policy", "group"}

func run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("echo", flag.ContinueOnError)
	fs.SetOutput(out)
	modelDir := fs.String("model", "", "Hugging Face Qwen3 folder; empty: the embedded small Qwen3")
	sftSteps := fs.Int("sft-steps", 60, "SFT warm-start steps on scripted echo calls (0: none); at 30 every sampled call still failed (the warm start check says so), at 60 most work and rollouts still differ")
	steps := fs.Int("steps", 10, "GRPO steps")
	g := fs.Int("generations", 4, "rollouts per prompt")
	lr := fs.Float64("lr", 1e-3, "GRPO learning rate")
	outDir := fs.String("out", "echo-out", "output folder (metrics.jsonl, plot.png, completions.jsonl)")
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
	if *g < 2 || *steps < 0 || *sftSteps < 0 || *lr <= 0 {
		return fmt.Errorf("want -generations ≥ 2, -steps ≥ 0, -sft-steps ≥ 0, -lr > 0")
	}

	be := cpu.New(*threads)
	defer be.Close()
	pol, err := warmstart.Load(warmstart.Options{Dir: *modelDir, Hidden: *hidden, Seed: *seed}, be)
	if err != nil {
		return err
	}
	defer pol.Close()
	fmt.Fprintln(out, "model:", pol.Description)

	rows := make([]env.Row, len(words))
	for i, w := range words {
		rows[i] = env.Row{grpo.PromptColumn: prompt + w}
	}
	cfg := grpo.DefaultConfig()
	cfg.NumGenerations, cfg.PerDeviceTrainBatchSize = *g, 4**g // 4 prompts per step
	cfg.MaxSteps, cfg.LearningRate, cfg.Seed = *steps, *lr, *seed
	cfg.Temperature, cfg.TopK = 0.8, 10 // TRL's Wordle recipe: a small model's tail tokens break its tool calls
	cfg.MaxCompletionLength, cfg.MaxToolCallingIterations = 128, 2
	cfg.EnableThinking, cfg.GradientCheckpointing = tokenizer.ThinkingOff, *modelDir != ""
	cfg.OutputDir, cfg.LoggingSteps, cfg.LogCompletions = *outDir, 1, true
	checkpoints.GRPO(&cfg)
	factory := env.FactoryFunc(echo.NewEnv)
	if *sftSteps > 0 {
		convs, err := warmstart.Conversations(ctx, factory, rows, scripted, grpo.PlayOptions{Tokenizer: pol.Tokenizer, Config: &cfg})
		if err != nil {
			return err
		}
		sc := grpo.DefaultSFTConfig()
		sc.MaxSteps, sc.LearningRate, sc.BatchSize, sc.Seed = *sftSteps, 3e-3, 8, *seed
		sc.EnableThinking, sc.GradientCheckpointing, sc.Progress = tokenizer.ThinkingOff, false, out
		if _, err := warmstart.SFT(ctx, pol, convs, sc); err != nil {
			return fmt.Errorf("SFT: %w", err)
		}
	}
	tr, err := grpo.NewTrainer(pol.Model, pol.Tokenizer, cfg,
		grpo.WithEnv(factory), // its reward is the env's own
		grpo.WithLoRA(model.LoRAConfig{R: 8, Alpha: 16}),
		grpo.WithProgress(out))
	if err != nil {
		return err
	}
	defer tr.Close()
	// Does the warm start leave GRPO something to learn? (A warning: the
	// run goes on, as a user exploring would.)
	rep, err := warmstart.Check(ctx, tr, rows[:2], warmstart.CheckOptions{})
	fmt.Fprintln(out, "warm start check:", rep)
	if err != nil && !errors.Is(err, warmstart.ErrNoSignal) {
		return err
	} else if err != nil {
		fmt.Fprintln(out, "warning:", err)
	}
	if err := checkpoints.ResumeGRPO(tr, out); err != nil {
		return err
	}
	if err := tr.Train(ctx, grpo.NewDataset(rows)); err != nil {
		return err
	}
	fmt.Fprintf(out, "metrics in %s, reward curve in %s\n",
		filepath.Join(*outDir, grpo.MetricsFile), filepath.Join(*outDir, grpo.PlotFile))
	return nil
}

// prompt asks for a word to echo.
const prompt = "Use the echo tool to send: "

// scripted is the warm start's expert, a grpo.Script: echo the word the
// prompt asks for, then say it is done.
func scripted(ctx context.Context, r *grpo.Rollout) (tokenizer.Message, error) {
	if r.ToolCalls > 0 {
		return grpo.TextTurn("Echoed."), nil
	}
	word, _ := strings.CutPrefix(r.Prompt[len(r.Prompt)-1].Content, prompt)
	args, err := json.Marshal(echo.EchoArgs{Message: word})
	if err != nil {
		return tokenizer.Message{}, err
	}
	return grpo.CallTurn("echo", string(args)), nil
}
