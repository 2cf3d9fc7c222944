#include "textflag.h"

// AVX2 + FMA twins of the helpers in simd_backward_amd64.s (8 float32
// lanes; see simd_backward.go for the portable versions and their
// contracts). Lengths need not be multiples of 8 unless stated: tails run
// under a VMASKMOVPS mask, so every element goes through the same
// arithmetic whatever the split of a buffer into chunks.

// Constants of EXP2, eight copies of each (32 bytes apart), and the tail
// mask table: 8 lanes of ones, then 8 of zeros.
DATA expc2<>+0(SB)/8, $0x3fb8aa3b3fb8aa3b // log2e
DATA expc2<>+8(SB)/8, $0x3fb8aa3b3fb8aa3b
DATA expc2<>+16(SB)/8, $0x3fb8aa3b3fb8aa3b
DATA expc2<>+24(SB)/8, $0x3fb8aa3b3fb8aa3b
DATA expc2<>+32(SB)/8, $0xc2ce0000c2ce0000 // lo
DATA expc2<>+40(SB)/8, $0xc2ce0000c2ce0000
DATA expc2<>+48(SB)/8, $0xc2ce0000c2ce0000
DATA expc2<>+56(SB)/8, $0xc2ce0000c2ce0000
DATA expc2<>+64(SB)/8, $0x3f3180003f318000 // c1
DATA expc2<>+72(SB)/8, $0x3f3180003f318000
DATA expc2<>+80(SB)/8, $0x3f3180003f318000
DATA expc2<>+88(SB)/8, $0x3f3180003f318000
DATA expc2<>+96(SB)/8, $0xb95e8083b95e8083 // c2
DATA expc2<>+104(SB)/8, $0xb95e8083b95e8083
DATA expc2<>+112(SB)/8, $0xb95e8083b95e8083
DATA expc2<>+120(SB)/8, $0xb95e8083b95e8083
DATA expc2<>+128(SB)/8, $0x3950696739506967 // p0
DATA expc2<>+136(SB)/8, $0x3950696739506967
DATA expc2<>+144(SB)/8, $0x3950696739506967
DATA expc2<>+152(SB)/8, $0x3950696739506967
DATA expc2<>+160(SB)/8, $0x3ab743ce3ab743ce // p1
DATA expc2<>+168(SB)/8, $0x3ab743ce3ab743ce
DATA expc2<>+176(SB)/8, $0x3ab743ce3ab743ce
DATA expc2<>+184(SB)/8, $0x3ab743ce3ab743ce
DATA expc2<>+192(SB)/8, $0x3c0889083c088908 // p2
DATA expc2<>+200(SB)/8, $0x3c0889083c088908
DATA expc2<>+208(SB)/8, $0x3c0889083c088908
DATA expc2<>+216(SB)/8, $0x3c0889083c088908
DATA expc2<>+224(SB)/8, $0x3d2aa9c13d2aa9c1 // p3
DATA expc2<>+232(SB)/8, $0x3d2aa9c13d2aa9c1
DATA expc2<>+240(SB)/8, $0x3d2aa9c13d2aa9c1
DATA expc2<>+248(SB)/8, $0x3d2aa9c13d2aa9c1
DATA expc2<>+256(SB)/8, $0x3e2aaaaa3e2aaaaa // p4
DATA expc2<>+264(SB)/8, $0x3e2aaaaa3e2aaaaa
DATA expc2<>+272(SB)/8, $0x3e2aaaaa3e2aaaaa
DATA expc2<>+280(SB)/8, $0x3e2aaaaa3e2aaaaa
DATA expc2<>+288(SB)/8, $0x3f0000003f000000 // p5
DATA expc2<>+296(SB)/8, $0x3f0000003f000000
DATA expc2<>+304(SB)/8, $0x3f0000003f000000
DATA expc2<>+312(SB)/8, $0x3f0000003f000000
DATA expc2<>+320(SB)/8, $0x3f8000003f800000 // one
DATA expc2<>+328(SB)/8, $0x3f8000003f800000
DATA expc2<>+336(SB)/8, $0x3f8000003f800000
DATA expc2<>+344(SB)/8, $0x3f8000003f800000
DATA expc2<>+352(SB)/8, $0x42b2000042b20000 // hi
DATA expc2<>+360(SB)/8, $0x42b2000042b20000
DATA expc2<>+368(SB)/8, $0x42b2000042b20000
DATA expc2<>+376(SB)/8, $0x42b2000042b20000
DATA expc2<>+384(SB)/8, $0x0000007f0000007f // bias
DATA expc2<>+392(SB)/8, $0x0000007f0000007f
DATA expc2<>+400(SB)/8, $0x0000007f0000007f
DATA expc2<>+408(SB)/8, $0x0000007f0000007f
GLOBL expc2<>(SB), RODATA|NOPTR, $416
DATA tail2<>+0(SB)/8, $0xffffffffffffffff
DATA tail2<>+8(SB)/8, $0xffffffffffffffff
DATA tail2<>+16(SB)/8, $0xffffffffffffffff
DATA tail2<>+24(SB)/8, $0xffffffffffffffff
DATA tail2<>+32(SB)/8, $0x0000000000000000
DATA tail2<>+40(SB)/8, $0x0000000000000000
DATA tail2<>+48(SB)/8, $0x0000000000000000
DATA tail2<>+56(SB)/8, $0x0000000000000000
GLOBL tail2<>(SB), RODATA|NOPTR, $64

