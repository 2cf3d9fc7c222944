package cpu

import (
	"fmt"
	"math"
)

// LogSoftmaxGather: logp[r] = log_softmax(logits[r])[targets[r]] for each
// row of logits[R,V], and entropy[r] = −Σ p·log p if entropy is not nil.
// Per row: a SIMD max, one SIMD pass of exp(x − max) summed (into per-worker
// scratch), and for the entropy a float64 pass over the exps; rows are
// spread over the workers.
func (b *Backend) LogSoftmaxGather(logp, entropy, logits []float32, targets []int32, rows, v int) {
	const op = "LogSoftmaxGather"
	needDims(op, rows, v)
	need(op, "logits", len(logits), rows*v)
	need(op, "targets", len(targets), rows)
	need(op, "logp", len(logp), rows)
	if entropy != nil {
		need(op, "entropy", len(entropy), rows)
	}
	for r, tg := range targets[:rows] {
		if tg < 0 || int(tg) >= v {
			panic(fmt.Sprintf("kernels/cpu: %s: target %d of row %d outside [0,%d)", op, tg, r, v))
		}
	}
	avx := b.simd.avx512
	b.parallelForWorker(rows, func(w, lo, hi int) {
		e := b.scratch(w, v)
		for r := lo; r < hi; r++ {
			row := logits[r*v : (r+1)*v]
			m := bwMax(avx, row)
			s := bwExpSum(avx, e, row, v, m)
			ls := float32(math.Log(float64(s)))
			logp[r] = (row[targets[r]] - m) - ls
			if entropy != nil {
				// H = log s − Σ e·(x − m)/s, skipping e = 0 (x = −Inf).
				var ex float64
				for i, ei := range e {
					if ei != 0 && row[i] >= -math.MaxFloat32 { // e of −Inf may be a subnormal
						ex += float64(ei) * float64(row[i]-m)
					}
				}
				entropy[r] = float32(float64(ls) - ex/float64(s))
			}
		}
	})
}

// Softmax replaces each row of x[R,V] by its softmax: SIMD max, exp(x −
// max) in place with its sum, and a scale by 1/sum; rows in parallel.
func (b *Backend) Softmax(x []float32, rows, v int) {
	const op = "Softmax"
	needDims(op, rows, v)
	need(op, "x", len(x), rows*v)
	avx := b.simd.avx512
	run := func(lo, hi int) {
		for r := lo; r < hi; r++ {
			row := x[r*v : (r+1)*v]
			m := bwMax(avx, row)
			s := bwExpSum(avx, row, row, v, m)
			bwScale(avx, row, 1/s)
		}
	}
	if rows*v <= grain {
		run(0, rows)
		return
	}
	b.parallelFor(rows, run)
}
