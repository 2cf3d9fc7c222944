package kerneltest

import (
	"fmt"
	"math"
	"testing"

	"github.com/x/kernels"
	"github.com/x/kernels/ref"
)

// logitCase describes rows of logits: spread is the uniform half-range,
// offset shifts every value (large offsets test the max subtraction), and
// negInf sets that many entries per row (never the target) to −Inf.
type logitCase struct {
	rows, v        int
	spread, offset float64
	negInf         int
}

func (c logitCase) name() string {
	return fmt.Sprintf("R%d_V%d_spread%g_offset%g_neginf%d", c.rows, c.v, c.spread, c.offset, c.negInf)
}

// logits makes the case's [rows, v] logits and per-row targets that avoid
// the −Inf entries.
func (c logitCase) logits(seed string) ([]float32, []int32) {
	rng := newRNG(seed)
	x := uniform(rng, c.rows*c.v, c.spread)
	targets := make([]int32, c.rows)
	for r := 0; r < c.rows; r++ {
		row := x[r*c.v : (r+1)*c.v]
		for i := range row {
			row[i] += float32(c.offset)
		}
		targets[r] = int32(rng.IntN(c.v))
		for j := 0; j < c.negInf; j++ {
			if i := rng.IntN(c.v); int32(i) != targets[r] {
				row[i] = float32(math.Inf(-1))
			}
		}
	}
	return x, targets
}

func logitCases() []logitCase {
	return []logitCase{
		{1, 1, 1, 0, 0}, {1, 2, 1, 0, 0}, {3, 17, 5, 0, 2}, {4, 1000, 10, 0, 10}, {2, 1000, 30, 5e4, 0},
		{7, 4099, 3, -200, 0}, {2, 151936, 8, 0, 0}, {1, 151936, 40, 1000, 1000},
	}
}

// LogSoftmaxGather checks the gathered log-probabilities and entropies.
func LogSoftmaxGather(t *testing.T, b kernels.Backend) {
	var r ref.Backend
	for _, c := range logitCases() {
		for _, ent := range []bool{true, false} {
			name := fmt.Sprintf("%s_entropy%v", c.name(), ent)
			t.Run(name, func(t *testing.T) {
				x, targets := c.logits("LogSoftmaxGather" + c.name())
				want, wantH := make([]float32, c.rows), make([]float32, c.rows)
				r.LogSoftmaxGather(kernels.HostF32(want), kernels.HostF32(wantH), kernels.HostF32(x), kernels.HostI32(targets), c.rows, c.v)
				got := padded(make([]float32, c.rows), 2)
				var gotH []float32
				if ent {
					gotH = padded(make([]float32, c.rows), 2)
				}
				b.LogSoftmaxGather(kernels.HostF32(got), kernels.HostF32(gotH), kernels.HostF32(x), kernels.HostI32(targets), c.rows, c.v)
				CheckClose(t, "logp", got[:c.rows], want, Tolerance("LogSoftmaxGather"))
				CheckExact(t, "logp past R", got[c.rows:], padded(nil, 2))
				if ent {
					CheckClose(t, "entropy", gotH[:c.rows], wantH, Tolerance("Entropy"))
					CheckExact(t, "entropy past R", gotH[c.rows:], padded(nil, 2))
				}
				again := make([]float32, c.rows)
				b.LogSoftmaxGather(kernels.HostF32(again), kernels.Buffer{}, kernels.HostF32(x), kernels.HostI32(targets), c.rows, c.v)
				CheckExact(t, "repeated call", again, got[:c.rows])
			})
		}
	}
}

// Softmax checks the in-place row softmax.
func Softmax(t *testing.T, b kernels.Backend) {
	var r ref.Backend
	for _, c := range logitCases() {
		t.Run(c.name(), func(t *testing.T) {
			x, _ := c.logits("Softmax" + c.name())
			want := clone(x)
			r.Softmax(kernels.HostF32(want), c.rows, c.v)
			got := padded(x, 2)
			b.Softmax(kernels.HostF32(got), c.rows, c.v)
			CheckClose(t, "x", got[:len(x)], want, Tolerance("Softmax"))
			CheckExact(t, "x past R·V", got[len(x):], padded(nil, 2))
		})
	}
}
