package kernels

import (
	"fmt"
	"math"
)

// NoToken is the id SampleRows gives a row with no finite logit.
const NoToken = -1

// AnyFinite reports whether some logit of row is finite (not NaN or ±Inf):
// whether SampleRows can draw from it.
func AnyFinite(row []float32) bool {
	for _, v := range row {
		if !math.IsNaN(float64(v)) && !math.IsInf(float64(v), 0) {
			return true
		}
	}
	return false
}

// CheckSampleRows panics, naming the argument, when SampleRows's buffers do
// not fit rows×v logits, a row's parameters are out of range, or a uniform
// is outside [0, 1): programmer errors (the model validates user settings
// first). Every backend calls it, so the rules live here once.
func CheckSampleRows(ids, logp, fullLogp, logits Buffer, params []SamplingParams, u []float64, rows, v int) {
	fail := func(format string, args ...any) {
		panic("kernels: SampleRows: " + fmt.Sprintf(format, args...))
	}
	if rows < 0 || v < 0 {
		fail("negative dimension rows %d, v %d", rows, v)
	}
	if rows > 0 && v == 0 {
		fail("empty logits")
	}
	needI32("SampleRows", "ids", ids, rows)
	needF32("SampleRows", "logits", logits, rows*v)
	needF32("SampleRows", "logp", logp, rows)
	needF32("SampleRows", "fullLogp", fullLogp, rows)
	for _, b := range []struct {
		name string
		have int
		want int
	}{{"params", len(params), rows}, {"u", len(u), rows}} {
		if b.have < b.want {
			fail("%s has %d elements, need %d", b.name, b.have, b.want)
		}
	}
	for r := range rows {
		p := params[r]
		if !(p.Temperature >= 0) || p.TopK < 0 || !(p.TopP >= 0 && p.TopP <= 1) || !(p.MinP >= 0 && p.MinP <= 1) {
			fail("row %d: invalid sampling parameters %+v", r, p)
		}
		if !(u[r] >= 0 && u[r] < 1) {
			fail("row %d: u = %v outside [0,1)", r, u[r])
		}
	}
}
