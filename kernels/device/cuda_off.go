//go:build !cuda

package device

import "github.com/x/kernels"

// CUDAEnabled reports whether this binary was built with the cuda tag
// (and so links kernels/cuda's Device).
const CUDAEnabled = false

// openCUDA is ErrNoCUDA: kernels/cuda's Device is not linked in.
func openCUDA(int) (kernels.Backend, func() error, error) { return nil, nil, ErrNoCUDA }
