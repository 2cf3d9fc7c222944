//go:build cudahost

package cuda_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/x/kernels"
	"github.com/x/kernels/cuda"
)

// newHost is the SIMT host build as the backend under test (the e2e
// checks wrap it in kerneltest.Counting with CopyImports, so its imports
// are copies as a device's are).
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

// TestModelHostTrainVsCPU: LoRA training steps through the host build
// against kernels/cpu (see e2eTrainVsCPU).
func TestModelHostTrainVsCPU(t *testing.T) { e2eTrainVsCPU(t, newHost) }

// TestModelHostTrainTransfers: a training step's crossings through the
// host build (see e2eTrainTransfers).
func TestModelHostTrainTransfers(t *testing.T) { e2eTrainTransfers(t, newHost) }
