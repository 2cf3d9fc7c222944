//go:build cuda

package cuda

// The CUDA driver's hot path: one cgo call per driver call, each making
// the Device's context current on the calling OS thread first (ctx_in:
// cuCtxGetCurrent, and cuCtxSetCurrent only when another context is
// current there). A CUDA context is current per OS thread, and a
// goroutine may move between threads between two cgo calls, but not
// during one; so checking inside the call is what makes any goroutine able
// to use the Device without a locked OS thread or a hop to a driver
// goroutine (DESIGN.md: "CUDA: one launch path"). Also here, what
// gorgonia.org/cu v0.9.6 lacks:
//
//   - cuLaunchKernel with a packed parameter block (CU_LAUNCH_PARAM_BUFFER_
//     POINTER): cu's Launch copies exactly 8 bytes from each argument
//     pointer, so it over-reads 4-byte scalars and cannot pass by-value
//     structs; here the Go side packs the arguments with their C alignment
//     into one byte block (args) and the driver copies it at launch;
//   - cuFuncSetAttribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES),
//     needed before any launch with more than 48 KB of dynamic shared
//     memory;
//   - page-locked host memory (cuMemAllocHost / cuMemFreeHost);
//   - events, stream waits and graphs (stream capture, instantiate, launch);
//   - cuGetErrorName, to name a CUresult in our own errors.

/*
#cgo LDFLAGS: -L/usr/lib/x86_64-linux-gnu -lcuda
#include <stddef.h>
#include <cuda.h>

static CUresult ctx_in(CUcontext c) {
  CUcontext now = NULL;
  CUresult r = cuCtxGetCurrent(&now);
  if (r != CUDA_SUCCESS || now == c) return r;
  return cuCtxSetCurrent(c);
}
#define IN(c)                            \
  do {                                   \
    CUresult r_ = ctx_in(c);             \
    if (r_ != CUDA_SUCCESS) return r_;   \
  } while (0)

static CUresult d_launch(CUcontext c, CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                         unsigned bz, unsigned smem, CUstream s, void* params, size_t size) {
  IN(c);
  void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, params, CU_LAUNCH_PARAM_BUFFER_SIZE, &size, CU_LAUNCH_PARAM_END};
  return cuLaunchKernel(f, gx, gy, gz, bx, by, bz, smem, s, NULL, extra);
}
static CUresult d_set_max_smem(CUcontext c, CUfunction f, int bytes) {
  IN(c);
  return cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, bytes);
}
static CUresult d_mem_info(CUcontext c, size_t* free, size_t* total) { IN(c); return cuMemGetInfo(free, total); }
static CUresult d_malloc(CUcontext c, CUdeviceptr* p, size_t n) { IN(c); return cuMemAlloc(p, n); }
static CUresult d_free(CUcontext c, CUdeviceptr p) { IN(c); return cuMemFree(p); }
static CUresult d_host_alloc(CUcontext c, void** p, size_t n) { IN(c); return cuMemAllocHost(p, n); }
static CUresult d_host_free(CUcontext c, void* p) { IN(c); return cuMemFreeHost(p); }
static CUresult d_htod(CUcontext c, CUdeviceptr dst, const void* src, size_t n, CUstream s) {
  IN(c);
  return cuMemcpyHtoDAsync(dst, src, n, s);
}
static CUresult d_dtoh(CUcontext c, void* dst, CUdeviceptr src, size_t n, CUstream s) {
  IN(c);
  return cuMemcpyDtoHAsync(dst, src, n, s);
}
static CUresult d_dtod(CUcontext c, CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) {
  IN(c);
  return cuMemcpyDtoDAsync(dst, src, n, s);
}
static CUresult d_memset8(CUcontext c, CUdeviceptr d, unsigned char v, size_t n, CUstream s) {
  IN(c);
  return cuMemsetD8Async(d, v, n, s);
}
static CUresult d_memset32(CUcontext c, CUdeviceptr d, unsigned v, size_t n, CUstream s) {
  IN(c);
  return cuMemsetD32Async(d, v, n, s);
}
static CUresult d_stream_create(CUcontext c, CUstream* s) { IN(c); return cuStreamCreate(s, CU_STREAM_NON_BLOCKING); }
static CUresult d_stream_destroy(CUcontext c, CUstream s) { IN(c); return cuStreamDestroy(s); }
static CUresult d_stream_sync(CUcontext c, CUstream s) { IN(c); return cuStreamSynchronize(s); }
static CUresult d_event_create(CUcontext c, CUevent* e) { IN(c); return cuEventCreate(e, CU_EVENT_DISABLE_TIMING); }
static CUresult d_event_destroy(CUcontext c, CUevent e) { IN(c); return cuEventDestroy(e); }
static CUresult d_event_record(CUcontext c, CUevent e, CUstream s) { IN(c); return cuEventRecord(e, s); }
static CUresult d_event_sync(CUcontext c, CUevent e) { IN(c); return cuEventSynchronize(e); }
static CUresult d_event_query(CUcontext c, CUevent e) { IN(c); return cuEventQuery(e); }
static CUresult d_stream_wait(CUcontext c, CUstream s, CUevent e) { IN(c); return cuStreamWaitEvent(s, e, 0); }
// Relaxed capture: in the global and thread-local modes, cuStreamEndCapture
// must come from the OS thread that began the capture, and the capturing
// thread may not call cuMemAlloc and the like; a goroutine changes threads
// between cgo calls, and other goroutines share its threads. The Device
// refuses what a graph cannot hold itself (errCapturing).
static CUresult d_capture_begin(CUcontext c, CUstream s) {
  IN(c);
  return cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED);
}
static CUresult d_capture_end(CUcontext c, CUstream s, CUgraphExec* out) {
  IN(c);
  CUgraph g = NULL;
  CUresult r = cuStreamEndCapture(s, &g);
  if (r != CUDA_SUCCESS) return r;
  r = cuGraphInstantiateWithFlags(out, g, 0);
  cuGraphDestroy(g);
  return r;
}
static CUresult d_graph_launch(CUcontext c, CUgraphExec g, CUstream s) { IN(c); return cuGraphLaunch(g, s); }
static CUresult d_graph_destroy(CUcontext c, CUgraphExec g) { IN(c); return cuGraphExecDestroy(g); }
static CUresult d_retain(CUdevice dev, CUcontext* c) { return cuDevicePrimaryCtxRetain(c, dev); }
static CUresult d_release(CUdevice dev) { return cuDevicePrimaryCtxRelease(dev); }
static CUresult d_set_current(CUcontext c) { return cuCtxSetCurrent(c); }

static const char* result_name(CUresult r) {
  const char* s = NULL;
  if (cuGetErrorName(r, &s) != CUDA_SUCCESS || s == NULL) return "CUDA_ERROR_UNKNOWN_CODE";
  return s;
}
*/
import "C"

