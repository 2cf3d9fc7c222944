package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/kernels"
	"github.com/x/kernels/kerneltest"
	"github.com/x/kernels/ref"
)

// precisionPaths are the SIMD paths kernels.MatMulBF16 runs on: every forced path
// of simdPaths, and the AVX-512 path with VDPBF16PS where the CPU has
// AVX512_BF16.
func precisionPaths() []simdPath {
	ps := simdPaths()
	bf := simdPath{name: "avx512", label: "avx512bf16", f: features{avx512: true, avx2: true, avx512bf16: true}}
	if have := detect(); !have.avx512 || !have.avx512bf16 {
		bf.missing = "this CPU lacks AVX-512 F/BW/VL/DQ with AVX512_BF16 (or GODEBUG turned one off)"
	}
	return append(ps[:1:1], append([]simdPath{bf}, ps[1:]...)...)
}

// precisionShapes are MatMul (M, N, K) shapes for kernels.MatMulBF16: every M
// regime (1: matVec; 2–15: direct; ≥ 16: packed, with a row block past
// mbNT), K below, at and past SIMD widths and pairs (odd K included), N
// across register and task blocks.
func precisionShapes() [][3]int {
	return [][3]int{
		{1, 1, 1}, {1, 37, 19}, {1, 67, 544}, {2, 3, 2}, {3, 5, 33}, {7, 9, 95}, {8, 70, 256},
		{13, 130, 64}, {15, 4, 1056}, {16, 64, 64}, {17, 70, 129}, {33, 200, 1024}, {64, 48, 256},
		{130, 66, 200}, {247, 67, 96},
	}
}

// roundBF16 is x with every element rounded to bf16 (nearest, ties to
// even) and widened back: what kernels.MatMulBF16 multiplies.
func roundBF16(x []float32) []float32 {
	r := make([]float32, len(x))
	for i, v := range x {
		r[i] = kernels.BF16ToF32(kernels.F32ToBF16(v))
	}
	return r
}

// TestMatMulPrecisionBF16 checks kernels.MatMulBF16 on every path, both thread
// counts and both accumulate modes: for bf16 weights the result must equal
// the reference MatMul of x rounded to bf16 within MatMul's own tolerance
// (the products of bf16 values are exact in float32, so only the float32
// summation differs, as on the exact path), and lie within the rounding's
// bound of the exact product, |Δ| ≤ 2⁻⁸·Σ|x||w|; for f32 and f16 weights
// the result is the exact MatMul's.
func TestMatMulPrecisionBF16(t *testing.T) {
	tol := kerneltest.Tolerance("MatMul")
	cases := precisionCases(tol)
	for _, p := range precisionPaths() {
		t.Run(p.testName(), func(t *testing.T) {
			if p.missing != "" {
				t.Skipf("%s path not run: %s", p.testName(), p.missing)
			}
			for _, threads := range []int{2, 1} {
				b := pathBackend(t, p, threads)
				require.NoError(t, b.SetMatMulPrecision(kernels.MatMulBF16))
				for _, c := range cases {
					t.Run(fmt.Sprintf("threads%d/%s", threads, c.name), func(t *testing.T) {
						got := append([]float32(nil), c.init...)
						b.MatMul(kernels.HostF32(got), kernels.HostF32(c.x), c.w, c.m, c.acc)
						kerneltest.CheckClose(t, "out vs reference on rounded x", got, c.want, tol)
						for i, bound := range c.bound {
							d := math.Abs(float64(got[i]) - float64(c.exact[i]))
							if !assert.LessOrEqualf(t, d, bound, "out[%d] off the exact product by more than bf16 rounding of x allows", i) {
								return
							}
						}
					})
				}
			}
		})
	}
}

// precisionCase is one MatMul of TestMatMulPrecisionBF16 with its
// expected results, computed once for every path.
type precisionCase struct {
	name    string
	m       int
	acc     bool
	x, init []float32
	w       kernels.Mat
	want    []float32 // reference MatMul of x rounded to bf16 (of x itself for f32/f16 weights)
	exact   []float32 // reference MatMul of x (bf16 weights only)
	bound   []float64 // per output: 2⁻⁸·Σ|x||w| + tol (bf16 weights only)
}

