package cpu

import "fmt"

// lsgBlock is the column block of LogSoftmaxGatherBackward: a task is one
// (row, block) pair, so a few rows of a 151,936-word vocabulary still
// spread over every thread.
const lsgBlock = 1 << 13

// LogSoftmaxGatherBackward writes dlogits[r, i] = dlogp[r]·(1[i = targets[r]]
// − softmax(logits[r])[i]) in three parallel passes over (row, column
// block) tasks: block maxima; exp(x − row max) stored into dlogits with
// block sums; then dlogits scaled by −dlogp/Σ and dlogp added at the
// target. Blocks are fixed and their sums added in order (in float64), so
// the result is deterministic. Element i is read before it is written, so
// dlogits may alias logits.
func (b *Backend) LogSoftmaxGatherBackward(dlogits, logits []float32, targets []int32, dlogp []float32, rows, v int) {
	const op = "LogSoftmaxGatherBackward"
	needDims(op, rows, v)
	need(op, "dlogits", len(dlogits), rows*v)
	need(op, "logits", len(logits), rows*v)
	need(op, "targets", len(targets), rows)
	need(op, "dlogp", len(dlogp), rows)
	for r := range rows {
		if t := targets[r]; t < 0 || int(t) >= v {
			panic(fmt.Sprintf("kernels/cpu: %s: targets[%d] = %d outside [0, %d)", op, r, t, v))
		}
	}
	if rows == 0 || v == 0 {
		return
	}
	avx := b.simd.avx512
	nb := (v + lsgBlock - 1) / lsgBlock
	part := make([]float32, rows*nb) // [R, blocks]: block max, then block Σexp
	rowMax := make([]float32, rows)  // [R]
	coef := make([]float32, rows)    // [R] −dlogp/Σexp
	span := func(task int) (r, i0, i1 int) {
		r, bi := task/nb, task%nb
		return r, r*v + bi*lsgBlock, r*v + min(v, (bi+1)*lsgBlock)
	}
	par := func(fn func(lo, hi int)) {
		if rows*v < 1<<15 {
			fn(0, rows*nb)
			return
		}
		b.parallelFor(rows*nb, fn)
	}
	par(func(lo, hi int) {
		for task := lo; task < hi; task++ {
			_, i0, i1 := span(task)
			part[task] = bwMax(avx, logits[i0:i1])
		}
	})
	for r := range rows {
		rowMax[r] = maxGo(part[r*nb : (r+1)*nb])
	}
	par(func(lo, hi int) {
		for task := lo; task < hi; task++ {
			r, i0, i1 := span(task)
			part[task] = bwExpSum(avx, dlogits[i0:i1], logits[i0:i1], i1-i0, rowMax[r])
		}
	})
	for r := range rows {
		var s float64
		for _, p := range part[r*nb : (r+1)*nb] {
			s += float64(p)
		}
		coef[r] = float32(-float64(dlogp[r]) / s)
	}
	par(func(lo, hi int) {
		for task := lo; task < hi; task++ {
			r, i0, i1 := span(task)
			bwScale(avx, dlogits[i0:i1], coef[r])
			if t := r*v + int(targets[r]); t >= i0 && t < i1 {
				dlogits[t] += dlogp[r]
			}
		}
	})
}
