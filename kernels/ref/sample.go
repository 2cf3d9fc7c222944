package ref

import (
	"math"
	"slices"

	"github.com/x/kernels"
)

// Argmax returns the first index of the largest value of x.
func (Backend) Argmax(x kernels.Buffer) (int32, error) {
	kernels.CheckArgmax(x)
	return argmax(x.F32()), nil
}

// argmax is Argmax on a host slice.
func argmax(x []float32) int32 {
	best := 0
	for i, v := range x {
		if v > x[best] {
			best = i
		}
	}
	return int32(best)
}

// SampleRows draws one token per row of logits[R,V] (row r under its
// parameters and uniform in args) by sampleRow, row after row.
func (b Backend) SampleRows(ids, logp, fullLogp, logits kernels.Buffer, args kernels.SampleArgs, rows, v int) {
	kernels.CheckSampleRows(ids, logp, fullLogp, logits, args, rows, v)
	b.sampleRows(ids.I32(), logp.F32(), fullLogp.F32(), logits.F32(), args.Params.I32(), args.U.I32(), rows, v)
}

// sampleRows is SampleRows on host slices (params and u packed as
// kernels.SampleArgs).
func (b Backend) sampleRows(ids []int32, logp, fullLogp, logits []float32, params, u []int32, rows, v int) {
	for r := range rows {
		row := logits[r*v : (r+1)*v]
		if !kernels.AnyFinite(row) {
			ids[r], logp[r], fullLogp[r] = kernels.NoToken, float32(math.NaN()), float32(math.NaN())
			continue
		}
		ids[r], logp[r], fullLogp[r] = b.sampleRow(row, kernels.SampleParamsAt(params, r), kernels.UniformAt(u, r))
	}
}

// sampleRow draws a token from logits[V], which has a finite logit, under p
// with u ∈ [0,1) as its only randomness. It is the specification of
// sampling; in float64 throughout:
//
//  1. z[i] = logits[i] / Temperature; tokens with z = −Inf are dropped.
//  2. Top-k keeps every token with z ≥ the k-th largest z (ties at the
//     boundary are all kept, as Hugging Face's TopKLogitsWarper does).
//  3. Top-p: with e[i] = exp(z[i] − max z) over the kept tokens and S their
//     sum in index order, walk the kept tokens by z descending (ties by lower
//     index) summing e/S; a token is kept while the mass before it is < TopP
//     (Hugging Face's TopPLogitsWarper; the most likely token always stays).
//  4. Min-p drops tokens with e[i] < MinP (p < MinP · p_max).
//  5. With S the sum of e over the kept tokens in index order, the sample is
//     the first kept token, in index order, whose running sum of e exceeds
//     u·S (the last kept token if rounding leaves none).
//
// The log-probability is z − max z − log S for the sampled token. The full
// log-probability is not part of the draw: it is fullLogProb, training's
// arithmetic (Scale then LogSoftmaxGather) on the same row.
func (b Backend) sampleRow(logits []float32, p kernels.SamplingParams, u float64) (id int32, logp, full float32) {
	v := len(logits)
	if p.Temperature == 0 {
		id := argmax(logits)
		return id, 0, fullLogProb(logits, 1, id)
	}
	z := make([]float64, v)
	keep := make([]bool, v)
	zmax := math.Inf(-1)
	for i, l := range logits {
		z[i] = float64(l) / float64(p.Temperature)
		keep[i] = !math.IsInf(z[i], -1) && !math.IsNaN(z[i])
		if keep[i] {
			zmax = math.Max(zmax, z[i])
		}
	}
	if math.IsInf(zmax, -1) {
		panic("kernels/ref: SampleRows: no token has a finite logit")
	}
	if p.TopK > 0 && p.TopK < v {
		var kept []float64
		for i := range z {
			if keep[i] {
				kept = append(kept, z[i])
			}
		}
		if p.TopK < len(kept) {
			slices.Sort(kept)
			kth := kept[len(kept)-p.TopK]
			for i := range z {
				keep[i] = keep[i] && z[i] >= kth
			}
		}
	}
	e := make([]float64, v)
	sum := func() float64 {
		var s float64
		for i := range z {
			if keep[i] {
				e[i] = math.Exp(z[i] - zmax)
				s += e[i]
			}
		}
		return s
	}
	if p.TopP > 0 && p.TopP < 1 {
		s := sum()
		var order []int
		for i := range z {
			if keep[i] {
				order = append(order, i)
			}
		}
		slices.SortFunc(order, func(a, b int) int {
			if z[a] != z[b] {
				if z[a] > z[b] {
					return -1
				}
				return 1
			}
			return a - b
		})
		var cum float64
		for _, i := range order {
			if cum >= float64(p.TopP) {
				keep[i] = false
				continue
			}
			cum += e[i] / s
		}
	}
	if p.MinP > 0 {
		for i := range z {
			keep[i] = keep[i] && math.Exp(z[i]-zmax) >= float64(p.MinP)
		}
	}
	s := sum()
	target := u * s
	pick := -1
	var cum float64
	for i := range z {
		if !keep[i] {
			continue
		}
		pick = i
		cum += e[i]
		if cum > target {
			break
		}
	}
	return int32(pick), float32(z[pick] - zmax - math.Log(s)), fullLogProb(logits, p.Temperature, int32(pick))
}

// fullLogProb is SampleRows' full log-probability of token id: the
// specification every backend follows is that it is, bit for bit, what
// that backend's Scale(row, 1/T) (1/T rounded to float32; skipped at T = 1,
// where it is the identity) then LogSoftmaxGather give for id, the
// arithmetic training takes the same token's log-prob with. Here that is
// logSoftmaxGather's float64 log-sum-exp of the float32 products.
func fullLogProb(logits []float32, temperature float32, id int32) float32 {
	x := logits
	if temperature != 1 {
		x = slices.Clone(logits)
		scale(x, 1/temperature)
	}
	return logProbOf(x, id)
}
