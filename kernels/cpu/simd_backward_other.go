//go:build !amd64

package cpu

// Without amd64 assembly the dispatchers always take the portable twins;
// p is isaGeneric on these architectures anyway (see detect).

func bwDots(_ isa, out, x, rows []float32, stride, n, d int) {
	if n <= 0 {
		return
	}
	if d <= 0 {
		clear(out[:n])
		return
	}
	dotsGo(out, x, rows, stride, n, d)
}

func bwAxpys(_ isa, out, coef, rows []float32, stride, n, d int) {
	if n > 0 && d > 0 {
		axpysGo(out, coef, rows, stride, n, d)
	}
}

func bwExpSum(_ isa, dst, src []float32, n int, sub float32) float32 {
	return expSumGo(dst, src, n, sub)
}

func bwMax(_ isa, x []float32) float32 { return maxGo(x) }

func bwScale(_ isa, x []float32, s float32) { scaleGo(x, s) }

func bwSwiGLU(_ isa, dgate, dup, dout, gate, up []float32) {
	swigluBackwardGo(dgate, dup, dout, gate, up)
}

func bwAdamW(_ isa, param, grad, m, v []float32, c *adamwConsts) {
	adamwGo(param, grad, m, v, c)
}

func bwRMSRow(_ isa, x, dy, w []float32) (ss, dot float32) { return rmsRowGo(x, dy, w) }

func bwRMSCols(_ isa, dx, dy, x, w, acc []float32, rs, k float32) {
	rmsColsGo(dx, dy, x, w, acc, rs, k)
}

func bwTile64(_ isa, out0, out1, x0, x1, kt []float32, n, ldk int) {
	tile64Go(out0, out1, x0, x1, kt, n, ldk)
}

func bwRoPERow(_ isa, x, cos, sin []float32, half, heads, headDim int) {
	ropeRowGo(x, cos, sin, half, heads, headDim)
}
