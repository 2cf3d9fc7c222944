//go:build !amd64

package cpu

import "unsafe"

// Without amd64 assembly the Backend never selects the VDPBF16PS path
// (detect reports no AVX-512); this exists so the package builds
// everywhere.
func dpNTAsm(mr, nr int, x *uint16, ldx int, w unsafe.Pointer, ldw int, steps int, out *float32, ldo int, acc int) {
	panic("kernels/cpu: no SIMD kernels on this architecture")
}
