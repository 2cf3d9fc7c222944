#include "textflag.h"

// expRowAVX2 is math.Exp over a row of logits, four float64 lanes at a
// time, bit for bit: each lane runs exactly the operations of Go's
// amd64 math.Exp on its FMA path (src/math/exp_amd64.s, label avxfma:
// Cody–Waite reduction with fused multiply-adds, x/16, a degree-8 Taylor
// polynomial, four squarings (y·(y+2)), then ·2^k), so SampleRows can
// keep the reference's float64 exps at a fraction of the cost. Only
// arguments in [−700, 700] take this path (no overflow, underflow or
// denormal handling here): other lanes (and NaN) come out NaN, for the
// caller to recompute with math.Exp.
//
// Constants, four copies of each (32 bytes apart), the float64 values of
// exp_amd64.s.
// log2e = 1.4426950408889634
DATA expd<>+0(SB)/8, $0x3ff71547652b82fe
DATA expd<>+8(SB)/8, $0x3ff71547652b82fe
DATA expd<>+16(SB)/8, $0x3ff71547652b82fe
DATA expd<>+24(SB)/8, $0x3ff71547652b82fe
// ln2u = 0.693147180559663
DATA expd<>+32(SB)/8, $0x3fe62e42fefa3000
DATA expd<>+40(SB)/8, $0x3fe62e42fefa3000
DATA expd<>+48(SB)/8, $0x3fe62e42fefa3000
DATA expd<>+56(SB)/8, $0x3fe62e42fefa3000
// ln2l = 2.8235290563031577e-13
DATA expd<>+64(SB)/8, $0x3d53de6af278ece6
DATA expd<>+72(SB)/8, $0x3d53de6af278ece6
DATA expd<>+80(SB)/8, $0x3d53de6af278ece6
DATA expd<>+88(SB)/8, $0x3d53de6af278ece6
// sixteenth = 0.0625
DATA expd<>+96(SB)/8, $0x3fb0000000000000
DATA expd<>+104(SB)/8, $0x3fb0000000000000
DATA expd<>+112(SB)/8, $0x3fb0000000000000
DATA expd<>+120(SB)/8, $0x3fb0000000000000
// c8 = 2.48015873015873e-05
DATA expd<>+128(SB)/8, $0x3efa01a01a01a01a
DATA expd<>+136(SB)/8, $0x3efa01a01a01a01a
DATA expd<>+144(SB)/8, $0x3efa01a01a01a01a
DATA expd<>+152(SB)/8, $0x3efa01a01a01a01a
// c7 = 0.0001984126984126984
DATA expd<>+160(SB)/8, $0x3f2a01a01a01a01a
DATA expd<>+168(SB)/8, $0x3f2a01a01a01a01a
DATA expd<>+176(SB)/8, $0x3f2a01a01a01a01a
DATA expd<>+184(SB)/8, $0x3f2a01a01a01a01a
// c6 = 0.001388888888888889
DATA expd<>+192(SB)/8, $0x3f56c16c16c16c17
DATA expd<>+200(SB)/8, $0x3f56c16c16c16c17
DATA expd<>+208(SB)/8, $0x3f56c16c16c16c17
DATA expd<>+216(SB)/8, $0x3f56c16c16c16c17
// c5 = 0.008333333333333333
DATA expd<>+224(SB)/8, $0x3f81111111111111
DATA expd<>+232(SB)/8, $0x3f81111111111111
DATA expd<>+240(SB)/8, $0x3f81111111111111
DATA expd<>+248(SB)/8, $0x3f81111111111111
// c4 = 0.041666666666666664
DATA expd<>+256(SB)/8, $0x3fa5555555555555
DATA expd<>+264(SB)/8, $0x3fa5555555555555
DATA expd<>+272(SB)/8, $0x3fa5555555555555
DATA expd<>+280(SB)/8, $0x3fa5555555555555
// c3 = 0.16666666666666666
DATA expd<>+288(SB)/8, $0x3fc5555555555555
DATA expd<>+296(SB)/8, $0x3fc5555555555555
DATA expd<>+304(SB)/8, $0x3fc5555555555555
DATA expd<>+312(SB)/8, $0x3fc5555555555555
// half = 0.5
DATA expd<>+320(SB)/8, $0x3fe0000000000000
DATA expd<>+328(SB)/8, $0x3fe0000000000000
DATA expd<>+336(SB)/8, $0x3fe0000000000000
DATA expd<>+344(SB)/8, $0x3fe0000000000000
// one = 1.0
DATA expd<>+352(SB)/8, $0x3ff0000000000000
DATA expd<>+360(SB)/8, $0x3ff0000000000000
DATA expd<>+368(SB)/8, $0x3ff0000000000000
DATA expd<>+376(SB)/8, $0x3ff0000000000000
// two = 2.0
DATA expd<>+384(SB)/8, $0x4000000000000000
DATA expd<>+392(SB)/8, $0x4000000000000000
DATA expd<>+400(SB)/8, $0x4000000000000000
DATA expd<>+408(SB)/8, $0x4000000000000000
DATA expd<>+416(SB)/8, $0x000003ff000003ff
DATA expd<>+424(SB)/8, $0x000003ff000003ff
// absmask
DATA expd<>+432(SB)/8, $0x7fffffffffffffff
DATA expd<>+440(SB)/8, $0x7fffffffffffffff
DATA expd<>+448(SB)/8, $0x7fffffffffffffff
DATA expd<>+456(SB)/8, $0x7fffffffffffffff
// lim
DATA expd<>+464(SB)/8, $0x4085e00000000000
DATA expd<>+472(SB)/8, $0x4085e00000000000
DATA expd<>+480(SB)/8, $0x4085e00000000000
DATA expd<>+488(SB)/8, $0x4085e00000000000
// nan
DATA expd<>+496(SB)/8, $0x7ff8000000000000
DATA expd<>+504(SB)/8, $0x7ff8000000000000
DATA expd<>+512(SB)/8, $0x7ff8000000000000
DATA expd<>+520(SB)/8, $0x7ff8000000000000
GLOBL expd<>(SB), RODATA|NOPTR, $528

