#include "textflag.h"

// AVX-512 helpers of the backward kernels and AdamW (see
// simd_backward.go for the portable twins and their contracts). All of
// them use unaligned loads and handle any length unless stated otherwise.

// EXP_SETUP loads the constants of EXP into Z10..Z20.
#define EXP_SETUP \
	MOVL $0x3fb8aa3b, R15; VPBROADCASTD R15, Z10; \
	MOVL $0xc2ce0000, R15; VPBROADCASTD R15, Z11; \
	MOVL $0x3f318000, R15; VPBROADCASTD R15, Z12; \
	MOVL $0xb95e8083, R15; VPBROADCASTD R15, Z13; \
	MOVL $0x39506967, R15; VPBROADCASTD R15, Z14; \
	MOVL $0x3ab743ce, R15; VPBROADCASTD R15, Z15; \
	MOVL $0x3c088908, R15; VPBROADCASTD R15, Z16; \
	MOVL $0x3d2aa9c1, R15; VPBROADCASTD R15, Z17; \
	MOVL $0x3e2aaaaa, R15; VPBROADCASTD R15, Z18; \
	MOVL $0x3f000000, R15; VPBROADCASTD R15, Z19; \
	MOVL $0x3f800000, R15; VPBROADCASTD R15, Z20

// EXP sets y = exp(x) for 16 lanes (Cephes expf: x = n·ln2 + r, a degree-7
// polynomial in r, then VSCALEFPS by 2^n). x is clobbered, t is scratch.
// Inputs below −103 give 0 (or a subnormal); NaN propagates.
#define EXP(x, y, t) \
	VMAXPS x, Z11, x; \
	VMULPS Z10, x, t; \
	VRNDSCALEPS $0, t, t; \
	VFNMADD231PS Z12, t, x; \
	VFNMADD231PS Z13, t, x; \
	VMOVAPS Z14, y; \
	VFMADD213PS Z15, x, y; \
	VFMADD213PS Z16, x, y; \
	VFMADD213PS Z17, x, y; \
	VFMADD213PS Z18, x, y; \
	VFMADD213PS Z19, x, y; \
	VMULPS x, x, Z21; \
	VFMADD213PS x, Z21, y; \
	VADDPS Z20, y, y; \
	VSCALEFPS t, y, y

// HSUM reduces the 16 lanes of z (whose low parts are y, x) into the low
// lane of x, using X21 as scratch.
#define HSUM(z, y, x) \
	VEXTRACTF64X4 $1, z, Y21; \
	VADDPS Y21, y, y; \
	VEXTRACTF32X4 $1, y, X21; \
	VADDPS X21, x, x; \
	VPERMILPS $0x4e, x, X21; \
	VADDPS X21, x, x; \
	VPERMILPS $0xb1, x, X21; \
	VADDSS X21, x, x

// TAILMASK sets K1 to the low CX bits (CX < 16); clobbers BX.
#define TAILMASK \
	MOVQ $1, BX; \
	SHLQ CX, BX; \
	DECQ BX; \
	KMOVW BX, K1

// func bwDotsAVX512(out, x, rows *float32, stride, n, d int)
// out[j] = Σ_{i<d} x[i]·rows[j·stride+i] for j < n; d is a positive
// multiple of 16.
TEXT ·bwDotsAVX512(SB), NOSPLIT, $0-48
	MOVQ out+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ rows+16(FP), DX
	MOVQ stride+24(FP), R8
	SHLQ $2, R8
	MOVQ n+32(FP), CX
	MOVQ d+40(FP), R9
	SHLQ $2, R9

dots4:
	CMPQ CX, $4
	JLT  dots1
	MOVQ DX, R10
	LEAQ (DX)(R8*1), R11
	LEAQ (R11)(R8*1), R12
	LEAQ (R12)(R8*1), R13
	VXORPS Z0, Z0, Z0
	VXORPS Z1, Z1, Z1
	VXORPS Z2, Z2, Z2
	VXORPS Z3, Z3, Z3
	XORQ AX, AX

dots4i:
	VMOVUPS     (SI)(AX*1), Z4
	VFMADD231PS (R10)(AX*1), Z4, Z0
	VFMADD231PS (R11)(AX*1), Z4, Z1
	VFMADD231PS (R12)(AX*1), Z4, Z2
	VFMADD231PS (R13)(AX*1), Z4, Z3
	ADDQ $64, AX
	CMPQ AX, R9
	JLT  dots4i
	HSUM(Z0, Y0, X0)
	HSUM(Z1, Y1, X1)
	HSUM(Z2, Y2, X2)
	HSUM(Z3, Y3, X3)
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
	VXORPS Z0, Z0, Z0
	VXORPS Z1, Z1, Z1
	XORQ AX, AX

