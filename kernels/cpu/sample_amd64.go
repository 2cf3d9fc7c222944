package cpu

import "math"

// expRowAVX2: dst[i] = math.Exp(float64(x[i])/c[0] − c[1]) for i < n, n a
// multiple of 4, bit for bit where the argument is in [−700, 700] and
// math.Exp takes its FMA path; NaN in the other lanes (see sample_amd64.s).
//
//go:noescape
func expRowAVX2(dst *float64, x *float32, n int, c *[2]float64)

// vecExpExact reports whether expRowAVX2 runs here and equals math.Exp bit
// for bit on a spread of probe arguments: it copies math.Exp's FMA path,
// which math takes only when the CPU (and GODEBUG) allow FMA; otherwise
// SampleRows keeps calling math.Exp.
func vecExpExact() bool {
	if !detect().avx2 {
		return false
	}
	const n = 512
	var x [n]float32
	var got [n]float64
	for i := range x {
		// arguments from −700 to about 3 with irregular fractions
		x[i] = float32(-700 + 703*float64(i)/n + 1e-3*float64(i%7))
	}
	c := [2]float64{1.0 / 0.7, 0.25}
	expRowAVX2(&got[0], &x[0], n, &c)
	for i, v := range x {
		want := math.Exp(float64(v)/c[0] - c[1])
		if math.Float64bits(got[i]) != math.Float64bits(want) {
			return false
		}
	}
	return true
}
