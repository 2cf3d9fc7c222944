package cuda

import (
	"embed"
	"io/fs"
)

// images holds the generated kernels (scripts/cuda-kernels.sh).
//
//go:embed gen/*.ptx gen/*.cubin
var images embed.FS

// Images returns the compiled kernels, one pair per .cu family X:
// gen/X.ptx, PTX ISA 7.8 for compute_90 (the driver JIT-compiles it for the
// device at hand), and gen/X.sm_90.cubin, SASS for sm_90 (H100/H200), both
// from nvcc 11.8 and committed. Each kernel is an extern "C" entry named as
// in its .cu file.
func Images() fs.FS { return images }
