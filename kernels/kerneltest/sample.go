package kerneltest

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
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
			assert.Equal(t, r.Argmax(x), b.Argmax(x))
		})
	}
}

// Sample checks sampling under temperature, top-k, top-p and min-p with
// fixed u values: the ids must equal the reference's exactly and the
// log-probabilities within Tolerance("SampleLogProb"); scratch may be nil
// or given.
func Sample(t *testing.T, b kernels.Backend) {
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
		{"V151936", uniform(newRNG("sV"), 151936, 12)},
		{"V151936_peaked", func() []float32 {
			x := uniform(newRNG("sVp"), 151936, 5)
			x[4242], x[151935] = 28, 27.5
			return x
		}()},
	}
	for _, l := range logits {
		for _, p := range params {
			us := []float64{0, 0.123, 0.5, 0.87654, 0.9999999}
			if len(l.x) > 1000 {
				us = []float64{0.123, 0.9999999} // the reference's full-vocabulary sort is slow
			}
			for _, u := range us {
				name := fmt.Sprintf("%s_T%g_K%d_P%g_M%g_u%g", l.name, p.Temperature, p.TopK, p.TopP, p.MinP, u)
				t.Run(name, func(t *testing.T) {
					wantID, wantLP := r.Sample(l.x, p, u, nil)
					id, lp := b.Sample(l.x, p, u, nil)
					assert.Equal(t, wantID, id, "id")
					CheckClose(t, "logprob", []float32{lp}, []float32{wantLP}, Tolerance("SampleLogProb"))
					scratch := make([]float32, len(l.x)+1)
					id2, lp2 := b.Sample(l.x, p, u, scratch)
					assert.Equal(t, id, id2, "id with scratch")
					assert.Equal(t, lp, lp2, "logprob with scratch")
				})
			}
		}
	}
}
