package tokenizer

import (
	"bufio"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"golang.org/x/text/unicode/norm"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestQwen3EncodeVectors(t *testing.T) {
	tok := qwen3(t)
	n := 0
	for _, v := range loadVectors(t) {
		if v.Kind != "encode" {
			continue
		}
		n++
		t.Run(v.ID, func(t *testing.T) {
			got := tok.Encode(v.Input)
			assert.Equal(t, v.IDs, got, "ids")
			var toks []string
			for _, id := range got {
				s, ok := tok.Token(id)
				assert.True(t, ok)
				toks = append(toks, s)
			}
			if len(v.Tokens) > 0 {
				assert.Equal(t, v.Tokens, toks, "tokens")
			}
			assert.Equal(t, v.Decoded, tok.Decode(v.IDs, false), "decoded")
			assert.Equal(t, v.DecodedSkipSpecial, tok.Decode(v.IDs, true), "decoded skipping special")
		})
	}
	require.Greater(t, n, 40)
}

// hfjsCase is one line of testdata/hfjs_encode.jsonl: random text encoded by
// Hugging Face's Tokenizers.js with Qwen3's and the tiny tokenizer.json.
type hfjsCase struct {
	Input    string  `json:"input"`
	Qwen3IDs []int32 `json:"qwen3_ids"`
	TinyIDs  []int32 `json:"tiny_ids"`
	// GPT2IDs are from the tiny tokenizer in GPT-2's layout; absent for
	// inputs with U+FEFF or U+0085, where Tokenizers.js's built-in ByteLevel
	// regex uses JavaScript's \s (which has U+FEFF and lacks U+0085) rather
	// than Oniguruma's Unicode White_Space.
	GPT2IDs []int32 `json:"gpt2_ids"`
}

func TestHFJSRandomText(t *testing.T) {
	f, err := os.Open("testdata/hfjs_encode.jsonl")
	require.NoError(t, err)
	defer f.Close()
	var cases []hfjsCase
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var c hfjsCase
		require.NoError(t, json.Unmarshal(sc.Bytes(), &c))
		cases = append(cases, c)
	}
	require.NoError(t, sc.Err())
	require.Greater(t, len(cases), 500)
	for _, tc := range []struct {
		name string
		tok  *Tokenizer
		want func(hfjsCase) []int32
	}{
		{"qwen3", qwen3(t), func(c hfjsCase) []int32 { return c.Qwen3IDs }},
		{"tiny", Tiny(), func(c hfjsCase) []int32 { return c.TinyIDs }},
		{"tiny in GPT-2 layout", tinyGPT2(t), func(c hfjsCase) []int32 { return c.GPT2IDs }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad, n := 0, 0
			for _, c := range cases {
				if tc.want(c) == nil {
					continue
				}
				n++
				ok := assert.Equal(t, tc.want(c), tc.tok.Encode(c.Input), "%q", c.Input)
				text := c.Input
				if tc.tok.nfc {
					text = norm.NFC.String(text)
				}
				ok = assert.Equal(t, text, tc.tok.Decode(tc.want(c), false), "%q", c.Input) && ok
				if !ok {
					bad++
					require.Less(t, bad, 5, "too many mismatches")
				}
			}
			require.Greater(t, n, 500)
		})
	}
}

func TestEncodeEdgeCases(t *testing.T) {
	tok := qwen3(t)
	for _, tc := range []struct {
		name string
		in   string
	}{
		{"long space run", strings.Repeat(" ", 5000) + "x"},
		{"long letter run uses the heap path", strings.Repeat("ab", 3000)},
		{"long CJK run", strings.Repeat("你好世界", 500)},
		{"added tokens back to back", "<|im_start|><|im_end|><think></think>"},
		{"prefix of an added token", "<|im_st <thin <tool_call"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ids := tok.Encode(tc.in)
			assert.Equal(t, tc.in, tok.Decode(ids, false))
		})
	}
}

func TestDecode(t *testing.T) {
	tok := qwen3(t)
	e := tok.Encode("é") // one token, two bytes
	require.Len(t, e, 1)
	euro := tok.Encode("€")
	for _, tc := range []struct {
		name        string
		ids         []int32
		skipSpecial bool
		want        string
	}{
		{"unknown ids are skipped", []int32{-1, 9, 1 << 30}, false, "*"},
		{"special dropped, non-special kept", tok.Encode("<|im_start|>a<think>b</think><|im_end|>"), true, "a<think>b</think>"},
		{"special kept", tok.Encode("<|im_end|>"), false, "<|im_end|>"},
		{"truncated UTF-8 is one U+FFFD", []int32{tok.byteIDs[0xE2], tok.byteIDs[0x82]}, false, "\uFFFD"},
		{"invalid bytes each U+FFFD", []int32{tok.byteIDs[0xFF], tok.byteIDs[0xC0]}, false, "\uFFFD\uFFFD"},
		{"valid after invalid", append([]int32{tok.byteIDs[0xE2]}, euro...), false, "\uFFFD€"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, tok.Decode(tc.ids, tc.skipSpecial))
		})
	}
}

func TestTokenLookups(t *testing.T) {
	tok := qwen3(t)
	assert.Equal(t, 151669, tok.VocabSize())
	assert.Equal(t, int32(151645), tok.EOS())
	assert.Equal(t, int32(151643), tok.Pad())
	for _, tc := range []struct {
		s       string
		id      int32
		special bool
	}{
		{"<|endoftext|>", 151643, true},
		{"<|im_start|>", 151644, true},
		{"<|im_end|>", 151645, true},
		{"<tool_call>", 151657, false},
		{"</tool_call>", 151658, false},
		{"<tool_response>", 151665, false},
		{"</tool_response>", 151666, false},
		{"<think>", 151667, false},
		{"</think>", 151668, false},
		{"Ġthe", 279, false},
	} {
		id, ok := tok.TokenID(tc.s)
		assert.True(t, ok, tc.s)
		assert.Equal(t, tc.id, id, tc.s)
		assert.Equal(t, tc.special, tok.IsSpecial(id), tc.s)
		s, ok := tok.Token(id)
		assert.True(t, ok)
		assert.Equal(t, tc.s, s)
	}
	_, ok := tok.TokenID("no such token")
	assert.False(t, ok)
	_, ok = tok.Token(-3)
	assert.False(t, ok)
}

// TestConcurrentEncode exercises the shared word cache from many goroutines
// (run with -race).
func TestConcurrentEncode(t *testing.T) {
	tok := Tiny()
	texts := []string{"hello world", "guess the number 42", "<think>\nhmm\n</think>\n\nok", "你好 world"}
	want := make([][]int32, len(texts))
	for i, s := range texts {
		want[i] = tok.Encode(s)
	}
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range 200 {
				i := (g + k) % len(texts)
				got := tok.Encode(texts[i])
				if !slices.Equal(got, want[i]) || tok.Decode(got, false) != texts[i] {
					errs <- texts[i]
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for s := range errs {
		t.Errorf("concurrent encode of %q differed", s)
	}
}
