package cpu

import (
	"math"
	"slices"
	"unsafe"

	"github.com/x/kernels"
)

// Argmax returns the first index of the largest value of x: a max pass,
// then the first index holding it.
func (b *Backend) Argmax(x kernels.Buffer) (int32, error) {
	kernels.CheckArgmax(x)
	return b.argmax(x.F32()), nil
}

// argmax is Argmax on a host slice.
func (b *Backend) argmax(x []float32) int32 {
	m := bwMax(b.simd.isa(), x)
	for i, v := range x {
		if v == m {
			return int32(i)
		}
	}
	// Only NaNs compare false everywhere: fall back to the reference rule.
	best := 0
	for i, v := range x {
		if v > x[best] {
			best = i
		}
	}
	return int32(best)
}

// SampleRows samples the rows in parallel, one sampleRow each with the
// worker's scratch, and computes each full log-prob the way training does:
// the row scaled by 1/T in float32 (Backend.Scale) and the row's
// log-sum-exp as LogSoftmaxGather takes it, so on this backend it equals
// Scale then LogSoftmaxGather bit for bit.
func (b *Backend) SampleRows(ids, logp, fullLogp, logits kernels.Buffer, args kernels.SampleArgs, rows, v int) {
	kernels.CheckSampleRows(ids, logp, fullLogp, logits, args, rows, v)
	b.sampleRows(ids.I32(), logp.F32(), fullLogp.F32(), logits.F32(), args.Params.I32(), args.U.I32(), rows, v)
}

// sampleRows is SampleRows on host slices (params and u packed as
// kernels.SampleArgs).
func (b *Backend) sampleRows(ids []int32, logp, fullLogp, logits []float32, params, u []int32, rows, v int) {
	b.parallelForWorker(rows, func(w, lo, hi int) {
		buf := b.scratch(w, 2*v)
		keep, scaled := buf[:v], buf[v:]
		for r := lo; r < hi; r++ {
			row := logits[r*v : (r+1)*v]
			if !kernels.AnyFinite(row) {
				ids[r], logp[r], fullLogp[r] = kernels.NoToken, float32(math.NaN()), float32(math.NaN())
				continue
			}
			p := kernels.SampleParamsAt(params, r)
			ids[r], logp[r] = b.sampleRow(row, p, kernels.UniformAt(u, r), buf)
			x := row
			if t := p.Temperature; t != 0 && t != 1 {
				invT := 1 / t
				for i, l := range row {
					scaled[i] = l * invT
				}
				x = scaled
			}
			fullLogp[r] = b.rowLogProb(x, ids[r], keep)
		}
	})
}

// rowLogProb is log_softmax(x)[id] as LogSoftmaxGather computes it; e is
// scratch of len(x).
func (b *Backend) rowLogProb(x []float32, id int32, e []float32) float32 {
	if b.simd.avx512 {
		m, logS, _ := rowLSE(x)
		return float32(float64(x[id]) - m - logS)
	}
	avx := b.simd.isa()
	m := bwMax(avx, x)
	s := bwExpSum(avx, e, x, len(x), m)
	return (x[id] - m) - float32(math.Log(float64(s)))
}

