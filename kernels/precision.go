package kernels

import "fmt"

// MatMulPrecision says how a backend's MatMul multiplies its activations x
// by bf16 weights. The default, MatMulExact, is what the conformance
// suite's tolerances hold every backend to; a backend that offers another
// implements MatMulPrecisionSetter.
type MatMulPrecision int

const (
	// MatMulExact multiplies float32 x by the weights widened exactly to
	// float32, accumulating in float32 (the default, every backend's).
	MatMulExact MatMulPrecision = iota
	// MatMulBF16 first rounds x to bf16 (nearest, ties to even), then
	// multiplies: each product of two bf16 values is exact in float32 and
	// the sums are float32, so the one new error is x's rounding, a
	// relative 2⁻⁸ at most per element (half the spacing of bf16's 8-bit
	// significand). This is the arithmetic of llama.cpp's CPU backend for
	// bf16 weights and of PyTorch's
	// torch.set_float32_matmul_precision("medium"). It applies to MatMul
	// with bf16 weights only (f32 and f16 weights stay exact, as do
	// MatMulNN and MatMulTN, so gradients are unaffected) and suits
	// inference and rollout generation; log-probs computed with it differ
	// from exact ones by the rounding of every linear layer's input. A
	// backend documents where it runs faster (kernels/cpu: VDPBF16PS on
	// AVX512_BF16) and any further difference (kernels/cpu: VDPBF16PS
	// flushes denormal factors and sums).
	MatMulBF16
)

// String names the precision as command lines spell it: "exact" or
// "bf16".
func (p MatMulPrecision) String() string {
	switch p {
	case MatMulExact:
		return "exact"
	case MatMulBF16:
		return "bf16"
	}
	return fmt.Sprintf("MatMulPrecision(%d)", int(p))
}

// Valid reports whether p is one of the named precisions.
func (p MatMulPrecision) Valid() bool { return p == MatMulExact || p == MatMulBF16 }

// ParseMatMulPrecision reads "exact" or "bf16" (String's names).
func ParseMatMulPrecision(s string) (MatMulPrecision, error) {
	for _, p := range []MatMulPrecision{MatMulExact, MatMulBF16} {
		if s == p.String() {
			return p, nil
		}
	}
	return 0, fmt.Errorf("matmul precision %q: want exact or bf16", s)
}

// MatMulPrecisionSetter is the optional interface of a Backend whose MatMul
// precision can be changed (kernels/cpu's Backend implements it). The
// precision is the backend's state, not a call's: it applies to every
// later MatMul until set again, so the one goroutine that uses the backend
// sets it around the calls it is meant for. A Backend without it runs
// MatMulExact only.
type MatMulPrecisionSetter interface {
	// SetMatMulPrecision sets how later MatMul calls with bf16 weights
	// treat their activations; a precision the backend does not support
	// is an error and leaves the setting unchanged.
	SetMatMulPrecision(MatMulPrecision) error
	// MatMulPrecision is the precision SetMatMulPrecision last set
	// (MatMulExact before any).
	MatMulPrecision() MatMulPrecision
}
