// Command wordle is the Wordle recipe end to end, on a laptop CPU: a small
// Qwen3 learns to play Wordle through a guess tool, first by supervised
// fine-tuning on a few games of an expert solver (a short reasoning, then a
// guess, per turn), then by GRPO with TRL's Wordle reward terms (the
// recipe's with -rewards recipe). It ends with the recipe's table (wins,
// greedy and sampled, guesses per win, tool calls and invalid guesses) for
// the model before SFT, after SFT, every 20 GRPO steps and after GRPO, and
// says by how much GRPO changed the wins.
//
//	go run ./examples/wordle                      # the embedded default: no download, no GPU
//	go run ./examples/wordle -model qwen3-0.6b    # a Hugging Face Qwen3 folder
//	go run ./examples/wordle -env-url http://host:8001 -env-token s3cret
//	go run ./examples/wordle -save-steps 5        # checkpoints; after a crash, add -resume
//	go run -tags cuda ./examples/wordle -device cuda   # on GPU 0 (needs cuda.h to build, a GPU to run)
//
// With no -model it builds a small Qwen3 with random weights sized to the
// project's embedded tiny tokenizer. The output folder (-out) receives the
// SFT and GRPO metrics (metrics.jsonl), their plots, the GRPO completions,
// the trained LoRA adapter in PEFT format, the model it applies to and the
// evaluation table.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/x/env/wordle"
	"github.com/x/examples/internal/ckpt"
	"github.com/x/examples/internal/cli"
	"github.com/x/examples/internal/wordlegame"
	"github.com/x/grpo"
	"github.com/x/kernels/device"
	"github.com/x/model"
)

func main() { cli.Main("wordle", run) }

// config is one run's settings, from the command line.
type config struct {
	ModelDir  string
	Words     []string // the secrets the game draws from
	EvalWords []string // played greedily by each evaluation
	SFTWords  int      // the warm start sees games of the first SFTWords words
	SFTSteps  int
	SFTLR     float64
	Steps     int // GRPO optimizer steps
	Prompts   int // secrets per GRPO step (0: every word)
	G         int // rollouts per secret
	LR        float64
	Beta      float64 // weight of the KL to the SFT model (the adapters off)
	Temp      float64 // GRPO's sampling temperature
	TopK      int     // GRPO's top-k sampling (0: every token)
	Schedule  string  // GRPO's learning-rate schedule (model.ScheduleKind)
	Decay     float64 // warmup_stable_decay's decay, a share of Steps
	Rewards   string  // the reward set (wordlegame.RewardSet)
	Scale     string  // GRPO's scale_rewards: group, batch or none
	Sampled   int     // sampled games per eval word at GRPO's temperature (0: greedy only)
	EvalEvery int     // evaluate every this many GRPO steps too (0: only after SFT and after GRPO)
	LoRARank  int
	Out       string
	Seed      uint64
	Threads   int
	Device    string // "cpu", "cuda", "cuda:N" (kernels/device)
	EnvURL    string
	EnvToken  string
	Hidden    int // the embedded model's hidden size (0: the tiny shape's 128)
	// Checkpoints are -save-steps and -resume.
	Checkpoints *ckpt.Flags

	// RolloutMatMul is the matmul precision of generation (rollouts and
	// evaluations): grpo.RolloutExact or grpo.RolloutBF16.
	RolloutMatMul string
}

// demoWords is the default run's secret words: the first ten of
// wordlegame.DefaultWordList. With ten words the warm start covers every
// secret, every step can hold every secret, and a GRPO step of 80 rollouts
// takes a few seconds, so the run fits 120 GRPO steps in minutes; with sixteen, six secrets the SFT model never saw made
// GRPO's groups mostly all-lose or all-win (BENCHMARKS-log.md, "Examples: the
// Wordle demo").
const demoWords = "brave brick bride chair charm chart crane crash grace grade"

