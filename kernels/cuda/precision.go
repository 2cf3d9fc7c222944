package cuda

import (
	"fmt"

	"github.com/x/kernels"
)

// Device implements kernels.MatMulPrecisionSetter: MatMul with bf16
// weights runs matmul.cu's exact kernels (x3: each f32 activation split
// into three bf16 terms, the products an f32 GEMM's) or, at
// kernels.MatMulBF16, its x1 kernels (each activation rounded to bf16
// once, PyTorch's arithmetic with bf16 activations, a third of the
// tensor-core work). Both are batch-invariant. MatMulNN and MatMulTN
// (gradients) and f32/f16 weights stay exact.
var _ kernels.MatMulPrecisionSetter = (*Device)(nil)

// SetMatMulPrecision sets the precision of later MatMul calls with bf16
// weights on this Device (a stream of NewStream has its own setting).
func (d *Device) SetMatMulPrecision(p kernels.MatMulPrecision) error {
	if !p.Valid() {
		return fmt.Errorf("kernels/cuda: SetMatMulPrecision: unknown precision %d", int(p))
	}
	d.prec = p
	return nil
}

// MatMulPrecision is the precision SetMatMulPrecision last set.
func (d *Device) MatMulPrecision() kernels.MatMulPrecision { return d.prec }

// gemmTerms is the activation terms of MatMul's bf16 kernels at p.
func gemmTerms(p kernels.MatMulPrecision) int {
	if p == kernels.MatMulBF16 {
		return termsBF16
	}
	return termsExact
}
