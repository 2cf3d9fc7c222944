package kerneltest

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// CheckClose compares got with want under tol: per element
// |got−want| ≤ ATol + RTol·|want| (non-finite wants must be matched
// exactly) and NMSE ≤ tol.NMSE, where a want of exactly 0 counts as
// zeroFloor in NMSE's denominator. It reports the first 5 mismatches with
// index, got and want, and the largest absolute and relative errors. It
// returns whether both checks passed.
func CheckClose(t *testing.T, what string, got, want []float32, tol Tol) bool {
	t.Helper()
	require.Equal(t, len(want), len(got), "%s: length", what)
	c := compare(got, want, tol)
	okElems := assert.Zerof(t, c.bad, "%s: %d of %d elements outside |got−want| ≤ %g + %g·|want| (max abs err %.3g, max rel err %.3g); first mismatches:%s",
		what, c.bad, len(want), tol.ATol, tol.RTol, c.maxAbs, c.maxRel, c.first)
	okNMSE := assert.LessOrEqualf(t, c.nmse, tol.NMSE, "%s: NMSE %.3g > %.3g (max abs err %.3g, max rel err %.3g)",
		what, c.nmse, tol.NMSE, c.maxAbs, c.maxRel)
	return okElems && okNMSE
}

// zeroFloor is the magnitude a reference of exactly 0 stands for in NMSE's
// denominator: float32's machine epsilon, 2⁻²³. A value that is 0 in
// exact arithmetic but computed from O(1) quantities (the log-prob of a
// token whose probability rounds to 1: log of a sum that is 1 within
// rounding) comes out as rounding error (the H200's sampler, which sums in
// float64, gave 1e-17 where the reference's float64 gave 0), while its
// relative error, and with an all-zero reference the NMSE, is infinite.
// With the floor, NMSE ≤ tol.NMSE bounds such an error at √NMSE·2⁻²³
// (1.2e-13 for SampleLogProb's 1e-12): float64 rounding passes, while an
// error of float32's order (a sum kept in float32) or more still fails;
// the element check (ATol) is unchanged.
const zeroFloor = 1.0 / (1 << 23)

// comparison is CheckClose's verdict on two equally long slices.
type comparison struct {
	bad                  int     // elements outside ATol + RTol·|want|, or non-finite mismatches
	nmse, maxAbs, maxRel float64 // over the finite elements
	first                string  // the first 5 mismatches, one per line
}

func compare(got, want []float32, tol Tol) comparison {
	var c comparison
	var num, den float64
	var first strings.Builder
	for i := range want {
		g, w := float64(got[i]), float64(want[i])
		var ok bool
		switch {
		case math.IsNaN(w):
			ok = math.IsNaN(g)
		case math.IsInf(w, 0):
			ok = g == w
		case math.IsNaN(g) || math.IsInf(g, 0):
			ok = false
		default:
			d := math.Abs(g - w)
			num += d * d
			if w == 0 {
				den += zeroFloor * zeroFloor
			} else {
				den += w * w
			}
			c.maxAbs = math.Max(c.maxAbs, d)
			if w != 0 {
				c.maxRel = math.Max(c.maxRel, d/math.Abs(w))
			}
			ok = d <= tol.ATol+tol.RTol*math.Abs(w)
		}
		if !ok {
			if c.bad < 5 {
				fmt.Fprintf(&first, "\n  [%d] got %.9g want %.9g", i, g, w)
			}
			c.bad++
		}
	}
	switch {
	case den > 0:
		c.nmse = num / den
	case num > 0:
		c.nmse = math.Inf(1)
	}
	c.first = first.String()
	return c
}

// CheckExact requires got and want to be bitwise equal (NaNs of any
// payload count as equal), reporting the first 5 differences.
func CheckExact(t *testing.T, what string, got, want []float32) bool {
	t.Helper()
	require.Equal(t, len(want), len(got), "%s: length", what)
	var bad int
	var first strings.Builder
	for i := range want {
		g, w := got[i], want[i]
		if math.Float32bits(g) == math.Float32bits(w) || (g != g && w != w) {
			continue
		}
		if bad < 5 {
			fmt.Fprintf(&first, "\n  [%d] got %.9g want %.9g", i, g, w)
		}
		bad++
	}
	return assert.Zerof(t, bad, "%s: %d of %d elements differ; first:%s", what, bad, len(want), first.String())
}
