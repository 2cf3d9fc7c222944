package grpo

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/env"
	"github.com/x/kernels"
	"github.com/x/kernels/cpu"
	"github.com/x/kernels/kerneltest"
	"github.com/x/model"
	"github.com/x/tokenizer"
)

// precisionSpy is a CPU backend that counts the MatMuls with bf16 weights
// (the ones a MatMul precision changes) it runs at each precision.
type precisionSpy struct {
	*cpu.Backend
	calls map[kernels.MatMulPrecision]int
}

func (s *precisionSpy) MatMul(out, x kernels.Buffer, w kernels.Mat, m int, accumulate bool) {
	if w.DType == kernels.BF16 {
		s.calls[s.MatMulPrecision()]++
	}
	s.Backend.MatMul(out, x, w, m, accumulate)
}

// reset forgets the calls counted so far.
func (s *precisionSpy) reset() { s.calls = map[kernels.MatMulPrecision]int{} }

// tinyBF16Model is tinyModel with bf16 weights on a precisionSpy.
func tinyBF16Model(t *testing.T, seed uint64) (*model.Model, *tokenizer.Tokenizer, *precisionSpy) {
	t.Helper()
	tok := tokenizer.Tiny()
	cfg, err := model.NamedConfig("tiny")
	require.NoError(t, err)
	cfg.VocabSize = tok.VocabSize()
	cfg.EOSTokenIDs = []int32{tok.EOS()}
	dir := t.TempDir()
	// Weights of std 0.2 make distributions peaked enough that the
	// activations' bf16 rounding shows in the log-probs.
	require.NoError(t, model.WriteRandom(dir, cfg, kernels.BF16, seed, model.RandomOptions{Std: 0.2}))
	be := cpu.New(2)
	spy := &precisionSpy{Backend: be}
	spy.reset()
	m, err := model.Load(dir, spy)
	require.NoError(t, err)
	t.Cleanup(func() {
		m.Close()
		be.Close()
	})
	return m, tok, spy
}

// bf16Trainer is a LoRA trainer of a bf16 tiny model whose layout needs old
// log-probs (NumIterations 2), generating at precision prec.
func bf16Trainer(t *testing.T, prec string) (*Trainer, *precisionSpy, []env.Row) {
	t.Helper()
	m, tok, spy := tinyBF16Model(t, 5)
	cfg := testConfig(4, 2)
	cfg.NumIterations = 2
	cfg.MaxCompletionLength = 12
	cfg.RolloutMatMulPrecision = prec
	i := 0
	varying := func(context.Context, *Rollout) (float64, error) { i++; return float64(i % 3), nil }
	tr, err := NewTrainer(m, tok, cfg, WithReward("v", 1, varying), WithLoRA(model.LoRAConfig{R: 4, Alpha: 8}))
	require.NoError(t, err)
	t.Cleanup(func() { tr.Close() })
	require.True(t, tr.layout.NeedsOldLogProbs())
	rows := []env.Row{{"prompt": "Count to three."}, {"prompt": "Name a colour."}}
	return tr, spy, rows
}

// maxDiff is the largest |a−b| over the loss tokens.
func maxDiff(a, b [][]float32, seqs []trainSeq) float64 {
	d := 0.0
	for j, s := range seqs {
		for i, m := range s.mask {
			if m {
				d = max(d, math.Abs(float64(a[j][i])-float64(b[j][i])))
			}
		}
	}
	return d
}

// meanDiff is the mean |a−b| over the loss tokens.
func meanDiff(a, b [][]float32, seqs []trainSeq) float64 {
	d, n := 0.0, 0
	for j, s := range seqs {
		for i, m := range s.mask {
			if m {
				d += math.Abs(float64(a[j][i]) - float64(b[j][i]))
				n++
			}
		}
	}
	return d / float64(n)
}

// bitsEqual reports whether a and b hold the same float32 bits.
func bitsEqual(a, b [][]float32) bool {
	if len(a) != len(b) {
		return false
	}
	for j := range a {
		if len(a[j]) != len(b[j]) {
			return false
		}
		for i := range a[j] {
			if math.Float32bits(a[j][i]) != math.Float32bits(b[j][i]) {
				return false
			}
		}
	}
	return true
}

// lossAdvantages puts every rollout in the loss with advantages ±1.
func lossAdvantages(n int) Advantages {
	a := Advantages{A: make([]float64, n), Loss: repeat(true, n)}
	for i := range a.A {
		a.A[i] = float64(1 - 2*(i%2))
	}
	return a
}