import (
	"fmt"
	"unsafe"

	"gorgonia.org/cu"
)

// defaultDynamicSmem is the dynamic shared memory a kernel may use without
// cuFuncSetAttribute (plan.go's maxDynamicSmem with it).
const defaultDynamicSmem = 48 << 10

// maxParamBytes is the driver's limit on a kernel's parameter block
// (4 KB before CUDA 12.1 and on PTX below 8.1).
const maxParamBytes = 4096

// result turns a CUresult into an error naming the call, or nil;
// CUDA_ERROR_OUT_OF_MEMORY wraps errOutOfMemory.
func result(call string, r C.CUresult) error {
	if r == C.CUDA_SUCCESS {
		return nil
	}
	err := fmt.Errorf("cuda: %s: %s (CUresult %d)", call, C.GoString(C.result_name(r)), int(r))
	if r == C.CUDA_ERROR_OUT_OF_MEMORY {
		err = fmt.Errorf("%w: %w", err, errOutOfMemory)
	}
	return err
}

// cuHandles are the driver's objects behind the seam's handles, in tables
// (no handle is converted between integers and pointers).
type cuHandles struct {
	ctx     C.CUcontext
	fns     []C.CUfunction
	smem    []int // the dynamic shared memory each kernel is allowed
	streams handles[streamH, C.CUstream]
	events  handles[eventH, C.CUevent]
	graphs  handles[graphH, C.CUgraphExec]
}

func newCUHandles() cuHandles {
	return cuHandles{streams: newHandles[streamH, C.CUstream]("cuda: stream"), events: newHandles[eventH, C.CUevent]("cuda: event"),
		graphs: newHandles[graphH, C.CUgraphExec]("cuda: graph")}
}

func cFunction(f cu.Function) C.CUfunction { return *(*C.CUfunction)(unsafe.Pointer(&f)) }

func (d *cudaDriver) memInfo() (int64, int64, error) {
	var free, total C.size_t
	if err := result("cuMemGetInfo", C.d_mem_info(d.h.ctx, &free, &total)); err != nil {
		return 0, 0, err
	}
	return int64(free), int64(total), nil
}

func (d *cudaDriver) malloc(n int64) (devptr, error) {
	var p C.CUdeviceptr
	if err := result(fmt.Sprintf("cuMemAlloc %d bytes", n), C.d_malloc(d.h.ctx, &p, C.size_t(n))); err != nil {
		return 0, err
	}
	return devptr(p), nil
}

func (d *cudaDriver) free(p devptr) error {
	return result("cuMemFree", C.d_free(d.h.ctx, C.CUdeviceptr(p)))
}

