package model

import (
	"context"
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/kernels"
	"github.com/x/kernels/cpu"
	"github.com/x/kernels/ref"
)

// trLoRARef is the "lora" section of testdata/tiny_tied_f32.json.
type trLoRARef struct {
	InputIDs        []int32                `json:"input_ids"`
	TargetPositions []int                  `json:"target_positions"`
	TargetIDs       []int32                `json:"target_ids"`
	Logprobs        []float64              `json:"logprobs"`
	Objective       float64                `json:"objective"`
	Gradients       map[string]trJSONArray `json:"gradients"`
}

// trJSONArray is a nested JSON list of numbers, flattened row-major.
type trJSONArray []float64

func (a *trJSONArray) UnmarshalJSON(b []byte) error {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	var walk func(any)
	walk = func(x any) {
		switch x := x.(type) {
		case []any:
			for _, e := range x {
				walk(e)
			}
		case float64:
			*a = append(*a, x)
		}
	}
	walk(v)
	return nil
}

func trReadLoRARef(t *testing.T) trLoRARef {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "tiny_tied_f32.json"))
	require.NoError(t, err)
	var doc struct {
		LoRA trLoRARef `json:"lora"`
	}
	require.NoError(t, json.Unmarshal(data, &doc))
	return doc.LoRA
}

// trLoadTiny loads the tiny reference checkpoint on be, with its PEFT
// adapter when adapter is set.
func trLoadTiny(t *testing.T, be kernels.Backend, adapter bool) *Model {
	t.Helper()
	m, err := Load(filepath.Join("testdata", "tiny_tied_f32"), be)
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.Close() })
	if adapter {
		_, err := LoadAdapter(filepath.Join("testdata", "tiny_tied_f32_lora"), m)
		require.NoError(t, err)
	}
	return m
}

// trRelErr is ‖got − want‖ / ‖want‖.
func trRelErr(got []float32, want []float64) float64 {
	var d, n float64
	for i := range want {
		e := float64(got[i]) - want[i]
		d += e * e
		n += want[i] * want[i]
	}
	return math.Sqrt(d / n)
}

// TestLoRAGradientsMatchReference checks the training forward's log-probs
// and the LoRA gradients of the summed completion log-probs against the
// float64 reference. Tolerances: log-probs 1e-5 absolute, gradients 1e-3
// relative (float32 accumulation over a 2-layer model; the reference
// README expects about 1e-4).
func TestLoRAGradientsMatchReference(t *testing.T) {
	want := trReadLoRARef(t)
	fast := cpu.New(2)
	defer fast.Close()
	for _, tc := range []struct {
		name       string
		be         kernels.Backend
		checkpoint bool
	}{{"ref", ref.Backend{}, false}, {"cpu", fast, false}, {"cpu-checkpoint", fast, true}} {
		t.Run(tc.name, func(t *testing.T) {
			m := trLoadTiny(t, tc.be, true)
			tr, err := NewTrainable(m, TrainOptions{KeepActivations: !tc.checkpoint, LogitsChunk: 3})
			require.NoError(t, err)
			start := want.TargetPositions[0] + 1
			seq := TrainSeq{IDs: want.InputIDs, Start: start}
			lp, ent, err := tr.Forward(context.Background(), []TrainSeq{seq})
			require.NoError(t, err)
			require.Len(t, lp[0], len(want.Logprobs))
			for i, w := range want.Logprobs {
				assert.InDelta(t, w, lp[0][i], 1e-5, "logprob %d", i)
				assert.Greater(t, ent[0][i], float32(0))
			}
			ones := make([]float32, len(want.Logprobs))
			for i := range ones {
				ones[i] = 1
			}
			require.NoError(t, tr.Backward(context.Background(), [][]float32{ones}))
			require.Len(t, tr.Params(), len(want.Gradients))
			worst := 0.0
			for _, p := range tr.Params() {
				g, ok := want.Gradients[p.Name]
				require.True(t, ok, "no reference gradient for %s", p.Name)
				require.Equal(t, len(g), p.Grad.Len(), p.Name)
				e := trRelErr(p.Grad.F32(), g)
				worst = max(worst, e)
				// The issue asks for 1e-3; measured worst 4.2e-7 (ref) and
				// 1.2e-6 (cpu), so 1e-5 catches a systematic error early.
				assert.Less(t, e, 1e-5, "%s relative error", p.Name)
			}
			t.Logf("%s: LoRA gradients: worst relative error %.2e over %d tensors", tc.name, worst, len(tr.Params()))
		})
	}
}

