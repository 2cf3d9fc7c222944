package ref

import (
	"math"

	"github.com/x/kernels"
)

// LogSoftmaxGatherBackward writes, for each row r of logits[R,V] with p =
// softmax(logits[r]) and H its entropy,
// dlogits[r, i] = dlogp[r]·(1[i = targets[r]] − p[i]) − dentropy[r]·p[i]·(log p[i] + H)
// (the entropy term only when dentropy is not nil). The row's max, Σexp
// and H are accumulated in float64 before anything is written, and element
// i is read before it is written, so dlogits may alias logits.
func (Backend) LogSoftmaxGatherBackward(dlogits, logits, targets, dlogp, dentropy kernels.Buffer, rows, v int) {
	kernels.CheckLogSoftmaxGatherBackward(dlogits, logits, targets, dlogp, dentropy, rows, v)
	logSoftmaxGatherBackward(dlogits.F32(), logits.F32(), targets.I32(), dlogp.F32(), opt(dentropy), rows, v)
}

// logSoftmaxGatherBackward is LogSoftmaxGatherBackward on host slices (dentropy nil: none).
func logSoftmaxGatherBackward(dlogits, logits []float32, targets []int32, dlogp, dentropy []float32, rows, v int) {
	for r := range rows {
		tgt := int(targets[r])
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
		lse := mx + math.Log(sum)
		var h, ge float64 // entropy, dentropy
		if dentropy != nil {
			ge = float64(dentropy[r])
			for _, e := range x {
				if p := math.Exp(float64(e) - lse); p > 0 {
					h -= p * (float64(e) - lse)
				}
			}
		}
		out := dlogits[r*v : (r+1)*v]
		for i := range v {
			p := math.Exp(float64(x[i])-mx) / sum
			d := -g * p
			if ge != 0 && p > 0 {
				d -= ge * p * (float64(x[i]) - lse + h)
			}
			if i == tgt {
				d += g
			}
			out[i] = float32(d)
		}
	}
}
