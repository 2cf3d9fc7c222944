package cpu

import "math"

// RMSNormBackward computes dx[R,C] (=) and dw[C] (+=) of
// y = w·x/sqrt(mean(x²)+eps); see ref.Backend.RMSNormBackward for the
// formula. Pass 1, parallel over rows, sums x² and w·dy·x of each row in
// float64. Pass 2, parallel over column blocks, writes dx and sums dw over
// the rows in order, in float64: every column's sum has the same order
// whatever the blocks, so the result does not depend on the thread count,
// and no two tasks write the same dw. Element (r, i) is read before dx(r, i)
// is written, so dx may alias dout or x.
func (b *Backend) RMSNormBackward(dx, dw, dout, x, w []float32, rows, cols int, eps float32) {
	const op = "RMSNormBackward"
	needDims(op, rows, cols)
	n := rows * cols
	need(op, "dx", len(dx), n)
	need(op, "dout", len(dout), n)
	need(op, "x", len(x), n)
	need(op, "w", len(w), cols)
	need(op, "dw", len(dw), cols)
	if n == 0 {
		return
	}
	w = w[:cols]
	rstd := make([]float32, 2*rows) // [R, 2]: 1/rms and the dx correction factor
	rowSums := func(lo, hi int) {
		for r := lo; r < hi; r++ {
			xr := x[r*cols : (r+1)*cols]
			dy := dout[r*cols : (r+1)*cols]
			var ss, dot float64
			for i, v := range xr {
				ss += float64(v * v)
				dot += float64(w[i] * dy[i] * v)
			}
			rs := 1 / math.Sqrt(ss/float64(cols)+float64(eps))
			rstd[2*r] = float32(rs)
			rstd[2*r+1] = float32(dot * rs * rs * rs / float64(cols))
		}
	}
	blk := min(256, max(16, (cols+4*b.threads-1)/(4*b.threads)))
	columns := func(lo, hi int) {
		var acc [256]float64
		for bi := lo; bi < hi; bi++ {
			c0 := bi * blk
			c1 := min(cols, c0+blk)
			a := acc[:c1-c0]
			clear(a)
			wb := w[c0:c1]
			for r := range rows {
				rs, k := rstd[2*r], rstd[2*r+1]
				xr := x[r*cols+c0 : r*cols+c1]
				dy := dout[r*cols+c0 : r*cols+c1]
				out := dx[r*cols+c0 : r*cols+c1]
				for i := range a {
					xi, dyi := xr[i], dy[i]
					a[i] += float64(dyi * xi * rs)
					out[i] = rs*wb[i]*dyi - xi*k
				}
			}
			for i, v := range a {
				dw[c0+i] += float32(v)
			}
		}
	}
	nblk := (cols + blk - 1) / blk
	if n < 1<<14 {
		rowSums(0, rows)
		columns(0, nblk)
		return
	}
	b.parallelFor(rows, rowSums)
	b.parallelFor(nblk, columns)
}
