package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/x/env"
	"github.com/x/examples/internal/ckpt"
	"github.com/x/examples/internal/wordlegame"
	"github.com/x/grpo"
	"github.com/x/grpo/warmstart"
	"github.com/x/kernels/device"
	"github.com/x/model"
	"github.com/x/tokenizer"
)

// result is what a run measured.
type result struct {
	Before, AfterSFT, AfterGRPO score
	During                      []namedScore // the evaluations every -eval-every GRPO steps
	Elapsed                     time.Duration
}

// Output layout under config.Out.
const (
	sftDir     = "sft"        // SFT metrics.jsonl and plot.png
	grpoDir    = "grpo"       // GRPO metrics.jsonl, completions.jsonl, plot.png
	baseDir    = "base-model" // the model the adapter applies to (after the warm start)
	adapterDir = "adapter"    // the GRPO LoRA adapter, PEFT format
	tableFile  = "eval.md"    // the evaluation table
)

// train runs the whole recipe: evaluate, SFT warm start, evaluate, GRPO,
// evaluate; then it writes the adapter and the table.
func train(ctx context.Context, cfg config, out io.Writer) (result, error) {
	var res result
	begin := time.Now()
	if err := os.MkdirAll(cfg.Out, 0o755); err != nil {
		return res, fmt.Errorf("output folder: %w", err)
	}
	be, closeBackend, err := device.Open(cfg.Device, device.Options{Threads: cfg.Threads})
	if err != nil {
		return res, fmt.Errorf("-device: %w", err)
	}
	defer func() { _ = closeBackend() }()
	pol, err := warmstart.Load(warmstart.Options{Dir: cfg.ModelDir, Hidden: cfg.Hidden, Seed: cfg.Seed}, be)
	if err != nil {
		return res, err
	}
	defer pol.Close()
	fmt.Fprintf(out, "model: %s\n", pol.Description)

	factory := wordlegame.LocalFactory(cfg.Words)
	where := "in process"
	if cfg.EnvURL != "" {
		factory = wordlegame.RemoteFactory(cfg.EnvURL, cfg.EnvToken, cfg.Words)
		where = "on " + cfg.EnvURL
	}
	fmt.Fprintf(out, "env: Wordle over %d words, played %s\n", len(cfg.Words), where)

	gcfg := grpoConfig(cfg)
	lora := model.LoRAConfig{R: max(cfg.LoRARank, 1), Alpha: 2 * float64(max(cfg.LoRARank, 1))}
	terms, err := wordlegame.RewardSet(cfg.Rewards, "")
	if err != nil {
		return res, fmt.Errorf("-rewards: %w", err)
	}
	newTrainer := func(withLoRA bool, extra ...grpo.Option) (*grpo.Trainer, error) {
		opts := append([]grpo.Option{grpo.WithEnv(factory)}, extra...)
		for _, t := range terms {
			opts = append(opts, grpo.WithReward(t.Name, 1, t.Fn))
		}
		if withLoRA {
			opts = append(opts, grpo.WithLoRA(lora))
		}
		opts = append(opts, grpo.WithProgress(out))
		return grpo.NewTrainer(pol.Model, pol.Tokenizer, gcfg, opts...)
	}
	evalRows := wordlegame.Rows(cfg.EvalWords)

	// Before SFT. The evaluation's trainer carries fresh adapters (B = 0:
	// the model's output is unchanged), removed afterwards so that the
	// warm start can train every weight.
	tr, err := newTrainer(true)
	if err != nil {
		return res, err
	}
	res.Before, err = evaluate(ctx, tr, evalRows, 0) // a random model: its sampled games only cost time
	tr.Close()
	model.DetachLoRA(pol.Model)
	if err != nil {
		return res, fmt.Errorf("evaluate before SFT: %w", err)
	}
	fmt.Fprintf(out, "before SFT: %s\n", res.Before)

	if cfg.SFTSteps > 0 {
		if err := warmStart(ctx, cfg, gcfg, pol, out); err != nil {
			return res, fmt.Errorf("SFT: %w", err)
		}
	}
	// The adapter's base: the checkpoint given, unless SFT changed it or
	// it is the embedded model's temporary folder.
	base := pol.Dir
	if cfg.SFTSteps > 0 || pol.Embedded() {
		base = filepath.Join(cfg.Out, baseDir)
		if err := pol.Save(base); err != nil {
			return res, err
		}
	}

	// The GRPO trainer evaluates itself every -eval-every steps (through a
	// callback, which runs between optimizer steps), so that the table
	// shows the wins along the run, not only where it stopped.
	var during *grpo.Trainer
	midEval := grpo.WithCallback(func(step int, _ grpo.Metrics) error {
		if cfg.EvalEvery == 0 || step%cfg.EvalEvery != 0 || step == cfg.Steps {
			return nil
		}
		s, err := evaluate(ctx, during, evalRows, cfg.Sampled)
		if err != nil {
			return fmt.Errorf("evaluate at step %d: %w", step, err)
		}
		res.During = append(res.During, namedScore{fmt.Sprintf("GRPO step %d", step), s})
		fmt.Fprintf(out, "GRPO step %d: %s\n", step, s)
		return nil
	})
	tr, err = newTrainer(cfg.LoRARank > 0, midEval)
	if err != nil {
		return res, err
	}
	during = tr
	defer tr.Close()
	if res.AfterSFT, err = evaluate(ctx, tr, evalRows, cfg.Sampled); err != nil {
		return res, fmt.Errorf("evaluate after SFT: %w", err)
	}
	fmt.Fprintf(out, "after SFT:  %s\n", res.AfterSFT)
	// Does the warm start leave GRPO something to learn? Rollouts of the
	// first four words, sampled as GRPO's first step samples them.
	check, err := warmstart.Check(ctx, tr, wordlegame.Rows(cfg.Words[:min(4, len(cfg.Words))]), warmstart.CheckOptions{})
	fmt.Fprintf(out, "warm start check: %s\n", check)
	if errors.Is(err, warmstart.ErrNoSignal) {
		fmt.Fprintf(out, "warning: %v\n", err)
	} else if err != nil {
		return res, fmt.Errorf("warm start check: %w", err)
	}

	fmt.Fprintf(out, "GRPO: %d steps of %d words x %d rollouts, lr %g (%s), beta %g, %s, T %g, top-k %d, %s rewards scaled by %s std\n",
		cfg.Steps, cfg.Prompts, cfg.G, cfg.LR, cfg.Schedule, cfg.Beta, loraText(cfg.LoRARank), cfg.Temp, cfg.TopK, cfg.Rewards, cfg.Scale)
	if cfg.Steps > 0 {
		if err := cfg.checkpoints().ResumeGRPO(tr, out); err != nil {
			return res, fmt.Errorf("GRPO: %w", err)
		}
		if err := tr.Train(ctx, grpo.NewDataset(wordlegame.Rows(cfg.Words))); err != nil {
			return res, fmt.Errorf("GRPO: %w", err)
		}
	}
	if res.AfterGRPO, err = evaluate(ctx, tr, evalRows, cfg.Sampled); err != nil {
		return res, fmt.Errorf("evaluate after GRPO: %w", err)
	}
	fmt.Fprintf(out, "after GRPO: %s\n", res.AfterGRPO)
	fmt.Fprintln(out, verdict(res.AfterSFT, res.AfterGRPO))
	if cfg.Steps > 0 {
		if err := titlePlot(cfg, res); err != nil {
			return res, err
		}
	}

	if cfg.LoRARank > 0 {
		abs, err := filepath.Abs(base)
		if err != nil {
			return res, err
		}
		if err := model.SaveAdapter(filepath.Join(cfg.Out, adapterDir), pol.Model, lora, abs); err != nil {
			return res, fmt.Errorf("save the adapter: %w", err)
		}
	} else if err := pol.Save(filepath.Join(cfg.Out, adapterDir)); err != nil {
		return res, err
	}

	res.Elapsed = time.Since(begin)
	var table strings.Builder
	rows := append([]namedScore{{"before SFT", res.Before}, {"after SFT", res.AfterSFT}}, res.During...)
	writeTable(&table, append(rows, namedScore{"after GRPO", res.AfterGRPO}))
	fmt.Fprintf(out, "\n%s\n", table.String())
	if err := os.WriteFile(filepath.Join(cfg.Out, tableFile), []byte(table.String()), 0o644); err != nil {
		return res, fmt.Errorf("write the table: %w", err)
	}
	fmt.Fprintf(out, "done in %s; %s holds metrics, plots, completions, the adapter (%s) and its base model\n",
		res.Elapsed.Round(time.Second), cfg.Out, adapterDir)
	return res, nil
}