// TestRolloutPrecisionBF16 generates at bf16 and trains exact: every
// bf16-weight MatMul of the generation ran at bf16 and every one of the
// scoring and training passes exact; the loss batch's old log-probs are an
// exact scoring pass's, bit for bit, while the rollouts' sampling log-probs
// are the bf16 forward's (close to a bf16 scoring pass, far from the
// exact one), and the step trains and leaves the backend exact.
func TestRolloutPrecisionBF16(t *testing.T) {
	tr, spy, rows := bf16Trainer(t, RolloutBF16)
	ctx := context.Background()

	spy.reset()
	gen := generateOnce(t, tr, rows)
	assert.Positive(t, spy.calls[kernels.MatMulBF16], "generation ran at bf16")
	assert.Zero(t, spy.calls[kernels.MatMulExact], "no generation MatMul ran exact")
	assert.Equal(t, kernels.MatMulExact, spy.MatMulPrecision(), "the backend is exact again after generating")

	spy.reset()
	gm := Metrics{}
	b, err := tr.prepare(ctx, &scoredGen{rs: gen.rollouts, adv: lossAdvantages(len(gen.rollouts))}, 0, gm)
	require.NoError(t, err)
	require.NotEmpty(t, b.seqs)
	assert.Positive(t, spy.calls[kernels.MatMulExact], "old log-probs were recomputed")
	assert.Zero(t, spy.calls[kernels.MatMulBF16], "scoring ran exact")
	require.NotNil(t, b.old, "NumIterations 2 needs old log-probs")
	assert.True(t, b.scored, "the engine's log-probs are a generator's: a scoring pass")
	assert.NotNil(t, b.isRatio, "ISCorrection applies (the default sequence_mask)")
	assert.Greater(t, gm[MetricSamplingLogpDiffMax], 1e-3, "sampling/* are known before learning")

	exact, err := tr.pol.logProbs(ctx, b.seqs, true)
	require.NoError(t, err)
	assert.True(t, bitsEqual(exact, b.old), "old log-probs are the exact scoring pass's, bit for bit")

	// The same scoring pass at bf16 gives other numbers (so the bit-for-bit
	// check above can fail), and the engine recorded the bf16 forward's:
	// far from the exact pass's (TestStepLayout holds decoding and scoring
	// at one precision within 1e-3; the rounding moves some by over 1e-2)
	// and, on average, much nearer the bf16 pass's. Decoding and scoring
	// at bf16 are not within 1e-3 of each other: their float32 sums differ
	// in order, which flips the bf16 rounding of a few activations, each
	// flip as large as the rounding itself.
	require.NoError(t, spy.SetMatMulPrecision(kernels.MatMulBF16))
	rounded, err := tr.pol.logProbs(ctx, b.seqs, true)
	require.NoError(t, spy.SetMatMulPrecision(kernels.MatMulExact))
	require.NoError(t, err)
	assert.False(t, bitsEqual(rounded, exact))
	far, near := meanDiff(b.sampler, exact, b.seqs), meanDiff(b.sampler, rounded, b.seqs)
	t.Logf("max |sampling − exact| %.3g; mean |sampling − exact| %.3g, |sampling − bf16 scoring| %.3g", maxDiff(b.sampler, exact, b.seqs), far, near)
	assert.Greater(t, maxDiff(b.sampler, exact, b.seqs), 1e-2, "the sampling log-probs carry the bf16 rounding")
	assert.Less(t, near, far/2, "the sampling log-probs are the bf16 forward's")

	spy.reset()
	before := snapshot(tr.Params())
	rep, err := tr.Step(ctx, rows)
	require.NoError(t, err)
	assert.True(t, changed(t, before, tr.Params()))
	assert.Equal(t, kernels.MatMulExact, spy.MatMulPrecision(), "exact after Step")
	assert.Positive(t, spy.calls[kernels.MatMulBF16])
	assert.Positive(t, spy.calls[kernels.MatMulExact])
	require.Len(t, rep.Metrics, 2)
	// sampling/* compares the exact scoring pass (before the policy
	// moved) with what the engine recorded at bf16, for every step of
	// the generation alike.
	assert.Greater(t, rep.Metrics[0][MetricSamplingLogpDiffMax], 1e-3)
	assert.Equal(t, rep.Metrics[0][MetricSamplingLogpDiffMax], rep.Metrics[1][MetricSamplingLogpDiffMax])
}

