package cpu

import (
	"math"

	"github.com/x/kernels"
)

// RMSNorm: out[R,C] = w[C]·x/√(mean(x²)+eps) per row; out may alias x. Rows
// are split over the workers when there are enough of them.
func (b *Backend) RMSNorm(out, x, w kernels.Buffer, rows, cols int, eps float32) {
	kernels.CheckRMSNorm(out, x, w, rows, cols)
	b.rmsNorm(out.F32(), x.F32(), w.F32(), rows, cols, eps)
}

// rmsNorm is RMSNorm on host slices.
func (b *Backend) rmsNorm(out, x, w []float32, rows, cols int, eps float32) {
	if rows == 0 || cols == 0 {
		return
	}
	run := func(lo, hi int) {
		for r := lo; r < hi; r++ {
			rmsNormRow(out[r*cols:(r+1)*cols], x[r*cols:(r+1)*cols], w, cols, eps)
		}
	}
	if rows*cols <= grain {
		run(0, rows)
		return
	}
	b.parallelFor(rows, run)
}

// rmsNormRow normalises one row: o = w·row/√(mean(row²)+eps).
func rmsNormRow(o, row, w []float32, cols int, eps float32) {
	ss := sumSquares(row)
	inv := float32(1 / math.Sqrt(float64(ss)/float64(cols)+float64(eps)))
	for i, v := range row {
		o[i] = w[i] * (v * inv)
	}
}

// sumSquares is Σ x² with eight float32 accumulators.
func sumSquares(x []float32) float32 {
	var s [8]float32
	i := 0
	for ; i+8 <= len(x); i += 8 {
		v := x[i : i+8 : i+8]
		s[0] += v[0] * v[0]
		s[1] += v[1] * v[1]
		s[2] += v[2] * v[2]
		s[3] += v[3] * v[3]
		s[4] += v[4] * v[4]
		s[5] += v[5] * v[5]
		s[6] += v[6] * v[6]
		s[7] += v[7] * v[7]
	}
	for ; i < len(x); i++ {
		s[0] += x[i] * x[i]
	}
	return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]))
}