// EXP2 sets y = exp(x) for 8 lanes, as EXP of simd_backward_amd64.s
// (Cephes expf: x = n·ln2 + r, a degree-5 polynomial in r) but scaling by
// 2ⁿ without VSCALEFPS: n is split into n1 = n>>1 and n2 = n − n1, and
// y·2^n1·2^n2 rounds once into the subnormals below 2^-126. x is clamped
// to [−103, 89] (exp(−103) is the smallest subnormal, exp(89) overflows
// to +Inf); NaN propagates. x, t and u are clobbered.
#define EXP2(x, y, t, u) \
	VMOVUPS expc2<>+32(SB), t; \
	VMAXPS x, t, x; \
	VMOVUPS expc2<>+352(SB), t; \
	VMINPS x, t, x; \
	VMULPS expc2<>+0(SB), x, t; \
	VROUNDPS $0, t, t; \
	VFNMADD231PS expc2<>+64(SB), t, x; \
	VFNMADD231PS expc2<>+96(SB), t, x; \
	VMOVUPS expc2<>+128(SB), y; \
	VFMADD213PS expc2<>+160(SB), x, y; \
	VFMADD213PS expc2<>+192(SB), x, y; \
	VFMADD213PS expc2<>+224(SB), x, y; \
	VFMADD213PS expc2<>+256(SB), x, y; \
	VFMADD213PS expc2<>+288(SB), x, y; \
	VMULPS x, x, u; \
	VFMADD213PS x, u, y; \
	VADDPS expc2<>+320(SB), y, y; \
	VCVTPS2DQ t, t; \
	VPSRAD $1, t, u; \
	VPSUBD u, t, t; \
	VPADDD expc2<>+384(SB), u, u; \
	VPSLLD $23, u, u; \
	VMULPS u, y, y; \
	VPADDD expc2<>+384(SB), t, t; \
	VPSLLD $23, t, t; \
	VMULPS t, y, y

// HSUM2 reduces the 8 lanes of y (whose low half is x) into the low lane
// of x, using X14 as scratch.
#define HSUM2(y, x) \
	VEXTRACTF128 $1, y, X14; \
	VADDPS X14, x, x; \
	VPERMILPS $0x4e, x, X14; \
	VADDPS X14, x, x; \
	VPERMILPS $0xb1, x, X14; \
	VADDSS X14, x, x

// TAILMASK2 sets Y15 to a mask of the low CX lanes (0 < CX < 8); clobbers
// BX and CX.
#define TAILMASK2 \
	LEAQ tail2<>+32(SB), BX; \
	SHLQ $2, CX; \
	SUBQ CX, BX; \
	VMOVUPS (BX), Y15

// func bwDotsAVX2(out, x, rows *float32, stride, n, d int)
// out[j] = Σ_{i<d} x[i]·rows[j·stride+i] for j < n; d is a positive
// multiple of 8. Four rows at a time, two accumulators per row.
TEXT ·bwDotsAVX2(SB), NOSPLIT, $0-48
	MOVQ out+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ rows+16(FP), DX
	MOVQ stride+24(FP), R8
	SHLQ $2, R8
	MOVQ n+32(FP), CX
	MOVQ d+40(FP), R9
	SHLQ $2, R9
	MOVQ R9, R14
	ANDQ $-64, R14 // bytes of d done two vectors at a time

dots4:
	CMPQ CX, $4
	JLT  dots1
	MOVQ DX, R10
	LEAQ (DX)(R8*1), R11
	LEAQ (R11)(R8*1), R12
	LEAQ (R12)(R8*1), R13
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	XORQ AX, AX

