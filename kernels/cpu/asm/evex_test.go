package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestEVEXEncoding checks the hand-written EVEX encodings against the
// machine code GNU as 2.41 produced for the same instructions (`as` on
// `vdpbf16ps %zmm3, %zmm2, %zmm1` etc., disassembled with objdump -d):
// registers below 8, 8–15, 16–23 and 24–31 in every operand position.
func TestEVEXEncoding(t *testing.T) {
	tests := []struct {
		name string
		got  string
		want string
	}{
		{"dpbf16 z1,z2,z3", vdpbf16ps(1, 2, 3), "BYTE $0x62; BYTE $0xF2; BYTE $0x6E; BYTE $0x48; BYTE $0x52; BYTE $0xCB"},
		{"dpbf16 z8,z17,z31", vdpbf16ps(8, 17, 31), "BYTE $0x62; BYTE $0x12; BYTE $0x76; BYTE $0x40; BYTE $0x52; BYTE $0xC7"},
		{"dpbf16 z24,z16,z0", vdpbf16ps(24, 16, 0), "BYTE $0x62; BYTE $0x62; BYTE $0x7E; BYTE $0x40; BYTE $0x52; BYTE $0xC0"},
		{"dpbf16 z23,z7,z15", vdpbf16ps(23, 7, 15), "BYTE $0x62; BYTE $0xC2; BYTE $0x46; BYTE $0x48; BYTE $0x52; BYTE $0xFF"},
		{"dpbf16 z0,z30,z9", vdpbf16ps(0, 30, 9), "BYTE $0x62; BYTE $0xD2; BYTE $0x0E; BYTE $0x40; BYTE $0x52; BYTE $0xC1"},
		{"cvtne2 z1,z2,z3", vcvtne2ps2bf16(1, 2, 3), "BYTE $0x62; BYTE $0xF2; BYTE $0x6F; BYTE $0x48; BYTE $0x72; BYTE $0xCB"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Contains(t, tt.got, "\t"+tt.want+" // ")
		})
	}
}

// TestEVEXRegisterRange checks that a register number outside 0–31 is
// refused rather than encoded into the wrong register.
func TestEVEXRegisterRange(t *testing.T) {
	assert.Panics(t, func() { vdpbf16ps(32, 0, 0) })
	assert.Panics(t, func() { vdpbf16ps(0, -1, 0) })
}
