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

// SampleArgs are SampleRows's per-row inputs besides the logits, in
// Buffers so that a device backend reads them from its own memory (a
// recorded decode step replays with new ones uploaded into the same
// Buffers, see StepGrapher) and a CPU backend in place. Both are I32:
//   - Params [rows, SampleParamWords]: row r's SamplingParams as
//     PutSampleParams writes them (the bits of Temperature, TopK clamped
//     to int32, TopP, MinP: the layout of the CUDA kernel's SampleParams);
//   - U [rows, SampleUniformWords]: row r's uniform u ∈ [0, 1), the bits of
//     the float64, low word first (PutUniform); on a device its address
//     must be a multiple of 8 bytes.
type SampleArgs struct {
	Params Buffer
	U      Buffer
}

// SampleParamWords and SampleUniformWords are the I32 words of one row in
// SampleArgs.Params and SampleArgs.U.
const (
	SampleParamWords   = 4
	SampleUniformWords = 2
)

// PutSampleParams writes p into dst[:SampleParamWords] (TopK above the
// int32 range is clamped: it keeps every token either way).
func PutSampleParams(dst []int32, p SamplingParams) {
	k := p.TopK
	if k > math.MaxInt32 {
		k = math.MaxInt32
	}
	dst[0] = int32(math.Float32bits(p.Temperature))
	dst[1] = int32(k)
	dst[2] = int32(math.Float32bits(p.TopP))
	dst[3] = int32(math.Float32bits(p.MinP))
}

// PutUniform writes u into dst[:SampleUniformWords].
func PutUniform(dst []int32, u float64) {
	b := math.Float64bits(u)
	dst[0], dst[1] = int32(uint32(b)), int32(uint32(b>>32))
}

// SampleParamsAt reads the SamplingParams PutSampleParams wrote at
// params[r·SampleParamWords:].
func SampleParamsAt(params []int32, r int) SamplingParams {
	w := params[r*SampleParamWords : (r+1)*SampleParamWords]
	return SamplingParams{Temperature: math.Float32frombits(uint32(w[0])), TopK: int(w[1]),
		TopP: math.Float32frombits(uint32(w[2])), MinP: math.Float32frombits(uint32(w[3]))}
}

// UniformAt reads the uniform PutUniform wrote at u[r·SampleUniformWords:].
func UniformAt(u []int32, r int) float64 {
	w := u[r*SampleUniformWords : (r+1)*SampleUniformWords]
	return math.Float64frombits(uint64(uint32(w[0])) | uint64(uint32(w[1]))<<32)
}

// HostSampleArgs packs params and u (one each per row) into host Buffers.
func HostSampleArgs(params []SamplingParams, u []float64) SampleArgs {
	p, w := make([]int32, len(params)*SampleParamWords), make([]int32, len(u)*SampleUniformWords)
	for r, x := range params {
		PutSampleParams(p[r*SampleParamWords:], x)
	}
	for r, x := range u {
		PutUniform(w[r*SampleUniformWords:], x)
	}
	return SampleArgs{Params: HostI32(p), U: HostI32(w)}
}

// Rows is the arguments of rows [r0, r1).
func (a SampleArgs) Rows(r0, r1 int) SampleArgs {
	return SampleArgs{Params: a.Params.Slice(r0*SampleParamWords, r1*SampleParamWords),
		U: a.U.Slice(r0*SampleUniformWords, r1*SampleUniformWords)}
}

// CheckSampleRows panics, naming the argument, when SampleRows's buffers do
// not fit rows×v logits, or, for arguments in host memory, a row's
// parameters are out of range or a uniform is outside [0, 1): programmer
// errors (the model validates user settings first). Arguments in a
// device's memory are not read here; the device trusts them. Every backend
// calls it, so the rules live here once.
func CheckSampleRows(ids, logp, fullLogp, logits Buffer, args SampleArgs, rows, v int) {
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
	needI32("SampleRows", "params", args.Params, rows*SampleParamWords)
	needI32("SampleRows", "u", args.U, rows*SampleUniformWords)
	for r := range rows {
		if args.Params.Host() {
			p := SampleParamsAt(args.Params.I32(), r)
			if !(p.Temperature >= 0) || p.TopK < 0 || !(p.TopP >= 0 && p.TopP <= 1) || !(p.MinP >= 0 && p.MinP <= 1) {
				fail("row %d: invalid sampling parameters %+v", r, p)
			}
		}
		if args.U.Host() {
			if u := UniformAt(args.U.I32(), r); !(u >= 0 && u < 1) {
				fail("row %d: u = %v outside [0,1)", r, u)
			}
		}
	}
}