dots4i:
	CMPQ AX, R14
	JGE  dots4r
	VMOVUPS     (SI)(AX*1), Y8
	VMOVUPS     32(SI)(AX*1), Y9
	VFMADD231PS (R10)(AX*1), Y8, Y0
	VFMADD231PS (R11)(AX*1), Y8, Y1
	VFMADD231PS (R12)(AX*1), Y8, Y2
	VFMADD231PS (R13)(AX*1), Y8, Y3
	VFMADD231PS 32(R10)(AX*1), Y9, Y4
	VFMADD231PS 32(R11)(AX*1), Y9, Y5
	VFMADD231PS 32(R12)(AX*1), Y9, Y6
	VFMADD231PS 32(R13)(AX*1), Y9, Y7
	ADDQ $64, AX
	JMP  dots4i

dots4r:
	CMPQ AX, R9
	JGE  dots4s
	VMOVUPS     (SI)(AX*1), Y8
	VFMADD231PS (R10)(AX*1), Y8, Y0
	VFMADD231PS (R11)(AX*1), Y8, Y1
	VFMADD231PS (R12)(AX*1), Y8, Y2
	VFMADD231PS (R13)(AX*1), Y8, Y3

dots4s:
	VADDPS Y4, Y0, Y0
	VADDPS Y5, Y1, Y1
	VADDPS Y6, Y2, Y2
	VADDPS Y7, Y3, Y3
	HSUM2(Y0, X0)
	HSUM2(Y1, X1)
	HSUM2(Y2, X2)
	HSUM2(Y3, X3)
	VMOVSS X0, (DI)
	VMOVSS X1, 4(DI)
	VMOVSS X2, 8(DI)
	VMOVSS X3, 12(DI)
	ADDQ $16, DI
	LEAQ (R13)(R8*1), DX
	SUBQ $4, CX
	JMP  dots4

dots1:
	TESTQ CX, CX
	JEQ   dotsdone
	VXORPS Y0, Y0, Y0
	XORQ AX, AX

dots1i:
	VMOVUPS     (SI)(AX*1), Y8
	VFMADD231PS (DX)(AX*1), Y8, Y0
	ADDQ $32, AX
	CMPQ AX, R9
	JLT  dots1i
	HSUM2(Y0, X0)
	VMOVSS X0, (DI)
	ADDQ $4, DI
	ADDQ R8, DX
	DECQ CX
	JMP  dots1

dotsdone:
	VZEROUPPER
	RET

// func bwAxpysAVX2(out, coef, rows *float32, stride, n, d int)
// out[i] += Σ_{j<n} coef[j]·rows[j·stride+i] for i < d; d is a positive
// multiple of 8. The sum over j runs in order of j for every i: blocks of
// 64 columns (8 accumulators) walk all n rows, then blocks of 8.
TEXT ·bwAxpysAVX2(SB), NOSPLIT, $0-48
	MOVQ out+0(FP), DI
	MOVQ coef+8(FP), SI
	MOVQ rows+16(FP), DX
	MOVQ stride+24(FP), R8
	SHLQ $2, R8
	MOVQ n+32(FP), CX
	MOVQ d+40(FP), R9
	SHLQ $2, R9
	TESTQ CX, CX
	JEQ   axdone
	XORQ AX, AX

ax64:
	LEAQ 256(AX), BX
	CMPQ BX, R9
	JGT  ax8
	VMOVUPS (DI)(AX*1), Y0
	VMOVUPS 32(DI)(AX*1), Y1
	VMOVUPS 64(DI)(AX*1), Y2
	VMOVUPS 96(DI)(AX*1), Y3
	VMOVUPS 128(DI)(AX*1), Y4
	VMOVUPS 160(DI)(AX*1), Y5
	VMOVUPS 192(DI)(AX*1), Y6
	VMOVUPS 224(DI)(AX*1), Y7
	MOVQ DX, R10
	XORQ R11, R11

