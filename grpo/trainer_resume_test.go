package grpo

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/env"
	"github.com/x/env/guess"
	"github.com/x/model"
)

// resumeRows are the generation batches of the resume test: two prompts
// (games) each.
func resumeRows(gen int) []env.Row {
	return []env.Row{{"target": 1 + gen%8}, {"target": 8 - gen%8}}
}

// newResumeTrainer makes a LoRA GRPO trainer on the tiny model (the same
// random weights every call) against the guess env, with a reward that
// depends on the sampled tokens, so groups have spread and the adapters
// move every step.
func newResumeTrainer(t *testing.T, out string, edit ...func(*Config)) *Trainer {
	return newResumeTrainerOn(t, false, out, edit...)
}

// newResumeTrainerOn is newResumeTrainer; with copyImports the model runs
// on a backend whose Import copies, as a device's does (see tinyModelOn).
func newResumeTrainerOn(t *testing.T, copyImports bool, out string, edit ...func(*Config)) *Trainer {
	m, tok := tinyModelOn(t, 11, copyImports)
	cfg := testConfig(4, 2)
	cfg.MaxCompletionLength = 24
	cfg.Seed = 5
	cfg.Beta = 0.04 // the reference pass (adapters off) is part of the step too
	cfg.OutputDir = out
	for _, e := range edit {
		e(&cfg)
	}
	tr, err := NewTrainer(m, tok, cfg,
		WithEnv(guess.NewFactory(guess.Options{Rules: guess.Rules{Max: 8, MaxGuesses: 3}})),
		WithLoRA(model.LoRAConfig{R: 4, Alpha: 8}),
		WithReward("tokens", 1, func(_ context.Context, r *Rollout) (float64, error) {
			s := 0
			for i, id := range r.CompletionIDs {
				if r.Mask[i] {
					s += int(id)
				}
			}
			return float64(s % 5), nil
		}))
	require.NoError(t, err)
	t.Cleanup(func() { tr.Close() })
	return tr
}

// TestResumeBitExact runs four generation batches, checkpointing after
// the second; a fresh trainer resumed from that checkpoint runs the last
// two, and its adapter and optimizer files must equal the uninterrupted
// run's byte for byte.
func TestResumeBitExact(t *testing.T) {
	if testing.Short() {
		t.Skip("trains a model")
	}
	checkResumeBitExact(t, newResumeTrainer(t, t.TempDir()), func() *Trainer { return newResumeTrainer(t, t.TempDir()) }, resumeRows, 4, 2)
}

// checkResumeBitExact steps whole through gens generation batches of
// rows, checkpointing after the first stopAt; a fresh trainer resumed
// from that checkpoint steps through the rest, and the two must end in
// the same state with byte-identical checkpoint files, the adapters having
// moved since the checkpoint (so the comparison is not of two idle runs).
// It returns the resumed trainer and its final checkpoint's folder.
func checkResumeBitExact(t *testing.T, whole *Trainer, fresh func() *Trainer, rows func(int) []env.Row, gens, stopAt int) (*Trainer, string) {
	t.Helper()
	ctx := context.Background()
	var ck string
	for g := range gens {
		_, err := whole.Step(ctx, rows(g))
		require.NoError(t, err)
		if g+1 == stopAt {
			var err error
			ck, err = whole.SaveCheckpoint()
			require.NoError(t, err)
		}
	}
	want, err := whole.SaveCheckpoint()
	require.NoError(t, err)

	resumed := fresh()
	require.NoError(t, resumed.Resume(ck))
	assert.Equal(t, stopAt, resumed.State().Generation)
	for g := stopAt; g < gens; g++ {
		_, err := resumed.Step(ctx, rows(g))
		require.NoError(t, err)
	}
	assert.Equal(t, whole.State(), resumed.State())
	got, err := resumed.SaveCheckpoint()
	require.NoError(t, err)
	assertSameCheckpointFiles(t, want, got, "the resumed run equals the uninterrupted run")
	a, err := os.ReadFile(filepath.Join(ck, model.AdapterWeightsFile))
	require.NoError(t, err)
	b, err := os.ReadFile(filepath.Join(want, model.AdapterWeightsFile))
	require.NoError(t, err)
	assert.False(t, string(a) == string(b), "the batches after the checkpoint changed the adapters")
	return resumed, want
}

