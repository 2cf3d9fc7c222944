package kerneltest

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/kernels"
	"github.com/x/kernels/ref"
)

// Argmax checks the first index of the maximum, exactly: ties, −Inf
// entries, the maximum at either end, and the full vocabulary.
func Argmax(t *testing.T, b kernels.Backend) {
	var r ref.Backend
	negInf := float32(math.Inf(-1))
	cases := []struct {
		name string
		make func() []float32
	}{
		{"V1", func() []float32 { return []float32{-3} }},
		{"V17_first", func() []float32 { x := uniform(newRNG("a17"), 17, 1); x[0] = 2; return x }},
		{"V17_last", func() []float32 { x := uniform(newRNG("b17"), 17, 1); x[16] = 2; return x }},
		{"V33_tie", func() []float32 { x := uniform(newRNG("c33"), 33, 1); x[31], x[5], x[20] = 7, 7, 7; return x }},
		{"V16_allNegInf_but_one", func() []float32 {
			x := make([]float32, 16)
			for i := range x {
				x[i] = negInf
			}
			x[9] = -1e30
			return x
		}},
		{"V151936", func() []float32 { return uniform(newRNG("v"), 151936, 20) }},
		{"V151936_tie_far", func() []float32 {
			x := uniform(newRNG("w"), 151936, 20)
			x[151935], x[70001] = 25, 25
			return x
		}},
		{"V151936_equal", func() []float32 { return make([]float32, 151936) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			x := c.make()
			want, err := r.Argmax(kernels.HostF32(x))
			require.NoError(t, err)
			got, err := b.Argmax(kernels.HostF32(x))
			require.NoError(t, err)
			assert.Equal(t, want, got)
		})
	}
}

// SampleRows checks batched sampling under temperature, top-k, top-p and
// min-p with fixed u values: each case is run alone and inside one batch
// of all the parameter sets (rows with different settings side by side);
// ids must equal the reference's exactly and both log-probabilities be
// within Tolerance("SampleLogProb").
func SampleRows(t *testing.T, b kernels.Backend) {
	var r ref.Backend
	params := []kernels.SamplingParams{
		{},               // greedy
		{Temperature: 1}, // plain softmax
		{Temperature: 0.7, TopK: 1},
		{Temperature: 1, TopK: 50},
		{Temperature: 1, TopP: 0.9},
		{Temperature: 1, MinP: 0.05},
		{Temperature: 0.6, TopK: 20, TopP: 0.95}, // Qwen3's thinking-mode defaults
		{Temperature: 0.7, TopK: 20, TopP: 0.8, MinP: 0.01}, // and a bit of everything
		{Temperature: 1.3, TopP: 0.5, MinP: 0.2},
	}
	logits := []struct {
		name string
		x    []float32
	}{
		{"V1", []float32{0.5}},
		{"V17", uniform(newRNG("s17"), 17, 3)},
		{"V17_ties", []float32{1, 2, 2, 2, 0, -1, 2, 1, 1, 0, 0, 0, 0, 2, -5, -5, 1}},
		{"V4_equal", []float32{1, 1, 1, 1}}, // top-p 0.5 lands exactly on a boundary
		{"V1024_equal", make([]float32, 1024)},
		{"V1000_neginf", func() []float32 {
			x := uniform(newRNG("s1000"), 1000, 6)
			for i := 0; i < 1000; i += 7 {
				x[i] = float32(math.Inf(-1))
			}
			return x
		}()},
		{"V1000_wide", func() []float32 { // exps far below the max underflow (arguments < −700)
			x := uniform(newRNG("s1000w"), 1000, 1)
			for i := range x {
				x[i] = 600 * (x[i] - 1) // logits in [−1200, 0]
			}
			return x
		}()},
		{"V151936", uniform(newRNG("sV"), 151936, 12)},
		{"V151936_peaked", func() []float32 {
			x := uniform(newRNG("sVp"), 151936, 5)
			x[4242], x[151935] = 28, 27.5
			return x
		}()},
	}
	tol, fullTol := Tolerance("SampleLogProb"), Tolerance("SampleFullLogProb")
	for _, l := range logits {
		v := len(l.x)
		us := []float64{0, 0.123, 0.5, 0.87654, 0.9999999}
		if v > 1000 {
			us = []float64{0.123, 0.9999999} // the reference's full-vocabulary sort is slow
		}
		for _, u := range us {
			// One batch: every parameter set on the same logits.
			n := len(params)
			batch := make([]float32, 0, n*v)
			uu := make([]float64, n)
			for i := range params {
				batch = append(batch, l.x...)
				uu[i] = u
			}
			wantID, wantLP, wantFull := make([]int32, n), make([]float32, n), make([]float32, n)
			r.SampleRows(kernels.HostI32(wantID), kernels.HostF32(wantLP), kernels.HostF32(wantFull), kernels.HostF32(batch), kernels.HostSampleArgs(params, uu), n, v)
			id, lp, full := make([]int32, n), make([]float32, n), make([]float32, n)
			b.SampleRows(kernels.HostI32(id), kernels.HostF32(lp), kernels.HostF32(full), kernels.HostF32(batch), kernels.HostSampleArgs(params, uu), n, v)
			for i, p := range params {
				name := fmt.Sprintf("%s_T%g_K%d_P%g_M%g_u%g", l.name, p.Temperature, p.TopK, p.TopP, p.MinP, u)
				t.Run(name, func(t *testing.T) {
					assert.Equal(t, wantID[i], id[i], "id")
					CheckClose(t, "logprob", lp[i:i+1], wantLP[i:i+1], tol)
					CheckClose(t, "full logprob", full[i:i+1], wantFull[i:i+1], fullTol)
					if p.Temperature != 0 {
						assert.LessOrEqual(t, full[i], lp[i]+float32(fullTol.ATol), "filtering only raises a token's log-prob")
					}
					id1, lp1, full1 := make([]int32, 1), make([]float32, 1), make([]float32, 1)
					b.SampleRows(kernels.HostI32(id1), kernels.HostF32(lp1), kernels.HostF32(full1), kernels.HostF32(l.x), kernels.HostSampleArgs(params[i:i+1], uu[i:i+1]), 1, v)
					assert.Equal(t, id[i], id1[0], "id alone")
					assert.Equal(t, lp[i], lp1[0], "logprob alone")
					assert.Equal(t, full[i], full1[0], "full logprob alone")
				})
			}
		}
	}
	t.Run("no_finite_logit", func(t *testing.T) { sampleDeadRows(t, b) })
	t.Run("backend_args", func(t *testing.T) { sampleBackendArgs(t, b, params) })
}