ax64j:
	VBROADCASTSS (SI)(R11*4), Y8
	VFMADD231PS  (R10)(AX*1), Y8, Y0
	VFMADD231PS  32(R10)(AX*1), Y8, Y1
	VFMADD231PS  64(R10)(AX*1), Y8, Y2
	VFMADD231PS  96(R10)(AX*1), Y8, Y3
	VFMADD231PS  128(R10)(AX*1), Y8, Y4
	VFMADD231PS  160(R10)(AX*1), Y8, Y5
	VFMADD231PS  192(R10)(AX*1), Y8, Y6
	VFMADD231PS  224(R10)(AX*1), Y8, Y7
	ADDQ R8, R10
	INCQ R11
	CMPQ R11, CX
	JLT  ax64j
	VMOVUPS Y0, (DI)(AX*1)
	VMOVUPS Y1, 32(DI)(AX*1)
	VMOVUPS Y2, 64(DI)(AX*1)
	VMOVUPS Y3, 96(DI)(AX*1)
	VMOVUPS Y4, 128(DI)(AX*1)
	VMOVUPS Y5, 160(DI)(AX*1)
	VMOVUPS Y6, 192(DI)(AX*1)
	VMOVUPS Y7, 224(DI)(AX*1)
	ADDQ $256, AX
	JMP  ax64

ax8:
	CMPQ AX, R9
	JGE  axdone
	VMOVUPS (DI)(AX*1), Y0
	MOVQ DX, R10
	XORQ R11, R11

ax8j:
	VBROADCASTSS (SI)(R11*4), Y8
	VFMADD231PS  (R10)(AX*1), Y8, Y0
	ADDQ R8, R10
	INCQ R11
	CMPQ R11, CX
	JLT  ax8j
	VMOVUPS Y0, (DI)(AX*1)
	ADDQ $32, AX
	JMP  ax8

axdone:
	VZEROUPPER
	RET

// EXPSUM2 sets dst = exp(src − Y9) for the 8 floats at byte offset off+AX
// and adds them to the accumulator acc.
#define EXPSUM2(off, acc) \
	VMOVUPS off(SI)(AX*1), Y0; \
	VSUBPS  Y9, Y0, Y0; \
	EXP2(Y0, Y2, Y1, Y3); \
	VMOVUPS Y2, off(DI)(AX*1); \
	VADDPS  Y2, acc, acc

// func bwExpSumAVX2(dst, src *float32, n int, sub float32) float32
// dst[i] = exp(src[i] − sub) for i < n and returns Σ dst[i] in 32 float32
// lanes (four accumulators, as many partial sums as two AVX-512 vectors
// keep, so a 150k-entry row sums as accurately), summed at the end. dst
// may equal src.
TEXT ·bwExpSumAVX2(SB), NOSPLIT, $0-36
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), DX
	VBROADCASTSS sub+24(FP), Y9
	VXORPS Y8, Y8, Y8
	VXORPS Y10, Y10, Y10
	VXORPS Y11, Y11, Y11
	VXORPS Y12, Y12, Y12
	XORQ AX, AX
	MOVQ DX, R9
	ANDQ $-32, R9
	SHLQ $2, R9

exp32:
	CMPQ AX, R9
	JGE  exp8
	EXPSUM2(0, Y8)
	EXPSUM2(32, Y10)
	EXPSUM2(64, Y11)
	EXPSUM2(96, Y12)
	SUBQ $-128, AX
	JMP  exp32

exp8:
	MOVQ DX, R9
	ANDQ $-8, R9
	SHLQ $2, R9

exp8loop:
	CMPQ AX, R9
	JGE  exptail
	EXPSUM2(0, Y8)
	ADDQ $32, AX
	JMP  exp8loop

exptail:
	MOVQ DX, CX
	ANDQ $7, CX
	JEQ  expdone
	TAILMASK2
	VMASKMOVPS (SI)(AX*1), Y15, Y0
	VSUBPS  Y9, Y0, Y0
	EXP2(Y0, Y2, Y1, Y3)
	VMASKMOVPS Y2, Y15, (DI)(AX*1)
	VANDPS  Y15, Y2, Y2
	VADDPS  Y2, Y10, Y10

expdone:
	VADDPS Y10, Y8, Y8
	VADDPS Y12, Y11, Y11
	VADDPS Y11, Y8, Y8
	HSUM2(Y8, X8)
	VMOVSS X8, ret+32(FP)
	VZEROUPPER
	RET

// func bwMaxAVX2(x *float32, n int) float32
// returns max(x[0..n)) for n ≥ 8: the last, partial vector is read again
// as the vector of the last 8 elements (max is idempotent).
TEXT ·bwMaxAVX2(SB), NOSPLIT, $0-20
	MOVQ x+0(FP), SI
	MOVQ n+8(FP), DX
	VMOVUPS (SI), Y0
	VMOVAPS Y0, Y1
	XORQ AX, AX
	MOVQ DX, R9
	ANDQ $-16, R9
	SHLQ $2, R9