// TestTrainResumeBitExact is the same through Train: a run of 4 optimizer
// steps over a shuffled 5-row dataset (so the data order crosses an epoch)
// checkpoints at step 2; a fresh trainer resumed from there trains to step
// 4 and its checkpoint equals the uninterrupted run's byte for byte. It
// also checks the run's outputs.
func TestTrainResumeBitExact(t *testing.T) {
	if testing.Short() {
		t.Skip("trains a model")
	}
	ctx := context.Background()
	data, setup := trainResumeRun()

	a := newResumeTrainer(t, t.TempDir(), setup)
	require.NoError(t, a.Train(ctx, data))
	outA := a.cfg.OutputDir
	cks, err := Checkpoints(outA)
	require.NoError(t, err)
	require.Equal(t, []string{filepath.Join(outA, "checkpoint-2"), filepath.Join(outA, "checkpoint-4")}, cks)
	logged, err := ReadMetrics(filepath.Join(outA, MetricsFile))
	require.NoError(t, err)
	require.Len(t, logged, 4)
	for _, k := range []string{MetricReward, MetricRewardStd, RewardMeanName("tokens"), MetricLoss, MetricKL, MetricEntropy, MetricLearningRate, MetricGradNorm,
		MetricCompletionsMeanLength, MetricToolsCallFrequency, MetricToolsFailureFrequency, MetricNumTokens,
		MetricStepTime, MetricTimeGeneration, MetricTimeTools, MetricTimeScoring, MetricTimeBackward, MetricTimeOptimizer} {
		assert.Contains(t, logged[3].Metrics, k)
	}
	assert.FileExists(t, filepath.Join(outA, PlotFile))
	lines, err := os.ReadFile(filepath.Join(outA, CompletionsFile))
	require.NoError(t, err)
	assert.Equal(t, 4*8, strings.Count(string(lines), "\n"), "8 rollouts per step")

	b := newResumeTrainer(t, t.TempDir(), setup)
	require.NoError(t, b.Resume(cks[0]))
	require.NoError(t, b.Train(ctx, data))
	assert.Equal(t, a.State(), b.State())
	loggedA := logged
	logged, err = ReadMetrics(filepath.Join(b.cfg.OutputDir, MetricsFile))
	require.NoError(t, err)
	require.Len(t, logged, 2, "the resumed run logs steps 3 and 4")
	assert.Equal(t, 3, logged[0].Step)
	// num_tokens is cumulative over the run, resumed or not.
	assert.Equal(t, loggedA[3].Metrics[MetricNumTokens], logged[1].Metrics[MetricNumTokens])
	for _, name := range []string{model.AdapterWeightsFile, OptimizerStateFile} {
		x, err := os.ReadFile(filepath.Join(cks[1], name))
		require.NoError(t, err)
		y, err := os.ReadFile(filepath.Join(b.cfg.OutputDir, "checkpoint-4", name))
		require.NoError(t, err)
		assert.True(t, string(x) == string(y), "%s: resumed Train equals the uninterrupted run byte for byte", name)
	}
}