// sampleRow implements ref.Backend's sampling specification with the same
// float64 arithmetic on every value that decides the token (so ids match
// the reference exactly under a fixed u), but selects instead of sorting:
// top-k's threshold comes from a size-k heap, and top-p quickselects the
// cut (see topP). Filtering by z = logit/T is done on the float32 logits,
// which is exact: dividing distinct float32 values by the same positive T
// in float64 keeps them distinct and ordered. Without top-p, each exp is
// computed once (rowExps) and replaced by the running sum s of the kept
// ones, so the walk to u·s is a scan of sums that equal, addition for
// addition, the reference's cumulative ones. scratch holds 2·len(logits)
// (the exps and sums as float64).
func (b *Backend) sampleRow(logits []float32, p kernels.SamplingParams, u float64, scratch []float32) (int32, float32) {
	v := len(logits)
	if p.Temperature == 0 {
		return b.argmax(logits), 0
	}
	finite := func(l float32) bool { return !math.IsInf(float64(l), -1) && l == l }
	// The largest finite logit (l > lmax is false for NaN and −Inf); the
	// count of finite ones only matters to top-k.
	lmax := float32(math.Inf(-1))
	for _, l := range logits {
		if l > lmax {
			lmax = l
		}
	}
	if math.IsInf(float64(lmax), -1) {
		panic("kernels/cpu: SampleRows: no token has a finite logit")
	}
	nFinite := v
	if p.TopK > 0 && p.TopK < v {
		nFinite = 0
		for _, l := range logits {
			if finite(l) {
				nFinite++
			}
		}
	}
	temp := float64(p.Temperature)
	zmax := float64(lmax) / temp
	// thr: a token is kept iff it is finite and its logit ≥ thr.
	thr := float32(math.Inf(-1))
	if p.TopK > 0 && p.TopK < nFinite {
		thr = kthLargest(logits, p.TopK, finite)
	}
	kept := func(l float32) bool { return finite(l) && l >= thr }
	lmin := float32(math.Inf(-1))
	exp := func(l float32) float64 { return math.Exp(float64(l)/temp - zmax) }
	// What is left: drop tokens under min-p, then walk the kept tokens in
	// index order to the first whose running sum of e exceeds u·s.
	minP := float64(p.MinP)
	var s, cum float64
	pick := -1
	if len(scratch) < 2*v {
		scratch = make([]float32, 2*v)
	}
	if !(p.TopP > 0 && p.TopP < 1) {
		// ev[i]: exp of token i, then the sum of the walked tokens' exps
		// up to i (the reference's cum after token i).
		ev := unsafe.Slice((*float64)(unsafe.Pointer(&scratch[0])), v)
		b.rowExps(ev, logits, temp, zmax)
		last := -1
		for i, l := range logits {
			if l >= thr && l > lmin { // kept(l)
				if e := ev[i]; !(p.MinP > 0 && e < minP) {
					s += e
					last = i
				}
			}
			ev[i] = s
		}
		// The first walked token whose sum exceeds u·s: sums only grow,
		// and a token that is not walked repeats the sum before it, so
		// the first index over u·s is a walked token.
		target := u * s
		pick = last
		for i, c := range ev {
			if c > target {
				pick = i
				break
			}
		}
		return int32(pick), float32(float64(logits[pick])/temp - zmax - math.Log(s))
	}
	// keep[i] = 1 marks the tokens still in the distribution.
	keep := scratch[:v]
	n := 0
	for i, l := range logits {
		keep[i] = 0
		if kept(l) {
			keep[i] = 1
			n++
		}
	}
	{
		idx, ev := make([]int32, 0, n), make([]float64, 0, n) // kept tokens in index order, their exps
		for i, l := range logits {
			if keep[i] != 0 {
				e := exp(l)
				s += e
				idx, ev = append(idx, int32(i)), append(ev, e)
			}
		}
		topP(logits, keep, idx, ev, s, float64(p.TopP))
		s = 0
		for j, i := range idx {
			if keep[i] != 0 {
				if p.MinP > 0 && ev[j] < minP {
					keep[i] = 0
				} else {
					s += ev[j]
				}
			}
		}
		target := u * s
		for j, i := range idx {
			if keep[i] != 0 {
				pick = int(i)
				if cum += ev[j]; cum > target {
					break
				}
			}
		}
	}
	return int32(pick), float32(float64(logits[pick])/temp - zmax - math.Log(s))
}

// rowExps sets e[i] = math.Exp(float64(x[i])/temp − zmax) for every i, bit
// for bit: four at a time by expRowAVX2 where it is exact (b.vecExp), its
// NaN lanes (arguments out of its range) and the tail by math.Exp.
func (b *Backend) rowExps(e []float64, x []float32, temp, zmax float64) {
	n := 0
	if b.vecExp && b.simd.avx2 {
		n = len(x) &^ 3
		c := [2]float64{temp, zmax}
		if n > 0 {
			expRowAVX2(&e[0], &x[0], n, &c)
		}
	}
	for i := range x {
		if i < n && e[i] == e[i] {
			continue
		}
		e[i] = math.Exp(float64(x[i])/temp - zmax)
	}
}

