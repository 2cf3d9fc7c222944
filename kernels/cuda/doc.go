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
//     thread, real barriers, lockstep warps, mma.sync, ldmatrix and
//     cp.async emulated per the PTX ISA tables, the tensor cores'
//     truncating accumulation as fitted to the H200). Device memory is host memory behind device addresses;
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
// The GEMMs (matmul.cu, ops_gemm.go, plan_gemm.go) pick a kernel by
// shape: a skinny tensor-core GEMV with split-K for M ≤ 16, 128-row
// cp.async/ldmatrix tiles above; their reductions run in fixed chunks of
// 128 terms summed in a fixed order, so a row's result does not depend on
// M (batch-invariant: sampling and training compute the same logits) and
// the tensor cores' truncation does not accumulate over long reductions.
// MatMul runs exact (f32 activations split into three bf16 terms) or, at
// kernels.MatMulBF16 (precision.go), on bf16-rounded activations.
//
// Status: the kernels are correct on the host build at the suite's
// awkward shapes; on an H200 (2026-12-04, before the present GEMMs and
// attention kernels) inference matched kernels/cpu. sample_rows makes
// about 70 block-wide passes over a row. Attention (head dims 16..128 in
// steps of 16) runs on the tensor cores, 16 query rows a warp with the
// GQA group's heads sharing K/V, keys in chunks of 64 folded by one merge
// so a row's bits do not depend on its batch (attention_fwd.cu), split
// over blocks for decode at small batch (flash-decoding) and combined with
// the same merge; its backward is flash-attention-2 style
// (attention_bwd.cu); other head dims run one warp per query row
// (attention.cu). Not yet run on a GPU.
package cuda
