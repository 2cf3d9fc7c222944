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
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/x/env"
	"github.com/x/env/echo"
	"github.com/x/examples/internal/ckpt"
	"github.com/x/examples/internal/policy"
	"github.com/x/grpo"
	"github.com/x/kernels/cpu"
	"github.com/x/model"
	"github.com/x/tokenizer"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "echo:", err)
		stop()
		os.Exit(1)
	}
}

// words are what the prompts ask the model to echo.
var words = []string{"hello", "wordle", "catch", "gopher", "tokens", "reward", "policy", "group"}

func run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("echo", flag.ContinueOnError)
	fs.SetOutput(out)
	modelDir := fs.String("model", "", "Hugging Face Qwen3 folder; empty: the embedded small Qwen3")
	sftSteps := fs.Int("sft-steps", 30, "SFT warm-start steps on scripted echo calls (0: none)")
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
	pol, err := policy.Load(policy.Options{Dir: *modelDir, Hidden: *hidden, Seed: *seed}, be)
	if err != nil {
		return err
	}
	defer pol.Close()
	fmt.Fprintln(out, "model:", pol.Description)

	rows := make([]env.Row, len(words))
	for i, w := range words {
		rows[i] = env.Row{grpo.PromptColumn: "Use the echo tool to send: " + w}
	}
	if *sftSteps > 0 {
		convs, err := scripted(ctx, rows)
		if err != nil {
			return err
		}
		sc := grpo.DefaultSFTConfig()
		sc.MaxSteps, sc.LearningRate, sc.BatchSize, sc.Seed = *sftSteps, 3e-3, 8, *seed
		sc.EnableThinking, sc.GradientCheckpointing, sc.Progress = tokenizer.ThinkingOff, false, out
		if _, err := grpo.SFT(ctx, pol.Model, pol.Tokenizer, convs, sc); err != nil {
			return fmt.Errorf("SFT: %w", err)
		}
	}

	cfg := grpo.DefaultConfig()
	cfg.NumGenerations, cfg.PerDeviceTrainBatchSize = *g, 4**g // 4 prompts per step
	cfg.MaxSteps, cfg.LearningRate, cfg.Seed = *steps, *lr, *seed
	cfg.Temperature, cfg.TopK = 0.8, 10 // TRL's Wordle recipe: a small model's tail tokens break its tool calls
	cfg.MaxCompletionLength, cfg.MaxToolCallingIterations = 128, 2
	cfg.EnableThinking, cfg.GradientCheckpointing = tokenizer.ThinkingOff, *modelDir != ""
	cfg.OutputDir, cfg.LoggingSteps, cfg.LogCompletions = *outDir, 1, true
	checkpoints.GRPO(&cfg)
	tr, err := grpo.NewTrainer(pol.Model, pol.Tokenizer, cfg,
		grpo.WithEnv(env.FactoryFunc(echo.NewEnv)), // its reward is the env's own
		grpo.WithLoRA(model.LoRAConfig{R: 8, Alpha: 16}),
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
	fmt.Fprintf(out, "metrics in %s, reward curve in %s\n",
		filepath.Join(*outDir, grpo.MetricsFile), filepath.Join(*outDir, grpo.PlotFile))
	return nil
}

// scripted is one SFT conversation per row: the prompt, the echo call
// with the word, the env's reply and a closing turn.
func scripted(ctx context.Context, rows []env.Row) ([]grpo.Conversation, error) {
	var convs []grpo.Conversation
	for i, row := range rows {
		e, err := echo.NewEnv(ctx)
		if err != nil {
			return nil, err
		}
		set, err := env.Tools(e)
		if err != nil {
			return nil, err
		}
		args, err := json.Marshal(echo.EchoArgs{Message: words[i]})
		if err != nil {
			return nil, err
		}
		reply, err := set.Call(ctx, "echo", args)
		if err != nil {
			return nil, fmt.Errorf("scripted echo: %w", err)
		}
		convs = append(convs, grpo.Conversation{Tools: set.Schemas(), Messages: []tokenizer.Message{
			{Role: "user", Content: row[grpo.PromptColumn].(string)},
			{Role: "assistant", ToolCalls: []tokenizer.ToolCall{{Name: "echo", Arguments: args}}},
			{Role: "tool", Name: "echo", Content: reply},
			{Role: "assistant", Content: "Echoed."},
		}})
	}
	return convs, nil
}
