package ref

import (
	"math"

	"github.com/x/kernels"
)

// RMSNorm: out[R,C] = w[C] * x / sqrt(mean(x²) + eps) per row; out may alias x.
func (Backend) RMSNorm(out, x, w kernels.Buffer, rows, cols int, eps float32) {
	kernels.CheckRMSNorm(out, x, w, rows, cols)
	rmsNorm(out.F32(), x.F32(), w.F32(), rows, cols, eps)
}

// rmsNorm is RMSNorm on host slices.
func rmsNorm(out, x, w []float32, rows, cols int, eps float32) {
	for r := 0; r < rows; r++ {
		row := x[r*cols : (r+1)*cols]
		var ss float64
		for _, v := range row {
			ss += float64(v) * float64(v)
		}
		inv := 1 / math.Sqrt(ss/float64(cols)+float64(eps))
		o := out[r*cols : (r+1)*cols]
		for i, v := range row {
			o[i] = float32(float64(w[i]) * float64(v) * inv)
		}
	}
}
