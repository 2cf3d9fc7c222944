package main

import (
	"bytes"
	"fmt"
)

// dpPack writes the AVX512_BF16 outer-product kernels of kernels.MatMulBF16's
// packed path (kernels/cpu/matmul_dp_packed.go) and their dispatch:
//
//	dpaxpy_<mr>x<nv>: c[i, 0:16·nv] (=, +=) Σ_p a[i, 2p:2p+2]·b[p, 0:16·nv]
//	    for i < mr ≤ 6 rows of bf16 x, nv ≤ 4 vectors of 16 columns, p <
//	    steps column pairs. a points at bf16 values, rows sai bytes apart,
//	    each step moving sap bytes (4: one pair); b is a K-pair-interleaved
//	    bf16 panel, one row of ldb bytes per pair p whose 32-bit lane j
//	    holds (w[j, 2p], w[j, 2p+1]).
//
// Per step: nv panel loads, mr VPBROADCASTDs of x's pair and mr·nv
// VDPBF16PS (hand-encoded, see evex.go), each 32 bf16 products into 16
// float32 sums: twice the products per instruction of axpy's VFMADD231PS.
func dpPack(s, g *bytes.Buffer) {
	for mr := 1; mr <= 6; mr++ {
		for nv := 1; nv <= 4; nv++ {
			dpAxpy(s, g, mr, nv)
		}
	}
	dpDispatch(g)
	dpLoop(s, g)
	narrowBF16(s, g)
}

// narrowBF16 writes narrowBF16(dst, src, n): dst[i] = the bf16 bits of
// src[i] rounded to nearest, ties to even, for n a multiple of 16, bit for
// bit as kernels.F32ToBF16 (denormals kept, NaN kept quiet by setting bit
// 6 of its high half), on AVX-512 F/BW integer ops: u + 0x7fff + (u>>16 &
// 1), shifted down 16, truncated to 16 bits by VPMOVDW. (VCVTNEPS2BF16
// would flush denormals to zero.) kernels.MatMulBF16 rounds x with it.
func narrowBF16(s, g *bytes.Buffer) {
	fmt.Fprintf(g, "// narrowBF16 rounds src[n] to bf16 bits in dst[n] as kernels.F32ToBF16 does, n a multiple of 16.\n//\n//go:noescape\nfunc narrowBF16(dst *uint16, src *float32, n int)\n\n")
	fmt.Fprintf(s, "\n// func narrowBF16(dst *uint16, src *float32, n int)\nTEXT ·narrowBF16(SB), NOSPLIT, $0-24\n")
	fmt.Fprintf(s, "\tMOVQ dst+0(FP), DI\n\tMOVQ src+8(FP), SI\n\tMOVQ n+16(FP), CX\n")
	for _, c := range []struct {
		v uint32
		z int
	}{{0x7fff, 31}, {1, 30}, {0x40, 29}} {
		fmt.Fprintf(s, "\tMOVL $0x%x, AX\n\tVPBROADCASTD AX, Z%d\n", c.v, c.z)
	}
	fmt.Fprintf(s, "\tSHRQ $4, CX\n\tJZ narrow_done\nnarrow_loop:\n")
	fmt.Fprintf(s, "\tVMOVDQU32 (SI), Z0\n\tVPSRLD $16, Z0, Z1\n\tVPANDD Z30, Z1, Z2\n\tVPADDD Z31, Z2, Z2\n\tVPADDD Z0, Z2, Z2\n\tVPSRLD $16, Z2, Z2\n")
	// NaN lanes (unordered with themselves) take the high half, quieted.
	fmt.Fprintf(s, "\tVCMPPS $3, Z0, Z0, K1\n\tVPORD Z29, Z1, K1, Z2\n\tVPMOVDW Z2, (DI)\n")
	fmt.Fprintf(s, "\tADDQ $64, SI\n\tADDQ $32, DI\n\tDECQ CX\n\tJNZ narrow_loop\nnarrow_done:\n\tVZEROUPPER\n\tRET\n")
}