max16:
	CMPQ AX, R9
	JGE  max8
	VMAXPS (SI)(AX*1), Y0, Y0
	VMAXPS 32(SI)(AX*1), Y1, Y1
	ADDQ $64, AX
	JMP  max16

max8:
	VMAXPS Y1, Y0, Y0
	MOVQ DX, R9
	ANDQ $-8, R9
	SHLQ $2, R9
	CMPQ AX, R9
	JGE  maxtail
	VMAXPS (SI)(AX*1), Y0, Y0

maxtail:
	VMAXPS -32(SI)(DX*4), Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VMAXPS X1, X0, X0
	VPERMILPS $0x4e, X0, X1
	VMAXPS X1, X0, X0
	VPERMILPS $0xb1, X0, X1
	VMAXSS X1, X0, X0
	VMOVSS X0, ret+16(FP)
	VZEROUPPER
	RET

// func bwScaleAVX2(x *float32, n int, s float32)
// x[i] *= s for i < n.
TEXT ·bwScaleAVX2(SB), NOSPLIT, $0-20
	MOVQ x+0(FP), SI
	MOVQ n+8(FP), DX
	VBROADCASTSS s+16(FP), Y9
	XORQ AX, AX
	MOVQ DX, R9
	ANDQ $-8, R9
	SHLQ $2, R9

scmain:
	CMPQ AX, R9
	JGE  sctail
	VMULPS (SI)(AX*1), Y9, Y0
	VMOVUPS Y0, (SI)(AX*1)
	ADDQ $32, AX
	JMP  scmain

sctail:
	MOVQ DX, CX
	ANDQ $7, CX
	JEQ  scdone
	TAILMASK2
	VMASKMOVPS (SI)(AX*1), Y15, Y0
	VMULPS Y9, Y0, Y0
	VMASKMOVPS Y0, Y15, (SI)(AX*1)

scdone:
	VZEROUPPER
	RET

// SWIGLU2 is the arithmetic of bwSwiGLUAVX2 on gate Y5, up Y6, dout Y7:
// dgate into Y0, dup into Y4 (Y10 holds 1.0).
#define SWIGLU2 \
	VXORPS  Y0, Y0, Y0; \
	VSUBPS  Y5, Y0, Y0; \
	EXP2(Y0, Y2, Y1, Y3); \
	VADDPS  Y10, Y2, Y2; \
	VDIVPS  Y2, Y10, Y3; \
	VMULPS  Y7, Y5, Y4; \
	VMULPS  Y3, Y4, Y4; \
	VSUBPS  Y3, Y10, Y0; \
	VFMADD213PS Y10, Y5, Y0; \
	VMULPS  Y3, Y0, Y0; \
	VMULPS  Y6, Y7, Y1; \
	VMULPS  Y1, Y0, Y0

// func bwSwiGLUAVX2(dgate, dup, dout, gate, up *float32, n int)
// s = σ(g) = 1/(1+exp(−g)): dup = dout·g·s, dgate = dout·up·s·(1 + g·(1−s)).
// Element i is read before it is written, so the buffers may alias
// element for element.
TEXT ·bwSwiGLUAVX2(SB), NOSPLIT, $0-48
	MOVQ dgate+0(FP), DI
	MOVQ dup+8(FP), R8
	MOVQ dout+16(FP), R10
	MOVQ gate+24(FP), SI
	MOVQ up+32(FP), R11
	MOVQ n+40(FP), DX
	VMOVUPS expc2<>+320(SB), Y10
	XORQ AX, AX
	MOVQ DX, R9
	ANDQ $-8, R9
	SHLQ $2, R9

swmain:
	CMPQ AX, R9
	JGE  swtail
	VMOVUPS (SI)(AX*1), Y5
	VMOVUPS (R11)(AX*1), Y6
	VMOVUPS (R10)(AX*1), Y7
	SWIGLU2
	VMOVUPS Y0, (DI)(AX*1)
	VMOVUPS Y4, (R8)(AX*1)
	ADDQ $32, AX
	JMP  swmain

swtail:
	MOVQ DX, CX
	ANDQ $7, CX
	JEQ  swdone
	TAILMASK2
	VMASKMOVPS (SI)(AX*1), Y15, Y5
	VMASKMOVPS (R11)(AX*1), Y15, Y6
	VMASKMOVPS (R10)(AX*1), Y15, Y7
	SWIGLU2
	VMASKMOVPS Y0, Y15, (DI)(AX*1)
	VMASKMOVPS Y4, Y15, (R8)(AX*1)

