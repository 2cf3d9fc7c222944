package ref

import (
	"math"

	"github.com/x/kernels"
)

// Softmax replaces each row of x[R,V] by its softmax, in float64.
func (Backend) Softmax(x kernels.Buffer, rows, v int) {
	kernels.CheckSoftmax(x, rows, v)
	softmax(x.F32(), rows, v)
}

// softmax is Softmax on host slices.
func softmax(x []float32, rows, v int) {
	for r := 0; r < rows; r++ {
		row := x[r*v : (r+1)*v]
		mx := math.Inf(-1)
		for _, a := range row {
			mx = math.Max(mx, float64(a))
		}
		var sum float64
		for _, a := range row {
			sum += math.Exp(float64(a) - mx)
		}
		for i, a := range row {
			row[i] = float32(math.Exp(float64(a)-mx) / sum)
		}
	}
}
