package ref_test

// Every backward kernel of the reference is checked against central finite
// differences of an independent float64 forward written here, on tiny
// shapes. The objective is always L = Σ dout∘f(x) with a fixed random dout,
// so ∂L/∂x is exactly what the backward computes.
//
// Step and tolerance: the forwards are float64 and smooth at O(1) inputs, so
// a central difference with h = 1e-4 has truncation error ~h²·|f'''| ≈ 1e-8
// and rounding error ~1e-16·|L|/h ≈ 1e-11. The backward's outputs are
// float32 (relative rounding 6e-8) and Attention reads the forward's Out and
// LSE rounded to float32, which perturbs P by |LSE|·6e-8 relative. A bound
// of 2e-6 + 2e-5·|want| is therefore 10–100× above the expected error and
// far below the error of any wrong term (a missing term is O(|want|)).

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/kernels"
	"github.com/x/kernels/ref"
)

const (
	fdStep = 1e-4
	fdAtol = 2e-6
	fdRtol = 2e-5
)

// fdRandom returns n values uniform in [lo, hi) from a fixed seed.
func fdRandom(seed uint64, n int, lo, hi float64) []float32 {
	r := rand.New(rand.NewPCG(seed, 0x6b62))
	out := make([]float32, n)
	for i := range out {
		out[i] = float32(lo + (hi-lo)*r.Float64())
	}
	return out
}

func fdWiden(x []float32) []float64 {
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = float64(v)
	}
	return out
}

// fdGrad returns the central-difference gradient of f at x (widened
// exactly to float64).
func fdGrad(x []float32, f func(x []float64) float64) []float64 {
	x64 := fdWiden(x)
	g := make([]float64, len(x))
	for i := range x64 {
		orig := x64[i]
		x64[i] = orig + fdStep
		lp := f(x64)
		x64[i] = orig - fdStep
		lm := f(x64)
		x64[i] = orig
		g[i] = (lp - lm) / (2 * fdStep)
	}
	return g
}

// fdAssert checks got against want (plus base, for accumulated gradients:
// got must equal base + gradient) element by element.
func fdAssert(t *testing.T, what string, got []float32, base []float32, want []float64) {
	t.Helper()
	require.GreaterOrEqual(t, len(got), len(want), what)
	bad := 0
	for i, w := range want {
		if base != nil {
			w += float64(base[i])
		}
		if diff := math.Abs(float64(got[i]) - w); !(diff <= fdAtol+fdRtol*math.Abs(w)) {
			bad++
			if bad <= 5 {
				assert.Failf(t, "gradient mismatch", "%s[%d]: got %.9g, want %.9g (|diff| %.3g)", what, i, got[i], w, diff)
			}
		}
	}
	assert.Zero(t, bad, "%s: %d of %d elements outside %g + %g·|want|", what, bad, len(want), fdAtol, fdRtol)
}

func fdDot(a []float64, b []float32) float64 {
	var s float64
	for i, v := range a {
		s += v * float64(b[i])
	}
	return s
}

func rmsnorm64(x, w []float64, rows, cols int, eps float64) []float64 {
	out := make([]float64, rows*cols)
	for r := range rows {
		var ss float64
		for _, v := range x[r*cols : (r+1)*cols] {
			ss += v * v
		}
		inv := 1 / math.Sqrt(ss/float64(cols)+eps)
		for i := range cols {
			out[r*cols+i] = w[i] * x[r*cols+i] * inv
		}
	}
	return out
}