// dpLoop writes dpLoop(iters): iters × 24 independent VDPBF16PS chains,
// the machine's bf16 dot-product peak (the peak benchmark's ceiling for
// the dpaxpy kernels): 1536 FLOP per iteration, 32 multiply-adds per
// instruction.
func dpLoop(s, g *bytes.Buffer) {
	zmmPeakLoop(s, g, "dpLoop", "dp", "// dpLoop runs iters × 24 independent VDPBF16PS (1536 FLOP per iteration).\n",
		func(i int) string { return vdpbf16ps(i, 30, 31) })
}

// dpAxpy writes dpaxpy_<mr>x<nv>. Registers as axpy's (axpyAccumulators
// and axpyStore): a AX (rows 3–5 from R13), sai R8, sap R9, b DI, ldb R11,
// steps CX, c DX, ldc R10, acc BX; accumulators Z0–Z23, the panel row in
// Z24–Z27, x's broadcast pairs in Z28–Z31.
func dpAxpy(s, g *bytes.Buffer, mr, nv int) {
	name := fmt.Sprintf("dpaxpy_%dx%d", mr, nv)
	fmt.Fprintf(g, "//go:noescape\nfunc %s(a unsafe.Pointer, sai int, sap int, b unsafe.Pointer, ldb int, steps int, c *float32, ldc int, acc int)\n\n", name)
	fmt.Fprintf(s, "\n// func %s(a unsafe.Pointer, sai int, sap int, b unsafe.Pointer, ldb int, steps int, c *float32, ldc int, acc int)\n", name)
	fmt.Fprintf(s, "TEXT ·%s(SB), NOSPLIT, $0-72\n", name)
	fmt.Fprintf(s, "\tMOVQ a+0(FP), AX\n\tMOVQ sai+8(FP), R8\n\tMOVQ sap+16(FP), R9\n\tMOVQ b+24(FP), DI\n\tMOVQ ldb+32(FP), R11\n")
	fmt.Fprintf(s, "\tMOVQ steps+40(FP), CX\n\tMOVQ c+48(FP), DX\n\tMOVQ ldc+56(FP), R10\n\tMOVQ acc+64(FP), BX\n")
	fmt.Fprintf(s, "\tLEAQ (AX)(R8*2), R13\n\tADDQ R8, R13\n")
	axpyAccumulators(s, name, mr, nv, "Z", 64, "VPXORD")
	for j := 0; j < nv; j++ {
		fmt.Fprintf(s, "\tVMOVDQU32 %d(DI), Z%d\n", 64*j, 24+j)
	}
	for i := 0; i < mr; i++ {
		bc := 28 + i%4
		fmt.Fprintf(s, "\tVPBROADCASTD %s, Z%d\n", rowAddr("AX", "R13", "R8", i, 0), bc)
		for j := 0; j < nv; j++ {
			s.WriteString(vdpbf16ps(axpyAcc(i, j), bc, 24+j))
		}
	}
	fmt.Fprintf(s, "\tADDQ R9, AX\n\tADDQ R9, R13\n\tADDQ R11, DI\n\tDECQ CX\n\tJNZ %s_loop\n%s_store:\n", name, name)
	axpyStore(s, mr, nv, "Z", 64)
}

// dpDispatch writes dpaxpyAsm, which picks a dpaxpy kernel by block shape.
func dpDispatch(g *bytes.Buffer) {
	fmt.Fprintf(g, "// dpaxpyAsm runs the AVX512_BF16 dpaxpy kernel of an mr×nv block.\n")
	fmt.Fprintf(g, "func dpaxpyAsm(mr, nv int, a unsafe.Pointer, sai int, sap int, b unsafe.Pointer, ldb int, steps int, c *float32, ldc int, acc int) {\nswitch mr<<4 | nv {\n")
	for mr := 1; mr <= 6; mr++ {
		for nv := 1; nv <= 4; nv++ {
			fmt.Fprintf(g, "case %d:\ndpaxpy_%dx%d(a, sai, sap, b, ldb, steps, c, ldc, acc)\n", mr<<4|nv, mr, nv)
		}
	}
	fmt.Fprintf(g, "default:\npanic(\"kernels/cpu: no dpaxpy kernel for this block\")\n}\n}\n\n")
}
