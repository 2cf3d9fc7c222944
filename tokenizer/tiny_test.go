package tokenizer

import (
	"os"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/text/unicode/norm"
)

// TestTinyRegenerates retrains the tiny tokenizer and compares it with the
// committed (and embedded) file byte for byte: training is deterministic and
// nobody edited the file by hand.
func TestTinyRegenerates(t *testing.T) {
	got, err := TrainTiny()
	require.NoError(t, err)
	onDisk, err := os.ReadFile("tiny/tokenizer.json")
	require.NoError(t, err)
	require.Equal(t, string(onDisk), tinyJSON, "embedded and on-disk files differ: rebuild")
	if string(got) != tinyJSON {
		t.Fatalf("tiny/tokenizer.json is stale: run go generate ./tokenizer/ (got %d bytes, committed %d)", len(got), len(tinyJSON))
	}
}

func TestTiny(t *testing.T) {
	tok := Tiny()
	assert.Equal(t, TinyVocabSize, tok.VocabSize())
	qwen := Qwen3AddedTokens()
	require.Len(t, qwen, 26)
	for i, a := range qwen {
		id, ok := tok.TokenID(a.Content)
		require.True(t, ok, a.Content)
		assert.Equal(t, int32(TinyVocabSize-len(qwen)+i), id, a.Content)
		assert.Equal(t, a.Special, tok.IsSpecial(id), a.Content)
	}
	assert.Equal(t, tok.EOS(), mustID(t, tok, "<|im_end|>"))
	assert.Equal(t, tok.Pad(), mustID(t, tok, "<|endoftext|>"))
	for _, s := range []string{
		"<|im_start|>user\nGuess the secret word.<|im_end|>\n<|im_start|>assistant\n<think>\nA fruit.\n</think>\n\n",
		"<tool_call>\n{\"name\": \"guess\", \"arguments\": {\"guess\": \"apple\"}}\n</tool_call>",
		"Feedback: GYBBG. The secret number is higher than 42.",
		"Unseen: 你好, Ünïcödé, emoji 🎲, tabs\tand  spaces\n\n",
	} {
		ids := tok.Encode(s)
		assert.Equal(t, s, tok.Decode(ids, false), "%q", s)
	}
	// Trained on this kind of text, it compresses it.
	game := "<tool_call>\n{\"name\": \"guess\", \"arguments\": {\"guess\": \"apple\"}}\n</tool_call>"
	assert.Less(t, len(tok.Encode(game)), len(game)/3, "tokens for %d bytes", len(game))
}

func mustID(t *testing.T, tok *Tokenizer, s string) int32 {
	t.Helper()
	id, ok := tok.TokenID(s)
	require.True(t, ok, s)
	return id
}

func TestTrainBPEOptions(t *testing.T) {
	_, err := TrainBPE([]string{"abc"}, TrainOptions{VocabSize: 100})
	assert.ErrorContains(t, err, "below 256 bytes")
	// A corpus too small to fill the vocabulary stops early but is valid.
	data, err := TrainBPE([]string{"abab abab abab"}, TrainOptions{VocabSize: 1000})
	require.NoError(t, err)
	tok, err := Parse(data)
	require.NoError(t, err)
	assert.Less(t, tok.VocabSize(), 270)
	assert.Equal(t, []int32{mustID(t, tok, "abab"), mustID(t, tok, "Ġabab")}, tok.Encode("abab abab"))
}

// FuzzRoundTrip: decode(encode(x)) == NFC(x) for valid UTF-8, with both the
// tiny and Qwen3's tokenizer.
func FuzzRoundTrip(f *testing.F) {
	for _, s := range []string{"Hello, world!", "a  b\n\n\tc", "café e\u0301", "你好😀", "<|im_end|>x<think>", "'S 're", "\u00a0\u3000 !"} {
		f.Add(s)
	}
	toks := []*Tokenizer{Tiny(), qwen3(f)}
	f.Fuzz(func(t *testing.T, s string) {
		if !utf8.ValidString(s) {
			return
		}
		for _, tok := range toks {
			if got := tok.Decode(tok.Encode(s), false); got != norm.NFC.String(s) {
				t.Fatalf("round trip of %q gave %q", s, got)
			}
		}
	})
}

// FuzzBPEHeap checks the priority-queue merge used for long words against
// the quadratic scan used for short ones.
func FuzzBPEHeap(f *testing.F) {
	for _, s := range []string{"aaaaa", "-----", "hello world", strings.Repeat("ab", 40), "guess the number"} {
		f.Add(s)
	}
	tok := Tiny()
	f.Fuzz(func(t *testing.T, w string) {
		if w == "" {
			return
		}
		var sc scratch
		scan := tok.bpeScan(nil, w[:min(len(w), 512)], &sc)
		heap := tok.bpeHeap(nil, w[:min(len(w), 512)], &sc)
		assert.Equal(t, scan, heap, "%q", w)
	})
}