func TestRMSNormBackwardFiniteDifferences(t *testing.T) {
	for _, tc := range []struct{ rows, cols int }{{1, 1}, {1, 7}, {3, 8}, {4, 13}} {
		t.Run(fmt.Sprintf("R%d_C%d", tc.rows, tc.cols), func(t *testing.T) {
			n := tc.rows * tc.cols
			const eps = 1e-6
			x := fdRandom(1, n, -2, 2)
			w := fdRandom(2, tc.cols, 0.5, 1.5)
			dout := fdRandom(3, n, -1, 1)
			dw0 := fdRandom(4, tc.cols, -1, 1)
			dx := fdRandom(5, n, -9, 9) // overwritten
			dw := append([]float32(nil), dw0...)
			ref.Backend{}.RMSNormBackward(kernels.HostF32(dx), kernels.HostF32(dw), kernels.HostF32(dout), kernels.HostF32(x), kernels.HostF32(w), tc.rows, tc.cols, eps)

			w64, x64 := fdWiden(w), fdWiden(x)
			wantDx := fdGrad(x, func(x []float64) float64 {
				return fdDot(rmsnorm64(x, w64, tc.rows, tc.cols, eps), dout)
			})
			wantDw := fdGrad(w, func(w []float64) float64 {
				return fdDot(rmsnorm64(x64, w, tc.rows, tc.cols, eps), dout)
			})
			fdAssert(t, "dx", dx, nil, wantDx)
			fdAssert(t, "dw", dw, dw0, wantDw)
		})
	}
}

func rope64(x []float64, pos []int32, heads, d int, theta float64) []float64 {
	out := make([]float64, len(x))
	half := d / 2
	for t, p := range pos {
		for h := range heads {
			o := (t*heads + h) * d
			for i := range half {
				invFreq := 1 / math.Pow(theta, float64(2*i)/float64(d))
				a := float64(p) * invFreq
				c, s := math.Cos(a), math.Sin(a)
				x1, x2 := x[o+i], x[o+i+half]
				out[o+i] = x1*c - x2*s
				out[o+i+half] = x2*c + x1*s
			}
		}
	}
	return out
}

func TestRoPEBackwardFiniteDifferences(t *testing.T) {
	for _, tc := range []struct {
		pos      []int32
		heads, d int
		theta    float64
	}{
		{[]int32{0}, 1, 2, 1e4},
		{[]int32{3, 4, 5}, 2, 8, 1e4},
		{[]int32{7, 100, 2, 40961}, 3, 16, 1e6},
	} {
		t.Run(fmt.Sprintf("T%d_H%d_D%d", len(tc.pos), tc.heads, tc.d), func(t *testing.T) {
			n := len(tc.pos) * tc.heads * tc.d
			x := fdRandom(11, n, -2, 2)
			dy := fdRandom(12, n, -1, 1)
			dx := append([]float32(nil), dy...)
			ref.Backend{}.RoPEBackward(kernels.HostF32(dx), kernels.HostI32(tc.pos), tc.heads, tc.d, tc.theta)
			want := fdGrad(x, func(x []float64) float64 {
				return fdDot(rope64(x, tc.pos, tc.heads, tc.d, tc.theta), dy)
			})
			fdAssert(t, "dx", dx, nil, want)
		})
	}
}

func TestSwiGLUBackwardFiniteDifferences(t *testing.T) {
	const n = 37
	gate := fdRandom(21, n, -6, 6)
	up := fdRandom(22, n, -3, 3)
	dout := fdRandom(23, n, -1, 1)
	dgate, dup := make([]float32, n), make([]float32, n)
	ref.Backend{}.SwiGLUBackward(kernels.HostF32(dgate), kernels.HostF32(dup), kernels.HostF32(dout), kernels.HostF32(gate), kernels.HostF32(up))
	silu := func(z float64) float64 { return z / (1 + math.Exp(-z)) }
	g64, u64 := fdWiden(gate), fdWiden(up)
	wantG := fdGrad(gate, func(g []float64) float64 {
		var s float64
		for i := range g {
			s += float64(dout[i]) * silu(g[i]) * u64[i]
		}
		return s
	})
	wantU := fdGrad(up, func(u []float64) float64 {
		var s float64
		for i := range u {
			s += float64(dout[i]) * silu(g64[i]) * u[i]
		}
		return s
	})
	fdAssert(t, "dgate", dgate, nil, wantG)
	fdAssert(t, "dup", dup, nil, wantU)

	// In place, as the model may call it: dgate over gate, dup over up.
	g2, u2 := append([]float32(nil), gate...), append([]float32(nil), up...)
	ref.Backend{}.SwiGLUBackward(kernels.HostF32(g2), kernels.HostF32(u2), kernels.HostF32(dout), kernels.HostF32(g2), kernels.HostF32(u2))
	assert.Equal(t, dgate, g2, "dgate aliasing gate")
	assert.Equal(t, dup, u2, "dup aliasing up")
}