// grpoConfig is the trainer's configuration for a run.
func grpoConfig(cfg config) grpo.Config {
	c := grpo.DefaultConfig()
	c.NumGenerations = cfg.G
	c.PerDeviceTrainBatchSize = cfg.Prompts * cfg.G // one optimizer step per generation batch
	c.MaxSteps = cfg.Steps
	c.LearningRate = cfg.LR
	c.Beta = cfg.Beta
	c.LRSchedule = model.ScheduleKind(cfg.Schedule)
	if c.LRSchedule == model.ScheduleWSD {
		c.DecaySteps = max(1, int(math.Round(cfg.Decay*float64(cfg.Steps))))
	}
	c.ScaleRewards = grpo.ScaleRewards(cfg.Scale)
	c.Temperature, c.TopK = float32(cfg.Temp), cfg.TopK
	c.RolloutMatMulPrecision = cfg.RolloutMatMul
	c.MaxCompletionLength = 400              // a six-guess game is about 330 tokens of the tiny tokenizer
	c.MaxToolCallingIterations = 8           // six guesses and two refused ones
	c.EnableThinking = tokenizer.ThinkingOff // the reasoning is in the message, before the call
	c.GradientCheckpointing = cfg.ModelDir != ""
	c.Seed = cfg.Seed
	c.OutputDir = filepath.Join(cfg.Out, grpoDir)
	c.LoggingSteps = 1
	cfg.checkpoints().GRPO(&c)
	c.LogCompletions = true
	return c
}

