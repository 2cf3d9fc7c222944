// Package ref is the reference Backend: plain loops, float64 accumulation,
// one goroutine. It is the specification every other backend is tested
// against (see kernels/kerneltest), so every kernel here is written to be
// obviously correct rather than fast.
//
// Conventions (as in kernels.Backend): buffers are row-major float32, the
// shape of each is written next to it, activation gradients are written (=)
// and parameter gradients accumulated (+=). Forward ops live in one file per
// family (matmul.go, rmsnorm.go, ...); backward ops in *_backward.go.
package ref

import (
	"github.com/x/kernels"
)

// Backend is the reference implementation of kernels.Backend. The zero
// value is ready to use; it holds no state, so one value may be used by any
// number of goroutines at once. Its Buffers are host slices
// (kernels.HostMemory).
type Backend struct {
	kernels.HostMemory
}

// opt is the host slice of an optional F32 Buffer: nil when it is empty.
func opt(b kernels.Buffer) []float32 {
	if b.Len() == 0 {
		return nil
	}
	return b.F32()
}