func TestEmbeddingBackwardFiniteDifferences(t *testing.T) {
	const v, c = 6, 5
	ids := []int32{2, 0, 2, 5, 2, 1}
	table := fdRandom(31, v*c, -1, 1)
	dout := fdRandom(32, len(ids)*c, -1, 1)
	d0 := fdRandom(33, v*c, -1, 1)
	dtable := append([]float32(nil), d0...)
	ref.Backend{}.EmbeddingBackward(kernels.HostF32(dtable), kernels.HostF32(dout), kernels.HostI32(ids), c)
	want := fdGrad(table, func(tab []float64) float64 {
		var s float64
		for t, id := range ids {
			for j := range c {
				s += float64(dout[t*c+j]) * tab[int(id)*c+j]
			}
		}
		return s
	})
	fdAssert(t, "dtable", dtable, d0, want)
	// Rows no id touches keep their value exactly.
	for _, row := range []int{3, 4} {
		assert.Equal(t, d0[row*c:(row+1)*c], dtable[row*c:(row+1)*c], "untouched row %d", row)
	}
}

func logSoftmaxGather64(x []float64, targets []int32, rows, v int) []float64 {
	out := make([]float64, rows)
	for r := range rows {
		row := x[r*v : (r+1)*v]
		mx := math.Inf(-1)
		for _, e := range row {
			mx = math.Max(mx, e)
		}
		var s float64
		for _, e := range row {
			s += math.Exp(e - mx)
		}
		out[r] = row[targets[r]] - mx - math.Log(s)
	}
	return out
}

func TestLogSoftmaxGatherBackwardFiniteDifferences(t *testing.T) {
	for _, tc := range []struct{ rows, v int }{{1, 1}, {1, 2}, {3, 11}, {2, 64}} {
		t.Run(fmt.Sprintf("R%d_V%d", tc.rows, tc.v), func(t *testing.T) {
			logits := fdRandom(41, tc.rows*tc.v, -5, 5)
			logits[0] = 40 // a dominant logit: softmax saturates in that row
			targets := make([]int32, tc.rows)
			for r := range targets {
				targets[r] = int32((r * 7) % tc.v)
			}
			dlogp := fdRandom(42, tc.rows, -2, 2)
			dl := make([]float32, tc.rows*tc.v)
			ref.Backend{}.LogSoftmaxGatherBackward(kernels.HostF32(dl), kernels.HostF32(logits), kernels.HostI32(targets), kernels.HostF32(dlogp), kernels.Buffer{}, tc.rows, tc.v)
			want := fdGrad(logits, func(x []float64) float64 {
				return fdDot(logSoftmaxGather64(x, targets, tc.rows, tc.v), dlogp)
			})
			fdAssert(t, "dlogits", dl, nil, want)

			inPlace := append([]float32(nil), logits...)
			ref.Backend{}.LogSoftmaxGatherBackward(kernels.HostF32(inPlace), kernels.HostF32(inPlace), kernels.HostI32(targets), kernels.HostF32(dlogp), kernels.Buffer{}, tc.rows, tc.v)
			assert.Equal(t, dl, inPlace, "dlogits aliasing logits")

			// With the entropy term: the gradient of Σ dlogp·logp + dent·H.
			dent := fdRandom(43, tc.rows, -2, 2)
			ref.Backend{}.LogSoftmaxGatherBackward(kernels.HostF32(dl), kernels.HostF32(logits), kernels.HostI32(targets), kernels.HostF32(dlogp), kernels.HostF32(dent), tc.rows, tc.v)
			want = fdGrad(logits, func(x []float64) float64 {
				return fdDot(logSoftmaxGather64(x, targets, tc.rows, tc.v), dlogp) + fdDot(entropy64(x, tc.rows, tc.v), dent)
			})
			fdAssert(t, "dlogits with entropy", dl, nil, want)
		})
	}
}

