package ref

import (
	"math"

	"github.com/x/kernels"
)

// RMSNormBackward computes dx[R,C] (=) and dw[C] (+=) for
// y = w·x·r, r = 1/sqrt(mean(x²)+eps), per row:
//
//	dx_i = r·w_i·dy_i − x_i·r³/C·Σ_j w_j·dy_j·x_j
//	dw_i += dy_i·x_i·r
//
// Every sum is accumulated in float64. dx may alias dout.
func (Backend) RMSNormBackward(dx, dw, dout, x, w kernels.Buffer, rows, cols int, eps float32) {
	kernels.CheckRMSNormBackward(dx, dw, dout, x, w, rows, cols)
	rmsNormBackward(dx.F32(), dw.F32(), dout.F32(), x.F32(), w.F32(), rows, cols, eps)
}

// rmsNormBackward is RMSNormBackward on host slices.
func rmsNormBackward(dx, dw, dout, x, w []float32, rows, cols int, eps float32) {
	dwAcc := make([]float64, cols)
	for r := range rows {
		xr := x[r*cols : (r+1)*cols]
		dy := dout[r*cols : (r+1)*cols]
		var ss, dot float64
		for i, v := range xr {
			ss += float64(v) * float64(v)
			dot += float64(w[i]) * float64(dy[i]) * float64(v)
		}
		rstd := 1 / math.Sqrt(ss/float64(cols)+float64(eps))
		k := dot * rstd * rstd * rstd / float64(cols)
		dxr := dx[r*cols : (r+1)*cols]
		for i := range cols {
			xi, dyi := float64(xr[i]), float64(dy[i])
			dwAcc[i] += dyi * xi * rstd
			dxr[i] = float32(rstd*float64(w[i])*dyi - xi*k)
		}
	}
	for i, v := range dwAcc {
		dw[i] = float32(float64(dw[i]) + v)
	}
}
