package model

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/kernels"
	"github.com/x/kernels/ref"
)

// sftCorpus is four arithmetic sequences mod vocab; each starts with its
// own token, so every next token is determined and a model can drive the
// loss to zero.
func sftCorpus(vocab, n int) []TrainSeq {
	var seqs []TrainSeq
	for k, step := range []int{1, 3, 5, 7} {
		ids := make([]int32, n)
		for i := range ids {
			ids[i] = int32((2*k + 1 + i*step) % vocab)
		}
		seqs = append(seqs, TrainSeq{IDs: ids, Start: 1})
	}
	return seqs
}

// TestSFTFromScratch trains a tiny randomly initialised model (full
// fine-tuning, AdamW, warmup + cosine) on the corpus with the mean
// negative log-likelihood and requires the loss to fall from about ln V
// to below 0.05.
func TestSFTFromScratch(t *testing.T) {
	ctx := context.Background()
	cfg := Config{VocabSize: 32, HiddenSize: 32, IntermediateSize: 64, NumLayers: 2, NumHeads: 4,
		NumKVHeads: 2, HeadDim: 8, RMSNormEps: 1e-6, RopeTheta: 1e4, TieWordEmbeddings: true, BOSTokenID: -1}
	dir := t.TempDir()
	require.NoError(t, WriteRandom(dir, cfg, kernels.F32, 1, RandomOptions{}))
	m, err := Load(dir, ref.Backend{})
	require.NoError(t, err)
	defer m.Close()
	tr, err := NewTrainable(m, TrainOptions{Full: true})
	require.NoError(t, err)
	const steps = 120
	opt := DefaultAdamWConfig(1e-2)
	opt.WeightDecay = 0
	opt.Schedule = Schedule{Kind: ScheduleCosine, LR: 1e-2, WarmupSteps: 10, TotalSteps: steps}
	o, err := NewAdamW(m.Backend, tr.Params(), opt)
	require.NoError(t, err)
	seqs := sftCorpus(cfg.VocabSize, 16)
	nll := SFTLoss(seqs)
	var first, last float64
	for step := range steps {
		tr.ZeroGrad()
		res, err := tr.Accumulate(ctx, seqs, nll)
		require.NoError(t, err)
		loss := res.Loss
		if step == 0 {
			first = loss
		}
		last = loss
		_, err = o.Step()
		require.NoError(t, err)
	}
	t.Logf("SFT loss %.3f -> %.4f in %d steps", first, last, steps)
	assert.Greater(t, first, 3.0, "starts near ln 32")
	assert.Less(t, last, 0.05)
}