// precisionCases builds every shape × weight dtype × accumulate case.
func precisionCases(tol kerneltest.Tol) []precisionCase {
	var r ref.Backend
	var cases []precisionCase
	for _, s := range precisionShapes() {
		m, n, k := s[0], s[1], s[2]
		for _, dt := range []kernels.DType{kernels.BF16, kernels.F32, kernels.F16} {
			for _, acc := range []bool{false, true} {
				rng := rand.New(rand.NewPCG(uint64(m*1000003+n*1009+k), uint64(dt)))
				c := precisionCase{name: fmt.Sprintf("M%d_N%d_K%d_%s_acc%v", m, n, k, dt, acc), m: m, acc: acc}
				c.x = uniformF32(rng, m*k, 1/math.Sqrt(float64(k)))
				c.w = randomMat(rng, dt, n, k)
				c.init = uniformF32(rng, m*n, 1)
				xr := c.x
				if dt == kernels.BF16 {
					xr = roundBF16(c.x)
				}
				c.want = append([]float32(nil), c.init...)
				r.MatMul(kernels.HostF32(c.want), kernels.HostF32(xr), c.w, m, acc)
				if dt == kernels.BF16 {
					c.exact = append([]float32(nil), c.init...)
					r.MatMul(kernels.HostF32(c.exact), kernels.HostF32(c.x), c.w, m, acc)
					c.bound = make([]float64, m*n)
					for i := range m {
						for j := range n {
							var sum float64
							for q := range k {
								sum += math.Abs(float64(c.x[i*k+q]) * float64(c.w.At(j, q)))
							}
							c.bound[i*n+j] = math.Ldexp(sum, -8) + tol.ATol + tol.RTol*math.Abs(float64(c.exact[i*n+j]))
						}
					}
				}
				cases = append(cases, c)
			}
		}
	}
	return cases
}

// TestMatMulPrecisionRounds checks that kernels.MatMulBF16 really rounds: on a
// shape where rounding x moves the product by far more than MatMul's
// tolerance, the exact and bf16 results differ, and setting the
// precision back to kernels.MatMulExact restores the exact result bit for bit.
func TestMatMulPrecisionRounds(t *testing.T) {
	b := New(2)
	t.Cleanup(b.Close)
	rng := rand.New(rand.NewPCG(7, 8))
	m, n, k := 20, 40, 512
	x := uniformF32(rng, m*k, 1/math.Sqrt(float64(k)))
	w := randomMat(rng, kernels.BF16, n, k)
	exact := make([]float32, m*n)
	b.MatMul(kernels.HostF32(exact), kernels.HostF32(x), w, m, false)
	require.NoError(t, b.SetMatMulPrecision(kernels.MatMulBF16))
	assert.Equal(t, kernels.MatMulBF16, b.MatMulPrecision())
	rounded := make([]float32, m*n)
	b.MatMul(kernels.HostF32(rounded), kernels.HostF32(x), w, m, false)
	var maxd float64
	for i := range exact {
		maxd = math.Max(maxd, math.Abs(float64(exact[i]-rounded[i])))
	}
	assert.Greater(t, maxd, 1e-4, "kernels.MatMulBF16 left x unrounded")
	require.NoError(t, b.SetMatMulPrecision(kernels.MatMulExact))
	again := make([]float32, m*n)
	b.MatMul(kernels.HostF32(again), kernels.HostF32(x), w, m, false)
	assert.Equal(t, exact, again)
}

// TestSetMatMulPrecisionRefuses checks that an unknown precision is an
// error that leaves the setting unchanged.
func TestSetMatMulPrecisionRefuses(t *testing.T) {
	b := New(1)
	t.Cleanup(b.Close)
	require.NoError(t, b.SetMatMulPrecision(kernels.MatMulBF16))
	assert.EqualError(t, b.SetMatMulPrecision(kernels.MatMulPrecision(5)), "kernels/cpu: SetMatMulPrecision: unknown precision 5")
	assert.Equal(t, kernels.MatMulBF16, b.MatMulPrecision())
}

// uniformF32 is n values uniform in [−scale, scale).
func uniformF32(rng *rand.Rand, n int, scale float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32((2*rng.Float64() - 1) * scale)
	}
	return v
}

// randomMat is a rows×cols weight of dtype dt with values uniform in
// [−1, 1), rounded to dt.
func randomMat(rng *rand.Rand, dt kernels.DType, rows, cols int) kernels.Mat {
	return matAs(dt, uniformF32(rng, rows*cols, 1), rows, cols)
}

// matAs is the rows×cols weight v stored as dtype dt (each value rounded
// to nearest, ties to even).
func matAs(dt kernels.DType, v []float32, rows, cols int) kernels.Mat {
	to := map[kernels.DType]func(float32) uint16{kernels.BF16: kernels.F32ToBF16, kernels.F16: kernels.F32ToF16}[dt]
	if to == nil {
		return kernels.MatF32(v, rows, cols)
	}
	h := make([]uint16, len(v))
	for i, f := range v {
		h[i] = to(f)
	}
	if dt == kernels.BF16 {
		return kernels.MatBF16(h, rows, cols)
	}
	return kernels.MatF16(h, rows, cols)
}

// TestBF16Rows checks the bf16 layout the VDPBF16PS kernels read: each
// element rounded as kernels.F32ToBF16 rounds it, rows padded to an even
// length with a zero.
func TestBF16Rows(t *testing.T) {
	b := New(1)
	t.Cleanup(b.Close)
	tests := []struct {
		name   string
		m, k   int
		wantLD int
	}{{"even", 3, 4, 4}, {"odd", 2, 5, 6}, {"one", 1, 1, 2}, {"empty", 0, 3, 4}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x := uniformF32(rand.New(rand.NewPCG(1, uint64(tt.k))), tt.m*tt.k, 3)
			h, ld := b.bf16Rows(x, tt.m, tt.k)
			require.Equal(t, tt.wantLD, ld)
			require.Len(t, h, tt.m*ld)
			for i := range tt.m {
				for c := range ld {
					want := uint16(0)
					if c < tt.k {
						want = kernels.F32ToBF16(x[i*tt.k+c])
					}
					assert.Equalf(t, want, h[i*ld+c], "row %d column %d", i, c)
				}
			}
		})
	}
}

