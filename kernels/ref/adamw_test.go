package ref_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/x/kernels"
	"github.com/x/kernels/ref"
)

// TestAdamWTwoSteps checks two AdamW steps against values computed by hand
// (a float64 transcription of torch.optim.AdamW's single-tensor update,
// with the hyperparameters rounded to float32 as AdamWParams holds them, and
// the state rounded to float32 after each step as PyTorch stores it).
// Sanity of step 1 by hand: with m = v = 0 the bias-corrected update is
// lr·g/(|g|+eps) ≈ lr·sign(g), so param 0.5, grad 0.1, lr 1e-3, wd 0.01 gives
// 0.5·(1 − 1e-5) − 1e-3 = 0.498995. A zero gradient moves only by decay.
// Tolerance: 1e-6 relative (a few float32 ulps; the only differences are
// float64 rounding of pow/sqrt) plus 1e-12 absolute for the tiny v entries.
func TestAdamWTwoSteps(t *testing.T) {
	param0 := []float32{0.5, -1.25, 2.0, 0.0, 3.0}
	grads := [2][]float32{{0.1, -0.2, 0.0, 1e-3, -4.0}, {-0.3, 0.5, 0.25, 0.0, 2.0}}
	type state struct{ param, m, v []float32 }
	for _, tc := range []struct {
		name string
		p    kernels.AdamWParams
		want [2]state
	}{
		{
			name: "defaults_wd0.01",
			p:    kernels.AdamWParams{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01},
			want: [2]state{{
				param: []float32{0.49899500608444214, -1.2489875555038452, 1.9999799728393555, -0.0009999900357797742, 3.000969886779785},
				m:     []float32{0.010000002570450306, -0.020000005140900612, 0.0, 0.00010000002657761797, -0.40000009536743164},
				v:     []float32{9.999871508625802e-06, 3.9999486034503207e-05, 0.0, 9.999872041532853e-10, 0.015999794006347656},
			}, {
				param: []float32{0.49948421120643616, -1.2494173049926758, 1.999215841293335, -0.0016700287815183401, 3.001206159591675},
				m:     []float32{-0.021000007167458534, 0.03200000897049904, 0.025000005960464478, 9.000002319226041e-05, -0.1600000262260437},
				v:     []float32{9.998871973948553e-05, 0.0002899562823586166, 6.249919533729553e-05, 9.989872262750055e-10, 0.019983742386102676},
			}},
		},
		{
			// A large eps dominates sqrt(v̂) for small gradients; no decay.
			name: "large_eps_no_wd",
			p:    kernels.AdamWParams{LR: 0.1, Beta1: 0.5, Beta2: 0.75, Eps: 0.1},
			want: [2]state{{
				param: []float32{0.44999998807907104, -1.1833332777023315, 2.0, -0.0009900990407913923, 3.0975608825683594},
				m:     []float32{0.05000000074505806, -0.10000000149011612, 0.0, 0.0005000000237487257, -2.0},
				v:     []float32{0.002500000176951289, 0.010000000707805157, 0.0, 2.500000277905201e-07, 4.0},
			}, {
				param: []float32{0.4995974600315094, -1.2366665601730347, 1.942326307296753, -0.0013212644262239337, 3.0975608825683594},
				m:     []float32{-0.125, 0.20000000298023224, 0.125, 0.0002500000118743628, 0.0},
				v:     []float32{0.024375002831220627, 0.07000000029802322, 0.015625, 1.8750002084289008e-07, 4.0},
			}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			param := append([]float32(nil), param0...)
			m, v := make([]float32, len(param)), make([]float32, len(param))
			for step := 1; step <= 2; step++ {
				ref.Backend{}.AdamW(kernels.HostF32(param), kernels.HostF32(grads[step-1]), kernels.HostF32(m), kernels.HostF32(v), tc.p, step)
				want := tc.want[step-1]
				for _, c := range []struct {
					name      string
					got, want []float32
				}{{"param", param, want.param}, {"m", m, want.m}, {"v", v, want.v}} {
					for i := range c.want {
						w := float64(c.want[i])
						assert.InDelta(t, w, float64(c.got[i]), 1e-12+1e-6*math.Abs(w), "step %d %s[%d]", step, c.name, i)
					}
				}
			}
		})
	}
}
