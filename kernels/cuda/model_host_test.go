//go:build cudahost

package cuda_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/x/kernels"
	"github.com/x/kernels/cuda"
	"github.com/x/model"
)

// newHost is a Device on the host twin as the backend under test (its
// imports are copies, as on a GPU; the e2e checks also wrap it in
// kerneltest.Counting with CopyImports).
func newHost(t *testing.T) kernels.Backend {
	d := cuda.NewHost(2)
	t.Cleanup(func() { require.NoError(t, d.Close()) })
	return d
}

// TestModelHostVsCPU: the model's inference entry points through the SIMT
// host build against kernels/cpu (see e2eVsCPU).
func TestModelHostVsCPU(t *testing.T) { e2eVsCPU(t, newHost) }

// TestModelHostTransfers: Load imports each weight once, a decode step
// never downloads logits and no op gets foreign host memory, through the
// host build (see e2eTransfers).
func TestModelHostTransfers(t *testing.T) { e2eTransfers(t, newHost) }

// TestModelHostForwardInvariance: on the host build every position's
// hidden state is the same bits in a continuous batch as alone (see
// e2eForwardInvariance).
func TestModelHostForwardInvariance(t *testing.T) { e2eForwardInvariance(t, newHost) }

// TestModelHostTrainVsCPU: LoRA training steps through the host build
// against kernels/cpu (see e2eTrainVsCPU).
func TestModelHostTrainVsCPU(t *testing.T) { e2eTrainVsCPU(t, newHost) }

// TestModelHostTrainTransfers: a training step's crossings through the
// host build (see e2eTrainTransfers).
func TestModelHostTrainTransfers(t *testing.T) { e2eTrainTransfers(t, newHost) }

// TestModelHostSyncs: a decode step waits for the device once, a training
// step only where the host reads a value, counted at the driver seam of
// the host twin (see e2eSyncs).
func TestModelHostSyncs(t *testing.T) { e2eSyncs(t, newHost) }

// TestModelHostGraphs: decode steps replayed from graphs on the host build
// give the bits of op-by-op steps and of each sequence alone, padding rows
// leak nothing, and a pool that moved is recaptured (see e2eGraphs).
func TestModelHostGraphs(t *testing.T) { e2eGraphs(t, newHost) }

// BenchmarkDecodeStepHost: a decode step of the tiny e2e model on the host
// twin at batch 1, 8 and 64, replayed from graphs and op by op,
// interleaved: its host time without the kernels' (see benchDecodeStep),
// launches and waits.
func BenchmarkDecodeStepHost(b *testing.B) {
	for _, batch := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("batch%d", batch), func(b *testing.B) {
			d := cuda.NewHost(2)
			defer d.Close()
			dir := b.TempDir()
			require.NoError(b, model.WriteRandom(dir, e2eShape(), kernels.BF16, 11, model.RandomOptions{Std: 0.08, NormStd: 0.1}))
			m, err := model.Load(dir, d)
			require.NoError(b, err)
			defer m.Close()
			benchDecodeStep(b, d, m, batch)
		})
	}
}
