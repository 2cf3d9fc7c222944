package ref

import "github.com/x/kernels"

// MatMul: out[M,N] (=, or += if accumulate) x[M,K] · wᵀ with w [N,K].
func (Backend) MatMul(out, x []float32, w kernels.Mat, m int, accumulate bool) {
	kernels.CheckMatMul(out, x, w, m)
	n, k := w.Rows, w.Cols
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			var s float64
			for p := 0; p < k; p++ {
				s += float64(x[i*k+p]) * float64(w.At(j, p))
			}
			if accumulate {
				s += float64(out[i*n+j])
			}
			out[i*n+j] = float32(s)
		}
	}
}

// MatMulNN: out[M,K] (=, or += if accumulate) dy[M,N] · w[N,K].
func (Backend) MatMulNN(out, dy []float32, w kernels.Mat, m int, accumulate bool) {
	kernels.CheckMatMulNN(out, dy, w, m)
	n, k := w.Rows, w.Cols
	for i := 0; i < m; i++ {
		for p := 0; p < k; p++ {
			var s float64
			for j := 0; j < n; j++ {
				s += float64(dy[i*n+j]) * float64(w.At(j, p))
			}
			if accumulate {
				s += float64(out[i*k+p])
			}
			out[i*k+p] = float32(s)
		}
	}
}

// MatMulTN: dw[N,K] += dy[M,N]ᵀ · x[M,K].
func (Backend) MatMulTN(dw, dy, x []float32, m, n, k int) {
	kernels.CheckMatMulTN(dw, dy, x, m, n, k)
	for j := 0; j < n; j++ {
		for p := 0; p < k; p++ {
			s := float64(dw[j*k+p])
			for i := 0; i < m; i++ {
				s += float64(dy[i*n+j]) * float64(x[i*k+p])
			}
			dw[j*k+p] = float32(s)
		}
	}
}
