//go:build cuda

package device

import (
	"fmt"

	"github.com/x/kernels"
	"github.com/x/kernels/cuda"
	_ "github.com/x/kernels/device/internal/cuinit" // a clear message, before gorgonia.org/cu's init, when there is no GPU
)

// CUDAEnabled reports whether this binary was built with the cuda tag
// (and so links kernels/cuda's Device).
const CUDAEnabled = true

// openCUDA opens GPU ordinal.
func openCUDA(ordinal int) (kernels.Backend, func() error, error) {
	d, err := cuda.NewDevice(ordinal)
	if err != nil {
		return nil, nil, fmt.Errorf("open GPU %d (needs libcuda.so.1 and an NVIDIA GPU; -device cpu runs without): %w", ordinal, err)
	}
	return d, d.Close, nil
}
