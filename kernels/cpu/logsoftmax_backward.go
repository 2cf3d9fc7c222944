package cpu

import (
	"math"

	"github.com/x/kernels"
)

// lsgBlock is the column block of LogSoftmaxGatherBackward. Every row is
// reduced block by block (block maxima, then block sums of exp added in
// block order in float64), whichever way the work is split, so the result
// is bitwise the same for any thread count.
const lsgBlock = 1 << 13

// LogSoftmaxGatherBackward writes dlogits[r, i] = dlogp[r]·(1[i = targets[r]]
// − softmax(logits[r])[i]): the row max; exp(x − max) stored into dlogits
// with its sum; dlogits scaled by −dlogp/Σ, and dlogp added at the target.
// With dentropy it adds the entropy term (see entropyBackward).
// With at least two rows per thread, rows run in parallel and each row's
// three passes hit its cached copy (a 151,936-word row is 600 KB); with
// fewer rows, each pass is split over (row, column block) tasks so a few
// rows still use every thread. Element i is read before it is written, so
// dlogits may alias logits.
func (b *Backend) LogSoftmaxGatherBackward(dlogits, logits, targets, dlogp, dentropy kernels.Buffer, rows, v int) {
	kernels.CheckLogSoftmaxGatherBackward(dlogits, logits, targets, dlogp, dentropy, rows, v)
	b.logSoftmaxGatherBackward(dlogits.F32(), logits.F32(), targets.I32(), dlogp.F32(), opt(dentropy), rows, v)
}

// logSoftmaxGatherBackward is LogSoftmaxGatherBackward on host slices (dentropy nil: none).
func (b *Backend) logSoftmaxGatherBackward(dlogits, logits []float32, targets []int32, dlogp, dentropy []float32, rows, v int) {
	if rows == 0 || v == 0 {
		return
	}
	if dentropy != nil {
		b.entropyBackward(dlogits, logits, targets, dlogp, dentropy, rows, v)
		return
	}
	l := lsg{avx: b.simd.isa(), dlogits: dlogits, logits: logits, targets: targets, dlogp: dlogp, v: v,
		nb: (v + lsgBlock - 1) / lsgBlock}
	l.part = make([]float32, rows*l.nb)
	l.rowMax = make([]float32, rows)
	l.coef = make([]float32, rows)
	if rows*v < 1<<15 || rows >= 2*b.threads {
		rowsFn := func(lo, hi int) {
			for r := lo; r < hi; r++ {
				l.max(r*l.nb, (r+1)*l.nb)
				l.rowMaxOf(r)
				l.exp(r*l.nb, (r+1)*l.nb)
				l.coefOf(r)
				l.scale(r*l.nb, (r+1)*l.nb)
			}
		}
		if rows*v < 1<<15 {
			rowsFn(0, rows)
		} else {
			b.parallelFor(rows, rowsFn)
		}
		return
	}
	tasks := rows * l.nb
	b.parallelFor(tasks, l.max)
	for r := range rows {
		l.rowMaxOf(r)
	}
	b.parallelFor(tasks, l.exp)
	for r := range rows {
		l.coefOf(r)
	}
	b.parallelFor(tasks, l.scale)
}

// lsg is one LogSoftmaxGatherBackward call; a task is a (row, column
// block) pair, task = row·nb + block.
type lsg struct {
	avx             isa
	dlogits, logits []float32 // [R, V]
	targets         []int32   // [R]
	dlogp           []float32 // [R]
	v, nb           int
	part            []float32 // [R, nb] block max, then block Σexp
	rowMax, coef    []float32 // [R] row max; −dlogp/Σexp
}

func (l *lsg) span(task int) (r, i0, i1 int) {
	r, bi := task/l.nb, task%l.nb
	return r, r*l.v + bi*lsgBlock, r*l.v + min(l.v, (bi+1)*lsgBlock)
}

func (l *lsg) max(lo, hi int) {
	for task := lo; task < hi; task++ {
		_, i0, i1 := l.span(task)
		l.part[task] = bwMax(l.avx, l.logits[i0:i1])
	}
}