dots1i:
	VMOVUPS     (SI)(AX*1), Z4
	VFMADD231PS (DX)(AX*1), Z4, Z0
	ADDQ $64, AX
	CMPQ AX, R9
	JLT  dots1i
	HSUM(Z0, Y0, X0)
	VMOVSS X0, (DI)
	ADDQ $4, DI
	ADDQ R8, DX
	DECQ CX
	JMP  dots1

dotsdone:
	VZEROUPPER
	RET

// func bwAxpysAVX512(out, coef, rows *float32, stride, n, d int)
// out[i] += Σ_{j<n} coef[j]·rows[j·stride+i] for i < d; d is a positive
// multiple of 16. The sum over j runs in order of j for every i.
TEXT ·bwAxpysAVX512(SB), NOSPLIT, $0-48
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

ax128:
	LEAQ 512(AX), BX
	CMPQ BX, R9
	JGT  ax16
	VMOVUPS (DI)(AX*1), Z0
	VMOVUPS 64(DI)(AX*1), Z1
	VMOVUPS 128(DI)(AX*1), Z2
	VMOVUPS 192(DI)(AX*1), Z3
	VMOVUPS 256(DI)(AX*1), Z4
	VMOVUPS 320(DI)(AX*1), Z5
	VMOVUPS 384(DI)(AX*1), Z6
	VMOVUPS 448(DI)(AX*1), Z7
	MOVQ DX, R10
	XORQ R11, R11

ax128j:
	VBROADCASTSS (SI)(R11*4), Z8
	VFMADD231PS  (R10)(AX*1), Z8, Z0
	VFMADD231PS  64(R10)(AX*1), Z8, Z1
	VFMADD231PS  128(R10)(AX*1), Z8, Z2
	VFMADD231PS  192(R10)(AX*1), Z8, Z3
	VFMADD231PS  256(R10)(AX*1), Z8, Z4
	VFMADD231PS  320(R10)(AX*1), Z8, Z5
	VFMADD231PS  384(R10)(AX*1), Z8, Z6
	VFMADD231PS  448(R10)(AX*1), Z8, Z7
	ADDQ R8, R10
	INCQ R11
	CMPQ R11, CX
	JLT  ax128j
	VMOVUPS Z0, (DI)(AX*1)
	VMOVUPS Z1, 64(DI)(AX*1)
	VMOVUPS Z2, 128(DI)(AX*1)
	VMOVUPS Z3, 192(DI)(AX*1)
	VMOVUPS Z4, 256(DI)(AX*1)
	VMOVUPS Z5, 320(DI)(AX*1)
	VMOVUPS Z6, 384(DI)(AX*1)
	VMOVUPS Z7, 448(DI)(AX*1)
	ADDQ $512, AX
	JMP  ax128

ax16:
	CMPQ AX, R9
	JGE  axdone
	VMOVUPS (DI)(AX*1), Z0
	MOVQ DX, R10
	XORQ R11, R11

ax16j:
	VBROADCASTSS (SI)(R11*4), Z8
	VFMADD231PS  (R10)(AX*1), Z8, Z0
	ADDQ R8, R10
	INCQ R11
	CMPQ R11, CX
	JLT  ax16j
	VMOVUPS Z0, (DI)(AX*1)
	ADDQ $64, AX
	JMP  ax16

axdone:
	VZEROUPPER
	RET

// func bwExpSumAVX512(dst, src *float32, n int, sub float32) float32
// dst[i] = exp(src[i] − sub) for i < n and returns Σ dst[i] (16 float32
// lanes, summed at the end). dst may equal src.
TEXT ·bwExpSumAVX512(SB), NOSPLIT, $0-36
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), DX
	VBROADCASTSS sub+24(FP), Z9
	EXP_SETUP
	VXORPS Z8, Z8, Z8
	XORQ AX, AX
	MOVQ DX, R9
	ANDQ $-16, R9
	SHLQ $2, R9

