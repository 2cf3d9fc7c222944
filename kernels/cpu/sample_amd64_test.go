package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestExpRowAVX2 checks the vector exp against math.Exp bit for bit on
// random arguments across its range and NaN (not in range) for the rest.
func TestExpRowAVX2(t *testing.T) {
	if !vecExpExact() {
		t.Skip("no AVX2 + FMA here (or math.Exp is not on its FMA path): SampleRows uses math.Exp")
	}
	rng := rand.New(rand.NewPCG(5, 6))
	for _, c := range [][2]float64{{1, 0}, {0.6, 3.5}, {1.7, -2}, {1, 650}} {
		const n = 1 << 14
		x := make([]float32, n)
		for i := range x {
			x[i] = float32((rng.Float64()*2 - 1) * 800)
		}
		x[0], x[1], x[2], x[3] = float32(math.NaN()), float32(math.Inf(-1)), float32(math.Inf(1)), 0
		got := make([]float64, n)
		expRowAVX2(&got[0], &x[0], n, &c)
		bad := 0
		for i, v := range x {
			arg := float64(v)/c[0] - c[1]
			if arg >= -700 && arg <= 700 {
				if math.Float64bits(got[i]) != math.Float64bits(math.Exp(arg)) {
					bad++
				}
				continue
			}
			require.True(t, math.IsNaN(got[i]), "argument %g outside [−700, 700] gave %g, want NaN", arg, got[i])
		}
		assert.Zero(t, bad, "c %v: %d of %d in-range exps differ from math.Exp", c, bad, n)
	}
}
