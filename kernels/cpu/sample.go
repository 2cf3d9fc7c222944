package cpu

import (
	"container/heap"
	"fmt"
	"math"
	"slices"

	"github.com/x/kernels"
)

// Argmax returns the first index of the largest value of x: a max pass,
// then the first index holding it.
func (b *Backend) Argmax(x []float32) int32 {
	if len(x) == 0 {
		panic("kernels/cpu: Argmax: empty input")
	}
	m := bwMax(b.simd.avx512, x)
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

// Sample implements ref.Backend.Sample's specification with the same
// float64 arithmetic on every value that decides the token (so ids match
// the reference exactly under a fixed u), but selects instead of sorting:
// top-k's threshold comes from a size-k heap, and top-p sorts only the
// most likely candidates, growing the candidate set only if their mass
// stays below TopP. Filtering by z = logit/T is done on the float32 logits,
// which is exact: dividing distinct float32 values by the same positive T
// in float64 keeps them distinct and ordered.
func (b *Backend) Sample(logits []float32, p kernels.SamplingParams, u float64, scratch []float32) (int32, float32) {
	const op = "Sample"
	v := len(logits)
	checkSampling(op, v, p, u)
	if p.Temperature == 0 {
		return b.Argmax(logits), 0
	}
	finite := func(l float32) bool { return !math.IsInf(float64(l), -1) && l == l }
	lmax, nFinite := float32(math.Inf(-1)), 0
	for _, l := range logits {
		if finite(l) {
			nFinite++
			lmax = max(lmax, l)
		}
	}
	if nFinite == 0 {
		panic("kernels/cpu: Sample: no token has a finite logit")
	}
	temp := float64(p.Temperature)
	zmax := float64(lmax) / temp
	// thr: a token is kept iff it is finite and its logit ≥ thr.
	thr := float32(math.Inf(-1))
	if p.TopK > 0 && p.TopK < nFinite {
		thr = kthLargest(logits, p.TopK, finite)
	}
	kept := func(l float32) bool { return finite(l) && l >= thr }
	exp := func(l float32) float64 { return math.Exp(float64(l)/temp - zmax) }
	// keep[i] = 1 marks the tokens still in the distribution.
	keep := scratch
	if len(keep) < v {
		keep = make([]float32, v)
	}
	keep = keep[:v]
	n := 0
	for i, l := range logits {
		keep[i] = 0
		if kept(l) {
			keep[i] = 1
			n++
		}
	}
	if p.TopP > 0 && p.TopP < 1 {
		var s float64
		for i, l := range logits {
			if keep[i] != 0 {
				s += exp(l)
			}
		}
		topP(logits, keep, n, kept, exp, s, float64(p.TopP))
	}
	var s float64
	minP := float64(p.MinP)
	for i, l := range logits {
		if keep[i] != 0 {
			if x := exp(l); p.MinP > 0 && x < minP {
				keep[i] = 0
			} else {
				s += x
			}
		}
	}
	target := u * s
	pick := -1
	var cum float64
	for i, l := range logits {
		if keep[i] == 0 {
			continue
		}
		pick = i
		cum += exp(l)
		if cum > target {
			break
		}
	}
	return int32(pick), float32(float64(logits[pick])/temp - zmax - math.Log(s))
}

// kthLargest returns the k-th largest of the values of x that pass ok,
// counting duplicates (1 ≤ k ≤ their number), with a size-k min-heap.
func kthLargest(x []float32, k int, ok func(float32) bool) float32 {
	h := make(minHeap, 0, k)
	for _, l := range x {
		if !ok(l) {
			continue
		}
		if len(h) < k {
			heap.Push(&h, l)
		} else if l > h[0] {
			h[0] = l
			heap.Fix(&h, 0)
		}
	}
	return h[0]
}

// topP applies the top-p filter to the n tokens marked in keep (those
// passing kept): walking them by logit descending, ties by lower index,
// summing exp/s, a token survives while the mass before it is < topP. Only
// the c most likely candidates are sorted, c growing ×8 until the walk ends
// inside them; that sorted set is always a prefix of the full order.
func topP(x, keep []float32, n int, kept func(float32) bool, exp func(float32) float64, s, topP float64) {
	for c := min(64, n); ; c = min(8*c, n) {
		lo := kthLargest(x, c, kept) // the candidates: every kept token ≥ lo
		var cand []int
		for i, l := range x {
			if keep[i] != 0 && l >= lo {
				cand = append(cand, i)
			}
		}
		slices.SortFunc(cand, func(a, b int) int {
			if x[a] != x[b] {
				if x[a] > x[b] {
					return -1
				}
				return 1
			}
			return a - b
		})
		var cum float64
		for j, i := range cand {
			if cum >= topP {
				for _, d := range cand[j:] {
					keep[d] = 0
				}
				for d, l := range x {
					if l < lo {
						keep[d] = 0
					}
				}
				return
			}
			cum += exp(x[i]) / s
		}
		if len(cand) == n {
			return // the walk covered every token without reaching topP
		}
	}
}

// minHeap is a min-heap of float32 for container/heap.
type minHeap []float32

func (h minHeap) Len() int           { return len(h) }
func (h minHeap) Less(i, j int) bool { return h[i] < h[j] }
func (h minHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *minHeap) Push(x any)        { *h = append(*h, x.(float32)) }
func (h *minHeap) Pop() any {
	old := *h
	v := old[len(old)-1]
	*h = old[:len(old)-1]
	return v
}

// checkSampling panics on parameters no caller should pass; user-facing
// configuration is validated before it reaches a kernel.
func checkSampling(op string, v int, p kernels.SamplingParams, u float64) {
	switch {
	case v == 0:
		panic("kernels/cpu: " + op + ": empty logits")
	case !(p.Temperature >= 0), p.TopK < 0, !(p.TopP >= 0 && p.TopP <= 1), !(p.MinP >= 0 && p.MinP <= 1):
		panic(fmt.Sprintf("kernels/cpu: %s: invalid sampling parameters %+v", op, p))
	case !(u >= 0 && u < 1):
		panic(fmt.Sprintf("kernels/cpu: %s: u = %v outside [0,1)", op, u))
	}
}
