package learning

import (
	"context"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/examples/internal/wordlegame"
	"github.com/x/grpo"
	"github.com/x/model"
)

// The learning suite: each case warm-starts the embedded tiny Qwen3 on a
// task's expert games (SFT), measures task success, trains by GRPO with a
// stated seed and budget, and requires success to rise by a stated margin
// over the warm start's: GRPO must learn the task, not only a reward.
// Success is counted on sampled games at the training temperature and
// top-k (the policy GRPO trains) and on greedy ones, on evaluation rows.
//
// The short cases run in `make test`; GRPO_LEARN=long (`make learn`) adds
// the long ones. Every case runs on two threads, so that its arithmetic,
// and so its trajectory, depends only on the kernels' SIMD path. The
// button case gives the same figures on the AVX-512, AVX2-only
// (GODEBUG=cpu.avx512f=off) and no-SIMD (GODEBUG=cpu.avx512f=off,cpu.avx2=off)
// paths; the long cases' margins are about half the gain measured on
// AVX-512, and every long case passes on all three paths (BENCHMARKS.md,
// "Issue 21, fourth session").

// longSuite reports whether the long learning cases run.
func longSuite() bool { return os.Getenv("GRPO_LEARN") == "long" }

// learnCase is one case of the suite.
type learnCase struct {
	name string
	long bool // only in `make learn`
	task Task
	s    Settings
	// The warm start must leave room (sampled success at most maxBefore),
	// and GRPO must raise the sampled success by minGain (a share of
	// games), reach minGreedy greedy wins, and lose at most greedyLoss.
	maxBefore, minGain float64
	minGreedy          int
	greedyLoss         int
	// minCalls, if set, is the fewest tool calls per greedy game after
	// GRPO: the policy must use its tools, not learn to avoid them.
	minCalls float64
}

func TestLearn(t *testing.T) {
	if testing.Short() {
		t.Skip("trains models")
	}
	sampling := func(lr, beta float64) func(*grpo.Config) {
		return func(c *grpo.Config) {
			c.Temperature, c.TopK = 0.5, 10
			c.LearningRate, c.Beta = lr, beta
		}
	}
	words, err := wordlegame.ParseWords(wordlegame.DefaultWordList)
	require.NoError(t, err)
	cases := []learnCase{
		{
			// One tool, five buttons, blue always wins; the warm start
			// presses each colour alike, so about one sampled game in
			// eight wins and the greedy game presses one fixed colour.
			// Measured: sampled 11 % -> 88 %, greedy 0/16 -> 16/16, the
			// same on all three paths; about 22 s of CPU on AVX-512.
			name: "button",
			task: ButtonTask(32),
			s: Settings{Seed: 1, SFTSteps: 70, SFTLR: 3e-3, Steps: 15, Prompts: 4, G: 8, LoRARank: 16, SampledEval: 8,
				Config: sampling(1e-3, 0)},
			maxBefore: 0.3, minGain: 0.4, minGreedy: 12, minCalls: 0.9,
		},
		{
			// Guess a number in 1..8 with higher/lower hints: binary
			// search, its own reward (fewer guesses score more). The warm
			// start errs in some branches (5-6 guesses, not found);
			// every target in every step, lr 5e-4 decaying linearly (the
			// trainer's default schedule), β 0.04. Measured on AVX-512:
			// sampled 72 % -> 83 %, greedy 7/8 -> 8/8 (at lr 1e-3 and β 0
			// GRPO lowered it to 39 %: results.md).
			name: "guess8", long: true,
			task: GuessTask(8),
			s: Settings{Seed: 1, SFTSteps: 100, SFTLR: 3e-3, Steps: 30, Prompts: 8, G: 8, LoRARank: 16, SampledEval: 8,
				Config: sampling(5e-4, 0.04)},
			maxBefore: 0.8, minGain: 0.05, minGreedy: 7, minCalls: 2,
		},
		{
			// The demo's Wordle with the demo's defaults: ten words, TRL's
			// reward terms, the demo's warm start, every word in each of
			// 120 steps (10 × 8), lr 2e-3 held, then a cosine to 0 over
			// the last 36 steps (warmup_stable_decay), β 0.04. Measured:
			// sampled 36 % -> 59 % of 80 games, greedy 5/10 -> 6/10, calls
			// per greedy game 2.10 -> 2.00 on AVX-512 (5.1 min on 2
			// threads); 36 % -> 57 %, 5 -> 6 on AVX2; 36 % -> 59 %, 5 -> 6
			// with no SIMD (93 min, loaded).
			name: "wordle10", long: true,
			task: WordleTask(words[:10], wordlegame.TRLRewards),
			s: Settings{Seed: 1, SFTSteps: 70, SFTLR: 3e-3, Steps: 120, Prompts: 10, G: 8, LoRARank: 16, SampledEval: 8,
				Config: func(c *grpo.Config) {
					sampling(2e-3, 0.04)(c)
					c.LRSchedule, c.DecaySteps = model.ScheduleWSD, 36
				}},
			maxBefore: 0.5, minGain: 0.1, minCalls: 1.5,
		},
		{
			// The two-tool key-value task (lookup, submit), 4 values
			// written as two tokens each (KVOptions.Split: one-token values
			// kept the warm start on a plateau, results.md), the guessing
			// expert: half its games submit a guess without a lookup, so
			// the warm start copies the looked-up value but looks up in
			// about one sampled game in four and guesses greedily. Success
			// is the right value read by a lookup of the asked key (a
			// lucky guess is none). 800 SFT steps at a constant lr 3e-3;
			// GRPO 24 steps of 4 rows × 8, lr 1e-3 decaying linearly.
			// Measured (Threads 2, the machine loaded): sampled 24 % -> 95 %
			// (every two-call game won before and after: the gain is the
			// lookup), greedy 0/24 -> 24/24, calls per greedy game 1.00 ->
			// 2.00; 3 min 38 s wall on AVX-512 (SFT 3 min). On AVX2: 24 % ->
			// 99 %, 0/24 -> 24/24, pass, 6 min; no SIMD: 26 % -> 95 %, 0/24 ->
			// 24/24, 23.6 min. Seeds 2 and 3 (one thread):
			// 81 -> 97 % and 42 -> 80 %.
			name: "kv4-guessing", long: true,
			task: KVTask(KVOptions{Rows: 48, Values: 4, Split: true, Guessing: true}),
			s: Settings{Seed: 1, SFTSteps: 800, SFTLR: 3e-3, SFTSchedule: model.ScheduleConstant,
				Steps: 24, Prompts: 4, G: 8, LoRARank: 16, SampledEval: 4, Config: sampling(1e-3, 0)},
			maxBefore: 0.5, minGain: 0.35, minGreedy: 12, minCalls: 1.5,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.long && !longSuite() {
				t.Skip("a long case: GRPO_LEARN=long (make learn) runs it")
			}
			c.s.Threads = 2
			runCase(t, c)
		})
	}
}

