package cpu

import "golang.org/x/sys/cpu"

// features records which SIMD paths a Backend may use. Tests force a path
// by setting a Backend's features (see simdPaths in simd_test.go); a user
// forces one with GODEBUG (see Backend.SIMD).
type features struct {
	avx512 bool // AVX-512 F/BW/VL/DQ kernels (f32 FMA, bf16 and f16 widening)
	avx2   bool // AVX2 + FMA + F16C kernels

	// avx512bf16: VDPBF16PS may run kernels.MatMulBF16's products (with avx512).
	avx512bf16 bool
}

// detect reads the CPU's features (golang.org/x/sys/cpu, which honours
// GODEBUG=cpu.avx512f=off, cpu.avx2=off and cpu.avx512bf16=off).
func detect() features {
	return features{
		avx512: cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW && cpu.X86.HasAVX512VL && cpu.X86.HasAVX512DQ,
		avx2:   cpu.X86.HasAVX2 && cpu.X86.HasFMA && cpu.X86.HasF16C,

		avx512bf16: cpu.X86.HasAVX512F && cpu.X86.HasAVX512BF16,
	}
}

// isa is the instruction set one call of a SIMD helper (the bw*
// dispatchers) runs on.
type isa uint8

const (
	isaGeneric isa = iota // portable Go
	isaAVX2               // AVX2 + FMA, 8 lanes
	isaAVX512             // AVX-512, 16 lanes
)

// isa is the best instruction set of f.
func (f features) isa() isa {
	switch {
	case f.avx512:
		return isaAVX512
	case f.avx2:
		return isaAVX2
	}
	return isaGeneric
}

// String names the instruction set as Backend.SIMD does.
func (s isa) String() string {
	switch s {
	case isaAVX512:
		return "avx512"
	case isaAVX2:
		return "avx2"
	}
	return "generic"
}
