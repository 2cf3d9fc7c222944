package grpo

import (
	"context"
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/env"
	"github.com/x/env/envtest"
	"github.com/x/model"
)

// asyncData is the dataset of the asynchronous tests: guess games.
func asyncData() Dataset {
	return NewDataset([]env.Row{{"target": 1}, {"target": 3}, {"target": 5}, {"target": 7}, {"target": 8}, {"target": 2}})
}

// sameCheckpoints asserts that two checkpoint folders hold byte-identical
// adapters and optimizer state.
func sameCheckpoints(t *testing.T, a, b, what string) {
	t.Helper()
	for _, name := range []string{model.AdapterWeightsFile, OptimizerStateFile} {
		x, err := os.ReadFile(filepath.Join(a, name))
		require.NoError(t, err)
		y, err := os.ReadFile(filepath.Join(b, name))
		require.NoError(t, err)
		assert.True(t, string(x) == string(y), "%s: %s byte for byte", what, name)
	}
}

// TestAsyncStalenessZeroEqualsSync: Train through the producer at
// staleness 0 ends with the synchronous trainer's adapters and optimizer
// state byte for byte, on policy (one optimizer step per generation) and
// with old log-probs in the loss (NumIterations 2).
func TestAsyncStalenessZeroEqualsSync(t *testing.T) {
	if testing.Short() {
		t.Skip("trains a model")
	}
	for _, iters := range []int{1, 2} {
		t.Run(map[int]string{1: "on_policy", 2: "num_iterations_2"}[iters], func(t *testing.T) {
			setup := func(c *Config) { c.MaxSteps, c.SaveSteps, c.NumIterations = 4, 4, iters }
			sync := newResumeTrainer(t, t.TempDir(), setup)
			require.NoError(t, sync.Train(context.Background(), asyncData()))
			async := newResumeTrainer(t, t.TempDir(), setup)
			async.alwaysAsync = true
			require.NoError(t, async.Train(context.Background(), asyncData()))
			assert.Equal(t, sync.State(), async.State())
			sameCheckpoints(t, filepath.Join(sync.cfg.OutputDir, "checkpoint-4"), filepath.Join(async.cfg.OutputDir, "checkpoint-4"), "staleness 0")
		})
	}
}

// TestAsyncStalenessBound: each generation is sampled with the policy of
// exactly max(0, g_k − s) optimizer steps (g_k the step its learning
// starts at), which the completions log records per rollout and
// async/staleness/* reports: never above s, and s once the run is under
// way; the policy learns. Layouts of one and of two optimizer steps per
// generation.
func TestAsyncStalenessBound(t *testing.T) {
	if testing.Short() {
		t.Skip("trains a model")
	}
	for _, tc := range []struct {
		name       string
		s, spg     int
		steps      int
		wantLag    []float64 // per optimizer step
		wantPolicy []int     // per generation
	}{
		{"s1", 1, 1, 4, []float64{0, 1, 1, 1}, []int{0, 0, 1, 2}},
		{"s2", 2, 1, 4, []float64{0, 1, 2, 2}, []int{0, 0, 0, 1}},
		// Two steps per generation: generation k starts at step 2k.
		{"s2_two_steps_per_generation", 2, 2, 6, []float64{0, 0, 2, 2, 2, 2}, []int{0, 0, 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logged []Metrics
			tr := newResumeTrainer(t, t.TempDir(), func(c *Config) {
				c.MaxSteps, c.MaxStaleness, c.LogCompletions = tc.steps, tc.s, true
				if tc.spg == 2 {
					c.PerDeviceTrainBatchSize, c.StepsPerGeneration = 4, 2
				}
			})
			tr.o.callbacks = append(tr.o.callbacks, func(_ int, m Metrics) error { logged = append(logged, m); return nil })
			before := snapshot(tr.Params())
			require.NoError(t, tr.Train(context.Background(), asyncData()))
			assert.True(t, changed(t, before, tr.Params()), "the policy learnt")
			require.Len(t, logged, tc.steps)
			for i, m := range logged {
				assert.Equal(t, tc.wantLag[i], m[MetricAsyncStalenessMax], "step %d", i+1)
				assert.Equal(t, tc.wantLag[i], m[MetricAsyncStalenessMean], "step %d", i+1)
				assert.LessOrEqual(t, m[MetricAsyncStalenessMax], float64(tc.s), "the bound")
			}
			recs := readCompletions(t, filepath.Join(tr.cfg.OutputDir, CompletionsFile))
			perGen := tr.layout.GenerationBatchSize
			require.Len(t, recs, perGen*len(tc.wantPolicy))
			for i, r := range recs {
				assert.Equal(t, tc.wantPolicy[i/perGen], r.PolicyVersion, "generation %d rollout %d", i/perGen, i%perGen)
			}
			assert.Nil(t, tr.async, "the run is over")
		})
	}
}