// kthLargest returns the k-th largest of the values of x that pass ok,
// counting duplicates (1 ≤ k ≤ their number), with a size-k min-heap.
func kthLargest(x []float32, k int, ok func(float32) bool) float32 {
	h := make([]float32, 0, k)
	for _, l := range x {
		switch {
		case !ok(l):
		case len(h) < k:
			h = append(h, l)
			for i := len(h) - 1; i > 0 && h[(i-1)/2] > h[i]; i = (i - 1) / 2 {
				h[i], h[(i-1)/2] = h[(i-1)/2], h[i]
			}
		case l > h[0]:
			h[0] = l
			for i := 0; ; {
				c := 2*i + 1
				if c >= k {
					break
				}
				if c+1 < k && h[c+1] < h[c] {
					c++
				}
				if h[i] <= h[c] {
					break
				}
				h[i], h[c] = h[c], h[i]
				i = c
			}
		}
	}
	return h[0]
}

// before reports whether token a comes before token b in the top-p walk:
// higher logit first, ties by lower index (a strict total order).
func before(x []float32, a, b int32) bool { return x[a] > x[b] || (x[a] == x[b] && a < b) }

// topPEps is the margin within which a cumulative mass computed in another
// order than the reference's might round to the other side of TopP: sums of
// at most ~10⁶ probabilities differ by < 10⁻¹⁰.
const topPEps = 1e-9

// topP applies the top-p filter to the kept tokens idx (in index order;
// ev[j]/s is the probability of token idx[j], the reference's expression):
// walking them in the order of before, a token survives while the mass
// before it is < topP. A quickselect on that order narrows the cut to ≤ 64
// tokens, adding whole partitions' masses (in any order), then sorts and
// walks only those. If a decision falls within topPEps of topP, where
// summation order could matter, it redoes the reference's full sort and
// sequential sum, so the result is always the reference's.
func topP(x, keep []float32, idx []int32, ev []float64, s, topP float64) {
	pos := make([]int32, len(idx)) // a permutation of positions into idx/ev
	for j := range pos {
		pos[j] = int32(j)
	}
	prec := func(a, b int32) bool { return before(x, idx[a], idx[b]) }
	lo, hi := 0, len(pos) // pos[:lo] all kept, pos[hi:] all dropped
	above := 0.0          // mass of pos[:lo]
	for hi-lo > 64 {
		a, b, c := pos[lo], pos[(lo+hi)/2], pos[hi-1]
		if prec(b, a) {
			a, b = b, a
		}
		if prec(c, b) {
			b = c
			if prec(b, a) {
				b = a
			}
		}
		pivot, mid := b, lo // partition: the tokens before the pivot, then the pivot
		for j := lo; j < hi; j++ {
			if prec(pos[j], pivot) {
				pos[mid], pos[j] = pos[j], pos[mid]
				mid++
			}
		}
		for j := mid; j < hi; j++ {
			if pos[j] == pivot {
				pos[mid], pos[j] = pos[j], pos[mid]
				break
			}
		}
		mid++
		var mass float64
		for _, j := range pos[lo:mid] {
			mass += ev[j] / s
		}
		switch t := above + mass; {
		case t < topP-topPEps: // every token up to the pivot has mass before it < topP
			above, lo = t, mid
		case t > topP+topPEps: // the token after the pivot has mass before it ≥ topP
			hi = mid
		default:
			topPSorted(keep, idx, ev, s, topP, pos, prec)
			return
		}
	}
	region := pos[lo:hi]
	slices.SortFunc(region, func(a, b int32) int {
		if prec(a, b) {
			return -1
		}
		return 1
	})
	cut, cum := hi, above
	for j, q := range region {
		if math.Abs(cum-topP) < topPEps {
			topPSorted(keep, idx, ev, s, topP, pos, prec)
			return
		}
		if cum >= topP {
			cut = lo + j
			break
		}
		cum += ev[q] / s
	}
	for _, q := range pos[cut:] {
		keep[idx[q]] = 0
	}
}

// topPSorted is the reference's top-p: a full sort and a sequential sum.
func topPSorted(keep []float32, idx []int32, ev []float64, s, topP float64, pos []int32, prec func(a, b int32) bool) {
	slices.SortFunc(pos, func(a, b int32) int {
		if prec(a, b) {
			return -1
		}
		return 1
	})
	var cum float64
	for _, q := range pos {
		if cum >= topP {
			keep[idx[q]] = 0
			continue
		}
		cum += ev[q] / s
	}
}