swdone:
	VZEROUPPER
	RET

// ADAMW2 is the arithmetic of bwAdamWAVX2 on grad Y0, m Y1, v Y3, param Y6
// (constants in Y7..Y14); the new m, v, param are left in Y1, Y3, Y6.
#define ADAMW2 \
	VMULPS  Y7, Y1, Y1; \
	VFMADD231PS Y8, Y0, Y1; \
	VMULPS  Y0, Y0, Y2; \
	VMULPS  Y9, Y3, Y3; \
	VFMADD231PS Y10, Y2, Y3; \
	VSQRTPS Y3, Y4; \
	VFMADD213PS Y14, Y13, Y4; \
	VDIVPS  Y4, Y1, Y5; \
	VMULPS  Y11, Y6, Y6; \
	VFNMADD231PS Y12, Y5, Y6

// func bwAdamWAVX2(param, grad, m, v *float32, n int, c *adamwConsts)
// One AdamW step over n elements, in float32, as bwAdamWAVX512.
TEXT ·bwAdamWAVX2(SB), NOSPLIT, $0-48
	MOVQ param+0(FP), DI
	MOVQ grad+8(FP), SI
	MOVQ m+16(FP), R8
	MOVQ v+24(FP), R10
	MOVQ n+32(FP), DX
	MOVQ c+40(FP), R11
	VBROADCASTSS 0(R11), Y7
	VBROADCASTSS 4(R11), Y8
	VBROADCASTSS 8(R11), Y9
	VBROADCASTSS 12(R11), Y10
	VBROADCASTSS 16(R11), Y11
	VBROADCASTSS 20(R11), Y12
	VBROADCASTSS 24(R11), Y13
	VBROADCASTSS 28(R11), Y14
	XORQ AX, AX
	MOVQ DX, R9
	ANDQ $-8, R9
	SHLQ $2, R9

admain:
	CMPQ AX, R9
	JGE  adtail
	VMOVUPS (SI)(AX*1), Y0
	VMOVUPS (R8)(AX*1), Y1
	VMOVUPS (R10)(AX*1), Y3
	VMOVUPS (DI)(AX*1), Y6
	ADAMW2
	VMOVUPS Y1, (R8)(AX*1)
	VMOVUPS Y3, (R10)(AX*1)
	VMOVUPS Y6, (DI)(AX*1)
	ADDQ $32, AX
	JMP  admain

adtail:
	MOVQ DX, CX
	ANDQ $7, CX
	JEQ  addone
	TAILMASK2
	VMASKMOVPS (SI)(AX*1), Y15, Y0
	VMASKMOVPS (R8)(AX*1), Y15, Y1
	VMASKMOVPS (R10)(AX*1), Y15, Y3
	VMASKMOVPS (DI)(AX*1), Y15, Y6
	ADAMW2
	VMASKMOVPS Y1, Y15, (R8)(AX*1)
	VMASKMOVPS Y3, Y15, (R10)(AX*1)
	VMASKMOVPS Y6, Y15, (DI)(AX*1)

addone:
	VZEROUPPER
	RET

// func bwRMSRowAVX2(x, dy, w *float32, n int, sums *float32)
// sums[0] = Σ x², sums[1] = Σ w·dy·x over i < n, in 8 float32 lanes
// summed at the end (masked-off tail lanes load as 0).
TEXT ·bwRMSRowAVX2(SB), NOSPLIT, $0-40
	MOVQ x+0(FP), SI
	MOVQ dy+8(FP), R8
	MOVQ w+16(FP), R10
	MOVQ n+24(FP), DX
	MOVQ sums+32(FP), DI
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	XORQ AX, AX
	MOVQ DX, R9
	ANDQ $-8, R9
	SHLQ $2, R9

rrmain:
	CMPQ AX, R9
	JGE  rrtail
	VMOVUPS (SI)(AX*1), Y2
	VMOVUPS (R8)(AX*1), Y3
	VMULPS  (R10)(AX*1), Y3, Y3
	VFMADD231PS Y2, Y2, Y0
	VFMADD231PS Y3, Y2, Y1
	ADDQ $32, AX
	JMP  rrmain

rrtail:
	MOVQ DX, CX
	ANDQ $7, CX
	JEQ  rrdone
	TAILMASK2
	VMASKMOVPS (SI)(AX*1), Y15, Y2
	VMASKMOVPS (R8)(AX*1), Y15, Y3
	VMASKMOVPS (R10)(AX*1), Y15, Y4
	VMULPS  Y4, Y3, Y3
	VFMADD231PS Y2, Y2, Y0
	VFMADD231PS Y3, Y2, Y1

