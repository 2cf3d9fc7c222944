//go:build cuda

package cuda

/*
#cgo LDFLAGS: -L/usr/lib/x86_64-linux-gnu -lcuda
#include <cuda.h>
#include <cudaProfiler.h>

static CUresult d_profile(CUcontext c, int on) {
  CUresult r = cuCtxSetCurrent(c);
  if (r != CUDA_SUCCESS) return r;
  return on ? cuProfilerStart() : cuProfilerStop();
}
*/
import "C"

import "errors"

// SetProfiling starts (on) or stops the CUDA profilers' collection for the
// Device's context (cuProfilerStart, cuProfilerStop), so that a tool
// started with collection off (ncu --profile-from-start off, nsys
// --capture-range=cudaProfilerApi) sees only the work in between: one
// decode step, one training step (the gpu-check's ncu stage). It first
// waits for the work already queued (Sync), so starting begins after the
// setup's launches and stopping comes after the last launch to profile.
// Without a profiler attached the driver accepts the calls and nothing
// happens.
func (d *Device) SetProfiling(on bool) error {
	if err := d.Sync(); err != nil {
		return err
	}
	drv, ok := d.sh.drv.(*cudaDriver)
	if !ok {
		return errors.New("kernels/cuda: SetProfiling: the Device is not on the CUDA driver")
	}
	call, flag := "cuProfilerStop", C.int(0)
	if on {
		call, flag = "cuProfilerStart", 1
	}
	return result(call, C.d_profile(drv.h.ctx, flag))
}
