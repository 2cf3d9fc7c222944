package grpo

import "math"

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
