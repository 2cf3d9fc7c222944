package kerneltest

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/x/kernels"
)

// SampleFullLogProbExact checks the one arithmetic the sampled and the
// trained log-probs share: on the same logits, SampleRows' fullLogp[r] must
// be, bit for bit, what the same backend's Scale(row, 1/T) (skipped at T
// = 1, as training skips it) then LogSoftmaxGather give for the sampled
// token (T = 1 under greedy), with and without the entropy output (logp
// must not depend on it). No tolerance: this is what lets
// sampling/sampling_logp_difference be exactly 0 where the two passes'
// logits are the same bits. Rows of one batch mix the parameter sets, so
// a kernel that sized its reduction by the batch would show.
func SampleFullLogProbExact(t *testing.T, b kernels.Backend) {
	params := []kernels.SamplingParams{
		{},               // greedy: T = 1
		{Temperature: 1}, // no scaling
		{Temperature: 0.7},
		{Temperature: 1.3, TopK: 20, TopP: 0.9},
		{Temperature: 0.6, TopK: 20, TopP: 0.95, MinP: 0.01},
		{Temperature: 0.9, MinP: 0.1},
	}
	negInf := float32(math.Inf(-1))
	cases := []struct {
		name string
		x    []float32
	}{
		{"V17", uniform(newRNG("f17"), 17, 3)},
		{"V1000_neginf", func() []float32 {
			x := uniform(newRNG("f1000"), 1000, 6)
			for i := 0; i < 1000; i += 7 {
				x[i] = negInf
			}
			return x
		}()},
		{"V1000_offset", func() []float32 { // large logits: the max subtraction matters
			x := uniform(newRNG("f1000o"), 1000, 4)
			for i := range x {
				x[i] += 5e4
			}
			return x
		}()},
		{"V4096", uniform(newRNG("f4096"), 4096, 9)},
		{"V151936", uniform(newRNG("fV"), 151936, 12)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n, v := len(params), len(c.x)
			logits := make([]float32, 0, n*v)
			u := make([]float64, n)
			for i := range params {
				logits = append(logits, c.x...)
				u[i] = math.Mod(0.137+0.31*float64(i), 1)
			}
			ids, lp, full := make([]int32, n), make([]float32, n), make([]float32, n)
			b.SampleRows(kernels.HostI32(ids), kernels.HostF32(lp), kernels.HostF32(full), kernels.HostF32(logits), kernels.HostSampleArgs(params, u), n, v)
			for i, p := range params {
				t.Run(fmt.Sprintf("T%g_K%d_P%g_M%g", p.Temperature, p.TopK, p.TopP, p.MinP), func(t *testing.T) {
					for _, withEntropy := range []bool{false, true} {
						got := trainedLogProb(b, c.x, p.Temperature, ids[i], withEntropy)
						assert.Equal(t, math.Float32bits(got), math.Float32bits(full[i]),
							"token %d: SampleRows full log-prob %v, Scale+LogSoftmaxGather %v (entropy %v)", ids[i], full[i], got, withEntropy)
					}
				})
			}
		})
	}
}

// trainedLogProb is the log-prob training takes of token id on row x at
// temperature (0 means 1): the row times float32(1/T) by Scale unless T is
// 1, then LogSoftmaxGather, with the entropy output or without.
func trainedLogProb(b kernels.Backend, x []float32, temperature float32, id int32, withEntropy bool) float32 {
	row := slices.Clone(x)
	if temperature != 0 && temperature != 1 {
		b.Scale(kernels.HostF32(row), 1/temperature)
	}
	lp := make([]float32, 1)
	var ent kernels.Buffer
	if withEntropy {
		ent = kernels.HostF32(make([]float32, 1))
	}
	b.LogSoftmaxGather(kernels.HostF32(lp), ent, kernels.HostF32(row), kernels.HostI32([]int32{id}), 1, len(row))
	return lp[0]
}