// TestRolloutPrecisionExact: "exact" (and "") leave generation alone:
// every MatMul runs exact and the engine's log-probs are the old
// log-probs, with no scoring pass and no correction, as before the option.
func TestRolloutPrecisionExact(t *testing.T) {
	for _, prec := range []string{RolloutExact, ""} {
		t.Run(fmt.Sprintf("%q", prec), func(t *testing.T) {
			tr, spy, rows := bf16Trainer(t, prec)
			assert.Nil(t, tr.pol.prec)
			spy.reset()
			gen := generateOnce(t, tr, rows)
			assert.Positive(t, spy.calls[kernels.MatMulExact])
			assert.Zero(t, spy.calls[kernels.MatMulBF16])

			spy.reset()
			b, err := tr.prepare(context.Background(), &scoredGen{rs: gen.rollouts, adv: lossAdvantages(len(gen.rollouts))}, 0, Metrics{})
			require.NoError(t, err)
			assert.Zero(t, spy.calls[kernels.MatMulExact]+spy.calls[kernels.MatMulBF16], "no scoring pass: the sampler's log-probs are the old ones")
			assert.False(t, b.scored)
			assert.Nil(t, b.isRatio)
			for k, j := range b.rows {
				assert.Equal(t, gen.rollouts[j].LogProbs, b.old[k])
			}
			_, err = tr.Step(context.Background(), rows)
			require.NoError(t, err)
			assert.Zero(t, spy.calls[kernels.MatMulBF16])
		})
	}
}

// TestRolloutPrecisionValidate: an unknown precision is a ConfigError
// naming the field and the values allowed.
func TestRolloutPrecisionValidate(t *testing.T) {
	c := DefaultConfig()
	c.RolloutMatMulPrecision = "fp8"
	err := c.Validate()
	require.Error(t, err)
	for _, s := range []string{"RolloutMatMulPrecision", "rollout_matmul_precision", `"fp8"`, `"exact"`, `"bf16"`} {
		assert.Contains(t, err.Error(), s)
	}
}

// TestRolloutPrecisionBackend: "bf16" needs a backend that can switch its
// precision; kerneltest.Counting (as a device backend) cannot, and
// NewTrainer says so by its type. "exact" needs nothing.
func TestRolloutPrecisionBackend(t *testing.T) {
	m, tok := tinyModelOn(t, 1, true) // a kerneltest.Counting over cpu
	cfg := testConfig(2, 1)
	cfg.RolloutMatMulPrecision = RolloutBF16
	_, err := NewTrainer(m, tok, cfg, WithReward("one", 1, constant(1)))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "*kerneltest.Counting")
	assert.Contains(t, err.Error(), "RolloutMatMulPrecision")

	cfg.RolloutMatMulPrecision = RolloutExact
	tr, err := NewTrainer(m, tok, cfg, WithReward("one", 1, constant(1)))
	require.NoError(t, err)
	require.NoError(t, tr.Close())
}

// exactOnlyBackend is a CPU backend that implements
// kernels.MatMulPrecisionSetter but supports exact only, as a device
// backend without a bf16 path would.
type exactOnlyBackend struct{ *cpu.Backend }

func (exactOnlyBackend) SetMatMulPrecision(p kernels.MatMulPrecision) error {
	if p != kernels.MatMulExact {
		return fmt.Errorf("exactOnly: %s not supported", p)
	}
	return nil
}

func (exactOnlyBackend) MatMulPrecision() kernels.MatMulPrecision { return kernels.MatMulExact }

// TestRolloutPrecisioner: which backends "bf16" rollouts accept, and that
// the probe leaves the backend's precision as it found it.
func TestRolloutPrecisioner(t *testing.T) {
	be := cpu.New(1)
	t.Cleanup(be.Close)
	tests := []struct {
		name    string
		b       kernels.Backend
		p       kernels.MatMulPrecision
		want    bool   // a setter comes back
		wantErr string // in the error
	}{
		{"exact needs nothing", &kerneltest.Counting{Backend: be}, kernels.MatMulExact, false, ""},
		{"cpu switches", be, kernels.MatMulBF16, true, ""},
		{"no setter", &kerneltest.Counting{Backend: be}, kernels.MatMulBF16, false, "does not implement kernels.MatMulPrecisionSetter"},
		{"setter refuses", exactOnlyBackend{be}, kernels.MatMulBF16, false, "refuses it (exactOnly: bf16 not supported)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := rolloutPrecisioner(tt.b, tt.p)
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				assert.Contains(t, err.Error(), "RolloutMatMulPrecision")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, s != nil)
			assert.Equal(t, kernels.MatMulExact, be.MatMulPrecision(), "the probe put the precision back")
		})
	}
}