func runCase(t *testing.T, c learnCase) {
	t.Helper()
	res, err := Run(context.Background(), c.task, c.s)
	require.NoError(t, err)
	b, a := res.Before, res.After
	n := len(res.Steps)
	t.Logf("%s seed %d: sampled %d/%d (%.0f%%) -> %d/%d (%.0f%%), greedy %d/%d -> %d/%d, calls per greedy game %.2f -> %.2f; reward %.3f (first 5 steps) -> %.3f (last 5), entropy %.3f -> %.3f; SFT %s, GRPO %s",
		c.task.Name, c.s.Seed, b.Sampled, b.SampledGames, 100*b.SampledRate(), a.Sampled, a.SampledGames, 100*a.SampledRate(),
		b.Greedy, b.GreedyGames, a.Greedy, a.GreedyGames, b.Calls, a.Calls,
		res.Window(grpo.MetricReward, 0, 5), res.Window(grpo.MetricReward, n-5, n),
		res.Window(grpo.MetricEntropy, 0, 5), res.Window(grpo.MetricEntropy, n-5, n), res.SFTTime.Round(1e8), res.GRPOTime.Round(1e8))
	require.Len(t, res.Steps, c.s.Steps)
	require.LessOrEqual(t, b.SampledRate(), c.maxBefore, "the warm start must leave GRPO room to learn")
	assert.GreaterOrEqual(t, a.SampledRate(), b.SampledRate()+c.minGain, "GRPO must raise the sampled success by %.0f points", 100*c.minGain)
	assert.GreaterOrEqual(t, a.Greedy, b.Greedy-c.greedyLoss, "GRPO must not lose greedy wins")
	assert.GreaterOrEqual(t, a.Greedy, c.minGreedy, "greedy wins after GRPO")
	assert.GreaterOrEqual(t, a.Calls, c.minCalls, "tool calls per greedy game after GRPO")
}

// TestRunRejectsBadSettings: a setting out of range is an error that
// names it, before any training.
func TestRunRejectsBadSettings(t *testing.T) {
	task := KVTask(KVOptions{Rows: 2, Values: 4, Split: true, Games: 2})
	for _, c := range []struct {
		name string
		s    Settings
		want string
	}{
		{"negative SFT batch", Settings{Seed: 1, Threads: 1, SFTSteps: 1, SFTLR: 1e-3, SFTBatch: -1}, "SFT batch -1"},
		{"unknown SFT schedule", Settings{Seed: 1, Threads: 1, SFTSteps: 1, SFTLR: 1e-3, SFTSchedule: "sawtooth"}, "sawtooth"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Run(context.Background(), task, c.s)
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
		})
	}
}
