package main

import (
	"bytes"
	"fmt"
)

// direct2MaxMR and direct2MaxNR bound the register blocks of direct2.
const (
	direct2MaxMR = 3
	direct2MaxNR = 4
)

// direct2 writes direct2_<dt>_<mr>x<nr>(x, ldx, w, ldw, steps, out, ldo,
// acc, pf): the AVX2 + FMA kernel of MatMul's direct path (1 < M < 16,
// batched decode): out[i, j] (=, +=) Σ_k x[i, k]·w[j, k] for i < mr ≤ 3 x
// rows, j < nr ≤ 4 weight rows, k < 8·steps.
//
// It is dotNT2's block (3 x rows held in Y12–Y14, one weight vector at a
// time widened into Y15, 12 accumulators) with a software prefetch, and
// each output's sum is dotNT2's operation for operation: lane l of one ymm
// accumulator adds x[i, k]·w[j, k] for k ≡ l (mod 8) in k order by FMA,
// and the 8 lanes are reduced by the same VHADDPS tree, so the two kernels
// give bit-identical outputs (TestDirect2MatchesDotNT2).
//
// Four steps run per iteration (a 64-byte line of each bf16 or f16 row, two
// of each f32 row), and when pf is not nil each iteration prefetches the
// same bytes of the nr rows at pf, pf+ldw, … into L2 (PREFETCHT1; the
// caller passes the next block's rows): the first row group of a block
// pulls the next block's weights from memory while it computes, so that
// block starts on cached weights instead of stalling on memory (without
// it, the first group of each block took more time than the other two
// together). Into L2, not L1: 8 rows of x at K = 1024 fill L1 by
// themselves, and T1 streamed the lm_head at M = 8 faster per CPU-second
// than T0 or NTA. A 4 x rows × 2 weight rows block (8 rows as 4 + 4, half
// the widening per FMA) with the same prefetch ran alike on cached data,
// better at M = 4 and worse at M = 8 (the lm_head ≈ 8 % fewer GFLOP per
// CPU-second; a batch-8 decode ≈ 4 % more CPU seconds): it reads each x row
// for every 2 weight rows instead of every 4, from L2 (see BENCHMARKS.md).
func direct2(s, g *bytes.Buffer, dt string, mr, nr int) {
	name := fmt.Sprintf("direct2_%s_%dx%d", dt, mr, nr)
	sig := "(x *float32, ldx int, w unsafe.Pointer, ldw int, steps int, out *float32, ldo int, acc int, pf unsafe.Pointer)"
	fmt.Fprintf(g, "//go:noescape\nfunc %s%s\n\n", name, sig)
	fmt.Fprintf(s, "\n// func %s%s\n", name, sig)
	fmt.Fprintf(s, "TEXT ·%s(SB), NOSPLIT, $0-72\n", name)
	acc := func(i, j int) int { return i*direct2MaxNR + j }
	xr := func(i int) int { return 12 + i }
	// SI: x rows 0–2, R8 their stride; DI: weight rows 0–2 (R12 = row 3),
	// R11 the weight stride; R13 the prefetch rows 0–2 (R14 = row 3); CX
	// steps, BX steps mod 4.
	fmt.Fprintf(s, "\tMOVQ x+0(FP), SI\n\tMOVQ ldx+8(FP), R8\n\tMOVQ w+16(FP), DI\n\tMOVQ ldw+24(FP), R11\n\tMOVQ steps+32(FP), CX\n\tMOVQ pf+64(FP), R13\n")
	fmt.Fprintf(s, "\tLEAQ (SI)(R8*2), R10\n\tADDQ R8, R10\n")
	fmt.Fprintf(s, "\tLEAQ (DI)(R11*2), R12\n\tADDQ R11, R12\n\tLEAQ (R13)(R11*2), R14\n\tADDQ R11, R14\n")
	for i := 0; i < mr; i++ {
		for j := 0; j < nr; j++ {
			fmt.Fprintf(s, "\tVXORPS Y%d, Y%d, Y%d\n", acc(i, j), acc(i, j), acc(i, j))
		}
	}
	xAddr := func(i, off int) string { return rowAddr("SI", "R10", "R8", i, off) }
	es := 8 * size(dt) // weight bytes per step and row
	step := func(q int) {
		for i := 0; i < mr; i++ {
			fmt.Fprintf(s, "\tVMOVUPS %s, Y%d\n", xAddr(i, 32*q), xr(i))
		}
		for j := 0; j < nr; j++ {
			load8(s, dt, rowAddr("DI", "R12", "R11", j, es*q), 15)
			for i := 0; i < mr; i++ {
				fmt.Fprintf(s, "\tVFMADD231PS Y15, Y%d, Y%d\n", xr(i), acc(i, j))
			}
		}
	}
	quad := func(label string, prefetch bool) {
		fmt.Fprintf(s, "%s:\n", label)
		for q := 0; q < 4; q++ {
			if prefetch && (es*q)%64 == 0 {
				for j := 0; j < nr; j++ {
					fmt.Fprintf(s, "\tPREFETCHT1 %s\n", rowAddr("R13", "R14", "R11", j, es*q))
				}
			}
			step(q)
		}
		fmt.Fprintf(s, "\tADDQ $128, SI\n\tADDQ $128, R10\n\tADDQ $%d, DI\n\tADDQ $%d, R12\n", 4*es, 4*es)
		if prefetch {
			fmt.Fprintf(s, "\tADDQ $%d, R13\n\tADDQ $%d, R14\n", 4*es, 4*es)
		}
		fmt.Fprintf(s, "\tDECQ CX\n\tJNZ %s\n\tJMP %s_tail\n", label, name)
	}
	fmt.Fprintf(s, "\tMOVQ CX, BX\n\tANDQ $3, BX\n\tSHRQ $2, CX\n\tJZ %s_tail\n\tTESTQ R13, R13\n\tJZ %s_plain\n", name, name)
	quad(name+"_pf", true)
	quad(name+"_plain", false)
	fmt.Fprintf(s, "%s_tail:\n\tTESTQ BX, BX\n\tJZ %s_reduce\n%s_one:\n", name, name, name)
	step(0)
	fmt.Fprintf(s, "\tADDQ $32, SI\n\tADDQ $32, R10\n\tADDQ $%d, DI\n\tADDQ $%d, R12\n\tDECQ BX\n\tJNZ %s_one\n%s_reduce:\n", es, es, name, name)
	dotReduce256(s, name, mr, nr, acc) // dotNT2's reduction and stores
}

