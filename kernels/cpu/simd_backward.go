package cpu

import "math"

// Portable twins of the AVX-512 helpers in simd_backward_amd64.s. Each is
// the definition of its assembly version (same arguments, as slices) and
// the path taken without AVX-512 or when a length does not suit the
// assembly; the dispatchers bw* in simd_backward_amd64.go and
// simd_backward_other.go choose between them.

// dotsGo sets out[j] = Σ_{i<d} x[i]·rows[j·stride+i] for j < n.
func dotsGo(out, x, rows []float32, stride, n, d int) {
	x = x[:d]
	for j := range n {
		r := rows[j*stride : j*stride+d]
		var s0, s1, s2, s3 float32
		i := 0
		for ; i+4 <= d; i += 4 {
			s0 += x[i] * r[i]
			s1 += x[i+1] * r[i+1]
			s2 += x[i+2] * r[i+2]
			s3 += x[i+3] * r[i+3]
		}
		for ; i < d; i++ {
			s0 += x[i] * r[i]
		}
		out[j] = (s0 + s1) + (s2 + s3)
	}
}

// axpysGo adds Σ_{j<n} coef[j]·rows[j·stride : j·stride+d] to out[d], in
// order of j.
func axpysGo(out, coef, rows []float32, stride, n, d int) {
	out = out[:d]
	for j := range n {
		c := coef[j]
		r := rows[j*stride : j*stride+d]
		for i := range out {
			out[i] += c * r[i]
		}
	}
}

// expSumGo sets dst[i] = exp(src[i] − sub) for i < n and returns their sum.
// dst may equal src.
func expSumGo(dst, src []float32, n int, sub float32) float32 {
	var s float64
	for i := range n {
		e := float32(math.Exp(float64(src[i] - sub)))
		dst[i] = e
		s += float64(e)
	}
	return float32(s)
}

// maxGo returns the largest of x, −Inf if x is empty.
func maxGo(x []float32) float32 {
	m := float32(math.Inf(-1))
	for _, v := range x {
		if v > m {
			m = v
		}
	}
	return m
}

// scaleGo multiplies x by s.
func scaleGo(x []float32, s float32) {
	for i := range x {
		x[i] *= s
	}
}

// swigluBackwardGo is SwiGLUBackward on one chunk: with s = σ(g),
// dup = dout·g·s and dgate = dout·up·s·(1 + g·(1−s)). Element i is read
// before it is written.
func swigluBackwardGo(dgate, dup, dout, gate, up []float32) {
	for i := range dout {
		g, u, d := gate[i], up[i], dout[i]
		s := float32(1 / (1 + math.Exp(-float64(g))))
		dgate[i] = d * u * s * (1 + g*(1-s))
		dup[i] = d * g * s
	}
}

// adamwConsts are the per-step scalars of an AdamW update, laid out as the
// assembly reads them.
type adamwConsts struct {
	beta1, oneMinusBeta1 float32
	beta2, oneMinusBeta2 float32
	decay                float32 // 1 − lr·wd
	stepSize             float32 // lr / (1 − β1^step)
	invSqrtBC2           float32 // 1 / sqrt(1 − β2^step)
	eps                  float32
}

// adamwGo is one AdamW step over a chunk, in float32, as bwAdamWAVX512.
func adamwGo(param, grad, m, v []float32, c *adamwConsts) {
	for i := range param {
		g := grad[i]
		mi := c.beta1*m[i] + c.oneMinusBeta1*g
		vi := c.beta2*v[i] + c.oneMinusBeta2*(g*g)
		denom := float32(math.Sqrt(float64(vi)))*c.invSqrtBC2 + c.eps
		param[i] = param[i]*c.decay - c.stepSize*(mi/denom)
		m[i], v[i] = mi, vi
	}
}

// rmsRowGo returns Σ x² and Σ w·dy·x of one row.
func rmsRowGo(x, dy, w []float32) (ss, dot float32) {
	dy, w = dy[:len(x)], w[:len(x)]
	for i, v := range x {
		ss += v * v
		dot += w[i] * dy[i] * v
	}
	return ss, dot
}

// rmsColsGo does, for one row, acc[i] += rs·dy[i]·x[i] and
// dx[i] = rs·dy[i]·w[i] − k·x[i]; element i is read before dx[i] is written.
func rmsColsGo(dx, dy, x, w, acc []float32, rs, k float32) {
	dy, x, w, acc = dy[:len(dx)], x[:len(dx)], w[:len(dx)], acc[:len(dx)]
	for i := range dx {
		g := rs * dy[i]
		xi := x[i]
		acc[i] += g * xi
		dx[i] = g*w[i] - k*xi
	}
}

// tile64Go sets out0[j] = Σ_{i<n} x0[i]·kt[i·ldk+j] and out1[j] likewise
// from x1, for j < 64: two rows of a score tile against a transposed block
// of 64 keys. out0 may equal out1 when x0 equals x1.
func tile64Go(out0, out1, x0, x1, kt []float32, n, ldk int) {
	var a0, a1 [64]float32
	for i := range n {
		c0, c1 := x0[i], x1[i]
		row := kt[i*ldk : i*ldk+64]
		for j, k := range row {
			a0[j] += c0 * k
			a1[j] += c1 * k
		}
	}
	copy(out0[:64], a0[:])
	copy(out1[:64], a1[:])
}

// ropeRowGo applies RoPE's inverse rotation to the heads of one token,
// x[heads, headDim]: (x[i], x[i+half]) → (x[i]·cos[i] + x[i+half]·sin[i],
// x[i+half]·cos[i] − x[i]·sin[i]) for i < half.
func ropeRowGo(x, cos, sin []float32, half, heads, headDim int) {
	cos, sin = cos[:half], sin[:half]
	for h := range heads {
		lo := x[h*headDim : h*headDim+half]
		hi := x[h*headDim+half : h*headDim+2*half]
		for i := range lo {
			a, b := lo[i], hi[i]
			lo[i] = a*cos[i] + b*sin[i]
			hi[i] = b*cos[i] - a*sin[i]
		}
	}
}