// entropy64 is each row's softmax entropy in float64.
func entropy64(x []float64, rows, v int) []float64 {
	out := make([]float64, rows)
	for r := range rows {
		row := x[r*v : (r+1)*v]
		mx := math.Inf(-1)
		for _, e := range row {
			mx = math.Max(mx, e)
		}
		var s float64
		for _, e := range row {
			s += math.Exp(e - mx)
		}
		lse := mx + math.Log(s)
		for _, e := range row {
			p := math.Exp(e - lse)
			out[r] -= p * (e - lse)
		}
	}
	return out
}

// attention64 is causal GQA attention in float64; it returns Out [T,H,D]
// and LSE [T,H] of one sequence.
func attention64(q, k, v []float64, tt, start, heads, kvh, d int, scale float64) (out, lse []float64) {
	out = make([]float64, tt*heads*d)
	lse = make([]float64, tt*heads)
	group := heads / kvh
	for t := range tt {
		for h := range heads {
			g := h / group
			qo := (t*heads + h) * d
			n := start + t + 1
			s := make([]float64, n)
			mx := math.Inf(-1)
			for j := range n {
				ko := (j*kvh + g) * d
				var dot float64
				for i := range d {
					dot += q[qo+i] * k[ko+i]
				}
				s[j] = dot * scale
				mx = math.Max(mx, s[j])
			}
			var sum float64
			for j := range n {
				s[j] = math.Exp(s[j] - mx)
				sum += s[j]
			}
			lse[t*heads+h] = mx + math.Log(sum)
			for j := range n {
				vo := (j*kvh + g) * d
				for i := range d {
					out[qo+i] += s[j] / sum * v[vo+i]
				}
			}
		}
	}
	return out, lse
}

func fdNarrow(x []float64) []float32 {
	out := make([]float32, len(x))
	for i, v := range x {
		out[i] = float32(v)
	}
	return out
}

func TestAttentionBackwardFiniteDifferences(t *testing.T) {
	type seqShape struct{ t, start int }
	for _, tc := range []struct {
		name          string
		heads, kvh, d int
		seqs          []seqShape
	}{
		{"MHA_T1", 2, 2, 8, []seqShape{{1, 0}}},
		{"GQA2_Start3", 4, 2, 8, []seqShape{{3, 3}}},
		{"GQA2_batch", 4, 2, 8, []seqShape{{4, 0}, {2, 5}, {1, 1}}},
		{"GQA4_D4", 4, 1, 4, []seqShape{{3, 2}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			scale := 1 / math.Sqrt(float64(tc.d))
			for i, sh := range tc.seqs {
				seed := uint64(100 * (i + 1))
				s := sh.start + sh.t
				nq, nkv := sh.t*tc.heads*tc.d, s*tc.kvh*tc.d
				q := fdRandom(seed+1, nq, -1.5, 1.5)
				k := fdRandom(seed+2, nkv, -1.5, 1.5)
				v := fdRandom(seed+3, nkv, -1, 1)
				out, lse := attention64(fdWiden(q), fdWiden(k), fdWiden(v), sh.t, sh.start, tc.heads, tc.kvh, tc.d, scale)
				dk0, dv0 := fdRandom(seed+4, nkv, -1, 1), fdRandom(seed+5, nkv, -1, 1)
				dout := fdRandom(seed+6, nq, -1, 1)
				g := kernels.AttentionGradBatch{
					AttentionBatch: kernels.OneSeq(q, fdNarrow(out), fdNarrow(lse), k, v, sh.t, sh.start),
					DOut:           kernels.HostF32(dout),
					DQ:             kernels.HostF32(fdRandom(seed+7, nq, -50, 50)), // must be overwritten
					DK:             kernels.HostF32(append([]float32(nil), dk0...)), DV: kernels.HostF32(append([]float32(nil), dv0...)),
				}
				ref.Backend{}.AttentionBackward(g, tc.heads, tc.kvh, tc.d, float32(scale))

				q64, k64, v64 := fdWiden(q), fdWiden(k), fdWiden(v)
				loss := func(q, k, v []float64) float64 {
					out, _ := attention64(q, k, v, sh.t, sh.start, tc.heads, tc.kvh, tc.d, scale)
					return fdDot(out, dout)
				}
				p := fmt.Sprintf("seq%d.", i)
				fdAssert(t, p+"dQ", g.DQ.F32(), nil, fdGrad(q, func(q []float64) float64 { return loss(q, k64, v64) }))
				fdAssert(t, p+"dK", g.DK.F32(), dk0, fdGrad(k, func(k []float64) float64 { return loss(q64, k, v64) }))
				fdAssert(t, p+"dV", g.DV.F32(), dv0, fdGrad(v, func(v []float64) float64 { return loss(q64, k64, v) }))
			}
		})
	}
}

