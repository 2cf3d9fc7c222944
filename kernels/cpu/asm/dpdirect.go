package main

import (
	"bytes"
	"fmt"
)

// dpMaxMR and dpMaxNR bound the register blocks of the dpNT kernels
// (kernels.MatMulBF16's direct path on VDPBF16PS, kernels/cpu/matmul_dp_direct.go):
// up to 8 x rows × up to 3 weight rows, 24 accumulators, so that one
// weight load serves all 8 rows of a batch-8 decode step.
const (
	dpMaxMR = 8
	dpMaxNR = 3
)

// dpDirect writes the dpNT kernels and their dispatch, dpNTAsm:
//
//	dpNT_<mr>x<nr>(x *uint16, ldx int, w unsafe.Pointer, ldw int, steps int, out *float32, ldo int, acc int)
//	    out[i, j] (=, +=) Σ_k x[i, k]·w[j, k] for i < mr ≤ 8 x rows, j < nr ≤ 3
//	    weight rows, k < 32·steps; x and w are bf16 rows ldx and ldw bytes
//	    apart.
//
// Per step of 32 columns it loads each weight row's 64 bytes (16 bf16
// pairs) once and each x row's 64 bytes once, and runs one VDPBF16PS per
// (x row, weight row): accumulator lane l gains the pair (2l, 2l+1) of
// the step's products, each exact in float32. At the end each
// accumulator's 16 lanes are reduced by the same shuffle tree as dotNT's,
// so every output's summation order depends on K alone, never on the
// block it was computed in.
func dpDirect(s, g *bytes.Buffer) {
	for mr := 1; mr <= dpMaxMR; mr++ {
		for nr := 1; nr <= dpMaxNR; nr++ {
			dpNT(s, g, mr, nr)
		}
	}
	fmt.Fprintf(g, "// dpNTAsm runs the AVX512_BF16 dpNT kernel of an mr×nr block (mr ≤ %d, nr ≤ %d).\n", dpMaxMR, dpMaxNR)
	fmt.Fprintf(g, "func dpNTAsm(mr, nr int, x *uint16, ldx int, w unsafe.Pointer, ldw int, steps int, out *float32, ldo int, acc int) {\nswitch mr<<4 | nr {\n")
	for mr := 1; mr <= dpMaxMR; mr++ {
		for nr := 1; nr <= dpMaxNR; nr++ {
			fmt.Fprintf(g, "case %d:\ndpNT_%dx%d(x, ldx, w, ldw, steps, out, ldo, acc)\n", mr<<4|nr, mr, nr)
		}
	}
	fmt.Fprintf(g, "default:\npanic(\"kernels/cpu: no dpNT kernel for this block\")\n}\n}\n\n")
}

// dpXAddr addresses x row r (< 9) of a dpNT block: rows 0–2 from SI, 3–5
// from R10 (SI + 3·ldx), 6–8 from R13 (SI + 6·ldx), stride R8.
func dpXAddr(r, off int) string {
	if r < 6 {
		return rowAddr("SI", "R10", "R8", r, off)
	}
	return rowAddr("R13", "R13", "R8", r-6, off)
}

// dpNT writes one dpNT_<mr>x<nr> kernel. Registers: accumulators Z0…
// (row-major, mr·nr ≤ 24), weight rows Z24…Z26, x row Z30; after the loop
// Z24–Z28 and Z31 (zero) serve the reduction. Pointers: x rows SI, R10,
// R13 (stride R8), weight rows DI, R12 (stride R11), the prefetch R14.
func dpNT(s, g *bytes.Buffer, mr, nr int) {
	name := fmt.Sprintf("dpNT_%dx%d", mr, nr)
	fmt.Fprintf(g, "//go:noescape\nfunc %s(x *uint16, ldx int, w unsafe.Pointer, ldw int, steps int, out *float32, ldo int, acc int)\n\n", name)
	acc := func(i, j int) int { return i*nr + j }
	fmt.Fprintf(s, "\n// func %s(x *uint16, ldx int, w unsafe.Pointer, ldw int, steps int, out *float32, ldo int, acc int)\n", name)
	fmt.Fprintf(s, "TEXT ·%s(SB), NOSPLIT, $0-64\n", name)
	fmt.Fprintf(s, "\tMOVQ x+0(FP), SI\n\tMOVQ ldx+8(FP), R8\n\tMOVQ w+16(FP), DI\n\tMOVQ ldw+24(FP), R11\n\tMOVQ steps+32(FP), CX\n")
	fmt.Fprintf(s, "\tLEAQ (SI)(R8*2), R10\n\tADDQ R8, R10\n\tLEAQ (R10)(R8*2), R13\n\tADDQ R8, R13\n")
	fmt.Fprintf(s, "\tLEAQ (DI)(R11*2), R12\n\tADDQ R11, R12\n")
	for i := 0; i < mr; i++ {
		for j := 0; j < nr; j++ {
			fmt.Fprintf(s, "\tVPXORD Z%d, Z%d, Z%d\n", acc(i, j), acc(i, j), acc(i, j))
		}
	}
	// R14 walks the next block's weight rows, nr·ldw further on: each
	// step prefetches into L2 the line of every next-block row that it
	// reads of its own, so the block's weights stream from memory while
	// this one computes. Measured at M = 8 with the weights out of cache
	// (rotating over 66 MB): ≈ 2× the GFLOP per CPU-second of no prefetch;
	// PREFETCHT0 to the same distance gained half as much (into L1 it
	// competes with the x rows the block rereads every step).
	fmt.Fprintf(s, "\tMOVQ R11, R14\n\tIMULQ $%d, R14\n\tADDQ DI, R14\n", nr)
	fmt.Fprintf(s, "\tTESTQ CX, CX\n\tJZ %s_reduce\n%s_loop:\n", name, name)
	for j := 0; j < nr; j++ {
		fmt.Fprintf(s, "\tPREFETCHT1 %s\n", rowAddr("R14", "R14", "R11", j, 0))
		fmt.Fprintf(s, "\tVMOVDQU32 %s, Z%d\n", rowAddr("DI", "R12", "R11", j, 0), 24+j)
	}
	for i := 0; i < mr; i++ {
		fmt.Fprintf(s, "\tVMOVDQU32 %s, Z30\n", dpXAddr(i, 0))
		for j := 0; j < nr; j++ {
			s.WriteString(vdpbf16ps(acc(i, j), 30, 24+j))
		}
	}
	fmt.Fprintf(s, "\tADDQ $64, SI\n\tADDQ $64, R10\n\tADDQ $64, R13\n\tADDQ $64, DI\n\tADDQ $64, R12\n\tADDQ $64, R14\n")
	fmt.Fprintf(s, "\tDECQ CX\n\tJNZ %s_loop\n%s_reduce:\n", name, name)
	dotReduce512(s, mr, nr, acc) // the same tree as dotNT's
}