expmain:
	CMPQ AX, R9
	JGE  exptail
	VMOVUPS (SI)(AX*1), Z0
	VSUBPS  Z9, Z0, Z0
	EXP(Z0, Z2, Z1)
	VMOVUPS Z2, (DI)(AX*1)
	VADDPS  Z2, Z8, Z8
	ADDQ $64, AX
	JMP  expmain

exptail:
	MOVQ DX, CX
	ANDQ $15, CX
	JEQ  expdone
	TAILMASK
	VMOVUPS.Z (SI)(AX*1), K1, Z0
	VSUBPS  Z9, Z0, Z0
	EXP(Z0, Z2, Z1)
	VMOVUPS Z2, K1, (DI)(AX*1)
	VADDPS  Z2, Z8, K1, Z8

expdone:
	HSUM(Z8, Y8, X8)
	VMOVSS X8, ret+32(FP)
	VZEROUPPER
	RET

// func bwMaxAVX512(x *float32, n int) float32
// returns max(x[0..n)), −Inf for n = 0.
TEXT ·bwMaxAVX512(SB), NOSPLIT, $0-20
	MOVQ x+0(FP), SI
	MOVQ n+8(FP), DX
	MOVL $0xff800000, R15
	VPBROADCASTD R15, Z0
	VMOVAPS Z0, Z1
	XORQ AX, AX
	MOVQ DX, R9
	ANDQ $-32, R9
	SHLQ $2, R9

max32:
	CMPQ AX, R9
	JGE  max16
	VMAXPS (SI)(AX*1), Z0, Z0
	VMAXPS 64(SI)(AX*1), Z1, Z1
	ADDQ $128, AX
	JMP  max32

max16:
	VMAXPS Z1, Z0, Z0
	MOVQ DX, R9
	ANDQ $-16, R9
	SHLQ $2, R9
	CMPQ AX, R9
	JGE  maxtail
	VMAXPS (SI)(AX*1), Z0, Z0
	ADDQ $64, AX

maxtail:
	MOVQ DX, CX
	ANDQ $15, CX
	JEQ  maxdone
	TAILMASK
	VMAXPS (SI)(AX*1), Z0, K1, Z0

maxdone:
	VEXTRACTF64X4 $1, Z0, Y1
	VMAXPS Y1, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VMAXPS X1, X0, X0
	VPERMILPS $0x4e, X0, X1
	VMAXPS X1, X0, X0
	VPERMILPS $0xb1, X0, X1
	VMAXSS X1, X0, X0
	VMOVSS X0, ret+16(FP)
	VZEROUPPER
	RET

// func bwScaleAVX512(x *float32, n int, s float32)
// x[i] *= s for i < n.
TEXT ·bwScaleAVX512(SB), NOSPLIT, $0-20
	MOVQ x+0(FP), SI
	MOVQ n+8(FP), DX
	VBROADCASTSS s+16(FP), Z9
	XORQ AX, AX
	MOVQ DX, R9
	ANDQ $-16, R9
	SHLQ $2, R9

scmain:
	CMPQ AX, R9
	JGE  sctail
	VMULPS (SI)(AX*1), Z9, Z0
	VMOVUPS Z0, (SI)(AX*1)
	ADDQ $64, AX
	JMP  scmain

sctail:
	MOVQ DX, CX
	ANDQ $15, CX
	JEQ  scdone
	TAILMASK
	VMOVUPS.Z (SI)(AX*1), K1, Z0
	VMULPS Z9, Z0, Z0
	VMOVUPS Z0, K1, (SI)(AX*1)

scdone:
	VZEROUPPER
	RET

// SWIGLU_BODY does 16 lanes of bwSwiGLUAVX512 at byte offset AX under
// mask K3.
#define SWIGLU_BODY \
	VMOVUPS.Z (SI)(AX*1), K3, Z5; \
	VMOVUPS.Z (R11)(AX*1), K3, Z6; \
	VMOVUPS.Z (R10)(AX*1), K3, Z7; \
	VXORPS  Z0, Z0, Z0; \
	VSUBPS  Z5, Z0, Z0; \
	EXP(Z0, Z2, Z1); \
	VADDPS  Z20, Z2, Z2; \
	VDIVPS  Z2, Z20, Z3; \
	VMULPS  Z7, Z5, Z4; \
	VMULPS  Z3, Z4, Z4; \
	VSUBPS  Z3, Z20, Z0; \
	VFMADD213PS Z20, Z5, Z0; \
	VMULPS  Z3, Z0, Z0; \
	VMULPS  Z6, Z7, Z1; \
	VMULPS  Z1, Z0, Z0; \
	VMOVUPS Z0, K3, (DI)(AX*1); \
	VMOVUPS Z4, K3, (R8)(AX*1)

