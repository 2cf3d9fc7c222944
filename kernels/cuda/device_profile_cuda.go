//go:build cuda

package cuda

/*
#cgo LDFLAGS: -L/usr/lib/x86_64-linux-gnu -lcuda
#include <cudaProfiler.h>
*/
import "C"

import (
	"context"
	"fmt"
)

// SetProfiling starts (on) or stops the CUDA profilers' collection for the
// Device's context (cuProfilerStart, cuProfilerStop), so that a tool
// started with collection off (ncu --profile-from-start off, nsys
// --capture-range=cudaProfilerApi) sees only the work in between: one
// decode step, one training step. It first waits for the work already
// queued, so stopping ends after the last launch to profile and starting
// begins after the setup's. Without a profiler attached it does nothing
// harmful (the driver accepts the calls).
func (d *Device) SetProfiling(on bool) error {
	return d.drv.do(context.Background(), func() error {
		if err := d.drv.sync(); err != nil {
			return err
		}
		call, r := "cuProfilerStop", C.CUresult(0)
		if on {
			call, r = "cuProfilerStart", C.cuProfilerStart()
		} else {
			r = C.cuProfilerStop()
		}
		if r != C.CUDA_SUCCESS {
			return fmt.Errorf("cuda: %s: CUresult %d", call, int(r))
		}
		return nil
	})
}