// TestAsyncResumeBitExact: an asynchronous run (staleness 1) checkpoints
// at step 2 with the adapter snapshot its next generation samples with; a
// fresh trainer resumed there plays the generations in flight again and
// ends byte for byte where the uninterrupted run does.
func TestAsyncResumeBitExact(t *testing.T) {
	if testing.Short() {
		t.Skip("trains a model")
	}
	setup := func(c *Config) { c.MaxSteps, c.SaveSteps, c.MaxStaleness = 4, 2, 1 }
	whole := newResumeTrainer(t, t.TempDir(), setup)
	require.NoError(t, whole.Train(context.Background(), asyncData()))
	cks, err := Checkpoints(whole.cfg.OutputDir)
	require.NoError(t, err)
	require.Len(t, cks, 2)
	// Generation 2 (learnt from step 2) samples with the policy of step 1.
	assert.FileExists(t, filepath.Join(cks[0], SnapshotFile(1)))
	entries, err := os.ReadDir(cks[0])
	require.NoError(t, err)
	n := 0
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "policy_version_") {
			n++
		}
	}
	assert.Equal(t, 1, n, "only the snapshots generations in flight need")

	resumed := newResumeTrainer(t, t.TempDir(), setup)
	require.NoError(t, resumed.Resume(cks[0]))
	require.Len(t, resumed.resumed, 1)
	require.NoError(t, resumed.Train(context.Background(), asyncData()))
	assert.Equal(t, whole.State(), resumed.State())
	sameCheckpoints(t, cks[1], filepath.Join(resumed.cfg.OutputDir, "checkpoint-4"), "resumed")

	// Resumed into a synchronous run, the snapshots are dropped.
	syncRun := newResumeTrainer(t, t.TempDir(), func(c *Config) { c.MaxSteps, c.SaveSteps = 4, 2 })
	require.NoError(t, syncRun.Resume(cks[0]))
	require.NoError(t, syncRun.Train(context.Background(), asyncData()))
	assert.Nil(t, syncRun.resumed)
}

// TestAsyncResumeOfAResumedRunBitExact: an asynchronous run resumed from
// a synchronous checkpoint (step 2) has no policy older than its start,
// so its first generations sample with the start's adapters (versions
// clamped up to 2); a checkpoint it writes at step 3 holds that snapshot,
// and a run resumed there must sample those generations with it again
// (not with its own start's adapters) to end where the uninterrupted
// asynchronous run does.
func TestAsyncResumeOfAResumedRunBitExact(t *testing.T) {
	if testing.Short() {
		t.Skip("trains a model")
	}
	syncRun := newResumeTrainer(t, t.TempDir(), func(c *Config) { c.MaxSteps, c.SaveSteps = 2, 2 })
	require.NoError(t, syncRun.Train(context.Background(), asyncData()))
	setup := func(c *Config) { c.MaxSteps, c.SaveSteps, c.MaxStaleness, c.LogCompletions = 5, 1, 2, true }
	whole := newResumeTrainer(t, t.TempDir(), setup)
	require.NoError(t, whole.Resume(filepath.Join(syncRun.cfg.OutputDir, "checkpoint-2")))
	require.NoError(t, whole.Train(context.Background(), asyncData()))
	// Generations 3 and 4 (learnt from steps 3 and 4) sampled with step 2's
	// policy: generation 3's max(0, 3 − 2) = 1 is older than the run.
	recs := readCompletions(t, filepath.Join(whole.cfg.OutputDir, CompletionsFile))
	versions := map[int]int{}
	for _, r := range recs {
		versions[r.Step] = r.PolicyVersion
	}
	assert.Equal(t, map[int]int{3: 2, 4: 2, 5: 2}, versions, "policy version by the step that learnt it")
	ck3 := filepath.Join(whole.cfg.OutputDir, "checkpoint-3")
	assert.FileExists(t, filepath.Join(ck3, SnapshotFile(2)))

	resumed := newResumeTrainer(t, t.TempDir(), setup)
	require.NoError(t, resumed.Resume(ck3))
	require.NoError(t, resumed.Train(context.Background(), asyncData()))
	versions = map[int]int{}
	for _, r := range readCompletions(t, filepath.Join(resumed.cfg.OutputDir, CompletionsFile)) {
		versions[r.Step] = r.PolicyVersion
	}
	assert.Equal(t, map[int]int{4: 2, 5: 2}, versions, "the resumed run samples with the checkpoint's snapshot")
	assert.Equal(t, whole.State(), resumed.State())
	sameCheckpoints(t, filepath.Join(whole.cfg.OutputDir, "checkpoint-5"), filepath.Join(resumed.cfg.OutputDir, "checkpoint-5"), "resumed twice")
}