// func bwSwiGLUAVX512(dgate, dup, dout, gate, up *float32, n int)
// s = σ(g) = 1/(1+exp(−g)): dup = dout·g·s, dgate = dout·up·s·(1 + g·(1−s)).
// Element i is read before it is written, so the buffers may alias
// element for element.
TEXT ·bwSwiGLUAVX512(SB), NOSPLIT, $0-48
	MOVQ dgate+0(FP), DI
	MOVQ dup+8(FP), R8
	MOVQ dout+16(FP), R10
	MOVQ gate+24(FP), SI
	MOVQ up+32(FP), R11
	MOVQ n+40(FP), DX
	EXP_SETUP
	XORQ AX, AX
	MOVQ DX, R9
	ANDQ $-16, R9
	SHLQ $2, R9
	KXNORW K3, K3, K3

swmain:
	CMPQ AX, R9
	JGE  swtail
	SWIGLU_BODY
	ADDQ $64, AX
	JMP  swmain

swtail:
	MOVQ DX, CX
	ANDQ $15, CX
	JEQ  swdone
	TAILMASK
	KMOVW K1, K3
	SWIGLU_BODY

swdone:
	VZEROUPPER
	RET

// ADAMW_BODY does 16 lanes of bwAdamWAVX512 at byte offset AX under mask
// K3.
#define ADAMW_BODY \
	VMOVUPS.Z (SI)(AX*1), K3, Z0; \
	VMOVUPS.Z (R8)(AX*1), K3, Z1; \
	VMOVUPS.Z (R10)(AX*1), K3, Z3; \
	VMOVUPS.Z (DI)(AX*1), K3, Z6; \
	VMULPS  Z10, Z1, Z1; \
	VFMADD231PS Z11, Z0, Z1; \
	VMULPS  Z0, Z0, Z2; \
	VMULPS  Z12, Z3, Z3; \
	VFMADD231PS Z13, Z2, Z3; \
	VSQRTPS Z3, Z4; \
	VFMADD213PS Z17, Z16, Z4; \
	VDIVPS  Z4, Z1, Z5; \
	VMULPS  Z14, Z6, Z6; \
	VFNMADD231PS Z15, Z5, Z6; \
	VMOVUPS Z1, K3, (R8)(AX*1); \
	VMOVUPS Z3, K3, (R10)(AX*1); \
	VMOVUPS Z6, K3, (DI)(AX*1)

// func bwAdamWAVX512(param, grad, m, v *float32, n int, c *adamwConsts)
// One AdamW step over n elements, in float32:
//	m = β1·m + (1−β1)·g;  v = β2·v + (1−β2)·g²
//	param = param·(1−lr·wd) − stepSize·m/(sqrt(v)·invSqrtBC2 + eps)
// c holds β1, 1−β1, β2, 1−β2, 1−lr·wd, lr/(1−β1^t), 1/sqrt(1−β2^t), eps.
TEXT ·bwAdamWAVX512(SB), NOSPLIT, $0-48
	MOVQ param+0(FP), DI
	MOVQ grad+8(FP), SI
	MOVQ m+16(FP), R8
	MOVQ v+24(FP), R10
	MOVQ n+32(FP), DX
	MOVQ c+40(FP), R11
	VBROADCASTSS 0(R11), Z10
	VBROADCASTSS 4(R11), Z11
	VBROADCASTSS 8(R11), Z12
	VBROADCASTSS 12(R11), Z13
	VBROADCASTSS 16(R11), Z14
	VBROADCASTSS 20(R11), Z15
	VBROADCASTSS 24(R11), Z16
	VBROADCASTSS 28(R11), Z17
	XORQ AX, AX
	MOVQ DX, R9
	ANDQ $-16, R9
	SHLQ $2, R9
	KXNORW K3, K3, K3

admain:
	CMPQ AX, R9
	JGE  adtail
	ADAMW_BODY
	ADDQ $64, AX
	JMP  admain

adtail:
	MOVQ DX, CX
	ANDQ $15, CX
	JEQ  addone
	TAILMASK
	KMOVW K1, K3
	ADAMW_BODY

addone:
	VZEROUPPER
	RET

