package ref

import "github.com/x/kernels"

// MatMul: out[M,N] (=, or += if accumulate) x[M,K] · wᵀ with w [N,K].
func (Backend) MatMul(out, x kernels.Buffer, w kernels.Mat, m int, accumulate bool) {
	kernels.CheckMatMul(out, x, w, m)
	matMul(out.F32(), x.F32(), w, m, accumulate)
}

// matMul is MatMul on host slices.
func matMul(out, x []float32, w kernels.Mat, m int, accumulate bool) {
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
func (Backend) MatMulNN(out, dy kernels.Buffer, w kernels.Mat, m int, accumulate bool) {
	kernels.CheckMatMulNN(out, dy, w, m)
	matMulNN(out.F32(), dy.F32(), w, m, accumulate)
}

// matMulNN is MatMulNN on host slices.
func matMulNN(out, dy []float32, w kernels.Mat, m int, accumulate bool) {
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
func (Backend) MatMulTN(dw, dy, x kernels.Buffer, m, n, k int) {
	kernels.CheckMatMulTN(dw, dy, x, m, n, k)
	matMulTN(dw.F32(), dy.F32(), x.F32(), m, n, k)
}

// matMulTN is MatMulTN on host slices.
func matMulTN(dw, dy, x []float32, m, n, k int) {
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
