package main

import (
	"fmt"
	"strings"
)

// Go's assembler has no mnemonics for the AVX512_BF16 instructions, so the
// generator writes their machine code as BYTE directives. evex0F38 encodes
// the register-to-register form of a 512-bit EVEX instruction in the 0F38
// opcode map with W0, no masking and no broadcast:
//
//	62 P0 P1 P2 opcode ModRM
//	P0 = R̄ X̄ B̄ R̄′ 0 0 1 0  (R, R′: bits 3, 4 of dst; B, X: bits 3, 4 of src2)
//	P1 = 0 v̄v̄v̄v̄ 1 pp      (vvvv: bits 0–3 of src1, inverted)
//	P2 = 0 10 0 V̄′ 000     (L′L = 10: 512 bits; V′: bit 4 of src1, inverted)
//	ModRM = 11 dst[2:0] src2[2:0]
//
// dst, src1 and src2 are zmm register numbers 0–31; pp selects the
// implied prefix (1 = 66, 2 = F3, 3 = F2). The result is one line of Go
// assembly ending with the instruction in Intel operand order as a comment.
func evex0F38(mnemonic string, opcode, pp byte, dst, src1, src2 int) string {
	for _, r := range []int{dst, src1, src2} {
		if r < 0 || r > 31 {
			panic(fmt.Sprintf("asm: %s: zmm register %d out of range", mnemonic, r))
		}
	}
	inv := func(r, bit int) byte { return byte(^(r >> bit) & 1) }
	p0 := inv(dst, 3)<<7 | inv(src2, 4)<<6 | inv(src2, 3)<<5 | inv(dst, 4)<<4 | 0b0010
	p1 := byte(^src1&0xf)<<3 | 1<<2 | pp
	p2 := byte(0b10)<<5 | inv(src1, 4)<<3
	modrm := byte(0xc0) | byte(dst&7)<<3 | byte(src2&7)
	code := []byte{0x62, p0, p1, p2, opcode, modrm}
	parts := make([]string, len(code))
	for i, c := range code {
		parts[i] = fmt.Sprintf("BYTE $0x%02X", c)
	}
	return fmt.Sprintf("\t%s // %s zmm%d, zmm%d, zmm%d\n", strings.Join(parts, "; "), mnemonic, dst, src1, src2)
}

// vdpbf16ps is VDPBF16PS zmm(dst), zmm(src1), zmm(src2): for each of the
// 16 float32 lanes i, dst[i] += src1.bf16[2i+1]·src2.bf16[2i+1], then
// dst[i] += src1.bf16[2i]·src2.bf16[2i] (each product exact in float32,
// each add rounded to nearest even, denormal inputs and outputs flushed
// to zero). Go assembly operand order is the reverse of the comment's:
// in Go terms it computes "VDPBF16PS src2, src1, dst".
func vdpbf16ps(dst, src1, src2 int) string {
	return evex0F38("VDPBF16PS", 0x52, 2, dst, src1, src2)
}

// vcvtne2ps2bf16 is VCVTNE2PS2BF16 zmm(dst), zmm(src1), zmm(src2): the 16
// float32 lanes of src2 rounded to bf16 (nearest even) into dst's low 16
// bf16 halves and src1's into its high 16.
func vcvtne2ps2bf16(dst, src1, src2 int) string {
	return evex0F38("VCVTNE2PS2BF16", 0x72, 3, dst, src1, src2)
}