// TestMatMulBF16Specials checks kernels.MatMulBF16's documented handling of
// denormals, infinities and NaNs on every path (matVec, the direct and
// the packed VDPBF16PS paths, the exact kernels over rounded x): x rows of
// denormals (2⁻¹²⁷) against a weight row of 2¹²⁰, a +Inf met by weights
// of 0 (NaN) and of either sign (±Inf), a NaN, and ordinary rows. NaN and
// ±Inf outputs must be the reference's on x rounded to bf16; finite ones
// within MatMul's tolerance plus the documented flush-to-zero allowance,
// 2⁻¹²⁶·(|x| + |w| + 1) per term: VDPBF16PS treats a denormal factor as
// 0, which loses that factor times the other one (here 2⁻¹²⁷·2¹²⁰ per
// term, far above 2⁻¹²⁶), and flushes denormal sums.
func TestMatMulBF16Specials(t *testing.T) {
	var r ref.Backend
	tol := kerneltest.Tolerance("MatMul")
	denormal := math.Float32frombits(0x00400000) // 2⁻¹²⁷, a bf16 value
	for _, p := range precisionPaths() {
		t.Run(p.testName(), func(t *testing.T) {
			if p.missing != "" {
				t.Skipf("%s path not run: %s", p.testName(), p.missing)
			}
			b := pathBackend(t, p, 2)
			require.NoError(t, b.SetMatMulPrecision(kernels.MatMulBF16))
			for _, s := range [][3]int{{1, 19, 64}, {4, 19, 64}, {5, 16, 70}, {32, 19, 64}, {33, 16, 70}} {
				m, n, k := s[0], s[1], s[2]
				t.Run(fmt.Sprintf("M%d_N%d_K%d", m, n, k), func(t *testing.T) {
					rng := rand.New(rand.NewPCG(uint64(m), uint64(n*k)))
					wv := make([]float32, n*k)
					for q := range k {
						wv[q] = 0x1p120 // row 0
						if q != 3 {
							wv[k+q] = 1 // row 1: 0 where x has its +Inf
						}
					}
					copy(wv[2*k:], uniformF32(rng, (n-2)*k, 1))
					wh := make([]uint16, n*k)
					for i, v := range wv {
						wh[i] = kernels.F32ToBF16(v)
					}
					w := kernels.MatBF16(wh, n, k)
					x := make([]float32, m*k)
					for i := range m {
						row := x[i*k : (i+1)*k]
						switch i % 4 {
						case 0:
							for q := range row {
								row[q] = denormal
							}
						case 1:
							row[3] = float32(math.Inf(1))
						case 2:
							copy(row, uniformF32(rng, k, 1))
							row[5] = float32(math.NaN())
						case 3:
							for q := range row {
								row[q] = float32(rng.Float64()) // ≥ 0: no cancellation against row 0's 2¹²⁰
							}
						}
					}
					want := make([]float32, m*n)
					r.MatMul(kernels.HostF32(want), kernels.HostF32(roundBF16(x)), w, m, false)
					got := make([]float32, m*n)
					b.MatMul(kernels.HostF32(got), kernels.HostF32(x), w, m, false)
					for i := range m {
						for j := range n {
							g, e := float64(got[i*n+j]), float64(want[i*n+j])
							switch {
							case math.IsNaN(e):
								assert.Truef(t, math.IsNaN(g), "out[%d, %d] = %v, want NaN", i, j, g)
							case math.IsInf(e, 0):
								assert.Equalf(t, e, g, "out[%d, %d]", i, j)
							default:
								var flush float64
								for q := range k {
									flush += math.Abs(float64(x[i*k+q])) + math.Abs(float64(w.At(j, q))) + 1
								}
								bound := tol.ATol + tol.RTol*math.Abs(e) + math.Ldexp(flush, -126)
								assert.LessOrEqualf(t, math.Abs(g-e), bound, "out[%d, %d] = %v, want %v", i, j, g, e)
							}
						}
					}
				})
			}
		})
	}
}

// TestBF16Dot checks which forced paths report VDPBF16PS: only AVX-512
// with AVX512_BF16.
func TestBF16Dot(t *testing.T) {
	tests := []struct {
		name string
		f    features
		want bool
	}{
		{"avx512+bf16", features{avx512: true, avx2: true, avx512bf16: true}, true},
		{"avx512", features{avx512: true, avx2: true}, false},
		{"avx2", features{avx2: true}, false},
		{"bf16 flag without avx512", features{avx2: true, avx512bf16: true}, false},
		{"generic", features{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := &Backend{simd: tt.f}
			assert.Equal(t, tt.want, b.BF16Dot())
		})
	}
}
