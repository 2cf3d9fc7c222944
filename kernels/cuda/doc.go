// Package cuda is the CUDA backend's kernels: one .cu file per op family
// (the same basename as its CPU twin in kernels/cpu), each opening with a
// comment on its layouts, launch configuration, assumptions and what it was
// checked against; common.cuh holds the helpers they share.
//
// The kernels are built two ways:
//
//   - for the GPU, by `make cuda-kernels` (scripts/cuda-kernels.sh): nvcc
//     11.8 compiles each .cu to PTX for compute_90 and to an sm_90 cubin
//     under gen/, committed and embedded (see Images); ptxas must report no
//     spills;
//   - for the CPU, with the `cudahost` build tag: host.cc compiles the same
//     sources as C++ through simt.h, a SIMT shim of our own (one fiber per
//     CUDA thread, real barriers, lockstep warps, mma.sync fragments
//     emulated per the PTX ISA tables), and Host runs them as a
//     kernels.Backend, so `go test -tags cudahost ./kernels/cuda/` runs the
//     whole conformance suite against the kernels' own indexing, tiling,
//     masking and reductions. simt.h states what that cannot catch.
//
// Launch configurations live in plan.go, shared by the host build and the
// device launcher.
package cuda