// slowToolTrainer is a LoRA trainer on the tiny model whose scripted
// rollouts call a slow tool twice (envtest.Slow, delay d) before
// answering, so that a generation spends most of its time waiting on
// tools; every rollout's calls run at once (ToolConcurrency 8).
func slowToolTrainer(t testing.TB, gauge *envtest.Gauge, d time.Duration, edit func(*Config)) *Trainer {
	t.Helper()
	cfg := testConfig(4, 2)
	cfg.MaxCompletionLength = 512
	cfg.MaxSteps = 3
	cfg.ToolConcurrency = 8
	edit(&cfg)
	m, tok := tinyModel(t, 1)
	tr, err := NewTrainer(m, tok, cfg, WithEnv(envtest.SlowFactory(d, gauge)), WithLoRA(model.LoRAConfig{R: 4, Alpha: 8}),
		WithReward("len", 1, func(_ context.Context, r *Rollout) (float64, error) { return float64(len(r.CompletionIDs) % 3), nil }))
	require.NoError(t, err)
	t.Cleanup(func() { tr.Close() })
	_, f := scripted(tok, func(_, turn int) string {
		if turn < 2 {
			return call("work", `{"job": "build"}`)
		}
		return "Done."
	})
	tr.eng.decoder = f
	return tr
}

// TestAsyncOverlapsToolsWithTraining: against a slow fake environment
// (envtest.Slow), the asynchronous trainer learns while tools work: some
// of its learner calls (loss passes, optimizer steps) hold the model while
// a tool call is in flight, where the synchronous trainer's never do; and
// it keeps its staleness bound. The overlap is observed as events (the
// calls in flight and started across each learner call), not as wall time, so the machine's load cannot decide the outcome;
// BenchmarkAsyncStep measures what the overlap saves.
func TestAsyncOverlapsToolsWithTraining(t *testing.T) {
	if testing.Short() {
		t.Skip("trains a model")
	}
	run := func(s int) (overlapped, calls int, lags []float64) {
		gauge := &envtest.Gauge{}
		tr := slowToolTrainer(t, gauge, 300*time.Millisecond, func(c *Config) { c.MaxStaleness = s })
		// A learner call overlaps tool work when a call is in flight as
		// it takes or gives back the model, or one started while it held
		// it: an intersection of intervals, whatever their lengths.
		holding, busyAtTake, startedAt := false, false, 0
		tr.pol.lk.learnerHeld = func() {
			if !holding {
				calls++
				busyAtTake, startedAt = gauge.InFlight() > 0, gauge.Calls()
			} else if busyAtTake || gauge.InFlight() > 0 || gauge.Calls() != startedAt {
				overlapped++
			}
			holding = !holding
		}
		tr.o.callbacks = append(tr.o.callbacks, func(_ int, m Metrics) error {
			lags = append(lags, m[MetricAsyncStalenessMax])
			return nil
		})
		require.NoError(t, tr.Train(context.Background(), nil))
		assert.Equal(t, 3*8*2, gauge.Calls(), "two calls per rollout")
		t.Logf("staleness %d: %d of %d learner calls overlap tool calls", s, overlapped, calls)
		return overlapped, calls, lags
	}
	overlapped, calls, _ := run(0)
	assert.Positive(t, calls)
	assert.Zero(t, overlapped, "synchronous: tools and learning in sequence")
	overlapped, _, lags := run(1)
	assert.Positive(t, overlapped, "asynchronous: learning while tools work")
	assert.Equal(t, []float64{0, 1, 1}, lags)
}

// TestAsyncErrors: asynchronous training needs LoRA and the trainer's
// own rollouts; a producer's failure ends Train with its error.
func TestAsyncErrors(t *testing.T) {
	m, tok := tinyModel(t, 3)
	cfg := testConfig(2, 1)
	cfg.MaxStaleness = 1
	_, err := NewTrainer(m, tok, cfg, WithEnv(counters()), WithReward("one", 1, constant(1)))
	assert.ErrorContains(t, err, "MaxStaleness")
	assert.ErrorContains(t, err, "LoRA")
	_, err = NewTrainer(m, tok, cfg, WithLoRA(model.LoRAConfig{R: 2, Alpha: 4}), WithReward("one", 1, constant(1)),
		WithRolloutFunc(func(context.Context, []env.Row) ([]Generated, error) { return nil, nil }))
	assert.ErrorContains(t, err, "RolloutFunc")
	cfg.MaxStaleness = -1
	assert.ErrorContains(t, cfg.Validate(), "MaxStaleness")

	if testing.Short() {
		return
	}
	// Generation 1's rollouts all fail (the producer plays it while the
	// learner trains on generation 0): Train ends with that error after
	// learning generation 0.
	tr, _ := newScripted(t, func() Config { c := testConfig(4, 2); c.MaxStaleness, c.MaxSteps = 1, 3; return c }(),
		func(r, _ int) string {
			if r >= 8 {
				return "!err"
			}
			return "Hi."
		}, WithEnv(counters()), WithLoRA(model.LoRAConfig{R: 2, Alpha: 4}), WithReward("len", 1, func(_ context.Context, r *Rollout) (float64, error) {
			return float64(len(r.CompletionIDs)), nil
		}))
	err = tr.Train(context.Background(), nil)
	assert.ErrorContains(t, err, "generation 1: all 8 rollouts failed")
	assert.Equal(t, 1, tr.State().GlobalStep)
	assert.Nil(t, tr.async)

	// Cancelled while the producer waits on tools that take an hour:
	// Train returns with the context's error (that it returns at all,
	// within the test's timeout, shows the tool calls were abandoned; no
	// wall-clock bound, which a loaded machine could break).
	tr = slowToolTrainer(t, &envtest.Gauge{}, time.Hour, func(c *Config) { c.MaxStaleness = 1 })
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	err = tr.Train(ctx, nil)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Equal(t, 0, tr.State().GlobalStep)
}

