//go:build amd64

package cpu

// Assembly in simd_backward_amd64.s (AVX-512) and simd_avx2_amd64.s (AVX2
// + FMA). Callers go through the bw* dispatchers below, which check the
// slices (so the assembly never reads or writes outside them), pick the
// instruction set p names, and fall back to the portable twins where the
// assembly does not suit a length.

//go:noescape
func bwDotsAVX512(out, x, rows *float32, stride, n, d int)

//go:noescape
func bwAxpysAVX512(out, coef, rows *float32, stride, n, d int)

//go:noescape
func bwExpSumAVX512(dst, src *float32, n int, sub float32) float32

//go:noescape
func bwMaxAVX512(x *float32, n int) float32

//go:noescape
func bwScaleAVX512(x *float32, n int, s float32)

//go:noescape
func bwSwiGLUAVX512(dgate, dup, dout, gate, up *float32, n int)

//go:noescape
func bwRMSRowAVX512(x, dy, w *float32, n int, sums *float32)

//go:noescape
func bwRMSColsAVX512(dx, dy, x, w, acc *float32, n int, rs, k float32)

//go:noescape
func bwTile64AVX512(out0, out1, x0, x1, kt *float32, n, ldk int)

//go:noescape
func bwRoPERowAVX512(x, cos, sin *float32, half, heads, headDim int)

//go:noescape
func bwAdamWAVX512(param, grad, m, v *float32, n int, c *adamwConsts)

//go:noescape
func bwDotsAVX2(out, x, rows *float32, stride, n, d int)

//go:noescape
func bwAxpysAVX2(out, coef, rows *float32, stride, n, d int)

//go:noescape
func bwExpSumAVX2(dst, src *float32, n int, sub float32) float32

//go:noescape
func bwMaxAVX2(x *float32, n int) float32

//go:noescape
func bwScaleAVX2(x *float32, n int, s float32)

//go:noescape
func bwSwiGLUAVX2(dgate, dup, dout, gate, up *float32, n int)

//go:noescape
func bwRMSRowAVX2(x, dy, w *float32, n int, sums *float32)

//go:noescape
func bwRMSColsAVX2(dx, dy, x, w, acc *float32, n int, rs, k float32)

//go:noescape
func bwTile64AVX2(out0, out1, x0, x1, kt *float32, n, ldk int)

//go:noescape
func bwRoPERowAVX2(x, cos, sin *float32, half, heads, headDim int)

// swigluAVX2: out[n] = silu(gate)·up, n a multiple of 8; out may alias
// gate or up.
//
//go:noescape
func swigluAVX2(out, gate, up *float32, n int)

//go:noescape
func bwAdamWAVX2(param, grad, m, v *float32, n int, c *adamwConsts)

// bwDots is dotsGo, in assembly when d is a multiple of the vector width
// (16 for AVX-512, 8 for AVX2).
func bwDots(p isa, out, x, rows []float32, stride, n, d int) {
	if n <= 0 {
		return
	}
	if d <= 0 {
		clear(out[:n])
		return
	}
	_, _, _ = out[n-1], x[d-1], rows[(n-1)*stride+d-1]
	switch {
	case p == isaAVX512 && d%16 == 0:
		bwDotsAVX512(&out[0], &x[0], &rows[0], stride, n, d)
	case p >= isaAVX2 && d%8 == 0:
		bwDotsAVX2(&out[0], &x[0], &rows[0], stride, n, d)
	default:
		dotsGo(out, x, rows, stride, n, d)
	}
}

// bwAxpys is axpysGo, in assembly when d is a multiple of the vector
// width (16 for AVX-512, 8 for AVX2).
func bwAxpys(p isa, out, coef, rows []float32, stride, n, d int) {
	if n <= 0 || d <= 0 {
		return
	}
	_, _, _ = out[d-1], coef[n-1], rows[(n-1)*stride+d-1]
	switch {
	case p == isaAVX512 && d%16 == 0:
		bwAxpysAVX512(&out[0], &coef[0], &rows[0], stride, n, d)
	case p >= isaAVX2 && d%8 == 0:
		bwAxpysAVX2(&out[0], &coef[0], &rows[0], stride, n, d)
	default:
		axpysGo(out, coef, rows, stride, n, d)
	}
}

// bwExpSum is expSumGo, in assembly on either SIMD path.
func bwExpSum(p isa, dst, src []float32, n int, sub float32) float32 {
	if n <= 0 {
		return 0
	}
	_, _ = dst[n-1], src[n-1]
	switch p {
	case isaAVX512:
		return bwExpSumAVX512(&dst[0], &src[0], n, sub)
	case isaAVX2:
		return bwExpSumAVX2(&dst[0], &src[0], n, sub)
	}
	return expSumGo(dst, src, n, sub)
}

