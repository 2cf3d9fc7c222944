// Package learning is GRPO's learning suite: small tasks whose optimal
// policy is known (guess the number with feedback, a two-tool key-value
// lookup, Wordle on a few words), each with a scripted expert whose games
// are the warm start, and a runner that warm-starts the embedded tiny
// Qwen3 by SFT, measures task success, trains it by GRPO and measures
// again. RL libraries call such tests performance tests: not "the code
// runs" but "the algorithm learns", with a stated seed, budget and margin.
//
// The runner is also the harness of the experiments behind DESIGN.md's
// "Why policies collapsed to doing less": Settings varies the trainer's
// knobs one at a time and Result reports success, tool use and entropy
// before and after.
package learning

import (
	"context"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/x/env"
	"github.com/x/grpo"
	"github.com/x/grpo/warmstart"
	"github.com/x/kernels/cpu"
	"github.com/x/model"
	"github.com/x/tokenizer"
)

// Task is one learning task.
type Task struct {
	Name string
	// Factory makes the task's environments.
	Factory env.Factory
	// Train is GRPO's dataset; Eval the rows each evaluation plays.
	Train, Eval []env.Row
	// Expert is the known optimal policy as a grpo.Script: its games,
	// played through grpo.PlayScript, are the warm start's data.
	Expert grpo.Script
	// ExpertRows are the rows the warm start's games are played on.
	ExpertRows []env.Row
	// Rewards are the task's reward functions by name (weight 1 each
	// unless Weights says otherwise).
	Rewards []Reward
	// Success reports whether a finished rollout solved the task.
	Success func(r *grpo.Rollout) (bool, error)
	// MaxCompletion and MaxTurns bound a rollout (tokens, tool rounds).
	MaxCompletion, MaxTurns int
}

// Reward is one named reward function with its weight.
type Reward struct {
	Name   string
	Weight float64
	Fn     grpo.RewardFunc
}

// Settings are one run's knobs: the warm start, GRPO's budget and the
// trainer settings the experiments vary. Zero fields take Defaults'.
type Settings struct {
	Seed    uint64
	Threads int // CPU threads (0: all)

	SFTSteps int
	SFTLR    float64
	// SFTBatch is expert games per SFT step (0: 8).
	SFTBatch int
	// SFTSchedule is the SFT learning rate's schedule after its warmup
	// (the first 10 % of the steps; "": cosine).
	SFTSchedule model.ScheduleKind
	// SFTLogEvery, if set, writes the SFT loss (the mean over the last
	// SFTLogEvery steps) to Log every SFTLogEvery steps: where it leaves
	// a plateau.
	SFTLogEvery int

	Steps   int // GRPO optimizer steps (one per generation)
	Prompts int // rows per step
	G       int // rollouts per row

	// Config adjusts the trainer's configuration after the runner set
	// the task's and the budget's fields (loss type, temperature, ...).
	Config func(*grpo.Config)
	// LoRARank is the adapters' rank; -1 trains every weight.
	LoRARank int
	// SampledEval is the sampled games per eval row (at the training
	// temperature and filters) for the sampled success rate; 0: none.
	SampledEval int

	// CacheDir, if set, keeps warm-started models there, keyed by task,
	// seed and SFT settings, so that experiments on one warm start do not
	// repeat it.
	CacheDir string
	// Log receives progress lines; nil discards them.
	Log io.Writer
	// OutputDir, if set, receives GRPO's metrics, plot and completions.
	OutputDir string
	// Show prints the completions of this many greedy evaluation games to
	// Log.
	Show int
}

// Score is one evaluation: greedy (one game per eval row) and sampled.
type Score struct {
	Greedy, GreedyGames   int     // games won, played
	Sampled, SampledGames int     // the same for sampled games
	Calls                 float64 // tool calls per greedy game
	Failures              float64 // failed tool calls per greedy game
	Reward                float64 // mean total reward per greedy game
	// ByCalls is the sampled games' mean reward by their number of tool
	// calls: whether, for this policy, the reward pays for calling more
	// or for stopping early.
	ByCalls map[int]CallsReward
}

// CallsReward is the sampled games that made a number of tool calls: how
// many, their mean reward and their wins.
type CallsReward struct {
	Games, Wins int
	Reward      float64
}

// GreedyRate is the share of greedy games won.
func (s Score) GreedyRate() float64 { return ratio(s.Greedy, s.GreedyGames) }

// SampledRate is the share of sampled games won (NaN without any).
func (s Score) SampledRate() float64 { return ratio(s.Sampled, s.SampledGames) }

func ratio(a, b int) float64 {
	if b == 0 {
		return math.NaN()
	}
	return float64(a) / float64(b)
}

// String is the score in words.
func (s Score) String() string {
	out := fmt.Sprintf("greedy %d/%d (calls %.2f, failures %.2f, reward %.3f)", s.Greedy, s.GreedyGames, s.Calls, s.Failures, s.Reward)
	if s.SampledGames > 0 {
		out += fmt.Sprintf(", sampled %d/%d (%.0f%%)", s.Sampled, s.SampledGames, 100*s.SampledRate())
	}
	if len(s.ByCalls) > 0 {
		out += ", sampled reward by calls:"
		for _, k := range slices.Sorted(maps.Keys(s.ByCalls)) {
			c := s.ByCalls[k]
			out += fmt.Sprintf(" %d: %.3f (%d games, %d won)", k, c.Reward, c.Games, c.Wins)
		}
	}
	return out
}

