package cuda

import (
	"errors"
	"unsafe"
)

// The driver seam. Device (device.go) is the one kernels.Backend of this
// package: it checks shapes, stages host arguments, packs kernel
// arguments, keeps the sticky error and owns the caching allocator, and
// reaches the hardware only through a driver. Two drivers implement it:
//
//   - the CUDA driver API (driver_cuda.go, the `cuda` build tag: our cgo
//     over libcuda, with gorgonia.org/cu for setup and module loading);
//   - the host twin (twin.go, plain Go; with the `cudahost` tag its
//     launches run the kernels on the CPU through the SIMT shim): device
//     memory is host memory behind device addresses, and streams queue
//     their work and run it only when the host waits, so a missing wait
//     reads stale data here as it would on a GPU.
//
// Every call is stream-ordered where CUDA's is, and may be made from any
// goroutine (the CUDA driver makes its context current on the calling
// thread inside each call). Errors name the driver call.

// devptr is a device address (CUdeviceptr); 0 is no memory.
type devptr uint64

// streamH, eventH, graphH and kernelH are a driver's handles: a CUstream,
// a CUevent, an instantiated CUgraphExec and a CUfunction, or the twin's
// numbers for them.
type (
	streamH uintptr
	eventH  uintptr
	graphH  uintptr
	kernelH uintptr
)

// errOutOfMemory is wrapped by a driver's malloc when the device has no
// room (CUDA_ERROR_OUT_OF_MEMORY), and by the allocator when its limit is
// reached, so the allocator can free its cache and retry.
var errOutOfMemory = errors.New("out of memory")

// driver is the seam between Device and the hardware.
type driver interface {
	// describe names the device (and, for the CUDA driver, where each
	// kernel family was loaded from).
	describe() string
	// memInfo is cuMemGetInfo: free and total device memory in bytes.
	memInfo() (free, total int64, err error)
	// malloc is cuMemAlloc (at least 256-byte aligned); free is cuMemFree,
	// which waits for the work that may use the memory.
	malloc(n int64) (devptr, error)
	free(p devptr) error
	// hostAlloc and hostFree are page-locked host memory
	// (cuMemAllocHost): copies from or into it run asynchronously, so the
	// host must not touch it until the copy's stream has reached them.
	hostAlloc(n int64) (unsafe.Pointer, error)
	hostFree(p unsafe.Pointer) error

	streamCreate() (streamH, error)
	streamDestroy(s streamH) error
	// streamSync waits for every operation queued on s.
	streamSync(s streamH) error
	eventCreate() (eventH, error)
	eventDestroy(e eventH) error
	// eventRecord marks the point of s's queue reached so far; eventSync
	// waits for it, eventQuery says whether it has been reached, and
	// streamWait makes s's later work wait for it.
	eventRecord(e eventH, s streamH) error
	eventSync(e eventH) error
	eventQuery(e eventH) (bool, error)
	streamWait(s streamH, e eventH) error

	// The copies are stream-ordered (cuMemcpy*Async). A host→device copy
	// from pageable memory reads src before it returns; from page-locked
	// memory (hostAlloc) it reads it when the stream reaches it. A
	// device→host copy into pageable memory returns when the data has
	// arrived (a wait for the stream); into page-locked memory it lands
	// when the stream reaches it.
	copyHtoD(dst devptr, src unsafe.Pointer, n int64, s streamH) error
	copyDtoH(dst unsafe.Pointer, src devptr, n int64, s streamH) error
	copyDtoD(dst, src devptr, n int64, s streamH) error
	// memset8 sets n bytes, memset32 n 32-bit words (cuMemsetD8Async,
	// cuMemsetD32Async).
	memset8(dst devptr, v byte, n int64, s streamH) error
	memset32(dst devptr, v uint32, n int64, s streamH) error

	// kernel resolves a kernel by its extern "C" name.
	kernel(name string) (kernelH, error)
	// launchKernel queues k on s with grid and block dm, smem bytes of
	// dynamic shared memory and the packed parameter block a.
	launchKernel(k kernelH, dm dims, smem int, a *args, s streamH) error

	// captureBegin starts recording s's work into a graph instead of
	// running it (cuStreamBeginCapture in relaxed mode: captureEnd may run
	// on another OS thread, as a goroutine moves between them); captureEnd
	// stops and returns the instantiated graph; graphLaunch queues a replay
	// of it on s.
	captureBegin(s streamH) error
	captureEnd(s streamH) (graphH, error)
	graphLaunch(g graphH, s streamH) error
	graphDestroy(g graphH) error

	// close releases the driver; the memory it handed out must be freed
	// first.
	close() error
}
