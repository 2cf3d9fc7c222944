//go:build cudahost

package cuda

/*
#include <stdlib.h>
#include "host.h"
*/
import "C"

import (
	"errors"
	"unsafe"
)

// hostError turns a host launch's message into an error (nil if none).
func hostError(msg *C.char) error {
	if msg == nil {
		return nil
	}
	s := C.GoString(msg)
	C.free(unsafe.Pointer(msg))
	return errors.New(s)
}

// probeMMA runs simt_probe_mma: d[16,8] = a[16,16]·b[16,8] + c (a, b bf16
// bits) through one emulated mma.sync.
func probeMMA(d []float32, a, b []uint16, c []float32) error {
	return hostError(C.host_simt_probe_mma(1, 1, 1, 32, 1, 1, 1, f32p(d), u16p(a), u16p(b), f32p(c)))
}

// probeBarrier runs simt_probe_barrier on one block of len(out) threads.
func probeBarrier(out []int32, workers int) error {
	return hostError(C.host_simt_probe_barrier(1, 1, 1, C.uint(len(out)), 1, 1, C.int(workers), (*C.int)(unsafe.Pointer(&out[0]))))
}

// probeBroken runs one of the deliberately broken kernels on one warp; it
// returns the shim's error.
func probeBroken(kernel string, out []int32) error {
	p := (*C.int)(unsafe.Pointer(&out[0]))
	switch kernel {
	case "diverge":
		return hostError(C.host_simt_broken_diverge(1, 1, 1, 32, 1, 1, 1, p))
	case "mask":
		return hostError(C.host_simt_broken_mask(1, 1, 1, 32, 1, 1, 1, p))
	case "ldmatrix":
		return hostError(C.host_simt_broken_ldmatrix(1, 1, 1, 32, 1, 1, 1, p))
	case "cp_async":
		return hostError(C.host_simt_broken_cp_async(1, 1, 1, 32, 1, 1, 1, p))
	}
	return errors.New("no broken kernel " + kernel)
}