// TestTrainingForwardMatchesInference: the training forward's log-probs
// equal the inference path's (Model.LogProbs and Logits), with adapters on
// and off, and with a sampling temperature given to both the same way
// (1e-5 absolute: both float32, different op order).
func TestTrainingForwardMatchesInference(t *testing.T) {
	ctx := context.Background()
	m := trLoadTiny(t, ref.Backend{}, true)
	seqs := trRandomSeqs(rand.New(rand.NewPCG(2, 2)), m.Config.VocabSize, 14, 6, 9)
	for _, temp := range []float32{1, 0.6} {
		tr, err := NewTrainable(m, TrainOptions{Temperature: temp, LogitsChunk: 7})
		require.NoError(t, err)
		for _, adapters := range []bool{true, false} {
			lp, ent, err := tr.LogProbs(ctx, seqs, adapters)
			require.NoError(t, err)
			for s, seq := range seqs {
				logits, err := m.Logits(seq.IDs, Options{NoAdapters: !adapters})
				require.NoError(t, err)
				v := m.Config.VocabSize
				for i := range seq.Scored() {
					row := logits[(seq.Start+i-1)*v : (seq.Start+i)*v]
					wlp, went := trLogSoftmax(row, temp, seq.IDs[seq.Start+i])
					assert.InDelta(t, wlp, lp[s][i], 1e-5, "T=%v adapters=%v seq %d token %d", temp, adapters, s, i)
					assert.InDelta(t, went, ent[s][i], 1e-5, "entropy")
				}
			}
			// Model.LogProbs takes the temperature the same way.
			var scored []Scored
			for _, seq := range seqs {
				scored = append(scored, Scored{Tokens: seq.IDs, Start: seq.Start, Mask: seq.Mask})
			}
			inf, err := m.LogProbs(ctx, scored, LogProbsOptions{NoAdapters: !adapters, Temperature: temp})
			require.NoError(t, err)
			for s, seq := range seqs {
				for i := range seq.Scored() {
					assert.InDelta(t, inf[s].LogProbs[seq.Start+i], lp[s][i], 1e-5)
				}
			}
		}
	}
}

// trLogSoftmax is the float64 log-softmax of row/temp at target, and the
// distribution's entropy.
func trLogSoftmax(row []float32, temp float32, target int32) (float64, float64) {
	mx := math.Inf(-1)
	for _, x := range row {
		mx = max(mx, float64(x/temp))
	}
	var z float64
	for _, x := range row {
		z += math.Exp(float64(x/temp) - mx)
	}
	lse := mx + math.Log(z)
	var h float64
	for _, x := range row {
		l := float64(x/temp) - lse
		h -= math.Exp(l) * l
	}
	return float64(row[target]/temp) - lse, h
}

// TestTrainableRejectsBadUse: misuse and bad batches are errors, not
// panics, and leave the gradients untouched.
func TestTrainableRejectsBadUse(t *testing.T) {
	ctx := context.Background()
	m := trRandomModel(t, trMicroConfig(true), kernels.F32, ref.Backend{}, 2)
	_, err := NewTrainable(m, TrainOptions{})
	assert.ErrorContains(t, err, "nothing to train")
	// An adapter on the last layer only: Full must refuse before touching
	// any weight (the embedding is converted first).
	require.NoError(t, AttachLoRA(m, LoRAConfig{R: 2, Alpha: 2, Layers: []int{len(m.Layers) - 1}}, 1))
	embed := &m.Embed.F32()[0]
	_, err = NewTrainable(m, TrainOptions{Full: true})
	assert.ErrorContains(t, err, "merge or detach")
	assert.Same(t, embed, &m.Embed.F32()[0], "a refused Full conversion leaves the weights as they were")
	DetachLoRA(m)
	require.NoError(t, AttachLoRA(m, LoRAConfig{R: 2, Alpha: 2}, 1))
	_, err = NewTrainable(m, TrainOptions{LogitsChunk: -1})
	assert.Error(t, err)
	for _, temp := range []float64{-1, math.NaN(), math.Inf(1)} {
		// As Model.LogProbs: a temperature must be finite and ≥ 0.
		_, err = NewTrainable(m, TrainOptions{Temperature: float32(temp)})
		assert.ErrorContains(t, err, "temperature", "%v", temp)
	}

	tr, err := NewTrainable(m, TrainOptions{})
	require.NoError(t, err)
	assert.ErrorContains(t, tr.Backward(ctx, nil), "without a pending Forward")
	ok := TrainSeq{IDs: []int32{1, 2, 3}, Start: 1}
	for _, bad := range [][]TrainSeq{
		nil,
		{{IDs: []int32{1, 2}, Start: 0}},
		{{IDs: []int32{1, 2}, Start: 3}},
		{ok, {IDs: []int32{1, 48}, Start: 1}},
		{{IDs: []int32{1, 2, 3}, Start: 1, Mask: []bool{true}}},
	} {
		_, err := tr.Accumulate(ctx, bad, SFTLoss(bad))
		assert.Error(t, err, "%v", bad)
		_, _, err = tr.LogProbs(ctx, bad, true)
		assert.Error(t, err, "%v", bad)
	}
	for _, p := range tr.Params() {
		assert.Equal(t, make([]float32, p.Grad.Len()), p.Grad.F32(), "no gradient from rejected batches")
	}
	_, _, err = tr.Forward(ctx, []TrainSeq{ok})
	require.NoError(t, err)
	assert.ErrorContains(t, tr.Backward(ctx, [][]float32{{1}}), "weights")
	assert.ErrorContains(t, tr.Backward(ctx, [][]float32{{1, 1}, {1}}), "sequences")
	require.NoError(t, tr.Backward(ctx, [][]float32{{1, 1}}))
	assert.Error(t, tr.Backward(ctx, [][]float32{{1, 1}}), "one Backward per Forward")

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	_, err = tr.Accumulate(cancelled, []TrainSeq{ok}, SFTLoss([]TrainSeq{ok}))
	assert.ErrorIs(t, err, context.Canceled)
	_, _, err = tr.LogProbs(cancelled, []TrainSeq{ok}, true)
	assert.ErrorIs(t, err, context.Canceled)
}