// TestBackwardShapePanics checks that a buffer too short for its shape is a
// panic naming the op and the argument, not a silent partial write.
func TestBackwardShapePanics(t *testing.T) {
	b := ref.Backend{}
	short := make([]float32, 3)
	buf := make([]float32, 64)
	for _, tc := range []struct {
		name, want string
		call       func()
	}{
		{"rmsnorm dx", "RMSNormBackward: dx", func() {
			b.RMSNormBackward(kernels.HostF32(short), kernels.HostF32(buf), kernels.HostF32(buf), kernels.HostF32(buf), kernels.HostF32(buf), 2, 4, 1e-6)
		}},
		{"rmsnorm dw", "RMSNormBackward: dw", func() {
			b.RMSNormBackward(kernels.HostF32(buf), kernels.HostF32(short), kernels.HostF32(buf), kernels.HostF32(buf), kernels.HostF32(buf), 2, 4, 1e-6)
		}},
		{"rope", "RoPEBackward: x", func() { b.RoPEBackward(kernels.HostF32(short), kernels.HostI32([]int32{0}), 1, 4, 1e4) }},
		{"swiglu", "SwiGLUBackward: up", func() {
			b.SwiGLUBackward(kernels.HostF32(buf), kernels.HostF32(buf), kernels.HostF32(buf), kernels.HostF32(buf), kernels.HostF32(short))
		}},
		{"embedding id", "ids[1] = 9", func() {
			b.EmbeddingBackward(kernels.HostF32(buf[:8]), kernels.HostF32(buf), kernels.HostI32([]int32{0, 9}), 4)
		}},
		{"logsoftmax target", "targets[0] = 5", func() {
			b.LogSoftmaxGatherBackward(kernels.HostF32(buf), kernels.HostF32(buf), kernels.HostI32([]int32{5}), kernels.HostF32(buf), kernels.Buffer{}, 1, 5)
		}},
		{"attention K", "AttentionBackward: K", func() {
			a := kernels.OneSeq(buf, buf, buf, short, buf, 1, 2)
			b.AttentionBackward(kernels.AttentionGradBatch{AttentionBatch: a, DOut: kernels.HostF32(buf), DQ: kernels.HostF32(buf),
				DK: kernels.HostF32(buf), DV: kernels.HostF32(buf)}, 2, 1, 8, 1)
		}},
		{"attention heads", "heads 3, kvHeads 2", func() { b.AttentionBackward(kernels.AttentionGradBatch{}, 3, 2, 8, 1) }},
		{"adamw step", "step 0", func() {
			b.AdamW(kernels.HostF32(buf), kernels.HostF32(buf), kernels.HostF32(buf), kernels.HostF32(buf), kernels.AdamWParams{}, 0)
		}},
		{"adamw v", "AdamW: v", func() {
			b.AdamW(kernels.HostF32(buf), kernels.HostF32(buf), kernels.HostF32(buf), kernels.HostF32(short), kernels.AdamWParams{}, 1)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				r := recover()
				require.NotNil(t, r, "no panic")
				assert.Contains(t, fmt.Sprint(r), tc.want)
			}()
			tc.call()
		})
	}
}
