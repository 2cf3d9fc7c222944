//go:build cuda

package cuda

// The thin cgo layer over the CUDA driver API for what gorgonia.org/cu
// v0.9.6 does not wrap:
//
//   - cuLaunchKernel with a packed parameter block (CU_LAUNCH_PARAM_BUFFER_
//     POINTER): cu's Launch copies exactly 8 bytes from each argument
//     pointer, so it over-reads 4-byte scalars and cannot pass by-value
//     structs larger than 8 bytes; here the Go side packs the arguments
//     with their C alignment into one byte block (see args) and the driver
//     copies it at launch;
//   - cuFuncSetAttribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES),
//     needed before any launch with more than 48 KB of dynamic shared
//     memory;
//   - page-locked host memory (cuMemAllocHost / cuMemFreeHost), which cu
//     leaves out on purpose, for copies that overlap kernels;
//   - cuGetErrorName, to name a CUresult in our own errors.
//
// cu's handle types (Function, Stream) are one-field structs around the
// driver's handle, so they are converted by reinterpreting that field.
// Every function here must be called on the goroutine that owns the
// context (see driver).

/*
#cgo LDFLAGS: -L/usr/lib/x86_64-linux-gnu -lcuda
#include <stddef.h>
#include <cuda.h>

static CUresult launch_packed(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                              unsigned bz, unsigned smem, CUstream s, void* params, size_t size) {
  void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, params, CU_LAUNCH_PARAM_BUFFER_SIZE, &size, CU_LAUNCH_PARAM_END};
  return cuLaunchKernel(f, gx, gy, gz, bx, by, bz, smem, s, NULL, extra);
}

static CUresult set_max_dynamic_smem(CUfunction f, int bytes) {
  return cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, bytes);
}

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

// maxParamBytes is the driver's limit on a kernel's parameter block
// (4 KB before CUDA 12.1 and on PTX below 8.1).
const maxParamBytes = 4096

// result turns a CUresult into an error naming the call, or nil.
func result(call string, r C.CUresult) error {
	if r == C.CUDA_SUCCESS {
		return nil
	}
	return fmt.Errorf("cuda: %s: %s (CUresult %d)", call, C.GoString(C.result_name(r)), int(r))
}

func cFunction(f cu.Function) C.CUfunction { return *(*C.CUfunction)(unsafe.Pointer(&f)) }
func cStream(s cu.Stream) C.CUstream       { return *(*C.CUstream)(unsafe.Pointer(&s)) }

// launchPacked launches f with the packed parameter block params.
func launchPacked(name string, f cu.Function, d dims, smem int, s cu.Stream, params []byte) error {
	if len(params) > maxParamBytes {
		return fmt.Errorf("cuda: cuLaunchKernel %s: %d parameter bytes > %d", name, len(params), maxParamBytes)
	}
	var p unsafe.Pointer
	if len(params) > 0 {
		p = unsafe.Pointer(&params[0])
	}
	r := C.launch_packed(cFunction(f), C.uint(d.gx), C.uint(d.gy), C.uint(d.gz), C.uint(d.bx), C.uint(d.by), C.uint(d.bz),
		C.uint(smem), cStream(s), p, C.size_t(len(params)))
	return result("cuLaunchKernel "+name, r)
}

// setMaxDynamicSmem allows f to be launched with up to bytes of dynamic
// shared memory (above the default 48 KB).
func setMaxDynamicSmem(name string, f cu.Function, bytes int) error {
	return result("cuFuncSetAttribute "+name, C.set_max_dynamic_smem(cFunction(f), C.int(bytes)))
}

// hostAlloc returns n bytes of page-locked host memory.
func hostAlloc(n int) (unsafe.Pointer, error) {
	var p unsafe.Pointer
	if err := result("cuMemAllocHost", C.cuMemAllocHost(&p, C.size_t(n))); err != nil {
		return nil, err
	}
	return p, nil
}

// hostFree releases memory from hostAlloc.
func hostFree(p unsafe.Pointer) error { return result("cuMemFreeHost", C.cuMemFreeHost(p)) }
