package cuda

// Argument structs passed to kernels by pointer, laid out as their C
// twins in attention.cu, sample.cu and loss.cu (every field 8 bytes, or
// 4-byte fields grouped so that the C and Go layouts agree). Pointers are
// carried as uintptr: host addresses of pinned slices in the host build,
// device addresses in the device build.

// attnSeq mirrors attention.cu's AttnSeq; pointers are carried as uintptr
// (the slices are pinned for the call).
type attnSeq struct {
	q, k, v, out, lse uintptr
	t, start          int64
	kb, vb            uintptr // block tables: arrays of block addresses (pinned)
	blockSize, dtype  int64
}

// attnGradSeq mirrors attention.cu's AttnGradSeq.
type attnGradSeq struct {
	dout, q, k, v, out, lse, dq, dk, dv, di uintptr
	t, start                                int64
	kb, vb                                  uintptr // block tables, as in attnSeq
	blockSize, dtype                        int64
}

// sampleParams mirrors sample.cu's SampleParams.
type sampleParams struct {
	temperature float32
	topK        int32
	topP, minP  float32
}

// lossArgs mirrors loss.cu's LossArgs: 17 pointers (uintptr, the slices
// pinned for the call), 3 int32 flags and 11 float32 settings.
type lossArgs struct {
	logp, entropy, oldLogP, refLogP, adv, seqAdv, mask, isRatio, weight, seg uintptr
	loss, dlogp, dentropy, ratio, kl, clip, phi                              uintptr
	objective, sequenceRatio, klBias                                         int32
	epsLow, epsHigh, delta, tauPos, tauNeg, kPos, lamPos, kNeg, lamNeg       float32
	beta, entropyCoef                                                        float32
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
