package model

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/kernels"
	"github.com/x/kernels/cpu"
	"github.com/x/kernels/ref"
)

const tinyDir = "testdata/tiny_tied_f32"

// reference is testdata/tiny_tied_f32.json, the float64 reference values.
type reference struct {
	Logits struct {
		InputIDs []int32     `json:"input_ids"`
		Logits   [][]float64 `json:"logits"`
		Argmax   []int32     `json:"argmax"`
	} `json:"logits"`
	LogProbs struct {
		PromptIDs     []int32   `json:"prompt_ids"`
		CompletionIDs []int32   `json:"completion_ids"`
		LogProbs      []float64 `json:"logprobs"`
		Sum           float64   `json:"sum"`
	} `json:"logprobs"`
	Greedy struct {
		PromptIDs    []int32 `json:"prompt_ids"`
		MaxNewTokens int     `json:"max_new_tokens"`
		Tokens       []int32 `json:"tokens"`
	} `json:"greedy"`
	LoRA struct {
		AdapterDir      string      `json:"adapter_dir"`
		InputIDs        []int32     `json:"input_ids"`
		Logits          [][]float64 `json:"logits"`
		TargetPositions []int       `json:"target_positions"`
		TargetIDs       []int32     `json:"target_ids"`
		LogProbs        []float64   `json:"logprobs"`
		GreedyPrompt    []int32     `json:"greedy_prompt_ids"`
		GreedyTokens    []int32     `json:"greedy_tokens"`
	} `json:"lora"`
}

func loadReference(t *testing.T) reference {
	t.Helper()
	data, err := os.ReadFile("testdata/tiny_tied_f32.json")
	require.NoError(t, err)
	var r reference
	require.NoError(t, json.Unmarshal(data, &r))
	require.NotEmpty(t, r.Logits.Logits)
	return r
}

// testBackend is one backend the model tests run on.
type testBackend struct {
	name string
	b    kernels.Backend
}

// inferBackends returns the reference and the fast CPU backend; the CPU one is
// closed when the test ends.
func inferBackends(t *testing.T) []testBackend {
	t.Helper()
	c := cpu.New(2)
	t.Cleanup(c.Close)
	return []testBackend{{"ref", ref.Backend{}}, {"cpu", c}}
}

func openTiny(t *testing.T, b kernels.Backend) *Model {
	t.Helper()
	m, err := Load(tinyDir, b)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, m.Close()) })
	return m
}

// assertClose checks |got−want| ≤ atol + rtol·|want| element-wise and
// reports the first few mismatches.
func assertClose(t *testing.T, got []float32, want []float64, atol, rtol float64, what string) {
	t.Helper()
	require.Len(t, got, len(want), what)
	bad := 0
	worst := 0.0
	for i, w := range want {
		d := math.Abs(float64(got[i]) - w)
		worst = math.Max(worst, d)
		if !(d <= atol+rtol*math.Abs(w)) {
			if bad < 5 {
				t.Errorf("%s[%d]: got %.8g, want %.8g (diff %.3g)", what, i, got[i], w, d)
			}
			bad++
		}
	}
	if bad > 0 {
		t.Errorf("%s: %d of %d elements out of tolerance (max abs diff %.3g)", what, bad, len(want), worst)
	}
}

// assertClose32 is assertClose against float32 values.
func assertClose32(t *testing.T, got, want []float32, atol, rtol float64, what string) {
	t.Helper()
	w := make([]float64, len(want))
	for i, v := range want {
		w[i] = float64(v)
	}
	assertClose(t, got, w, atol, rtol, what)
}

func flatten(rows [][]float64) []float64 {
	var out []float64
	for _, r := range rows {
		out = append(out, r...)
	}
	return out
}

// Tolerance against the float64 reference: float32 activations over two
// layers keep logits within ~1e-6; 1e-5 abs + 1e-4 rel is the README's bound.
const refAtol, refRtol = 1e-5, 1e-4

func TestLogitsMatchReference(t *testing.T) {
	want := loadReference(t)
	for _, tb := range inferBackends(t) {
		t.Run(tb.name, func(t *testing.T) {
			m := openTiny(t, tb.b)
			got, err := m.Logits(want.Logits.InputIDs, Options{})
			require.NoError(t, err)
			assertClose(t, got, flatten(want.Logits.Logits), refAtol, refRtol, "logits")
			V := m.Config.VocabSize
			for i, a := range want.Logits.Argmax {
				id, err := tb.b.Argmax(kernels.HostF32(got[i*V : (i+1)*V]))
				require.NoError(t, err)
				assert.Equal(t, a, id, "argmax at %d", i)
			}
		})
	}
}