// parseFlags reads args into a config; defaults are the embedded run.
func parseFlags(args []string, stderr io.Writer) (config, error) {
	var c config
	var words, evalWords string
	fs := flag.NewFlagSet("wordle", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.ModelDir, "model", "", "Hugging Face Qwen3 folder (config.json, *.safetensors, tokenizer.json); empty: the embedded small Qwen3 with random weights")
	fs.StringVar(&words, "words", demoWords, "the secret words, comma- or space-separated (each must be an allowed guess)")
	fs.StringVar(&evalWords, "eval-words", "", "words each evaluation plays, greedily, once each (default: all of -words)")
	fs.IntVar(&c.SFTWords, "sft-words", 0, "the warm start sees games of the first this many words (0: all of -words)")
	fs.IntVar(&c.SFTSteps, "sft-steps", 70, "supervised fine-tuning steps (0: no warm start); the default stops while the model wins about a third of its sampled games, so that a group's rollouts differ and GRPO has wins to reinforce")
	fs.Float64Var(&c.SFTLR, "sft-lr", 3e-3, "supervised fine-tuning peak learning rate")
	fs.IntVar(&c.Steps, "steps", 120, "GRPO optimizer steps")
	fs.IntVar(&c.Prompts, "prompts", 0, "secret words per GRPO step (0: every word of -words, so that each step's update weighs every secret: with 4 of 10 per step the wins of one secret rose as another's fell; DESIGN.md, \"Where the Wordle demo's learning stops\")")
	fs.IntVar(&c.G, "generations", 8, "rollouts per secret word (GRPO's group size)")
	fs.Float64Var(&c.LR, "lr", 2e-3, "GRPO peak learning rate (see -lr-schedule)")
	fs.Float64Var(&c.Beta, "beta", 0.04, "weight of GRPO's KL penalty to the SFT model (the model with its LoRA adapters off; needs -lora-rank > 0)")
	fs.Float64Var(&c.Temp, "temperature", 0.5, "GRPO's sampling temperature (the recipe's is 0.8; the tiny model needs less: at 0.8 most of its sampled tool calls were malformed and GRPO learned to stop calling guess)")
	fs.IntVar(&c.TopK, "top-k", 10, "GRPO samples among the this many likeliest tokens (0: all)")
	fs.StringVar(&c.Schedule, "lr-schedule", string(model.ScheduleWSD), "GRPO's learning-rate schedule: warmup_stable_decay (the peak rate, then a cosine to 0 over the last -lr-decay of the steps, so that the last updates cannot move the policy far: at a constant rate one update moved the sampled wins by 17 points), constant, linear (decaying to 0 over -steps) or cosine")
	fs.Float64Var(&c.Decay, "lr-decay", 0.3, "warmup_stable_decay's decay, as a share of -steps")
	fs.StringVar(&c.Rewards, "rewards", wordlegame.TRLRewards, "reward set: trl (TRL's Wordle terms, each of the last guess: correct, greens, yellows, repetition), trl-invalid (those and -0.1 per failed call) or recipe (win, greens of the best guess, -0.1 per failed call; with a weak warm start GRPO learns to stop after one guess under it)")
	fs.StringVar(&c.Scale, "scale-rewards", string(grpo.ScaleGroup), "what GRPO divides the group-centred rewards by: group (its std, TRL's default), batch (the whole step's std) or none")
	fs.IntVar(&c.EvalEvery, "eval-every", 20, "evaluate every this many GRPO steps too, a row of the table each (0: only after SFT and after GRPO)")
	fs.IntVar(&c.Sampled, "sampled-eval", 16, "each evaluation also plays every word this many times sampled at GRPO's temperature and top-k (the policy GRPO trains); 0: greedy only")
	fs.StringVar(&c.RolloutMatMul, "rollout-matmul", grpo.RolloutExact, "matmul precision of generation (GRPO's rollouts and the evaluations; training stays exact): exact, or bf16 (activations rounded to bf16, llama.cpp's arithmetic, faster on AVX512_BF16 CPUs); it changes only bf16 weights, so only a bf16 -model with -sft-steps 0 (the embedded model and a warm-started one are float32)")
	fs.IntVar(&c.LoRARank, "lora-rank", 16, "LoRA rank for GRPO (0: train every weight)")
	fs.StringVar(&c.Out, "out", "wordle-out", "output folder")
	fs.IntVar(&c.Hidden, "hidden", 0, "hidden size of the embedded model (0: 128, the tiny shape's); ignored with -model")
	fs.Uint64Var(&c.Seed, "seed", 1, "seed of the weights, the data order and sampling")
	fs.IntVar(&c.Threads, "threads", 0, "CPU threads (0: all)")
	fs.StringVar(&c.Device, "device", "cpu", "where the model runs: cpu, cuda (GPU 0) or cuda:N (GPU N; needs a binary built with -tags cuda)")
	fs.StringVar(&c.EnvURL, "env-url", "", "play on this OpenEnv Wordle server (env/cmd/envserver -env wordle, or OpenEnv's textarena_env) instead of in process")
	fs.StringVar(&c.EnvToken, "env-token", os.Getenv("OPENENV_TOKEN"), "bearer token for -env-url (default $OPENENV_TOKEN)")
	c.Checkpoints = ckpt.Register(fs)
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	var err error
	if c.Words, err = wordlegame.ParseWords(words); err != nil {
		return c, fmt.Errorf("-words: %w", err)
	}
	// The words first: every other word-count flag is checked against them.
	if err := wordlegame.CheckAllowed(wordle.DefaultDictionary(), c.Words); err != nil {
		return c, fmt.Errorf("-words: %w", err)
	}
	if c.SFTWords == 0 {
		c.SFTWords = len(c.Words)
	}
	if c.Prompts == 0 {
		c.Prompts = len(c.Words)
	}
	c.EvalWords = c.Words
	if evalWords != "" {
		if c.EvalWords, err = wordlegame.ParseWords(evalWords); err != nil {
			return c, fmt.Errorf("-eval-words: %w", err)
		}
	}
	return c, c.validate()
}

