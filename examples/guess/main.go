// Command guess is the project's default job. With no download, no weights
// and no GPU it builds a tiny Qwen3 (random weights, the embedded tiny
// tokenizer), measures how it plays guess-the-number through tool calls,
// warm-starts it by supervised fine-tuning on expert games (binary search,
// rendered with the Qwen3 chat template and its tool-call format), and
// measures again.
//
//	go run ./examples/guess              # about two minutes on 2 cores
//	go run ./examples/guess -steps 40    # a quick look
//	go run ./examples/guess -save out/   # also write the trained model in Hugging Face format
//
// Every piece is the library's: tokenizer.Chat renders prompts and parses the
// model's tool calls, model.Batch generates the turns of all games at once
// with KV caches kept between turns, tools dispatches the calls to the
// env/guess environments, and model.Trainable with model.AdamW trains.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	cfg := defaultConfig()
	flag.IntVar(&cfg.Steps, "steps", cfg.Steps, "supervised fine-tuning steps")
	flag.IntVar(&cfg.Batch, "batch", cfg.Batch, "expert games per step")
	flag.Float64Var(&cfg.LR, "lr", cfg.LR, "peak learning rate (cosine schedule with warm-up)")
	flag.IntVar(&cfg.EvalGames, "eval", cfg.EvalGames, "games played by each evaluation")
	flag.IntVar(&cfg.Max, "max", cfg.Max, "the hidden number is in 1..max")
	flag.IntVar(&cfg.Threads, "threads", cfg.Threads, "CPU threads (0: all)")
	flag.Uint64Var(&cfg.Seed, "seed", cfg.Seed, "seed of the weights, the games and sampling")
	flag.StringVar(&cfg.SaveDir, "save", "", "write the trained model (config.json, model.safetensors, tokenizer.json) here")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, cfg, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "guess:", err)
		os.Exit(1)
	}
}

// config is what a run does.
type config struct {
	Steps     int
	Batch     int
	LR        float64
	EvalGames int
	Max       int
	Threads   int
	Seed      uint64
	SaveDir   string
	LogEvery  int
}

func defaultConfig() config {
	return config{Steps: 150, Batch: 8, LR: 3e-3, EvalGames: 32, Max: 16, Seed: 1, LogEvery: 10}
}

func (c config) validate() error {
	switch {
	case c.Steps < 0:
		return fmt.Errorf("-steps %d is negative", c.Steps)
	case c.Batch < 1:
		return fmt.Errorf("-batch %d: need at least 1", c.Batch)
	case c.LR <= 0:
		return fmt.Errorf("-lr %g: need a positive rate", c.LR)
	case c.EvalGames < 1:
		return fmt.Errorf("-eval %d: need at least 1 game", c.EvalGames)
	case c.Max < 2 || c.Max > 1000:
		return fmt.Errorf("-max %d: need 2..1000", c.Max)
	case c.Threads < 0:
		return fmt.Errorf("-threads %d is negative", c.Threads)
	}
	return nil
}

func run(ctx context.Context, cfg config, out io.Writer) error {
	if err := cfg.validate(); err != nil {
		return err
	}
	p, err := newPlayer(cfg)
	if err != nil {
		return err
	}
	defer p.Close()

	fmt.Fprintf(out, "tiny Qwen3: %d layers, hidden %d, vocab %d, %.2fM parameters, random weights\n",
		p.model.Config.NumLayers, p.model.Config.HiddenSize, p.model.Config.VocabSize, float64(numParams(p.model.Config))/1e6)
	before, err := p.evaluate(ctx, cfg.EvalGames, cfg.Seed+1_000_000)
	if err != nil {
		return fmt.Errorf("evaluate before training: %w", err)
	}
	fmt.Fprintf(out, "before: %s\n", before)

	if err := p.finetune(ctx, cfg, out); err != nil {
		return fmt.Errorf("fine-tune: %w", err)
	}

	after, err := p.evaluate(ctx, cfg.EvalGames, cfg.Seed+1_000_000)
	if err != nil {
		return fmt.Errorf("evaluate after training: %w", err)
	}
	fmt.Fprintf(out, "after:  %s\n", after)
	if cfg.SaveDir != "" {
		if err := p.save(cfg.SaveDir); err != nil {
			return err
		}
		fmt.Fprintf(out, "saved to %s\n", cfg.SaveDir)
	}
	return nil
}
