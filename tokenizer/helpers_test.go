package tokenizer

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// qwen3Path finds Qwen3's tokenizer.json: $QWEN3_TOKENIZER, else
// <repo>/.cache/qwen3-tokenizer/tokenizer.json (make setup), else the shared
// reference copy beside the clone.
func qwen3Path(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("QWEN3_TOKENIZER"); p != "" {
		return p
	}
	dir, err := os.Getwd()
	require.NoError(t, err)
	root := ""
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			root = d
			break
		}
		if filepath.Dir(d) == d {
			break
		}
	}
	require.NotEmpty(t, root, "no go.mod above %s", dir)
	for _, p := range []string{
		filepath.Join(root, ".cache", "qwen3-tokenizer", "tokenizer.json"),
		filepath.Join(root, "..", "shared", "qwen3-tokenizer", "tokenizer.json"),
	} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	t.Fatalf("Qwen3 tokenizer.json not found: run make setup (or set QWEN3_TOKENIZER)")
	return ""
}

var (
	qwen3Once sync.Once
	qwen3Tok  *Tokenizer
	qwen3Err  error
)

// qwen3 loads Qwen3's tokenizer once per test binary (11 MB of JSON).
func qwen3(t testing.TB) *Tokenizer {
	t.Helper()
	path := qwen3Path(t)
	qwen3Once.Do(func() { qwen3Tok, qwen3Err = Load(path) })
	require.NoError(t, qwen3Err)
	return qwen3Tok
}

// vector is one line of testdata/vectors.jsonl (made with Hugging Face).
type vector struct {
	ID                  string            `json:"id"`
	Kind                string            `json:"kind"`
	Input               string            `json:"input"`
	IDs                 []int32           `json:"ids"`
	Tokens              []string          `json:"tokens"`
	Decoded             string            `json:"decoded"`
	DecodedSkipSpecial  string            `json:"decoded_skip_special"`
	Messages            []Message         `json:"messages"`
	Tools               []json.RawMessage `json:"tools"`
	AddGenerationPrompt bool              `json:"add_generation_prompt"`
	Kwargs              struct {
		EnableThinking *bool `json:"enable_thinking"`
	} `json:"chat_template_kwargs"`
	Rendered string `json:"rendered"`
}

func loadVectors(t testing.TB) []vector {
	t.Helper()
	f, err := os.Open("testdata/vectors.jsonl")
	require.NoError(t, err)
	defer f.Close()
	var out []vector
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var v vector
		require.NoError(t, json.Unmarshal(sc.Bytes(), &v), "line %d", len(out)+1)
		out = append(out, v)
	}
	require.NoError(t, sc.Err())
	require.NotEmpty(t, out)
	return out
}
