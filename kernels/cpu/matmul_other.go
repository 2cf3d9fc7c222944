//go:build !amd64

package cpu

import "unsafe"

// Without amd64 assembly the Backend never selects the SIMD paths (detect
// reports no AVX-512); these exist so the package builds everywhere.

func dotNTAsm(dt int, mr, nr int, x *float32, ldx int, w unsafe.Pointer, ldw int, steps int, out *float32, ldo int, acc int) {
	panic("kernels/cpu: no SIMD kernels on this architecture")
}

func axpyAsm(dt int, mr, nv int, a *float32, sai int, sap int, b unsafe.Pointer, ldb int, steps int, c *float32, ldc int, acc int) {
	panic("kernels/cpu: no SIMD kernels on this architecture")
}

func cvt_bf16(dst *float32, src *uint16, n int) {
	panic("kernels/cpu: no SIMD kernels on this architecture")
}
func cvt_f16(dst *float32, src *uint16, n int) {
	panic("kernels/cpu: no SIMD kernels on this architecture")
}

func swigluAsm(out, gate, up *float32, n int) {
	panic("kernels/cpu: no SIMD kernels on this architecture")
}

func fmaLoop(iters int) { panic("kernels/cpu: no SIMD kernels on this architecture") }

func fmaLoop2(iters int) { panic("kernels/cpu: no SIMD kernels on this architecture") }

func lseAsm(x *float32, n int, st *float32) {
	panic("kernels/cpu: no SIMD kernels on this architecture")
}

func dotNT2Asm(dt int, mr, nr int, x *float32, ldx int, w unsafe.Pointer, ldw int, steps int, out *float32, ldo int, acc int) {
	panic("kernels/cpu: no SIMD kernels on this architecture")
}

func axpy2Asm(dt int, mr, nv int, a *float32, sai int, sap int, b unsafe.Pointer, ldb int, steps int, c *float32, ldc int, acc int) {
	panic("kernels/cpu: no SIMD kernels on this architecture")
}

func cvt2_bf16(dst *float32, src *uint16, n int) {
	panic("kernels/cpu: no SIMD kernels on this architecture")
}
func cvt2_f16(dst *float32, src *uint16, n int) {
	panic("kernels/cpu: no SIMD kernels on this architecture")
}

func swigluAVX2(out, gate, up *float32, n int) {
	panic("kernels/cpu: no SIMD kernels on this architecture")
}

func packT2Asm(dt int, dst *float32, src unsafe.Pointer, lds int, kl int, ldd int) {
	panic("kernels/cpu: no SIMD kernels on this architecture")
}

func gemv2Asm(dt int, x *float32, w unsafe.Pointer, ldw int, lines int, out *float32, rows int, acc int) {
	panic("kernels/cpu: no SIMD kernels on this architecture")
}

func direct2Asm(dt int, mr, nr int, x *float32, ldx int, w unsafe.Pointer, ldw int, steps int, out *float32, ldo int, acc int, pf unsafe.Pointer) {
	panic("kernels/cpu: no SIMD kernels on this architecture")
}
