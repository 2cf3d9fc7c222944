package tokenizer

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// smallJSON is a valid byte-level BPE tokenizer.json of a few hundred
// tokens, trained here, used as the base for malformed variants.
func smallJSON(t testing.TB) []byte {
	t.Helper()
	data, err := TrainBPE([]string{"hello world, hello there", "the wordle game: guess 5 letters"},
		TrainOptions{VocabSize: 290, AddedTokens: Qwen3AddedTokens()[:3]})
	require.NoError(t, err)
	return data
}

// mutate decodes data, applies f to the generic JSON, and re-encodes it.
func mutate(t testing.TB, data []byte, f func(m map[string]any)) []byte {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(data, &m))
	f(m)
	out, err := json.Marshal(m)
	require.NoError(t, err)
	return out
}

func model(m map[string]any) map[string]any { return m["model"].(map[string]any) }

func TestParseErrors(t *testing.T) {
	base := smallJSON(t)
	_, err := Parse(base)
	require.NoError(t, err)
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"not JSON", []byte("{"), "parse tokenizer.json"},
		{"wrong field type", []byte(`{"model": 3}`), "parse tokenizer.json"},
		{"no model", mutate(t, base, func(m map[string]any) { delete(m, "model") }), "no model"},
		{"WordPiece", mutate(t, base, func(m map[string]any) { model(m)["type"] = "WordPiece" }), `unsupported type "WordPiece"`},
		{"NFKC", mutate(t, base, func(m map[string]any) { m["normalizer"] = map[string]any{"type": "NFKC"} }), `normalizer: unsupported type "NFKC"`},
		{"no pre-tokenizer", mutate(t, base, func(m map[string]any) { m["pre_tokenizer"] = nil }), "pre_tokenizer: missing"},
		{"other regex", mutate(t, base, func(m map[string]any) {
			m["pre_tokenizer"] = map[string]any{"type": "Sequence", "pretokenizers": []any{
				map[string]any{"type": "Split", "pattern": map[string]any{"Regex": `\w+`}, "behavior": "Isolated"},
				map[string]any{"type": "ByteLevel", "use_regex": false}}}
		}), "unsupported regex"},
		{"no ByteLevel", mutate(t, base, func(m map[string]any) {
			m["pre_tokenizer"] = map[string]any{"type": "Split", "pattern": map[string]any{"Regex": qwenRegex}, "behavior": "Isolated"}
		}), "no ByteLevel step"},
		{"other decoder", mutate(t, base, func(m map[string]any) { m["decoder"] = map[string]any{"type": "WordPiece"} }), "decoder: unsupported"},
		{"missing byte symbol", mutate(t, base, func(m map[string]any) { delete(model(m)["vocab"].(map[string]any), "!") }), "lacks the byte-level symbol"},
		{"merge out of vocab", mutate(t, base, func(m map[string]any) {
			model(m)["merges"] = []any{[]any{"h", "zzz"}}
		}), "not in the vocab"},
		{"merge string of three", mutate(t, base, func(m map[string]any) { model(m)["merges"] = []any{"a b c"} }), "not two space-separated"},
		{"merge pair of one", mutate(t, base, func(m map[string]any) { model(m)["merges"] = []any{[]any{"a"}} }), "want \"a b\" or [a, b]"},
		{"negative id", mutate(t, base, func(m map[string]any) { model(m)["vocab"].(map[string]any)["zz"] = -1 }), "out of range"},
		{"huge id", mutate(t, base, func(m map[string]any) { model(m)["vocab"].(map[string]any)["zz"] = 1 << 23 }), "far beyond"},
		{"duplicate id", mutate(t, base, func(m map[string]any) { model(m)["vocab"].(map[string]any)["zz"] = 0 }), "is used by both"},
		{"added without id", mutate(t, base, func(m map[string]any) {
			m["added_tokens"] = []any{map[string]any{"content": "<x>"}}
		}), "no id"},
		{"added id taken", mutate(t, base, func(m map[string]any) {
			m["added_tokens"] = []any{map[string]any{"id": 0, "content": "<x>"}}
		}), "already belongs"},
		{"added empty", mutate(t, base, func(m map[string]any) {
			m["added_tokens"] = []any{map[string]any{"id": 1000, "content": ""}}
		}), "empty content"},
		{"byte fallback", mutate(t, base, func(m map[string]any) { model(m)["byte_fallback"] = true }), "byte_fallback"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(tc.data)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestLoadErrors(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "missing.json"))
	assert.ErrorContains(t, err, "load tokenizer")
	p := filepath.Join(t.TempDir(), "bad.json")
	require.NoError(t, os.WriteFile(p, []byte("[]"), 0o600))
	_, err = Load(p)
	assert.ErrorContains(t, err, p)
}

// tinyGPT2 is the tiny tokenizer rewritten in GPT-2's layout (testdata/gen
// builds the same file for Tokenizers.js).
func tinyGPT2(t testing.TB) *Tokenizer {
	t.Helper()
	data := mutate(t, TinyJSON(), func(m map[string]any) {
		m["normalizer"] = nil
		m["pre_tokenizer"] = map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true}
		merges := model(m)["merges"].([]any)
		for i, p := range merges {
			pair := p.([]any)
			merges[i] = pair[0].(string) + " " + pair[1].(string)
		}
	})
	tok, err := Parse(data)
	require.NoError(t, err)
	return tok
}

// TestGPT2Shape loads the tiny tokenizer rewritten in GPT-2's layout
// (ByteLevel with its own regex, no normalizer, "a b" merge strings).
func TestGPT2Shape(t *testing.T) {
	gpt2 := tinyGPT2(t)
	tiny := Tiny()
	require.Equal(t, []splitPattern{patternGPT2}, gpt2.splits)
	for _, s := range []string{"hello world", "The answer is 42.", "a  b\n\nc"} {
		want := []int32{}
		for _, piece := range pieces(patternGPT2, s) {
			want = append(want, tiny.Encode(piece)...)
		}
		assert.Equal(t, want, gpt2.Encode(s), "%q", s)
		assert.Equal(t, s, gpt2.Decode(gpt2.Encode(s), false))
	}
	// Added tokens are split out before either regex; "user", "\n", "hi" are
	// pieces under both.
	s := "<|im_start|>user\nhi<|im_end|>"
	assert.Equal(t, tiny.Encode(s), gpt2.Encode(s))
}

// FuzzParse feeds mutated tokenizer.json files to Parse: an error is fine,
// a panic or a hang is not; whatever loads must encode and decode.
func FuzzParse(f *testing.F) {
	base := smallJSON(f)
	f.Add(base)
	f.Add(mutate(f, base, func(m map[string]any) { model(m)["merges"] = []any{"h e", "l l"} }))
	f.Add([]byte(`{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}, "pre_tokenizer": {"type": "ByteLevel"}, "decoder": {"type": "ByteLevel"}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		tok, err := Parse(data)
		if err != nil {
			return
		}
		ids := tok.Encode("hello <|im_start|> wörld 12\n\n")
		_ = tok.Decode(ids, true)
	})
}