rrdone:
	HSUM2(Y0, X0)
	HSUM2(Y1, X1)
	VMOVSS X0, (DI)
	VMOVSS X1, 4(DI)
	VZEROUPPER
	RET

// RMSCOLS2 is the arithmetic of bwRMSColsAVX2 on dy Y0, x Y1, w Y2, acc Y3
// (rs Y8, k Y9): the new acc in Y3, dx in Y5.
#define RMSCOLS2 \
	VMULPS  Y8, Y0, Y4; \
	VFMADD231PS Y1, Y4, Y3; \
	VMULPS  Y9, Y1, Y5; \
	VFMSUB231PS Y2, Y4, Y5

// func bwRMSColsAVX2(dx, dy, x, w, acc *float32, n int, rs, k float32)
// For i < n: acc[i] += rs·dy[i]·x[i]; dx[i] = rs·dy[i]·w[i] − k·x[i].
// dy[i] and x[i] are read before dx[i] is written.
TEXT ·bwRMSColsAVX2(SB), NOSPLIT, $0-56
	MOVQ dx+0(FP), DI
	MOVQ dy+8(FP), R8
	MOVQ x+16(FP), SI
	MOVQ w+24(FP), R10
	MOVQ acc+32(FP), R11
	MOVQ n+40(FP), DX
	VBROADCASTSS rs+48(FP), Y8
	VBROADCASTSS k+52(FP), Y9
	XORQ AX, AX
	MOVQ DX, R9
	ANDQ $-8, R9
	SHLQ $2, R9

rcmain:
	CMPQ AX, R9
	JGE  rctail
	VMOVUPS (R8)(AX*1), Y0
	VMOVUPS (SI)(AX*1), Y1
	VMOVUPS (R10)(AX*1), Y2
	VMOVUPS (R11)(AX*1), Y3
	RMSCOLS2
	VMOVUPS Y3, (R11)(AX*1)
	VMOVUPS Y5, (DI)(AX*1)
	ADDQ $32, AX
	JMP  rcmain

rctail:
	MOVQ DX, CX
	ANDQ $7, CX
	JEQ  rcdone
	TAILMASK2
	VMASKMOVPS (R8)(AX*1), Y15, Y0
	VMASKMOVPS (SI)(AX*1), Y15, Y1
	VMASKMOVPS (R10)(AX*1), Y15, Y2
	VMASKMOVPS (R11)(AX*1), Y15, Y3
	RMSCOLS2
	VMASKMOVPS Y3, Y15, (R11)(AX*1)
	VMASKMOVPS Y5, Y15, (DI)(AX*1)

rcdone:
	VZEROUPPER
	RET

// func bwTile64AVX2(out0, out1, x0, x1, kt *float32, n, ldk int)
// For two rows at once: out0[j] = Σ_{i<n} x0[i]·kt[i·ldk+j] and the same
// for out1 with x1, j < 64, in two passes of 32 columns (8 accumulators
// each). out0 may equal out1 when x0 equals x1.
TEXT ·bwTile64AVX2(SB), NOSPLIT, $0-56
	MOVQ out0+0(FP), DI
	MOVQ out1+8(FP), R8
	MOVQ x0+16(FP), SI
	MOVQ x1+24(FP), R10
	MOVQ kt+32(FP), DX
	MOVQ n+40(FP), CX
	MOVQ ldk+48(FP), R11
	SHLQ $2, R11
	MOVQ $2, R12

t32pass:
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	MOVQ DX, BX
	XORQ AX, AX
	TESTQ CX, CX
	JEQ  t32store

t32loop:
	VMOVUPS (BX), Y8
	VMOVUPS 32(BX), Y9
	VMOVUPS 64(BX), Y10
	VMOVUPS 96(BX), Y11
	VBROADCASTSS (SI)(AX*4), Y12
	VBROADCASTSS (R10)(AX*4), Y13
	VFMADD231PS Y8, Y12, Y0
	VFMADD231PS Y9, Y12, Y1
	VFMADD231PS Y10, Y12, Y2
	VFMADD231PS Y11, Y12, Y3
	VFMADD231PS Y8, Y13, Y4
	VFMADD231PS Y9, Y13, Y5
	VFMADD231PS Y10, Y13, Y6
	VFMADD231PS Y11, Y13, Y7
	ADDQ R11, BX
	INCQ AX
	CMPQ AX, CX
	JLT  t32loop

