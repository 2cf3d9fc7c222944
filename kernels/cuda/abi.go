package cuda

// Argument structs passed to kernels by pointer, laid out as their C
// twins in sample.cu, loss.cu and matmul.cu (every field 8 bytes, or
// 4-byte fields grouped so that the C and Go layouts agree). Pointers are
// carried as uintptr: host addresses of pinned slices in the host build,
// device addresses in the device build.

// gemmPart mirrors matmul.cu's GemmPart: one GEMM of a gemm_bf16_*_multi
// launch (MatMulMany).
type gemmPart struct {
	out, ws, w uintptr
	j, tile0   int64
}

// sampleParams mirrors sample.cu's SampleParams: one row of
// kernels.SampleArgs.Params as kernels.PutSampleParams writes it, read by
// sample_rows in place (TestSampleParamsLayout).
type sampleParams struct {
	temperature float32
	topK        int32
	topP, minP  float32
}

// lossArgs mirrors loss.cu's LossArgs: 20 pointers (uintptr, the slices
// pinned for the call), 4 int32 flags and 12 float32 settings.
type lossArgs struct {
	logp, entropy, oldLogP, refLogP, adv, seqAdv, mask, isRatio, weight uintptr
	entropyMask, samplingLogP, entropyWeight, seg                       uintptr
	loss, dlogp, dentropy, ratio, kl, clip, phi                         uintptr
	objective, sequenceRatio, klBias, offPolicy                         int32
	epsLow, epsHigh, delta, tauPos, tauNeg, kPos, lamPos, kNeg, lamNeg  float32
	beta, entropyCoef, offPolicyThreshold                               float32
}

// lossChunk is the segment length PolicyLoss uses when the caller gave no
// segments (only per-token terms are then needed).
const lossChunk = 1024

func flag(b bool) int32 {
	if b {
		return 1
	}
	return 0
}