// Result is what a run measured.
type Result struct {
	Before, After Score
	// Steps are GRPO's per-step metrics.
	Steps []grpo.Metrics
	// SFTTime and GRPOTime are the phases' wall time.
	SFTTime, GRPOTime time.Duration
}

// Window is the mean of metric name over GRPO steps [from, to).
func (r Result) Window(name string, from, to int) float64 {
	s, n := 0.0, 0
	for i := max(from, 0); i < min(to, len(r.Steps)); i++ {
		if v, ok := r.Steps[i][name]; ok && !math.IsNaN(v) {
			s += v
			n++
		}
	}
	if n == 0 {
		return math.NaN()
	}
	return s / float64(n)
}

// Run warm-starts the embedded tiny Qwen3 on the task's expert games,
// evaluates it, trains it by GRPO and evaluates it again.
func Run(ctx context.Context, task Task, s Settings) (Result, error) {
	var res Result
	log := s.Log
	if log == nil {
		log = io.Discard
	}
	be := cpu.New(s.Threads)
	defer be.Close()

	begin := time.Now()
	pol, err := warmStarted(ctx, task, s, be, log)
	if err != nil {
		return res, err
	}
	defer pol.Close()
	res.SFTTime = time.Since(begin)

	cfg := grpoConfig(task, s)
	opts := []grpo.Option{grpo.WithEnv(task.Factory),
		grpo.WithCallback(func(step int, m grpo.Metrics) error {
			res.Steps = append(res.Steps, m)
			fmt.Fprintf(log, "%s step %3d reward %.3f success? calls %.2f fail %.2f zero-std %.2f entropy %.3f kl %.4f len %.0f loss %+.4f\n",
				task.Name, step, m[grpo.MetricReward], m[grpo.MetricToolsCallFrequency], m[grpo.MetricToolsFailureFrequency],
				m[grpo.MetricFracRewardZeroStd], m[grpo.MetricEntropy], m[grpo.MetricKL], m[grpo.MetricCompletionsMeanLength], m[grpo.MetricLoss])
			return nil
		})}
	for _, r := range task.Rewards {
		opts = append(opts, grpo.WithReward(r.Name, r.Weight, r.Fn))
	}
	if s.LoRARank > 0 {
		opts = append(opts, grpo.WithLoRA(model.LoRAConfig{R: s.LoRARank, Alpha: 2 * float64(s.LoRARank)}))
	}
	tr, err := grpo.NewTrainer(pol.Model, pol.Tokenizer, cfg, opts...)
	if err != nil {
		return res, err
	}
	defer tr.Close()
	if res.Before, err = evaluate(ctx, tr, pol.Tokenizer, task, s); err != nil {
		return res, fmt.Errorf("%s: evaluate the warm start: %w", task.Name, err)
	}
	fmt.Fprintf(log, "%s after SFT: %s\n", task.Name, res.Before)
	if s.Steps == 0 {
		res.After = res.Before
		return res, nil
	}
	begin = time.Now()
	if err := tr.Train(ctx, grpo.NewDataset(task.Train)); err != nil {
		return res, fmt.Errorf("%s: GRPO: %w", task.Name, err)
	}
	res.GRPOTime = time.Since(begin)
	if res.After, err = evaluate(ctx, tr, pol.Tokenizer, task, s); err != nil {
		return res, fmt.Errorf("%s: evaluate after GRPO: %w", task.Name, err)
	}
	fmt.Fprintf(log, "%s after GRPO: %s\n", task.Name, res.After)
	return res, nil
}

// grpoConfig is the trainer's configuration of a run: the task's budget,
// one optimizer step per generation, then s.Config's changes.
func grpoConfig(task Task, s Settings) grpo.Config {
	c := grpo.DefaultConfig()
	c.NumGenerations = s.G
	c.PerDeviceTrainBatchSize = s.Prompts * s.G
	c.MaxSteps = s.Steps
	c.MaxCompletionLength = task.MaxCompletion
	c.MaxToolCallingIterations = task.MaxTurns
	c.EnableThinking = tokenizer.ThinkingOff
	c.GradientCheckpointing = false
	c.Seed = s.Seed
	c.LoggingSteps = 1
	c.SaveSteps = 0
	c.OutputDir = s.OutputDir
	c.LogCompletions = s.OutputDir != ""
	if s.Config != nil {
		s.Config(&c)
	}
	return c
}