// RMSROW_BODY does 16 lanes of bwRMSRowAVX512 at byte offset AX under
// mask K3.
#define RMSROW_BODY \
	VMOVUPS.Z (SI)(AX*1), K3, Z2; \
	VMOVUPS.Z (R8)(AX*1), K3, Z3; \
	VMULPS.Z  (R10)(AX*1), Z3, K3, Z3; \
	VFMADD231PS Z2, Z2, Z0; \
	VFMADD231PS Z3, Z2, Z1

// func bwRMSRowAVX512(x, dy, w *float32, n int, sums *float32)
// sums[0] = Σ x², sums[1] = Σ w·dy·x over i < n, in 16 float32 lanes
// summed at the end.
TEXT ·bwRMSRowAVX512(SB), NOSPLIT, $0-40
	MOVQ x+0(FP), SI
	MOVQ dy+8(FP), R8
	MOVQ w+16(FP), R10
	MOVQ n+24(FP), DX
	MOVQ sums+32(FP), DI
	VXORPS Z0, Z0, Z0
	VXORPS Z1, Z1, Z1
	XORQ AX, AX
	MOVQ DX, R9
	ANDQ $-16, R9
	SHLQ $2, R9
	KXNORW K3, K3, K3

rrmain:
	CMPQ AX, R9
	JGE  rrtail
	RMSROW_BODY
	ADDQ $64, AX
	JMP  rrmain

rrtail:
	MOVQ DX, CX
	ANDQ $15, CX
	JEQ  rrdone
	TAILMASK
	KMOVW K1, K3
	RMSROW_BODY

rrdone:
	HSUM(Z0, Y0, X0)
	HSUM(Z1, Y1, X1)
	VMOVSS X0, (DI)
	VMOVSS X1, 4(DI)
	VZEROUPPER
	RET

// RMSCOLS_BODY does 16 lanes of bwRMSColsAVX512 at byte offset AX under
// mask K3.
#define RMSCOLS_BODY \
	VMOVUPS.Z (R8)(AX*1), K3, Z0; \
	VMOVUPS.Z (SI)(AX*1), K3, Z1; \
	VMOVUPS.Z (R10)(AX*1), K3, Z2; \
	VMOVUPS.Z (R11)(AX*1), K3, Z3; \
	VMULPS  Z8, Z0, Z4; \
	VFMADD231PS Z1, Z4, Z3; \
	VMULPS  Z9, Z1, Z5; \
	VFMSUB231PS Z2, Z4, Z5; \
	VMOVUPS Z3, K3, (R11)(AX*1); \
	VMOVUPS Z5, K3, (DI)(AX*1)

// func bwRMSColsAVX512(dx, dy, x, w, acc *float32, n int, rs, k float32)
// For i < n: acc[i] += rs·dy[i]·x[i]; dx[i] = rs·dy[i]·w[i] − k·x[i].
// dy[i] and x[i] are read before dx[i] is written.
TEXT ·bwRMSColsAVX512(SB), NOSPLIT, $0-56
	MOVQ dx+0(FP), DI
	MOVQ dy+8(FP), R8
	MOVQ x+16(FP), SI
	MOVQ w+24(FP), R10
	MOVQ acc+32(FP), R11
	MOVQ n+40(FP), DX
	VBROADCASTSS rs+48(FP), Z8
	VBROADCASTSS k+52(FP), Z9
	XORQ AX, AX
	MOVQ DX, R9
	ANDQ $-16, R9
	SHLQ $2, R9
	KXNORW K3, K3, K3

rcmain:
	CMPQ AX, R9
	JGE  rctail
	RMSCOLS_BODY
	ADDQ $64, AX
	JMP  rcmain

rctail:
	MOVQ DX, CX
	ANDQ $15, CX
	JEQ  rcdone
	TAILMASK
	KMOVW K1, K3
	RMSCOLS_BODY

rcdone:
	VZEROUPPER
	RET