// checkpoints are the run's checkpoint flags (none set when the config
// was not parsed from a command line).
func (c config) checkpoints() *ckpt.Flags {
	if c.Checkpoints == nil {
		return &ckpt.Flags{}
	}
	return c.Checkpoints
}

// warmStart fine-tunes on the solver's games of the first SFTWords words,
// played as GRPO (gcfg) will play them: every weight of the embedded
// model, or LoRA adapters merged afterwards for a checkpoint given with
// -model.
func warmStart(ctx context.Context, cfg config, gcfg grpo.Config, pol *warmstart.Policy, out io.Writer) error {
	convs, err := wordlegame.Conversations(ctx, cfg.Words[:cfg.SFTWords], cfg.Words, grpo.PlayOptions{Tokenizer: pol.Tokenizer, Config: &gcfg})
	if err != nil {
		return err
	}
	sc := grpo.DefaultSFTConfig()
	sc.MaxSteps = cfg.SFTSteps
	sc.LearningRate = cfg.SFTLR
	sc.LRSchedule = model.ScheduleCosine
	sc.WarmupRatio = 0.1
	sc.BatchSize = 8
	sc.MaxLength = 512
	sc.EnableThinking = tokenizer.ThinkingOff
	sc.GradientCheckpointing = cfg.ModelDir != ""
	sc.Seed = cfg.Seed
	sc.OutputDir = filepath.Join(cfg.Out, sftDir)
	sc.LoggingSteps = 1 // a line per step, as GRPO's: a resumed run's logs then equal an uninterrupted one's
	if cfg.ModelDir != "" {
		sc.LoRA = &model.LoRAConfig{R: 16, Alpha: 32}
	}
	sc.Progress = out
	if err := cfg.checkpoints().SFT(&sc); err != nil {
		return err
	}
	fmt.Fprintf(out, "SFT: %d steps on the solver's games of %d of the %d words\n", cfg.SFTSteps, len(convs), len(cfg.Words))
	rep, err := warmstart.SFT(ctx, pol, convs, sc)
	if err != nil {
		return err
	}
	if n := len(rep.History); n > 0 {
		fmt.Fprintf(out, "SFT: final loss %.4f\n", rep.History[n-1].Metrics[grpo.MetricLoss])
	}
	return nil
}

// evaluate plays each row once greedily and, when sampled > 0, that
// many times at GRPO's temperature and top-k, and scores the games.
func evaluate(ctx context.Context, tr *grpo.Trainer, rows []env.Row, sampled int) (score, error) {
	var s score
	rep, err := tr.Evaluate(ctx, rows, grpo.EvalOptions{NumGenerations: 1, Greedy: true})
	if err != nil {
		return s, err
	}
	defer rep.Release()
	for i, r := range rep.Rollouts {
		g, err := wordlegame.GameOf(r)
		if err != nil {
			return s, err
		}
		s.add(g, r.ToolCalls, r.ToolFailures, rep.Rewards[i])
	}
	if sampled == 0 {
		return s, nil
	}
	srep, err := tr.Evaluate(ctx, rows, grpo.EvalOptions{NumGenerations: sampled})
	if err != nil {
		return s, err
	}
	defer srep.Release()
	for _, r := range srep.Rollouts {
		g, err := wordlegame.GameOf(r)
		if err != nil {
			return s, err
		}
		s.addSampled(g)
	}
	return s, nil
}

// titlePlot redraws GRPO's plot with the evaluation's result in its
// title.
func titlePlot(cfg config, res result) error {
	dir := filepath.Join(cfg.Out, grpoDir)
	steps, err := grpo.ReadMetrics(filepath.Join(dir, grpo.MetricsFile))
	if err != nil {
		return err
	}
	title := fmt.Sprintf("Wordle GRPO, seed %d: greedy wins %d/%d after SFT -> %d/%d after GRPO", cfg.Seed, res.AfterSFT.Wins, res.AfterSFT.Games, res.AfterGRPO.Wins, res.AfterGRPO.Games)
	if res.AfterGRPO.SampledGames > 0 {
		title += fmt.Sprintf("; sampled %.0f%% -> %.0f%%", res.AfterSFT.sampledRate(), res.AfterGRPO.sampledRate())
	}
	return grpo.WritePlot(filepath.Join(dir, grpo.PlotFile), steps, grpo.PlotOptions{Title: title})
}

func loraText(rank int) string {
	if rank == 0 {
		return "every weight trained"
	}
	return fmt.Sprintf("LoRA rank %d", rank)
}
