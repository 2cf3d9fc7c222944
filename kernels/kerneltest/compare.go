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
// exactly) and NMSE ≤ tol.NMSE. It reports the first 5 mismatches with
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
			den += w * w
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
