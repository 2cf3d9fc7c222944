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
//     masking and reductions, and the model end to end on Host against
//     kernels/cpu (model_e2e_test.go: logits, batched generation through
//     the paged KV cache, LogProbs, LoRA training steps, the host↔backend
//     crossings). simt.h states what that cannot catch.
//
// Launch configurations live in plan.go, shared by the host build and the
// device launcher.
//
// With the `cuda` build tag (gorgonia.org/cu; building needs cuda.h,
// running needs a GPU: cu's package init calls cuInit and exits without
// one), NewDevice opens a GPU: one goroutine locked to its OS thread owns
// the context and makes every driver call (driver_cuda.go); modules load
// from the embedded cubins, the PTX when the device is not sm_90 or the
// cubin is refused; device memory comes from a caching pool
// (pool_cuda.go); what cu lacks is in driver_cgo_cuda.go. Device is a
// kernels.Backend over the same kernels and plans as Host. Its Buffers
// are pooled device memory (device_buffer_cuda.go, buffer_cuda.go), and
// every op reads device Buffers in place; host Buffers passed to an op are
// staged (copied in, and out for outputs) around its launch.
//
// Status: the kernels are correct on the host build at the suite's
// awkward shapes; the device path compiles (go vet/build/test -c -tags
// cuda) but has never run on a GPU: `make gpu-check` prepares the check
// (scripts/gpu-check.sh). The kernels favour clarity over speed for now:
// the GEMM is a plain 32×64-tile mma.sync kernel (no ldmatrix, cp.async or
// pipelining; a decode row uses 1 of its 32 rows, no split-K for long
// reductions), attention runs one warp per query row (no shared-memory K/V
// tiles for prefill), and sample_rows makes about 70 block-wide passes over a row.
package cuda
