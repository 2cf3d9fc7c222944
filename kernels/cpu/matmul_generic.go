package cpu

import "github.com/x/kernels"

// The portable matmuls: the same contracts in plain Go, float32
// accumulation, parallel over output blocks. They run where AVX-512 is
// missing (and in tests that force the fallback).

// matMulGeneric: each task widens a block of weight rows and takes dot
// products with every row of x.
func (b *Backend) matMulGeneric(out, x []float32, w kernels.Mat, m int, accumulate bool) {
	n, k := w.Rows, w.Cols
	const rows = 16
	b.parallelForWorker((n+rows-1)/rows, func(wk, lo, hi int) {
		row := b.scratch(wk, k)
		for j := lo * rows; j < min(hi*rows, n); j++ {
			w.Row(row, j)
			for i := 0; i < m; i++ {
				s := dotGeneric(x[i*k:(i+1)*k], row)
				if accumulate {
					s += out[i*n+j]
				}
				out[i*n+j] = s
			}
		}
	})
}

// matMulNNGeneric: each task owns a block of output rows and adds
// dy[i,p]·w[p,:] for every weight row p.
func (b *Backend) matMulNNGeneric(out, dy []float32, w kernels.Mat, m int, accumulate bool) {
	n, k := w.Rows, w.Cols
	const rows = 8
	b.parallelForWorker((m+rows-1)/rows, func(wk, lo, hi int) {
		row := b.scratch(wk, k)
		i0, i1 := lo*rows, min(hi*rows, m)
		if !accumulate {
			clear(out[i0*k : i1*k])
		}
		for p := 0; p < n; p++ {
			w.Row(row, p)
			for i := i0; i < i1; i++ {
				axpyGeneric(out[i*k:(i+1)*k], row, dy[i*n+p])
			}
		}
	})
}

// matMulTNGeneric: each task owns a block of dw rows.
func (b *Backend) matMulTNGeneric(dw, dy, x []float32, m, n, k int) {
	b.parallelFor(n, func(lo, hi int) {
		for j := lo; j < hi; j++ {
			d := dw[j*k : (j+1)*k]
			for i := 0; i < m; i++ {
				axpyGeneric(d, x[i*k:(i+1)*k], dy[i*n+j])
			}
		}
	})
}

// dotGeneric is Σ a[i]·b[i] with four float32 accumulators.
func dotGeneric(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3)
}

// axpyGeneric: y += a·x.
func axpyGeneric(y, x []float32, a float32) {
	x = x[:len(y)]
	for i := range y {
		y[i] += a * x[i]
	}
}
