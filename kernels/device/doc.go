// Package device opens a kernels.Backend by name, so that a program can
// offer a -device flag without naming a backend package itself:
//
//	be, closeBackend, err := device.Open(*dev, device.Options{Threads: *threads})
//	if err != nil {
//		return err // e.g. "cuda" in a binary built without -tags cuda
//	}
//	defer closeBackend()
//	m, err := model.Load(dir, be)
//
// The names are "cpu" (kernels/cpu, Options.Threads workers, all cores by
// default), "cuda" (GPU 0) and "cuda:N" (GPU N). The CUDA backend
// (kernels/cuda) is linked only into binaries built with `go build -tags
// cuda`, which needs cuda.h (the CUDA toolkit) at build time and
// libcuda.so.1 (the NVIDIA driver) with an NVIDIA GPU at run time. Without
// the tag, Open("cuda") returns ErrNoCUDA, saying how to build one. With
// it, a machine without the driver library cannot start the binary (the
// dynamic loader names libcuda.so.1), and one without a GPU stops it before
// main with a message naming both (see internal/cuinit: the CUDA binding,
// gorgonia.org/cu, ends the process in its package initialisation when
// cuInit fails, so no later code could return an error instead).
//
// The package sits below the programs and above the backends; model and
// grpo import neither it nor any backend: they take the kernels.Backend a
// program chose.
package device