// direct2Kernels writes every direct2 block and direct2Asm, which picks
// one by dtype index and block shape.
func direct2Kernels(s, g *bytes.Buffer) {
	for _, dt := range dtypes {
		for mr := 1; mr <= direct2MaxMR; mr++ {
			for nr := 1; nr <= direct2MaxNR; nr++ {
				direct2(s, g, dt, mr, nr)
			}
		}
	}
	sig := "(dt int, mr, nr int, x *float32, ldx int, w unsafe.Pointer, ldw int, steps int, out *float32, ldo int, acc int, pf unsafe.Pointer)"
	fmt.Fprintf(g, "// direct2Asm runs the AVX2 direct2 kernel for dtype dt and an mr×nr block (mr ≤ %d, nr ≤ %d).\n", direct2MaxMR, direct2MaxNR)
	fmt.Fprintf(g, "func direct2Asm%s {\nswitch dt<<8 | mr<<4 | nr {\n", sig)
	for di, dt := range dtypes {
		for mr := 1; mr <= direct2MaxMR; mr++ {
			for nr := 1; nr <= direct2MaxNR; nr++ {
				fmt.Fprintf(g, "case %d:\ndirect2_%s_%dx%d(x, ldx, w, ldw, steps, out, ldo, acc, pf)\n", di<<8|mr<<4|nr, dt, mr, nr)
			}
		}
	}
	fmt.Fprintf(g, "default:\npanic(\"kernels/cpu: no direct2 kernel for this block\")\n}\n}\n\n")
}