// readCompletions reads a completions log.
func readCompletions(t *testing.T, path string) []CompletionRecord {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	var recs []CompletionRecord
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var r CompletionRecord
		require.NoError(t, json.Unmarshal([]byte(line), &r))
		recs = append(recs, r)
	}
	return recs
}

// gateEnv is an env whose Reset, for a row with "gate": true, reports on
// entered and then waits for release: a generation held mid-play.
type gateEnv struct {
	entered chan<- struct{}
	release <-chan struct{}
}

func (g *gateEnv) Reset(ctx context.Context, row env.Row) (string, error) {
	if row["gate"] == true {
		g.entered <- struct{}{}
		select {
		case <-g.release:
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
	return "Say something.", nil
}

// TestEvaluateWhileTheProducerSamplesWithASnapshot: while asynchronous
// training's producer plays a generation with an older policy's adapters
// (a snapshot), an Evaluate on another goroutine (a Callback's, say) samples
// with the live adapters: its rollouts' log-probs are the live policy's
// as the training forward scores them, not the snapshot's.
func TestEvaluateWhileTheProducerSamplesWithASnapshot(t *testing.T) {
	m, tok := tinyModel(t, 3)
	cfg := testConfig(2, 1)
	cfg.MaxCompletionLength = 12
	entered, release := make(chan struct{}, 4), make(chan struct{})
	tr, err := NewTrainer(m, tok, cfg, WithLoRA(model.LoRAConfig{R: 2, Alpha: 4}), WithReward("one", 1, constant(1)),
		WithEnv(env.FactoryFunc(func(context.Context) (env.Env, error) { return &gateEnv{entered: entered, release: release}, nil })))
	require.NoError(t, err)
	t.Cleanup(func() { tr.Close() })
	snap, err := tr.pol.newSnapshot() // the adapters as attached (B = 0): the base model
	require.NoError(t, err)
	defer tr.pol.releaseSnapshot(snap)
	rng := rand.New(rand.NewPCG(1, 2))
	for _, p := range tr.Params() { // the live policy moves far from the snapshot
		for i, x := range p.Data.F32() {
			p.Data.F32()[i] = x + float32(rng.Float64()-0.5)
		}
	}

	ctx := context.Background()
	done := make(chan error, 1)
	go func() {
		_, err := tr.produce(ctx, []env.Row{{"gate": true}}, 0, 0, snap, true)
		done <- err
	}()
	<-entered // the producer's generation (with snap) has begun
	ev, err := tr.Evaluate(ctx, []env.Row{{}}, EvalOptions{NumGenerations: 2})
	require.NoError(t, err)
	close(release)
	require.NoError(t, <-done)

	var seqs []trainSeq
	for _, r := range ev.Rollouts {
		require.NoError(t, r.Err)
		seqs = append(seqs, trainSeq{ids: append(append([]int32(nil), r.PromptIDs...), r.CompletionIDs...), start: len(r.PromptIDs), mask: r.Mask})
	}
	live, err := tr.pol.logProbs(ctx, seqs, true)
	require.NoError(t, err)
	worst := 0.0
	for j, r := range ev.Rollouts {
		require.Len(t, r.LogProbs, len(live[j]))
		for i, ok := range r.Mask {
			if ok {
				worst = max(worst, math.Abs(float64(live[j][i]-r.LogProbs[i])))
			}
		}
	}
	// The decoder's and the training forward's sums differ at the
	// rounding level (1e-6 here); the snapshot's policy differs by ~0.1.
	assert.Less(t, worst, 1e-3, "Evaluate sampled with the live adapters")
	ev.Release()
}
