//go:build cuda

// Package cuinit initialises the CUDA driver before gorgonia.org/cu does,
// to say clearly why a binary built with -tags cuda cannot run here. cu's
// package initialisation calls cuInit and, when it fails (no GPU, no
// usable driver), prints the driver's bare result ("NoDevice") and exits
// the process: nothing after it can turn that into an error. Go
// initialises packages in import-path order among those whose imports are
// ready (Go 1.21+); this package imports nothing cu does not, and its path
// ("github.com/…") sorts before "gorgonia.org/cu", so its init runs first.
// When cuInit fails it prints what the user needs (the build tag, the
// driver library, the GPU, how to run without one) and exits as cu would
// have; when cuInit succeeds, cu's own call is a no-op.
//
// A machine without libcuda.so.1 never reaches any init: the dynamic
// loader refuses to start the binary and names the library.
package cuinit

/*
#cgo LDFLAGS: -lcuda
#cgo linux CFLAGS: -I/usr/local/cuda/include -I/usr/include
#include <cuda.h>
*/
import "C"

import (
	"fmt"
	"os"
)

// ExitCode is the status the process exits with when cuInit fails (cu's
// own).
const ExitCode = 1

func init() {
	r := C.cuInit(0)
	if r == C.CUDA_SUCCESS {
		return
	}
	var name *C.char
	what := fmt.Sprintf("CUresult %d", int(r))
	if C.cuGetErrorName(r, &name) == C.CUDA_SUCCESS && name != nil {
		what = C.GoString(name)
	}
	fmt.Fprintf(os.Stderr, "%s: this binary was built with -tags cuda and needs an NVIDIA GPU and its driver (libcuda.so.1) to start, but cuInit failed: %s.\n"+
		"On a machine without a GPU, build without -tags cuda and run with -device cpu.\n", os.Args[0], what)
	os.Exit(ExitCode)
}
