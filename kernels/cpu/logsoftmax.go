package cpu

import (
	"math"

	"github.com/x/kernels"
)

// LogSoftmaxGather: logp[r] = log_softmax(logits[r])[targets[r]] for each
// row of logits[R,V], and entropy[r] = −Σ p·log p if entropy is not nil.
// With AVX-512 each row is read once: an online (per-lane running max,
// rescaled sums) log-sum-exp that also accumulates Σ e·(x − max) for the
// entropy. The portable path takes a max pass and an exp pass. Rows are
// spread over the workers.
func (b *Backend) LogSoftmaxGather(logp, entropy, logits, targets kernels.Buffer, rows, v int) {
	kernels.CheckLogSoftmaxGather(logp, entropy, logits, targets, rows, v)
	b.logSoftmaxGather(logp.F32(), opt(entropy), logits.F32(), targets.I32(), rows, v)
}

// logSoftmaxGather is LogSoftmaxGather on host slices (entropy nil: none).
func (b *Backend) logSoftmaxGather(logp, entropy, logits []float32, targets []int32, rows, v int) {
	if b.simd.avx512 {
		b.parallelFor(rows, func(lo, hi int) {
			for r := lo; r < hi; r++ {
				row := logits[r*v : (r+1)*v]
				m, logS, h := rowLSE(row)
				logp[r] = float32(float64(row[targets[r]]) - m - logS)
				if entropy != nil {
					entropy[r] = float32(h)
				}
			}
		})
		return
	}
	avx := b.simd.isa()
	b.parallelForWorker(rows, func(w, lo, hi int) {
		e := b.scratch(w, v)
		for r := lo; r < hi; r++ {
			row := logits[r*v : (r+1)*v]
			m := bwMax(avx, row)
			s := bwExpSum(avx, e, row, v, m)
			ls := float32(math.Log(float64(s)))
			logp[r] = (row[targets[r]] - m) - ls
			if entropy != nil {
				// H = log s − Σ e·(x − m)/s, skipping −Inf logits.
				var ex float64
				for i, ei := range e {
					if ei != 0 && row[i] >= -math.MaxFloat32 {
						ex += float64(ei) * float64(row[i]-m)
					}
				}
				entropy[r] = float32(float64(ls) - ex/float64(s))
			}
		}
	})
}

// rowLSE makes one pass over row with lseAsm and returns its max m, log S
// with S = Σ exp(x − m), and the entropy log S − Σ exp(x − m)·(x − m)/S.
// The 16 lanes' states and the last n mod 16 elements combine in float64.
func rowLSE(row []float32) (m, logS, entropy float64) {
	var st [48]float32
	n16 := len(row) &^ (vecSz - 1)
	if n16 > 0 {
		lseAsm(&row[0], n16, &st[0])
	} else {
		for l := range vecSz {
			st[l] = float32(math.Inf(-1))
		}
	}
	m = math.Inf(-1)
	for l := range vecSz {
		m = math.Max(m, float64(st[l]))
	}
	for _, x := range row[n16:] {
		m = math.Max(m, float64(x))
	}
	var s, t float64 // Σ e and Σ e·(x − m) relative to the row max
	for l := range vecSz {
		if st[vecSz+l] == 0 {
			continue
		}
		d := float64(st[l]) - m
		c := math.Exp(d)
		s += c * float64(st[vecSz+l])
		t += c * (float64(st[2*vecSz+l]) + d*float64(st[vecSz+l]))
	}
	for _, x := range row[n16:] {
		if d := float64(x) - m; d > -200 {
			e := math.Exp(d)
			s += e
			t += e * d
		}
	}
	return m, math.Log(s), math.Log(s) - t/s
}

// Softmax replaces each row of x[R,V] by its softmax: SIMD max, exp(x −
// max) in place with its sum, and a scale by 1/sum; rows in parallel.
func (b *Backend) Softmax(x kernels.Buffer, rows, v int) {
	kernels.CheckSoftmax(x, rows, v)
	b.softmax(x.F32(), rows, v)
}

// softmax is Softmax on host slices.
func (b *Backend) softmax(x []float32, rows, v int) {
	avx := b.simd.isa()
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