// sampleBackendArgs: parameters and uniforms in the backend's memory
// (Alloc and Upload, as a decode step keeps them) give the bits they give
// from host memory, chunk by chunk through SampleArgs.Rows.
func sampleBackendArgs(t *testing.T, b kernels.Backend, params []kernels.SamplingParams) {
	const v = 257
	n := len(params)
	var logits []float32
	u := make([]float64, n)
	for i := range n {
		logits = append(logits, uniform(newRNG(fmt.Sprint("args", i)), v, 4)...)
		u[i] = float64(i) / float64(n+1)
	}
	host := kernels.HostSampleArgs(params, u)
	wantID, want := make([]int32, n), [2][]float32{make([]float32, n), make([]float32, n)}
	b.SampleRows(kernels.HostI32(wantID), kernels.HostF32(want[0]), kernels.HostF32(want[1]), kernels.HostF32(logits), host, n, v)
	var dev kernels.SampleArgs
	for _, x := range []struct {
		dst *kernels.Buffer
		src kernels.Buffer
	}{{&dev.Params, host.Params}, {&dev.U, host.U}} {
		buf, err := b.Alloc(kernels.I32, x.src.Len())
		require.NoError(t, err)
		defer b.Free(buf)
		require.NoError(t, b.Upload(buf, x.src))
		*x.dst = buf
	}
	id, lp, full := make([]int32, n), make([]float32, n), make([]float32, n)
	for r0 := 0; r0 < n; r0 += 4 {
		r1 := min(r0+4, n)
		b.SampleRows(kernels.HostI32(id[r0:r1]), kernels.HostF32(lp[r0:r1]), kernels.HostF32(full[r0:r1]), kernels.HostF32(logits[r0*v:r1*v]), dev.Rows(r0, r1), r1-r0, v)
	}
	require.NoError(t, b.Err())
	assert.Equal(t, wantID, id, "ids")
	CheckExact(t, "logprobs", lp, want[0])
	CheckExact(t, "full logprobs", full, want[1])
}

// sampleDeadRows: rows with no finite logit (all −Inf; NaN, +Inf and −Inf)
// get kernels.NoToken and NaN log-probabilities, under greedy and sampled
// parameters, and the rows around them are drawn as if alone.
func sampleDeadRows(t *testing.T, b kernels.Backend) {
	const v = 300
	inf, nan := float32(math.Inf(1)), float32(math.NaN())
	alive := uniform(newRNG("dead"), v, 4)
	negInf, mixed := make([]float32, v), make([]float32, v)
	for i := range v {
		negInf[i] = -inf
		mixed[i] = []float32{nan, inf, -inf}[i%3]
	}
	rows := [][]float32{alive, negInf, alive, mixed}
	for _, p := range []kernels.SamplingParams{{}, {Temperature: 0.8, TopK: 20, TopP: 0.9}} {
		t.Run(fmt.Sprintf("T%g", p.Temperature), func(t *testing.T) {
			var logits []float32
			params, u := make([]kernels.SamplingParams, len(rows)), make([]float64, len(rows))
			for i, row := range rows {
				logits = append(logits, row...)
				params[i], u[i] = p, 0.3
			}
			n := len(rows)
			id, lp, full := make([]int32, n), make([]float32, n), make([]float32, n)
			b.SampleRows(kernels.HostI32(id), kernels.HostF32(lp), kernels.HostF32(full), kernels.HostF32(logits), kernels.HostSampleArgs(params, u), n, v)
			wantID, wantLP, wantFull := make([]int32, 1), make([]float32, 1), make([]float32, 1)
			ref.Backend{}.SampleRows(kernels.HostI32(wantID), kernels.HostF32(wantLP), kernels.HostF32(wantFull), kernels.HostF32(alive), kernels.HostSampleArgs(params[:1], u[:1]), 1, v)
			for i := range rows {
				if kernels.AnyFinite(rows[i]) {
					assert.Equal(t, wantID[0], id[i], "row %d id", i)
					CheckClose(t, "logprob", lp[i:i+1], wantLP, Tolerance("SampleLogProb"))
					CheckClose(t, "full logprob", full[i:i+1], wantFull, Tolerance("SampleFullLogProb"))
					continue
				}
				assert.Equal(t, int32(kernels.NoToken), id[i], "row %d id", i)
				assert.True(t, math.IsNaN(float64(lp[i])), "row %d logprob %v", i, lp[i])
				assert.True(t, math.IsNaN(float64(full[i])), "row %d full logprob %v", i, full[i])
			}
		})
	}
}
