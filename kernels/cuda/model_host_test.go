//go:build cudahost

package cuda_test

import (
	"fmt"
	"testing"

	"github.com/x/kernels"
	"github.com/x/kernels/cuda"
)

// deviceImports makes a host backend's Import copy, as cuda.Device's does
// (Alloc, then Upload), where kernels.HostMemory's returns the host memory
// itself. Through it the model's weights on the backend are memory of
// their own, so a model that updated a host weight in place after
// importing it (a training step's parameters) computes with the stale copy
// on the host build as it would on a GPU, instead of seeing the update for
// free as on kernels/cpu, and kerneltest.Counting counts such a weight
// passed to an op as foreign host memory (HostArgs), as a GPU would stage
// it.
type deviceImports struct{ kernels.Backend }

// Import copies src into a new backend Buffer.
func (d deviceImports) Import(src kernels.Buffer) (kernels.Buffer, error) {
	b, err := d.Alloc(src.DType(), src.Len())
	if err != nil {
		return kernels.Buffer{}, fmt.Errorf("importing %v: %w", src, err)
	}
	if err := d.Upload(b, src); err != nil {
		return kernels.Buffer{}, fmt.Errorf("importing %v: %w", src, err)
	}
	return b, nil
}

// newHost is the host build with device-style imports.
func newHost(*testing.T) kernels.Backend { return deviceImports{cuda.NewHost(2)} }

// TestModelHostVsCPU: the model's entry points through the SIMT host
// build against kernels/cpu (see e2eVsCPU).
func TestModelHostVsCPU(t *testing.T) { e2eVsCPU(t, newHost) }

// TestModelHostTransfers: a decode step never downloads logits and no op
// gets foreign host memory, through the host build (see e2eTransfers).
func TestModelHostTransfers(t *testing.T) { e2eTransfers(t, newHost) }

// hostOwnImports is the host build with kernels.HostMemory's Import, which
// returns the host memory itself, as kernels/cpu's does.
//
// The training checks run on it, not on newHost, while the parameters'
// values are host slices that AdamW updates in place (model.Param.Data,
// LoRA A and B; DESIGN.md, "still host"): with device-style imports the
// forward reads a stale copy of A after a step and the backward and
// optimizer get A and B as foreign host memory, as they would on a GPU.
func hostOwnImports(*testing.T) kernels.Backend { return cuda.NewHost(2) }

// TestModelHostTrainVsCPU: LoRA training steps through the host build
// against kernels/cpu (see e2eTrainVsCPU).
func TestModelHostTrainVsCPU(t *testing.T) { e2eTrainVsCPU(t, hostOwnImports) }
