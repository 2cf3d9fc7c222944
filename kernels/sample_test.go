package kernels_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/x/kernels"
)

// TestCheckSampleRows: misfit buffers and out-of-range rows panic naming
// the argument.
func TestCheckSampleRows(t *testing.T) {
	ids, lp, full := make([]int32, 2), make([]float32, 2), make([]float32, 2)
	logits := make([]float32, 6)
	params := []kernels.SamplingParams{{Temperature: 1}, {}}
	u := []float64{0, 0.5}
	kernels.CheckSampleRows(kernels.HostI32(ids), kernels.HostF32(lp), kernels.HostF32(full), kernels.HostF32(logits), kernels.HostSampleArgs(params, u), 2, 3)
	for _, tc := range []struct {
		name, msg string
		f         func()
	}{
		{"logits", "logits", func() {
			kernels.CheckSampleRows(kernels.HostI32(ids), kernels.HostF32(lp), kernels.HostF32(full), kernels.HostF32(logits[:5]), kernels.HostSampleArgs(params, u), 2, 3)
		}},
		{"fullLogp", "fullLogp", func() {
			kernels.CheckSampleRows(kernels.HostI32(ids), kernels.HostF32(lp), kernels.HostF32(full[:1]), kernels.HostF32(logits), kernels.HostSampleArgs(params, u), 2, 3)
		}},
		{"u", "u = 1", func() {
			kernels.CheckSampleRows(kernels.HostI32(ids), kernels.HostF32(lp), kernels.HostF32(full), kernels.HostF32(logits), kernels.HostSampleArgs(params, []float64{0, 1}), 2, 3)
		}},
		{"top-p", "row 1", func() {
			kernels.CheckSampleRows(kernels.HostI32(ids), kernels.HostF32(lp), kernels.HostF32(full), kernels.HostF32(logits), kernels.HostSampleArgs([]kernels.SamplingParams{{}, {TopP: 2}}, u), 2, 3)
		}},
		{"params", "params", func() {
			kernels.CheckSampleRows(kernels.HostI32(ids), kernels.HostF32(lp), kernels.HostF32(full), kernels.HostF32(logits), kernels.HostSampleArgs(params[:1], u), 2, 3)
		}},
		{"empty", "empty logits", func() {
			kernels.CheckSampleRows(kernels.HostI32(ids), kernels.HostF32(lp), kernels.HostF32(full), kernels.Buffer{}, kernels.HostSampleArgs(params, u), 2, 0)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				r := recover()
				if assert.NotNil(t, r) {
					assert.Contains(t, r.(string), "SampleRows")
					assert.Contains(t, r.(string), tc.msg)
				}
			}()
			tc.f()
		})
	}
}

// TestSampleArgsRoundTrip: PutSampleParams and PutUniform are read back
// exactly by SampleParamsAt and UniformAt (every bit of u), TopK past the
// int32 range clamped, and Rows slices both Buffers by row.
func TestSampleArgsRoundTrip(t *testing.T) {
	params := []kernels.SamplingParams{{}, {Temperature: 0.7, TopK: 20, TopP: 0.95, MinP: 0.01}, {Temperature: 1, TopK: math.MaxInt32 + 5}}
	u := []float64{0, 0.123456789012345678, math.Nextafter(1, 0)}
	a := kernels.HostSampleArgs(params, u)
	for r := range params {
		want := params[r]
		want.TopK = min(want.TopK, math.MaxInt32)
		assert.Equal(t, want, kernels.SampleParamsAt(a.Params.I32(), r))
		assert.Equal(t, math.Float64bits(u[r]), math.Float64bits(kernels.UniformAt(a.U.I32(), r)))
	}
	s := a.Rows(1, 3)
	assert.Equal(t, 2*kernels.SampleParamWords, s.Params.Len())
	assert.Equal(t, params[1], kernels.SampleParamsAt(s.Params.I32(), 0))
	assert.Equal(t, u[2], kernels.UniformAt(s.U.I32(), 1))
}
