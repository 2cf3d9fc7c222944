//go:build !amd64

package cpu

import "unsafe"

// Without amd64 assembly the Backend never selects the VDPBF16PS path
// (detect reports no AVX-512); these exist so the package builds
// everywhere.

func dpaxpyAsm(mr, nv int, a unsafe.Pointer, sai int, sap int, b unsafe.Pointer, ldb int, steps int, c *float32, ldc int, acc int) {
	panic("kernels/cpu: no SIMD kernels on this architecture")
}

func dpLoop(iters int) { panic("kernels/cpu: no SIMD kernels on this architecture") }

func narrowBF16(dst *uint16, src *float32, n int) {
	panic("kernels/cpu: no SIMD kernels on this architecture")
}
