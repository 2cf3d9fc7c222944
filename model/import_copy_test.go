package model

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/kernels"
	"github.com/x/kernels/cpu"
	"github.com/x/kernels/kerneltest"
)

// copyRun is what a few training steps produced, compared bit for bit
// between backends.
type copyRun struct {
	Losses  []float64     // Accumulate's loss per step
	LogP    [][][]float32 // and its log-probs per step
	RefLogP [][][]float32 // the KL reference's log-probs per step
	Params  [][]float32   // every parameter after the steps (Backend.Download)
	Logits  []float32     // Model.Logits after the steps (the forward reads the trained values)
	Saved   []byte        // the saved adapter (LoRA) or checkpoint (Full) weights file
	Merged  []float32     // LoRA: Model.Logits after MergeLoRA
}

// copyTrain runs steps training steps on the tiny model through be (LoRA
// with its shipped adapter, or Full with the bf16 reference kept), with a
// GRPO loss whose KL term reads the reference policy's log-probs, and
// records what came out.
func copyTrain(t *testing.T, be kernels.Backend, full bool, steps int) copyRun {
	t.Helper()
	ctx := t.Context()
	m := trLoadTiny(t, be, false)
	var lora LoRAConfig
	if !full {
		var err error
		lora, err = LoadAdapter(filepath.Join("testdata", "tiny_tied_f32_lora"), m)
		require.NoError(t, err)
	}
	tr, err := NewTrainable(m, TrainOptions{Full: full, Reference: full})
	require.NoError(t, err)
	defer tr.Close()
	opt, err := NewAdamW(be, tr.Params(), DefaultAdamWConfig(3e-2))
	require.NoError(t, err)
	defer opt.Release()
	seqs := []TrainSeq{{IDs: []int32{1, 2, 3, 4, 5, 6}, Start: 2}, {IDs: []int32{7, 8, 9, 10}, Start: 1}}
	rng := rand.New(rand.NewPCG(5, 6))
	var run copyRun
	for range steps {
		refLP, err := tr.RefLogProbs(ctx, seqs)
		require.NoError(t, err)
		old, _, err := tr.LogProbs(ctx, seqs, true)
		require.NoError(t, err)
		loss := grpoLoss(rng, kernels.LossParams{Objective: kernels.ObjectiveClipped, EpsLow: 0.2, EpsHigh: 0.28, Beta: 0.1},
			seqs, old, []float32{-0.1, 0.05}, false)
		loss.RefLogP, loss.ISRatio = refLP, nil
		res, err := tr.Accumulate(ctx, seqs, loss)
		require.NoError(t, err)
		_, err = opt.Step()
		require.NoError(t, err)
		tr.ZeroGrad()
		run.Losses, run.LogP, run.RefLogP = append(run.Losses, res.Loss), append(run.LogP, res.LogP), append(run.RefLogP, refLP)
	}
	for _, p := range tr.Params() {
		v := make([]float32, p.Data.Len())
		require.NoError(t, be.Download(kernels.HostF32(v), p.Data))
		run.Params = append(run.Params, v)
	}
	run.Logits, err = m.Logits([]int32{3, 1, 4, 1, 5}, Options{})
	require.NoError(t, err)
	dir := t.TempDir()
	file := filepath.Join(dir, "model.safetensors")
	if full {
		require.NoError(t, SaveCheckpoint(dir, m))
	} else {
		require.NoError(t, SaveAdapter(dir, m, lora, ""))
		file = filepath.Join(dir, AdapterWeightsFile)
	}
	run.Saved, err = os.ReadFile(file)
	require.NoError(t, err)
	if !full {
		require.NoError(t, MergeLoRA(m))
		run.Merged, err = m.Logits([]int32{3, 1, 4, 1, 5}, Options{})
		require.NoError(t, err)
	}
	return run
}

// TestTrainingThroughCopyingImports trains through a backend whose Import
// returns a separate copy, as a device's does (kerneltest.Counting with
// CopyImports), and requires bit-for-bit what the plain CPU backend gives:
// every step's loss and log-probs, the KL reference's log-probs, the
// parameters, the logits of the trained model, the saved adapter or
// checkpoint file, and (LoRA) the merged model's logits. Before the
// parameters lived in backend memory this failed: AdamW updated host
// slices the forward's imports did not see, and saving read host values.
func TestTrainingThroughCopyingImports(t *testing.T) {
	const steps = 3
	for _, full := range []bool{false, true} {
		name := map[bool]string{false: "lora", true: "full"}[full]
		t.Run(name, func(t *testing.T) {
			plain := cpu.New(2)
			defer plain.Close()
			want := copyTrain(t, plain, full, steps)
			require.NotEqual(t, want.LogP[0], want.LogP[steps-1], "training moved the log-probs")

			inner := cpu.New(2)
			defer inner.Close()
			c := &kerneltest.Counting{Backend: inner, CopyImports: true}
			got := copyTrain(t, c, full, steps)
			assert.Equal(t, want.Losses, got.Losses, "losses")
			assert.Equal(t, want.LogP, got.LogP, "log-probs")
			assert.Equal(t, want.RefLogP, got.RefLogP, "reference log-probs")
			assert.Equal(t, want.Params, got.Params, "parameters")
			assert.Equal(t, want.Logits, got.Logits, "logits after training")
			assert.Equal(t, want.Saved, got.Saved, "saved weights file")
			assert.Equal(t, want.Merged, got.Merged, "logits after merging")
		})
	}
}

// TestDownloadParamsOnCPU: on a CPU backend a trained weight's import is
// the host memory itself, so DownloadParams moves nothing and the host
// fields already hold what training wrote.
func TestDownloadParamsOnCPU(t *testing.T) {
	be := cpu.New(2)
	defer be.Close()
	c := &kerneltest.Counting{Backend: be}
	m := trLoadTiny(t, c, true)
	tr, err := NewTrainable(m, TrainOptions{})
	require.NoError(t, err)
	defer tr.Close()
	a := m.Layers[0].Attn.Q.LoRA.A
	assert.Equal(t, kernels.HostF32(a).HostPtr(), tr.Params()[0].Data.HostPtr(), "the parameter is the host field's memory")
	c.Reset()
	require.NoError(t, m.DownloadParams())
	assert.Zero(t, c.N.Total(), "nothing crosses")
}