func (l *lsg) rowMaxOf(r int) { l.rowMax[r] = maxGo(l.part[r*l.nb : (r+1)*l.nb]) }

func (l *lsg) exp(lo, hi int) {
	for task := lo; task < hi; task++ {
		r, i0, i1 := l.span(task)
		l.part[task] = bwExpSum(l.avx, l.dlogits[i0:i1], l.logits[i0:i1], i1-i0, l.rowMax[r])
	}
}

func (l *lsg) coefOf(r int) {
	var s float64
	for _, p := range l.part[r*l.nb : (r+1)*l.nb] {
		s += float64(p)
	}
	l.coef[r] = float32(-float64(l.dlogp[r]) / s)
}

func (l *lsg) scale(lo, hi int) {
	for task := lo; task < hi; task++ {
		r, i0, i1 := l.span(task)
		bwScale(l.avx, l.dlogits[i0:i1], l.coef[r])
		if t := r*l.v + int(l.targets[r]); t >= i0 && t < i1 {
			l.dlogits[t] += l.dlogp[r]
		}
	}
}

// entropyBackward is LogSoftmaxGatherBackward with the entropy term: with
// e = exp(x − m) (SIMD, into the worker's scratch), S = Σe, log p = x − m −
// log S and H = log S − Σ e·(x − m)/S (float64),
// dlogits[i] = g·1[i = t] + e[i]·(α + β·(x[i] − m)) with α = (−g − c·(H −
// log S))/S and β = −c/S, for g = dlogp and c = dentropy. Offsets are taken
// from the row max so large logits do not cancel. Rows run in parallel;
// element i is read before it is written (dlogits may alias logits).
func (b *Backend) entropyBackward(dlogits, logits []float32, targets []int32, dlogp, dentropy []float32, rows, v int) {
	avx := b.simd.isa()
	b.parallelForWorker(rows, func(w, lo, hi int) {
		e := b.scratch(w, v)
		for r := lo; r < hi; r++ {
			x, out := logits[r*v:(r+1)*v], dlogits[r*v:(r+1)*v]
			m := bwMax(avx, x)
			s := float64(bwExpSum(avx, e, x, v, m))
			t := expDotOffset(e, x, m)
			logS := math.Log(s)
			h := logS - t/s
			g, c := float64(dlogp[r]), float64(dentropy[r])
			alpha, beta := float32((-g-c*(h-logS))/s), float32(-c/s)
			scaleByOffset(out, e, x, m, alpha, beta)
			out[targets[r]] += float32(g)
		}
	})
}

// expDotOffset is Σ e[i]·(x[i] − m) in float64 over the entries whose
// logit is above m − 88 (below it e is 0 in float32, and a −Inf logit's e
// from the SIMD exp may not be exactly 0), with four accumulators so the
// float64 adds do not serialise.
func expDotOffset(e, x []float32, m float32) float64 {
	x = x[:len(e)]
	var t0, t1, t2, t3 float64
	term := func(ei, xi float32) float64 {
		if d := xi - m; d > -88 {
			return float64(ei) * float64(d)
		}
		return 0
	}
	i := 0
	for ; i+4 <= len(e); i += 4 {
		t0 += term(e[i], x[i])
		t1 += term(e[i+1], x[i+1])
		t2 += term(e[i+2], x[i+2])
		t3 += term(e[i+3], x[i+3])
	}
	for ; i < len(e); i++ {
		t0 += term(e[i], x[i])
	}
	return (t0 + t1) + (t2 + t3)
}

// scaleByOffset writes out[i] = e[i]·(alpha + beta·(x[i] − m)), 0 where the
// logit is at or below m − 88 (see expDotOffset). x[i] is read before
// out[i] is written, so out may alias x.
func scaleByOffset(out, e, x []float32, m, alpha, beta float32) {
	x, out = x[:len(e)], out[:len(e)]
	for i, ei := range e {
		d := x[i] - m
		o := ei * (alpha + beta*d)
		if !(d > -88) {
			o = 0
		}
		out[i] = o
	}
}