// cancelAfter is the model's decoder that cancels its context after n
// steps, so the next step fails.
type cancelAfter struct {
	turnDecoder
	n      int
	cancel context.CancelFunc
}

func (d *cancelAfter) step(ctx context.Context) (map[int]turn, error) {
	out, err := d.turnDecoder.step(ctx)
	if d.n--; d.n == 0 {
		d.cancel()
	}
	return out, err
}

// TestRolloutPrecisionRestoredOnFailure: a prefill, a decode step or a
// whole Step that fails (a cancelled context), or a generation that
// panics, leaves the backend at its previous precision.
func TestRolloutPrecisionRestoredOnFailure(t *testing.T) {
	tr, spy, rows := bf16Trainer(t, RolloutBF16)
	done, cancel := context.WithCancel(context.Background())
	cancel()

	sq := newSeq(1, tr.chat.Tokenizer().Encode("Hello there"))
	defer sq.release()
	assert.ErrorIs(t, tr.pol.prefill(done, []seq{sq}), context.Canceled)
	assert.Equal(t, kernels.MatMulExact, spy.MatMulPrecision(), "after a failed prefill")

	d := tr.pol.newDecoder(tr.sampling(), tr.eng.stop)
	defer d.close()
	_, err := d.add(genRequest{seq: sq, maxTokens: 4})
	require.NoError(t, err)
	_, err = d.step(done)
	assert.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, kernels.MatMulExact, spy.MatMulPrecision(), "after a failed decode step")

	assert.PanicsWithValue(t, "boom", func() {
		_ = tr.pol.generating(context.Background(), func() error {
			assert.Equal(t, kernels.MatMulBF16, spy.MatMulPrecision(), "inside generation")
			panic("boom")
		})
	})
	assert.Equal(t, kernels.MatMulExact, spy.MatMulPrecision(), "after a panic")

	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	tr.eng.decoder = func(s sampling, st []int32) turnDecoder {
		return &cancelAfter{turnDecoder: tr.pol.newDecoder(s, st), n: 2, cancel: stop}
	}
	spy.reset()
	_, err = tr.Step(ctx, rows)
	assert.ErrorIs(t, err, context.Canceled)
	assert.Positive(t, spy.calls[kernels.MatMulBF16], "the step generated before it failed")
	assert.Equal(t, kernels.MatMulExact, spy.MatMulPrecision(), "after a Step cancelled mid-generation")
	assert.Equal(t, TrainerState{}, tr.State())
}

// TestRolloutPrecisionRestoresPrevious: generation puts back whatever
// precision the backend had, not always exact.
func TestRolloutPrecisionRestoresPrevious(t *testing.T) {
	tr, spy, _ := bf16Trainer(t, RolloutBF16)
	require.NoError(t, spy.SetMatMulPrecision(kernels.MatMulBF16))
	tr.pol.rollout = kernels.MatMulExact // a precision other than the backend's
	require.NoError(t, tr.pol.generating(context.Background(), func() error {
		assert.Equal(t, kernels.MatMulExact, spy.MatMulPrecision())
		return nil
	}))
	assert.Equal(t, kernels.MatMulBF16, spy.MatMulPrecision())
	require.NoError(t, spy.SetMatMulPrecision(kernels.MatMulExact))
}

// TestRolloutPrecisionWarnsWithoutBF16Weights: "bf16" on a policy with no
// bf16 weight (a float32 model, or full fine-tuning's float32 masters)
// changes no number; NewTrainer says so in the log, and only for "bf16".
func TestRolloutPrecisionWarnsWithoutBF16Weights(t *testing.T) {
	for _, tc := range []struct {
		prec string
		warn bool
	}{{RolloutBF16, true}, {RolloutExact, false}} {
		t.Run(tc.prec, func(t *testing.T) {
			m, tok := tinyModel(t, 1) // float32 weights
			cfg := testConfig(2, 1)
			cfg.RolloutMatMulPrecision = tc.prec
			var log bytes.Buffer
			tr, err := NewTrainer(m, tok, cfg, WithReward("one", 1, constant(1)), WithLoRA(model.LoRAConfig{R: 2, Alpha: 4}),
				WithLogger(slog.New(slog.NewTextHandler(&log, nil))))
			require.NoError(t, err)
			require.NoError(t, tr.Close())
			if tc.warn {
				assert.Contains(t, log.String(), "rollout_matmul_precision bf16 changes nothing: the policy has no bf16 weights")
			} else {
				assert.NotContains(t, log.String(), "rollout_matmul_precision")
			}
		})
	}
}