// TestTrainResumeAfterKill resumes in the folder of a run killed between
// checkpoints: its logs hold steps past the last checkpoint (and a line
// the kill tore), and the folder of the checkpoint it was writing is left
// over. The resumed run's logs must equal an uninterrupted run's but for
// wall-time figures and train_loss (of one Train call), and the leftover folder must be gone.
func TestTrainResumeAfterKill(t *testing.T) {
	if testing.Short() {
		t.Skip("trains a model")
	}
	ctx := context.Background()
	data, setup := trainResumeRun()
	a := newResumeTrainer(t, t.TempDir(), setup)
	require.NoError(t, a.Train(ctx, data))
	whole := a.cfg.OutputDir

	// The killed run: everything the whole run wrote up to step 4's
	// checkpoint, which it was writing when killed.
	killed := t.TempDir()
	for _, f := range []string{MetricsFile, CompletionsFile} {
		b, err := os.ReadFile(filepath.Join(whole, f))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(killed, f), append(b, `{"step":5,"rew`...), 0o644))
	}
	require.NoError(t, os.CopyFS(filepath.Join(killed, "checkpoint-2"), os.DirFS(filepath.Join(whole, "checkpoint-2"))))
	require.NoError(t, os.CopyFS(filepath.Join(killed, ".checkpoint-4.tmp123"), os.DirFS(filepath.Join(whole, "checkpoint-4"))))

	b := newResumeTrainer(t, killed, setup)
	require.NoError(t, b.Resume("latest"))
	assert.NoDirExists(t, filepath.Join(killed, ".checkpoint-4.tmp123"), "an unfinished checkpoint is removed on resume")
	require.NoError(t, b.Train(ctx, data))

	want, err := ReadMetrics(filepath.Join(whole, MetricsFile))
	require.NoError(t, err)
	got, err := ReadMetrics(filepath.Join(killed, MetricsFile))
	require.NoError(t, err)
	require.Len(t, got, len(want), "each step logged once")
	for i := range want {
		assert.Equal(t, want[i].Step, got[i].Step)
		for k, v := range want[i].Metrics {
			if Reproducible(k) {
				assert.Equal(t, v, got[i].Metrics[k], "step %d %s", want[i].Step, k)
			}
		}
	}
	x, err := os.ReadFile(filepath.Join(whole, CompletionsFile))
	require.NoError(t, err)
	y, err := os.ReadFile(filepath.Join(killed, CompletionsFile))
	require.NoError(t, err)
	assert.Equal(t, strings.Count(string(x), "\n"), strings.Count(string(y), "\n"), "each completion logged once")
	assert.True(t, string(x) == string(y), "the completions log equals the uninterrupted run's")
	assertSameCheckpointFiles(t, filepath.Join(whole, "checkpoint-4"), filepath.Join(killed, "checkpoint-4"), "the resumed run equals the uninterrupted run")
}

func TestResumeErrors(t *testing.T) {
	tr := newResumeTrainer(t, t.TempDir())
	err := tr.Resume("latest")
	assert.ErrorContains(t, err, "no checkpoint-<step> folder")
	dir, err := tr.SaveCheckpoint()
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, TrainerStateFile), []byte(`{"global_step": 3, "mode": "lora", "state": {"global_step": 2}}`), 0o644))
	before := paramData(tr.checkpointWeights())
	err = tr.Resume(dir)
	assert.ErrorContains(t, err, "trainer state at step 2, checkpoint of step 3")
	assert.Equal(t, before, paramData(tr.checkpointWeights()))
}

// assertSameCheckpointFiles checks that the adapter and optimizer files of
// the checkpoint folders want and got are equal byte for byte; what says
// which two runs wrote them.
func assertSameCheckpointFiles(t *testing.T, want, got, what string) {
	t.Helper()
	for _, name := range []string{model.AdapterWeightsFile, OptimizerStateFile} {
		a, err := os.ReadFile(filepath.Join(want, name))
		require.NoError(t, err)
		b, err := os.ReadFile(filepath.Join(got, name))
		require.NoError(t, err)
		assert.True(t, string(a) == string(b), "%s: %s byte for byte", name, what)
	}
}

// trainResumeRun is the Train run the resume tests interrupt: 4 optimizer
// steps over a shuffled 5-row dataset (so the data order crosses an
// epoch), a checkpoint every 2, completions logged.
func trainResumeRun() (Dataset, func(*Config)) {
	data := NewDataset([]env.Row{{"target": 1}, {"target": 3}, {"target": 5}, {"target": 7}, {"target": 8}})
	return data, func(c *Config) {
		c.MaxSteps, c.SaveSteps, c.ShuffleDataset, c.LogCompletions = 4, 2, true, true
	}
}