func (d *cudaDriver) hostAlloc(n int64) (unsafe.Pointer, error) {
	var p unsafe.Pointer
	if err := result(fmt.Sprintf("cuMemAllocHost %d bytes", n), C.d_host_alloc(d.h.ctx, &p, C.size_t(n))); err != nil {
		return nil, err
	}
	return p, nil
}

func (d *cudaDriver) hostFree(p unsafe.Pointer) error {
	return result("cuMemFreeHost", C.d_host_free(d.h.ctx, p))
}

// look returns the driver objects of a stream and an event handle (0:
// none), under the handle lock.
func (d *cudaDriver) look(s streamH, e eventH) (cs C.CUstream, ce C.CUevent, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if s != 0 {
		if cs, err = d.h.streams.get(s); err != nil {
			return nil, nil, err
		}
	}
	if e != 0 {
		ce, err = d.h.events.get(e)
	}
	return cs, ce, err
}

func (d *cudaDriver) lookStream(s streamH) (C.CUstream, error) {
	cs, _, err := d.look(s, 0)
	return cs, err
}

func (d *cudaDriver) streamCreate() (streamH, error) {
	var cs C.CUstream
	if err := result("cuStreamCreate", C.d_stream_create(d.h.ctx, &cs)); err != nil {
		return 0, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.h.streams.add(cs), nil
}

func (d *cudaDriver) streamDestroy(s streamH) error {
	d.mu.Lock()
	cs, err := d.h.streams.take(s)
	d.mu.Unlock()
	if err != nil {
		return err
	}
	return result("cuStreamDestroy", C.d_stream_destroy(d.h.ctx, cs))
}

func (d *cudaDriver) streamSync(s streamH) error {
	cs, err := d.lookStream(s)
	if err != nil {
		return err
	}
	return result("cuStreamSynchronize", C.d_stream_sync(d.h.ctx, cs))
}

func (d *cudaDriver) eventCreate() (eventH, error) {
	var ce C.CUevent
	if err := result("cuEventCreate", C.d_event_create(d.h.ctx, &ce)); err != nil {
		return 0, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.h.events.add(ce), nil
}

func (d *cudaDriver) eventDestroy(e eventH) error {
	d.mu.Lock()
	ce, err := d.h.events.take(e)
	d.mu.Unlock()
	if err != nil {
		return err
	}
	return result("cuEventDestroy", C.d_event_destroy(d.h.ctx, ce))
}

func (d *cudaDriver) eventRecord(e eventH, s streamH) error {
	cs, ce, err := d.look(s, e)
	if err != nil {
		return err
	}
	return result("cuEventRecord", C.d_event_record(d.h.ctx, ce, cs))
}

func (d *cudaDriver) eventSync(e eventH) error {
	_, ce, err := d.look(0, e)
	if err != nil {
		return err
	}
	return result("cuEventSynchronize", C.d_event_sync(d.h.ctx, ce))
}

func (d *cudaDriver) eventQuery(e eventH) (bool, error) {
	_, ce, err := d.look(0, e)
	if err != nil {
		return false, err
	}
	r := C.d_event_query(d.h.ctx, ce)
	if r == C.CUDA_ERROR_NOT_READY {
		return false, nil
	}
	return r == C.CUDA_SUCCESS, result("cuEventQuery", r)
}

func (d *cudaDriver) streamWait(s streamH, e eventH) error {
	cs, ce, err := d.look(s, e)
	if err != nil {
		return err
	}
	return result("cuStreamWaitEvent", C.d_stream_wait(d.h.ctx, cs, ce))
}

func (d *cudaDriver) copyHtoD(dst devptr, src unsafe.Pointer, n int64, s streamH) error {
	cs, err := d.lookStream(s)
	if err != nil {
		return err
	}
	return result(fmt.Sprintf("cuMemcpyHtoDAsync %d bytes", n), C.d_htod(d.h.ctx, C.CUdeviceptr(dst), src, C.size_t(n), cs))
}

func (d *cudaDriver) copyDtoH(dst unsafe.Pointer, src devptr, n int64, s streamH) error {
	cs, err := d.lookStream(s)
	if err != nil {
		return err
	}
	return result(fmt.Sprintf("cuMemcpyDtoHAsync %d bytes", n), C.d_dtoh(d.h.ctx, dst, C.CUdeviceptr(src), C.size_t(n), cs))
}

func (d *cudaDriver) copyDtoD(dst, src devptr, n int64, s streamH) error {
	cs, err := d.lookStream(s)
	if err != nil {
		return err
	}
	return result(fmt.Sprintf("cuMemcpyDtoDAsync %d bytes", n), C.d_dtod(d.h.ctx, C.CUdeviceptr(dst), C.CUdeviceptr(src), C.size_t(n), cs))
}

func (d *cudaDriver) memset8(dst devptr, v byte, n int64, s streamH) error {
	cs, err := d.lookStream(s)
	if err != nil {
		return err
	}
	return result("cuMemsetD8Async", C.d_memset8(d.h.ctx, C.CUdeviceptr(dst), C.uchar(v), C.size_t(n), cs))
}

func (d *cudaDriver) memset32(dst devptr, v uint32, n int64, s streamH) error {
	cs, err := d.lookStream(s)
	if err != nil {
		return err
	}
	return result("cuMemsetD32Async", C.d_memset32(d.h.ctx, C.CUdeviceptr(dst), C.uint(v), C.size_t(n), cs))
}

func (d *cudaDriver) launchKernel(k kernelH, dm dims, smem int, a *args, s streamH) error {
	if int(k) >= len(d.h.fns) {
		return fmt.Errorf("cuda: launch of unresolved kernel %d", k)
	}
	name := d.names[k]
	if len(a.b) > maxParamBytes {
		return fmt.Errorf("cuda: cuLaunchKernel %s: %d parameter bytes > %d", name, len(a.b), maxParamBytes)
	}
	f := d.h.fns[k]
	if smem > defaultDynamicSmem {
		if err := d.allowSmem(k, smem); err != nil {
			return err
		}
	}
	cs, err := d.lookStream(s)
	if err != nil {
		return err
	}
	var p unsafe.Pointer
	if len(a.b) > 0 {
		p = unsafe.Pointer(&a.b[0]) // holds no Go pointers; cuLaunchKernel copies it before returning
	}
	r := C.d_launch(d.h.ctx, f, C.uint(dm.gx), C.uint(dm.gy), C.uint(dm.gz), C.uint(dm.bx), C.uint(dm.by), C.uint(dm.bz),
		C.uint(smem), cs, p, C.size_t(len(a.b)))
	return result("cuLaunchKernel "+name, r)
}

// allowSmem lets kernel k use smem bytes of dynamic shared memory.
func (d *cudaDriver) allowSmem(k kernelH, smem int) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if smem <= d.h.smem[k] {
		return nil
	}
	if err := result("cuFuncSetAttribute "+d.names[k], C.d_set_max_smem(d.h.ctx, d.h.fns[k], C.int(smem))); err != nil {
		return err
	}
	d.h.smem[k] = smem
	return nil
}

func (d *cudaDriver) captureBegin(s streamH) error {
	cs, err := d.lookStream(s)
	if err != nil {
		return err
	}
	return result("cuStreamBeginCapture", C.d_capture_begin(d.h.ctx, cs))
}

func (d *cudaDriver) captureEnd(s streamH) (graphH, error) {
	cs, err := d.lookStream(s)
	if err != nil {
		return 0, err
	}
	var g C.CUgraphExec
	if err := result("cuStreamEndCapture/cuGraphInstantiate", C.d_capture_end(d.h.ctx, cs, &g)); err != nil {
		return 0, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.h.graphs.add(g), nil
}

func (d *cudaDriver) graphLaunch(g graphH, s streamH) error {
	d.mu.Lock()
	cg, err := d.h.graphs.get(g)
	d.mu.Unlock()
	if err != nil {
		return err
	}
	cs, err := d.lookStream(s)
	if err != nil {
		return err
	}
	return result("cuGraphLaunch", C.d_graph_launch(d.h.ctx, cg, cs))
}

func (d *cudaDriver) graphDestroy(g graphH) error {
	d.mu.Lock()
	cg, err := d.h.graphs.take(g)
	d.mu.Unlock()
	if err != nil {
		return err
	}
	return result("cuGraphExecDestroy", C.d_graph_destroy(d.h.ctx, cg))
}

// retain retains dev's primary context.
func (d *cudaDriver) retain() error {
	return result("cuDevicePrimaryCtxRetain", C.d_retain(C.CUdevice(d.dev), &d.h.ctx))
}

// release releases the primary context.
func (d *cudaDriver) release() error {
	if d.h.ctx == nil {
		return nil
	}
	d.h.ctx = nil
	return result("cuDevicePrimaryCtxRelease", C.d_release(C.CUdevice(d.dev)))
}

// makeCurrent makes the context current on this OS thread (the caller
// has locked it) for gorgonia.org/cu's calls, which assume it.
func (d *cudaDriver) makeCurrent() error {
	return result("cuCtxSetCurrent", C.d_set_current(d.h.ctx))
}

// addFunction records a loaded kernel and returns its handle.
func (d *cudaDriver) addFunction(name string, f cu.Function) kernelH {
	k := kernelH(len(d.h.fns))
	d.h.fns = append(d.h.fns, cFunction(f))
	d.h.smem = append(d.h.smem, defaultDynamicSmem)
	d.names = append(d.names, name)
	d.funcs = append(d.funcs, f)
	return k
}