// func bwTile64AVX512(out0, out1, x0, x1, kt *float32, n, ldk int)
// For two rows at once: out0[j] = Σ_{i<n} x0[i]·kt[i·ldk+j] and the same
// for out1 with x1, j < 64 (kt is a transposed block of 64 keys). Eight
// independent accumulators keep both FMA ports busy; no horizontal sums.
TEXT ·bwTile64AVX512(SB), NOSPLIT, $0-56
	MOVQ out0+0(FP), DI
	MOVQ out1+8(FP), R8
	MOVQ x0+16(FP), SI
	MOVQ x1+24(FP), R10
	MOVQ kt+32(FP), DX
	MOVQ n+40(FP), CX
	MOVQ ldk+48(FP), R11
	SHLQ $2, R11
	VXORPS Z0, Z0, Z0
	VXORPS Z1, Z1, Z1
	VXORPS Z2, Z2, Z2
	VXORPS Z3, Z3, Z3
	VXORPS Z4, Z4, Z4
	VXORPS Z5, Z5, Z5
	VXORPS Z6, Z6, Z6
	VXORPS Z7, Z7, Z7
	TESTQ CX, CX
	JEQ   t64store
	XORQ AX, AX

t64loop:
	VMOVUPS (DX), Z8
	VMOVUPS 64(DX), Z9
	VMOVUPS 128(DX), Z10
	VMOVUPS 192(DX), Z11
	VBROADCASTSS (SI)(AX*4), Z12
	VBROADCASTSS (R10)(AX*4), Z13
	VFMADD231PS Z8, Z12, Z0
	VFMADD231PS Z9, Z12, Z1
	VFMADD231PS Z10, Z12, Z2
	VFMADD231PS Z11, Z12, Z3
	VFMADD231PS Z8, Z13, Z4
	VFMADD231PS Z9, Z13, Z5
	VFMADD231PS Z10, Z13, Z6
	VFMADD231PS Z11, Z13, Z7
	ADDQ R11, DX
	INCQ AX
	CMPQ AX, CX
	JLT  t64loop

t64store:
	VMOVUPS Z0, (DI)
	VMOVUPS Z1, 64(DI)
	VMOVUPS Z2, 128(DI)
	VMOVUPS Z3, 192(DI)
	VMOVUPS Z4, (R8)
	VMOVUPS Z5, 64(R8)
	VMOVUPS Z6, 128(R8)
	VMOVUPS Z7, 192(R8)
	VZEROUPPER
	RET

// ROPE_BODY rotates 16 pairs at byte offset AX of the head at DI (second
// halves at BX) by −angle under mask K3: (a, b) → (a·c + b·s, b·c − a·s).
#define ROPE_BODY \
	VMOVUPS.Z (DI)(AX*1), K3, Z0; \
	VMOVUPS.Z (BX)(AX*1), K3, Z1; \
	VMOVUPS.Z (SI)(AX*1), K3, Z2; \
	VMOVUPS.Z (R8)(AX*1), K3, Z3; \
	VMULPS  Z2, Z0, Z4; \
	VFMADD231PS Z3, Z1, Z4; \
	VMULPS  Z2, Z1, Z5; \
	VFNMADD231PS Z3, Z0, Z5; \
	VMOVUPS Z4, K3, (DI)(AX*1); \
	VMOVUPS Z5, K3, (BX)(AX*1)

// func bwRoPERowAVX512(x, cos, sin *float32, half, heads, headDim int)
// Applies the inverse rotation to every head of one token: for each head
// and i < half, (x[i], x[i+half]) → (x[i]·cos[i] + x[i+half]·sin[i],
// x[i+half]·cos[i] − x[i]·sin[i]).
TEXT ·bwRoPERowAVX512(SB), NOSPLIT, $0-48
	MOVQ x+0(FP), DI
	MOVQ cos+8(FP), SI
	MOVQ sin+16(FP), R8
	MOVQ half+24(FP), DX
	MOVQ heads+32(FP), R10
	MOVQ headDim+40(FP), R11
	SHLQ $2, R11
	MOVQ DX, R12
	SHLQ $2, R12
	MOVQ DX, CX
	ANDQ $15, CX
	TAILMASK
	MOVQ DX, R9
	ANDQ $-16, R9
	SHLQ $2, R9

ropehead:
	TESTQ R10, R10
	JEQ   ropedone
	LEAQ  (DI)(R12*1), BX
	XORQ  AX, AX
	KXNORW K3, K3, K3

ropeblk:
	CMPQ AX, R9
	JGE  ropetail
	ROPE_BODY
	ADDQ $64, AX
	JMP  ropeblk

ropetail:
	KORTESTW K1, K1
	JEQ  ropenext
	KMOVW K1, K3
	ROPE_BODY

ropenext:
	ADDQ R11, DI
	DECQ R10
	JMP  ropehead

ropedone:
	VZEROUPPER
	RET
