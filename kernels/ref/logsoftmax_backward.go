package ref

import (
	"fmt"
	"math"
)

// LogSoftmaxGatherBackward writes, for each row r of logits[R,V],
// dlogits[r, i] = dlogp[r]·(1[i = targets[r]] − softmax(logits[r])[i]).
// The row's max and Σexp are accumulated in float64 before anything is
// written, and element i is read before it is written, so dlogits may
// alias logits.
func (Backend) LogSoftmaxGatherBackward(dlogits, logits []float32, targets []int32, dlogp []float32, rows, v int) {
	const op = "LogSoftmaxGatherBackward"
	needDims(op, rows, v)
	need(op, "dlogits", len(dlogits), rows*v)
	need(op, "logits", len(logits), rows*v)
	need(op, "targets", len(targets), rows)
	need(op, "dlogp", len(dlogp), rows)
	for r := range rows {
		tgt := int(targets[r])
		if tgt < 0 || tgt >= v {
			panic(fmt.Sprintf("kernels/ref: %s: targets[%d] = %d outside [0, %d)", op, r, tgt, v))
		}
		x := logits[r*v : (r+1)*v]
		mx := math.Inf(-1)
		for _, e := range x {
			mx = math.Max(mx, float64(e))
		}
		var sum float64
		for _, e := range x {
			sum += math.Exp(float64(e) - mx)
		}
		g := float64(dlogp[r])
		out := dlogits[r*v : (r+1)*v]
		for i := range v {
			p := math.Exp(float64(x[i])-mx) / sum
			d := -g * p
			if i == tgt {
				d += g
			}
			out[i] = float32(d)
		}
	}
}
