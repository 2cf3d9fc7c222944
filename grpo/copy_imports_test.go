package grpo

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/kernels"
	"github.com/x/kernels/cpu"
	"github.com/x/kernels/kerneltest"
	"github.com/x/model"
	"github.com/x/tokenizer"
)

// The tests of this file run training through a backend whose Import
// returns a separate copy, as a device's does (kerneltest.Counting with
// CopyImports), where the CPU backends' Import returns the host memory
// itself and so hides a value read from or written to the wrong copy.

// TestResumeThroughCopyingImports is TestResumeBitExact with the resumed
// run on a copying backend: two GRPO generation batches (LoRA, with the
// KL reference pass), a checkpoint, a fresh trainer resumed from it, two
// more batches; its checkpoint files must equal the uninterrupted run's on
// the plain CPU backend byte for byte.
func TestResumeThroughCopyingImports(t *testing.T) {
	if testing.Short() {
		t.Skip("trains a model")
	}
	ctx := context.Background()
	const gens, stopAt = 4, 2
	whole := newResumeTrainer(t, t.TempDir())
	for g := range gens {
		_, err := whole.Step(ctx, resumeRows(g))
		require.NoError(t, err)
	}
	want, err := whole.SaveCheckpoint()
	require.NoError(t, err)

	first := newResumeTrainerOn(t, true, t.TempDir())
	for g := range stopAt {
		_, err := first.Step(ctx, resumeRows(g))
		require.NoError(t, err)
	}
	ck, err := first.SaveCheckpoint()
	require.NoError(t, err)
	resumed := newResumeTrainerOn(t, true, t.TempDir())
	require.NoError(t, resumed.Resume(ck))
	for g := stopAt; g < gens; g++ {
		_, err := resumed.Step(ctx, resumeRows(g))
		require.NoError(t, err)
	}
	assert.Equal(t, whole.State(), resumed.State())
	got, err := resumed.SaveCheckpoint()
	require.NoError(t, err)
	assertSameCheckpointFiles(t, want, got, "the copying backend's resumed run equals the CPU run")
}

// TestCheckpointThroughCopyingImports: a checkpoint saved from a copying
// backend holds the trained values (SaveCheckpoint downloads them), and
// LoadCheckpoint restores them into the backend's copy that the forward
// reads (it uploads them): the restored model's logits equal the saved
// one's, in LoRA and Full mode.
func TestCheckpointThroughCopyingImports(t *testing.T) {
	dir := tinyModelDir(t)
	be := cpu.New(1)
	t.Cleanup(be.Close)
	load := func() *model.Model {
		m, err := model.Load(dir, &kerneltest.Counting{Backend: be, CopyImports: true})
		require.NoError(t, err)
		t.Cleanup(func() { m.Close() })
		return m
	}
	for _, lora := range []*model.LoRAConfig{{R: 4, Alpha: 8}, nil} {
		name := map[bool]string{true: "lora", false: "full"}[lora != nil]
		t.Run(name, func(t *testing.T) {
			src := trainedWeightsOf(t, load(), lora, 1)
			path, err := SaveCheckpoint(t.TempDir(), 3, 0, src, nil, nil)
			require.NoError(t, err)
			dst := trainedWeightsOf(t, load(), lora, 2)
			_, err = LoadCheckpoint(path, dst, nil)
			require.NoError(t, err)
			for i, p := range dst.Params {
				want, got := make([]float32, p.Data.Len()), make([]float32, p.Data.Len())
				require.NoError(t, src.Model.Backend.Download(kernels.HostF32(want), src.Params[i].Data))
				require.NoError(t, dst.Model.Backend.Download(kernels.HostF32(got), p.Data))
				require.True(t, slices.Equal(want, got), "param %s restored bit for bit", p.Name)
			}
			ids := []int32{1, 2, 3, 4}
			want, err := src.Model.Logits(ids, model.Options{})
			require.NoError(t, err)
			got, err := dst.Model.Logits(ids, model.Options{})
			require.NoError(t, err)
			assert.Equal(t, want, got, "the forward reads the restored values")
		})
	}
}

// TestTrainerGivesBackendMemoryBack: a GRPO trainer's whole cycle (two
// generation batches with the KL reference pass, a checkpoint, a resume
// from it, Close) and then Model.Close leave no allocation of the
// (copying, so device-like) backend live.
func TestTrainerGivesBackendMemoryBack(t *testing.T) {
	if testing.Short() {
		t.Skip("trains a model")
	}
	ctx := context.Background()
	tr := newResumeTrainerOn(t, true, t.TempDir())
	m := tr.pol.m
	c, ok := m.Backend.(*kerneltest.Counting)
	require.True(t, ok, "the model runs on the counting backend")
	for g := range 2 {
		_, err := tr.Step(ctx, resumeRows(g))
		require.NoError(t, err)
	}
	ck, err := tr.SaveCheckpoint()
	require.NoError(t, err)
	require.NoError(t, tr.Resume(ck))
	_, err = tr.Step(ctx, resumeRows(2))
	require.NoError(t, err)
	require.NoError(t, tr.Close())
	require.NoError(t, m.Close())
	assert.Equal(t, 0, c.Live(), "allocations live after Trainer.Close and Model.Close")
	assert.Empty(t, c.BadFrees, "memory freed twice")
}

// TestSFTGivesBackendMemoryBack: SFT (LoRA and Full, with a checkpoint)
// through the copying backend equals the CPU backend's run (same losses,
// same saved weights) and, after Model.Close, leaves no allocation live.
func TestSFTGivesBackendMemoryBack(t *testing.T) {
	if testing.Short() {
		t.Skip("trains a model")
	}
	dir := tinyModelDir(t)
	for _, lora := range []*model.LoRAConfig{{R: 4, Alpha: 8}, nil} {
		name := map[bool]string{true: "lora", false: "full"}[lora != nil]
		t.Run(name, func(t *testing.T) {
			run := func(copyImports bool) ([]float64, []byte, *kerneltest.Counting) {
				be := cpu.New(1)
				defer be.Close()
				c := &kerneltest.Counting{Backend: be, CopyImports: copyImports}
				m, err := model.Load(dir, c)
				require.NoError(t, err)
				cfg := DefaultSFTConfig()
				cfg.MaxSteps, cfg.BatchSize, cfg.LearningRate = 3, 2, 3e-3
				cfg.LoRA, cfg.OutputDir, cfg.SaveSteps = lora, t.TempDir(), 3
				rep, err := SFT(context.Background(), m, tokenizer.Tiny(), guessConversations(), cfg)
				require.NoError(t, err)
				var losses []float64
				for _, h := range rep.History {
					losses = append(losses, h.Metrics[MetricLoss])
				}
				file := modelWeightsFile
				if lora != nil {
					file = model.AdapterWeightsFile
				}
				saved, err := os.ReadFile(filepath.Join(cfg.OutputDir, CheckpointPrefix+"3", file))
				require.NoError(t, err)
				require.NoError(t, m.Close())
				return losses, saved, c
			}
			wantLoss, wantSaved, _ := run(false)
			gotLoss, gotSaved, c := run(true)
			assert.Equal(t, wantLoss, gotLoss, "losses")
			assert.True(t, string(wantSaved) == string(gotSaved), "saved weights equal byte for byte")
			assert.Equal(t, 0, c.Live(), "allocations live after SFT and Model.Close")
			assert.Empty(t, c.BadFrees, "memory freed twice")
		})
	}
}
