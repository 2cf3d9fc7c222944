// Package cuda is the CUDA backend: the kernels, one .cu file per op
// family (the same basename as its CPU twin in kernels/cpu), each opening
// with a comment on its layouts, launch configuration, assumptions and
// what it was checked against (common.cuh holds the helpers they share),
// and Device, the one kernels.Backend that runs them.
//
// One launch path. Device (device.go, ops*.go) checks shapes, stages host
// arguments, packs each kernel's parameter block (args.go) and queues the
// launch through a driver seam (driver.go) with two implementations:
//
//   - the CUDA driver API (`cuda` build tag: NewDevice; gorgonia.org/cu to
//     find the GPU and load the modules, our cgo for the hot path,
//     driver_cgo_cuda.go). Modules load from the embedded sm_90 cubins
//     (gen/, `make cuda-kernels`), the PTX when the device is not sm_90;
//   - the host twin (twin.go; with the `cudahost` tag, NewHost runs the
//     kernels on the CPU through simt.h, our SIMT shim: one fiber per CUDA
//     thread, real barriers, lockstep warps, mma.sync emulated per the PTX
//     ISA tables). Device memory is host memory behind device addresses;
//     streams queue work and run it only when the host waits, so a missing
//     wait reads stale data every time; each launch's packed parameters are
//     checked against the kernel's C signature (host.cc unpacks the block by
//     that signature, so no parameter list is written twice).
//
// So `go test -tags cudahost ./kernels/cuda/` (make cudahost) runs the
// whole conformance suite and the model end to end (model_e2e_test.go)
// through the device path itself: memory, staging, launches, the kernels'
// status words, the allocator. simt.h states what the shim cannot catch;
// DESIGN.md lists what only a GPU confirms and the gpu-check stage that
// does.
//
// Execution is asynchronous and stream-ordered: the host waits only where
// it reads a value (Download, DownloadAll, scalar results, Sync, staged
// host outputs). Kernels that index with data check each index and report
// a bad one in a status slot (status.go) that the Device reads at its next
// sync point, instead of the host checking indices before a launch. Small
// uploads go through a page-locked staging area (staging.go). Memory comes
// from a caching allocator (alloc.go) with statistics
// (kernels.MemoryReporter) and Trim (kernels.MemoryTrimmer). NewStream
// gives more streams (Events order them); BeginCapture/EndCapture record
// a CUDA graph that Replay queues with one call (graph.go). Counters
// count what the Device asked of the driver: launches, waits, bytes.
//
// Adding a kernel: ops.go's comment. Launch configurations live in
// plan.go; argument structs passed by pointer in abi.go (checked against
// their C twins by TestKernelABI, with every launch's argument chain).
//
// Status: the kernels are correct on the host build at the suite's
// awkward shapes; on an H200 (2026-12-04) inference matched kernels/cpu.
// The kernels favour clarity over speed for now: the GEMM is a plain
// 32×64-tile mma.sync kernel, attention runs one warp per query row, and
// sample_rows makes about 70 block-wide passes over a row.
package cuda