// func expRowAVX2(dst *float64, x *float32, n int, c *[2]float64)
// dst[i] = exp(float64(x[i])/c[0] − c[1]) for i < n, n a multiple of 4;
// NaN where the argument is NaN or outside [−700, 700].
TEXT ·expRowAVX2(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ n+16(FP), CX
	MOVQ c+24(FP), AX
	VBROADCASTSD (AX), Y14
	VBROADCASTSD 8(AX), Y15
	SHRQ $2, CX
	JZ done
loop:
	VCVTPS2PD (SI), Y0
	VDIVPD Y14, Y0, Y0
	VSUBPD Y15, Y0, Y0
	VANDPD expd<>+432(SB), Y0, Y3
	VCMPPD $0x12, expd<>+464(SB), Y3, Y3
	VMULPD expd<>+0(SB), Y0, Y1
	VCVTPD2DQY Y1, X2
	VCVTDQ2PD X2, Y1
	VFNMADD231PD expd<>+32(SB), Y1, Y0
	VFNMADD231PD expd<>+64(SB), Y1, Y0
	VMULPD expd<>+96(SB), Y0, Y0
	VMOVUPD expd<>+128(SB), Y1
	VFMADD213PD expd<>+160(SB), Y0, Y1
	VFMADD213PD expd<>+192(SB), Y0, Y1
	VFMADD213PD expd<>+224(SB), Y0, Y1
	VFMADD213PD expd<>+256(SB), Y0, Y1
	VFMADD213PD expd<>+288(SB), Y0, Y1
	VFMADD213PD expd<>+320(SB), Y0, Y1
	VFMADD213PD expd<>+352(SB), Y0, Y1
	VMULPD Y1, Y0, Y0
	VADDPD expd<>+384(SB), Y0, Y1
	VMULPD Y1, Y0, Y0
	VADDPD expd<>+384(SB), Y0, Y1
	VMULPD Y1, Y0, Y0
	VADDPD expd<>+384(SB), Y0, Y1
	VMULPD Y1, Y0, Y0
	VADDPD expd<>+384(SB), Y0, Y1
	VFMADD213PD expd<>+352(SB), Y1, Y0
	VPADDD expd<>+416(SB), X2, X2
	VPMOVSXDQ X2, Y2
	VPSLLQ $52, Y2, Y2
	VMULPD Y2, Y0, Y0
	VANDPD Y3, Y0, Y0
	VANDNPD expd<>+496(SB), Y3, Y4
	VORPD Y4, Y0, Y0
	VMOVUPD Y0, (DI)
	ADDQ $16, SI
	ADDQ $32, DI
	DECQ CX
	JNZ loop
done:
	VZEROUPPER
	RET
