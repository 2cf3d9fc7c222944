//go:build cudahost || cuda

package cuda

// gemmPrecision is how MatMul multiplies float32 activations by bf16
// weights (matmul.cu: x3 or x1): the zero value is exact, the activation
// split into three bf16 terms so the products are an f32 GEMM's; bf16
// rounds each activation to bf16 once (PyTorch's arithmetic with bf16
// activations, a third of the tensor-core work), whose reference is
// kernels/ref on the rounded activations under MatMul's own tolerance, as
// kernels/cpu's MatMulBF16. MatMulNN and MatMulTN (gradients) and f32/f16
// weights are always exact.
type gemmPrecision struct {
	bf16 bool
}

// terms is the activation terms of MatMul's bf16 kernels.
func (p gemmPrecision) terms() int {
	if p.bf16 {
		return termsBF16
	}
	return termsExact
}