// bwMax is maxGo, in assembly on either SIMD path (AVX2 from 8 elements).
func bwMax(p isa, x []float32) float32 {
	switch {
	case p == isaAVX512 && len(x) > 0:
		return bwMaxAVX512(&x[0], len(x))
	case p == isaAVX2 && len(x) >= 8:
		return bwMaxAVX2(&x[0], len(x))
	}
	return maxGo(x)
}

// bwScale is scaleGo, in assembly on either SIMD path.
func bwScale(p isa, x []float32, s float32) {
	if len(x) == 0 {
		return
	}
	switch p {
	case isaAVX512:
		bwScaleAVX512(&x[0], len(x), s)
	case isaAVX2:
		bwScaleAVX2(&x[0], len(x), s)
	default:
		scaleGo(x, s)
	}
}

// bwSwiGLU is swigluBackwardGo over len(dout) elements, in assembly on
// either SIMD path.
func bwSwiGLU(p isa, dgate, dup, dout, gate, up []float32) {
	n := len(dout)
	if n == 0 {
		return
	}
	_, _, _, _ = dgate[n-1], dup[n-1], gate[n-1], up[n-1]
	switch p {
	case isaAVX512:
		bwSwiGLUAVX512(&dgate[0], &dup[0], &dout[0], &gate[0], &up[0], n)
	case isaAVX2:
		bwSwiGLUAVX2(&dgate[0], &dup[0], &dout[0], &gate[0], &up[0], n)
	default:
		swigluBackwardGo(dgate, dup, dout, gate, up)
	}
}

// bwAdamW is adamwGo over len(param) elements, in assembly on either SIMD
// path.
func bwAdamW(p isa, param, grad, m, v []float32, c *adamwConsts) {
	n := len(param)
	if n == 0 {
		return
	}
	_, _, _ = grad[n-1], m[n-1], v[n-1]
	switch p {
	case isaAVX512:
		bwAdamWAVX512(&param[0], &grad[0], &m[0], &v[0], n, c)
	case isaAVX2:
		bwAdamWAVX2(&param[0], &grad[0], &m[0], &v[0], n, c)
	default:
		adamwGo(param, grad, m, v, c)
	}
}

// bwRMSRow is rmsRowGo over len(x) elements, in assembly on either SIMD
// path.
func bwRMSRow(p isa, x, dy, w []float32) (ss, dot float32) {
	n := len(x)
	if p == isaGeneric || n == 0 {
		return rmsRowGo(x, dy, w)
	}
	_, _ = dy[n-1], w[n-1]
	var sums [2]float32
	if p == isaAVX512 {
		bwRMSRowAVX512(&x[0], &dy[0], &w[0], n, &sums[0])
	} else {
		bwRMSRowAVX2(&x[0], &dy[0], &w[0], n, &sums[0])
	}
	return sums[0], sums[1]
}

// bwRMSCols is rmsColsGo over len(dx) elements, in assembly on either SIMD
// path.
func bwRMSCols(p isa, dx, dy, x, w, acc []float32, rs, k float32) {
	n := len(dx)
	if p == isaGeneric || n == 0 {
		rmsColsGo(dx, dy, x, w, acc, rs, k)
		return
	}
	_, _, _, _ = dy[n-1], x[n-1], w[n-1], acc[n-1]
	if p == isaAVX512 {
		bwRMSColsAVX512(&dx[0], &dy[0], &x[0], &w[0], &acc[0], n, rs, k)
	} else {
		bwRMSColsAVX2(&dx[0], &dy[0], &x[0], &w[0], &acc[0], n, rs, k)
	}
}

// bwTile64 is tile64Go, in assembly on either SIMD path.
func bwTile64(p isa, out0, out1, x0, x1, kt []float32, n, ldk int) {
	if p == isaGeneric || n <= 0 {
		tile64Go(out0, out1, x0, x1, kt, n, ldk)
		return
	}
	_, _, _, _, _ = out0[63], out1[63], x0[n-1], x1[n-1], kt[(n-1)*ldk+63]
	if p == isaAVX512 {
		bwTile64AVX512(&out0[0], &out1[0], &x0[0], &x1[0], &kt[0], n, ldk)
	} else {
		bwTile64AVX2(&out0[0], &out1[0], &x0[0], &x1[0], &kt[0], n, ldk)
	}
}

// bwRoPERow is ropeRowGo, in assembly on either SIMD path.
func bwRoPERow(p isa, x, cos, sin []float32, half, heads, headDim int) {
	if p == isaGeneric || half <= 0 || heads <= 0 {
		ropeRowGo(x, cos, sin, half, heads, headDim)
		return
	}
	_, _, _ = x[(heads-1)*headDim+2*half-1], cos[half-1], sin[half-1]
	if p == isaAVX512 {
		bwRoPERowAVX512(&x[0], &cos[0], &sin[0], half, heads, headDim)
	} else {
		bwRoPERowAVX2(&x[0], &cos[0], &sin[0], half, heads, headDim)
	}
}