func TestLogProbsMatchReference(t *testing.T) {
	want := loadReference(t)
	lp := want.LogProbs
	for _, tb := range inferBackends(t) {
		t.Run(tb.name, func(t *testing.T) {
			m := openTiny(t, tb.b)
			toks := append(append([]int32{}, lp.PromptIDs...), lp.CompletionIDs...)
			res, err := m.LogProbs(t.Context(), []Scored{{Tokens: toks, Start: len(lp.PromptIDs)}}, LogProbsOptions{Entropy: true})
			require.NoError(t, err)
			got := res[0].LogProbs[len(lp.PromptIDs):]
			assertClose(t, got, lp.LogProbs, refAtol, refRtol, "logprobs")
			for i := range len(lp.PromptIDs) {
				assert.Zero(t, res[0].LogProbs[i], "unmasked position %d", i)
				assert.Zero(t, res[0].Entropy[i], "unmasked entropy %d", i)
			}
			// Entropy from the full logits, computed here in float64.
			logits, err := m.Logits(toks, Options{})
			require.NoError(t, err)
			V := m.Config.VocabSize
			for i := len(lp.PromptIDs); i < len(toks); i++ {
				assert.InDelta(t, entropy64(logits[(i-1)*V:i*V]), res[0].Entropy[i], 1e-4, "entropy at %d", i)
			}
		})
	}
}

func entropy64(logits []float32) float64 {
	mx := math.Inf(-1)
	for _, v := range logits {
		mx = math.Max(mx, float64(v))
	}
	var s float64
	for _, v := range logits {
		s += math.Exp(float64(v) - mx)
	}
	var h float64
	for _, v := range logits {
		lp := float64(v) - mx - math.Log(s)
		h -= math.Exp(lp) * lp
	}
	return h
}

func TestGreedyMatchesReference(t *testing.T) {
	want := loadReference(t)
	for _, tb := range inferBackends(t) {
		t.Run(tb.name, func(t *testing.T) {
			m := openTiny(t, tb.b)
			seq := NewSequence(1, want.Greedy.PromptIDs...)
			out, err := m.Generate(t.Context(), []Request{{Seq: seq, MaxNewTokens: want.Greedy.MaxNewTokens}}, BatchOptions{})
			require.NoError(t, err)
			assert.Equal(t, want.Greedy.Tokens, out[0].Tokens)
			assert.False(t, out[0].Stopped)
			assert.Equal(t, append(append([]int32{}, want.Greedy.PromptIDs...), want.Greedy.Tokens...), seq.Tokens)
			for _, lp := range out[0].LogProbs {
				assert.Zero(t, lp, "greedy log-probs are 0 by the SampleRows contract")
			}
		})
	}
}

func TestLoRAMatchesReference(t *testing.T) {
	want := loadReference(t)
	lr := want.LoRA
	for _, tb := range inferBackends(t) {
		t.Run(tb.name, func(t *testing.T) {
			m := openTiny(t, tb.b)
			_, err := LoadAdapter(filepath.Join("testdata", lr.AdapterDir), m)
			require.NoError(t, err)

			got, err := m.Logits(lr.InputIDs, Options{})
			require.NoError(t, err)
			assertClose(t, got, flatten(lr.Logits), refAtol, refRtol, "lora logits")

			// NoAdapters is the base model again.
			base, err := m.Logits(want.Logits.InputIDs, Options{NoAdapters: true})
			require.NoError(t, err)
			assertClose(t, base, flatten(want.Logits.Logits), refAtol, refRtol, "logits without adapters")

			res, err := m.LogProbs(t.Context(), []Scored{{Tokens: lr.InputIDs}}, LogProbsOptions{})
			require.NoError(t, err)
			for i, p := range lr.TargetPositions {
				require.Equal(t, lr.TargetIDs[i], lr.InputIDs[p+1])
				assert.InDelta(t, lr.LogProbs[i], res[0].LogProbs[p+1], refAtol+refRtol*math.Abs(lr.LogProbs[i]), "lora logprob %d", i)
			}

			out, err := m.Generate(t.Context(), []Request{{Seq: NewSequence(0, lr.GreedyPrompt...), MaxNewTokens: len(lr.GreedyTokens)}}, BatchOptions{})
			require.NoError(t, err)
			assert.Equal(t, lr.GreedyTokens, out[0].Tokens)

			// With adapters off, generation and scoring are the base model's.
			g := want.Greedy
			out, err = m.Generate(t.Context(), []Request{{Seq: NewSequence(0, g.PromptIDs...), MaxNewTokens: g.MaxNewTokens}}, BatchOptions{NoAdapters: true})
			require.NoError(t, err)
			assert.Equal(t, g.Tokens, out[0].Tokens)
			lp := want.LogProbs
			toks := append(append([]int32{}, lp.PromptIDs...), lp.CompletionIDs...)
			res, err = m.LogProbs(t.Context(), []Scored{{Tokens: toks}}, LogProbsOptions{NoAdapters: true})
			require.NoError(t, err)
			assertClose(t, res[0].LogProbs[len(lp.PromptIDs):], lp.LogProbs, refAtol, refRtol, "base logprobs with adapters off")
		})
	}
}
