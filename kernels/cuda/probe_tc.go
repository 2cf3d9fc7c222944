//go:build cudahost

package cuda

/*
#include "host.h"
*/
import "C"

import "unsafe"

// Host launches of the probes of the shim's ldmatrix, cp.async and
// tensor-core accumulation (simt_probe.cu); probeTC* in probe_tc_test.go
// holds their expectations, shared with the device tests.

// probeLdmatrix runs simt_probe_ldmatrix on one warp: out[32·12], m[32·8].
func probeLdmatrix(out []uint32, m []uint16) error {
	return hostError(C.host_simt_probe_ldmatrix(1, 1, 1, 32, 1, 1, 1, (*C.uint32_t)(unsafe.Pointer(&out[0])), u16p(m)))
}

// probeCpAsync runs simt_probe_cp_async on one warp: out[2·384], src[384].
func probeCpAsync(out, src []float32) error {
	return hostError(C.host_simt_probe_cp_async(1, 1, 1, 32, 1, 1, 1, f32p(out), f32p(src)))
}

// probeMMAChain runs simt_probe_mma_chain: d[16,8] = a[16,r]·b[r,8].
func probeMMAChain(d, a []float32, b []uint16, r int) error {
	return hostError(C.host_simt_probe_mma_chain(1, 1, 1, 32, 1, 1, 1, f32p(d), f32p(a), u16p(b), C.int(r)))
}
