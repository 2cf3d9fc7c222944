package kernels_test

import (
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
	kernels.CheckSampleRows(kernels.HostI32(ids), kernels.HostF32(lp), kernels.HostF32(full), kernels.HostF32(logits), params, u, 2, 3)
	for _, tc := range []struct {
		name, msg string
		f         func()
	}{
		{"logits", "logits", func() {
			kernels.CheckSampleRows(kernels.HostI32(ids), kernels.HostF32(lp), kernels.HostF32(full), kernels.HostF32(logits[:5]), params, u, 2, 3)
		}},
		{"fullLogp", "fullLogp", func() {
			kernels.CheckSampleRows(kernels.HostI32(ids), kernels.HostF32(lp), kernels.HostF32(full[:1]), kernels.HostF32(logits), params, u, 2, 3)
		}},
		{"u", "u = 1", func() {
			kernels.CheckSampleRows(kernels.HostI32(ids), kernels.HostF32(lp), kernels.HostF32(full), kernels.HostF32(logits), params, []float64{0, 1}, 2, 3)
		}},
		{"top-p", "row 1", func() {
			kernels.CheckSampleRows(kernels.HostI32(ids), kernels.HostF32(lp), kernels.HostF32(full), kernels.HostF32(logits), []kernels.SamplingParams{{}, {TopP: 2}}, u, 2, 3)
		}},
		{"empty", "empty logits", func() {
			kernels.CheckSampleRows(kernels.HostI32(ids), kernels.HostF32(lp), kernels.HostF32(full), kernels.Buffer{}, params, u, 2, 0)
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