t32store:
	VMOVUPS Y0, (DI)
	VMOVUPS Y1, 32(DI)
	VMOVUPS Y2, 64(DI)
	VMOVUPS Y3, 96(DI)
	VMOVUPS Y4, (R8)
	VMOVUPS Y5, 32(R8)
	VMOVUPS Y6, 64(R8)
	VMOVUPS Y7, 96(R8)
	ADDQ $128, DX
	ADDQ $128, DI
	ADDQ $128, R8
	DECQ R12
	JNZ  t32pass
	VZEROUPPER
	RET

// ROPE2 rotates 8 pairs (a in Y0, b in Y1, cos Y2, sin Y3) by −angle:
// (a, b) → (a·c + b·s, b·c − a·s) into Y4, Y5.
#define ROPE2 \
	VMULPS  Y2, Y0, Y4; \
	VFMADD231PS Y3, Y1, Y4; \
	VMULPS  Y2, Y1, Y5; \
	VFNMADD231PS Y3, Y0, Y5

// func bwRoPERowAVX2(x, cos, sin *float32, half, heads, headDim int)
// Applies the inverse rotation to every head of one token, as
// bwRoPERowAVX512.
TEXT ·bwRoPERowAVX2(SB), NOSPLIT, $0-48
	MOVQ x+0(FP), DI
	MOVQ cos+8(FP), SI
	MOVQ sin+16(FP), R8
	MOVQ half+24(FP), DX
	MOVQ heads+32(FP), R10
	MOVQ headDim+40(FP), R11
	SHLQ $2, R11
	MOVQ DX, R12
	SHLQ $2, R12
	VXORPS Y15, Y15, Y15
	MOVQ DX, CX
	ANDQ $7, CX
	JEQ  ropenomask
	TAILMASK2

ropenomask:
	MOVQ DX, R9
	ANDQ $-8, R9
	SHLQ $2, R9

ropehead:
	TESTQ R10, R10
	JEQ   ropedone
	LEAQ  (DI)(R12*1), R13
	XORQ  AX, AX

ropeblk:
	CMPQ AX, R9
	JGE  ropetail
	VMOVUPS (DI)(AX*1), Y0
	VMOVUPS (R13)(AX*1), Y1
	VMOVUPS (SI)(AX*1), Y2
	VMOVUPS (R8)(AX*1), Y3
	ROPE2
	VMOVUPS Y4, (DI)(AX*1)
	VMOVUPS Y5, (R13)(AX*1)
	ADDQ $32, AX
	JMP  ropeblk

ropetail:
	VPTEST Y15, Y15
	JEQ  ropenext
	VMASKMOVPS (DI)(AX*1), Y15, Y0
	VMASKMOVPS (R13)(AX*1), Y15, Y1
	VMASKMOVPS (SI)(AX*1), Y15, Y2
	VMASKMOVPS (R8)(AX*1), Y15, Y3
	ROPE2
	VMASKMOVPS Y4, Y15, (DI)(AX*1)
	VMASKMOVPS Y5, Y15, (R13)(AX*1)

ropenext:
	ADDQ R11, DI
	DECQ R10
	JMP  ropehead

ropedone:
	VZEROUPPER
	RET

// func swigluAVX2(out, gate, up *float32, n int)
// out[i] = gate[i]·up[i]/(1 + exp(−gate[i])) for i < n, n a multiple of
// 8; out may alias gate or up.
TEXT ·swigluAVX2(SB), NOSPLIT, $0-32
	MOVQ out+0(FP), DI
	MOVQ gate+8(FP), SI
	MOVQ up+16(FP), DX
	MOVQ n+24(FP), CX
	VMOVUPS expc2<>+320(SB), Y10
	SHRQ $3, CX
	JZ   sw2done

sw2loop:
	VMOVUPS (SI), Y5
	VXORPS  Y0, Y0, Y0
	VSUBPS  Y5, Y0, Y0
	EXP2(Y0, Y2, Y1, Y3)
	VADDPS  Y10, Y2, Y2
	VMULPS  (DX), Y5, Y5
	VDIVPS  Y2, Y5, Y5
	VMOVUPS Y5, (DI)
	ADDQ $32, SI
	ADDQ $32, DX
	ADDQ $32, DI
	DECQ CX
	JNZ  sw2loop

sw2done:
	VZEROUPPER
	RET