func (c config) validate() error {
	switch {
	case c.SFTWords < 1 || c.SFTWords > len(c.Words):
		return fmt.Errorf("-sft-words %d: want 1..%d (the number of -words)", c.SFTWords, len(c.Words))
	case c.SFTSteps < 0:
		return fmt.Errorf("-sft-steps %d is negative", c.SFTSteps)
	case c.SFTLR <= 0:
		return fmt.Errorf("-sft-lr %g: want a positive rate", c.SFTLR)
	case c.Steps < 0:
		return fmt.Errorf("-steps %d is negative", c.Steps)
	case c.Prompts < 1:
		return fmt.Errorf("-prompts %d: want at least 1, or 0 for every word of -words", c.Prompts)
	case c.G < 2:
		return fmt.Errorf("-generations %d: GRPO needs at least 2 rollouts per word", c.G)
	case c.LR <= 0:
		return fmt.Errorf("-lr %g: want a positive rate", c.LR)
	case c.LoRARank < 0:
		return fmt.Errorf("-lora-rank %d is negative", c.LoRARank)
	case c.Temp <= 0:
		return fmt.Errorf("-temperature %g: want a positive temperature", c.Temp)
	case c.TopK < 0:
		return fmt.Errorf("-top-k %d is negative", c.TopK)
	case c.RolloutMatMul != grpo.RolloutExact && c.RolloutMatMul != grpo.RolloutBF16:
		return fmt.Errorf("-rollout-matmul %q: want %s or %s", c.RolloutMatMul, grpo.RolloutExact, grpo.RolloutBF16)
	case c.Schedule != string(model.ScheduleConstant) && c.Schedule != string(model.ScheduleLinear) && c.Schedule != string(model.ScheduleCosine) && c.Schedule != string(model.ScheduleWSD):
		return fmt.Errorf("-lr-schedule %q: want warmup_stable_decay, constant, linear or cosine", c.Schedule)
	case !(c.Decay > 0 && c.Decay <= 1):
		return fmt.Errorf("-lr-decay %g: want a share of the steps in (0, 1]", c.Decay)
	case c.Rewards != wordlegame.RecipeRewards && c.Rewards != wordlegame.TRLRewards && c.Rewards != wordlegame.TRLInvalidRewards:
		return fmt.Errorf("-rewards %q: want %s, %s or %s", c.Rewards, wordlegame.TRLRewards, wordlegame.TRLInvalidRewards, wordlegame.RecipeRewards)
	case c.Scale != string(grpo.ScaleGroup) && c.Scale != string(grpo.ScaleBatch) && c.Scale != string(grpo.ScaleNone):
		return fmt.Errorf("-scale-rewards %q: want group, batch or none", c.Scale)
	case c.EvalEvery < 0:
		return fmt.Errorf("-eval-every %d is negative", c.EvalEvery)
	case c.Sampled < 0:
		return fmt.Errorf("-sampled-eval %d is negative", c.Sampled)
	case c.Beta < 0:
		return fmt.Errorf("-beta %g is negative", c.Beta)
	case c.Beta > 0 && c.LoRARank == 0:
		return fmt.Errorf("-beta %g needs LoRA (-lora-rank > 0): the KL reference is the model with its adapters off; add -beta 0 to train every weight", c.Beta)
	case c.Out == "":
		return fmt.Errorf("-out: want a folder")
	case c.Hidden < 0 || c.Hidden%32 != 0:
		return fmt.Errorf("-hidden %d: want a multiple of 32 (the head size)", c.Hidden)
	case c.Threads < 0:
		return fmt.Errorf("-threads %d is negative", c.Threads)
	}
	if c.Checkpoints != nil {
		if err := c.Checkpoints.Check(); err != nil {
			return err
		}
	}
	if _, err := device.Parse(c.Device); err != nil {
		return fmt.Errorf("-device: %w", err)
	}
	for _, w := range c.EvalWords {
		found := false
		for _, s := range c.Words {
			found = found || s == w
		}
		if !found {
			return fmt.Errorf("-eval-words: %q is not one of -words, so the prompt would not list it", w)
		}
	}
	return nil
}

// run parses args and does the whole run, printing to out.
func run(ctx context.Context, args []string, out io.Writer) error {
	cfg, err := parseFlags(args, out)
	if err != nil {
		return err
	}
	_, err = train(ctx, cfg, out)
	return err
}