// warmStarted loads the embedded model and fine-tunes every weight on the
// expert's games (or loads that model from the cache).
func warmStarted(ctx context.Context, task Task, s Settings, be *cpu.Backend, log io.Writer) (*warmstart.Policy, error) {
	if s.SFTBatch < 0 {
		return nil, fmt.Errorf("%s: SFT batch %d: want > 0, or 0 for 8", task.Name, s.SFTBatch)
	}
	begin := time.Now()
	var cached string
	if s.CacheDir != "" {
		cached = filepath.Join(s.CacheDir, fmt.Sprintf("%s-seed%d-sft%d-lr%g", task.Name, s.Seed, s.SFTSteps, s.SFTLR))
		if s.SFTBatch != 0 || s.SFTSchedule != "" {
			cached += fmt.Sprintf("-b%d-%s", s.SFTBatch, s.SFTSchedule)
		}
		if _, err := os.Stat(filepath.Join(cached, "config.json")); err == nil {
			return warmstart.Load(warmstart.Options{Dir: cached}, be)
		}
	}
	pol, err := warmstart.Load(warmstart.Options{Seed: s.Seed}, be)
	if err != nil {
		return nil, err
	}
	if s.SFTSteps > 0 {
		cfg := grpoConfig(task, s)
		convs, err := warmstart.Conversations(ctx, task.Factory, task.ExpertRows, task.Expert, grpo.PlayOptions{Tokenizer: pol.Tokenizer, Config: &cfg})
		if err != nil {
			pol.Close()
			return nil, fmt.Errorf("%s: expert games: %w", task.Name, err)
		}
		sc := grpo.DefaultSFTConfig()
		sc.MaxSteps = s.SFTSteps
		sc.LearningRate = s.SFTLR
		sc.LRSchedule = model.ScheduleCosine
		if s.SFTSchedule != "" {
			sc.LRSchedule = s.SFTSchedule
		}
		sc.WarmupRatio = 0.1
		sc.BatchSize = 8
		if s.SFTBatch > 0 {
			sc.BatchSize = s.SFTBatch
		}
		sc.MaxLength = 512
		sc.EnableThinking = tokenizer.ThinkingOff
		sc.GradientCheckpointing = false
		sc.Seed = s.Seed
		var cbs []grpo.Callback
		if s.SFTLogEvery > 0 {
			sc.LoggingSteps = s.SFTLogEvery
			cbs = append(cbs, func(step int, m grpo.Metrics) error {
				fmt.Fprintf(log, "%s SFT step %5d loss %.4f lr %.2e\n", task.Name, step, m[grpo.MetricLoss], m[grpo.MetricLearningRate])
				return nil
			})
		}
		rep, err := warmstart.SFT(ctx, pol, convs, sc, cbs...)
		if err != nil {
			pol.Close()
			return nil, fmt.Errorf("%s: SFT: %w", task.Name, err)
		}
		if n := len(rep.History); n > 0 {
			fmt.Fprintf(log, "%s SFT: %d steps on %d expert games, final loss %.4f (%s)\n", task.Name, s.SFTSteps, len(convs), rep.History[n-1].Metrics[grpo.MetricLoss], time.Since(begin).Round(time.Second))
		}
	}
	if cached != "" {
		if err := pol.Save(cached); err != nil {
			pol.Close()
			return nil, err
		}
	}
	return pol, nil
}

// evaluate plays every eval row greedily once and, when asked, sampled.
func evaluate(ctx context.Context, tr *grpo.Trainer, tok *tokenizer.Tokenizer, task Task, s Settings) (Score, error) {
	var sc Score
	rep, err := tr.Evaluate(ctx, task.Eval, grpo.EvalOptions{NumGenerations: 1, Greedy: true})
	if err != nil {
		return sc, err
	}
	for i, r := range rep.Rollouts {
		won, err := task.Success(r)
		if err != nil {
			rep.Release()
			return sc, err
		}
		if i < s.Show && s.Log != nil {
			fmt.Fprintf(s.Log, "--- %v won %v\n%s\n", r.Row, won, tok.Decode(r.CompletionIDs, false))
		}
		sc.GreedyGames++
		if won {
			sc.Greedy++
		}
		sc.Calls += float64(r.ToolCalls)
		sc.Failures += float64(r.ToolFailures)
		sc.Reward += rep.Rewards[i]
	}
	rep.Release()
	n := float64(max(sc.GreedyGames, 1))
	sc.Calls, sc.Failures, sc.Reward = sc.Calls/n, sc.Failures/n, sc.Reward/n
	if s.SampledEval > 0 {
		rep, err := tr.Evaluate(ctx, task.Eval, grpo.EvalOptions{NumGenerations: s.SampledEval})
		if err != nil {
			return sc, err
		}
		defer rep.Release()
		sc.ByCalls = map[int]CallsReward{}
		for i, r := range rep.Rollouts {
			won, err := task.Success(r)
			if err != nil {
				return sc, err
			}
			sc.SampledGames++
			c := sc.ByCalls[r.ToolCalls]
			c.Games++
			c.Reward += rep.Rewards[i]
			if won {
				sc.Sampled++
				c.Wins++
			}
			sc.ByCalls[r.ToolCalls] = c
		}
		for k, c := range sc.ByCalls {
			c.Reward /= float64(c.Games)
			sc.ByCalls[k] = c
		}
	}
	return sc, nil
}
