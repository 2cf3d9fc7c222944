package grpo

import (
	"math"
	"slices"
)

// nanMean is the mean of the non-NaN values of x (torch.nanmean), NaN if
// there are none.
func nanMean(x []float64) float64 {
	sum, n := 0.0, 0
	for _, v := range x {
		if !math.IsNaN(v) {
			sum += v
			n++
		}
	}
	if n == 0 {
		return math.NaN()
	}
	return sum / float64(n)
}

// nanStd is the Bessel-corrected (N−1) standard deviation of the non-NaN
// values of x (TRL's nanstd), NaN if there are fewer than two.
func nanStd(x []float64) float64 {
	mean := nanMean(x)
	ss, n := 0.0, 0
	for _, v := range x {
		if !math.IsNaN(v) {
			d := v - mean
			ss += d * d
			n++
		}
	}
	if n < 2 {
		return math.NaN()
	}
	return math.Sqrt(ss / float64(n-1))
}

// quantileLinear is the q-quantile of x with linear interpolation between
// order statistics (torch.quantile's default). x must not be empty; it is
// not modified.
func quantileLinear(x []float64, q float64) float64 {
	s := slices.Clone(x)
	slices.Sort(s)
	pos := q * float64(len(s)-1)
	lo := int(math.Floor(pos))
	if lo >= len(s)-1 {
		return s[len(s)-1]
	}
	if lo < 0 {
		return s[0]
	}
	return s[lo] + (pos-float64(lo))*(s[lo+1]-s[lo])
}
