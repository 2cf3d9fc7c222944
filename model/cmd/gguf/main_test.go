package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/kernels"
	"github.com/x/kernels/ref"
	"github.com/x/model"
)

// writeTokenizer writes a minimal BPE tokenizer.json of n rows into dir.
func writeTokenizer(t *testing.T, dir string, n int) {
	t.Helper()
	vocab := map[string]int{}
	for i := range n - 2 {
		vocab[fmt.Sprintf("t%d", i)] = i
	}
	js, err := json.Marshal(map[string]any{
		"added_tokens": []map[string]any{{"id": n - 2, "content": "<|im_end|>", "special": true}},
		"model":        map[string]any{"type": "BPE", "vocab": vocab, "merges": []string{"t1 t2"}},
	})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "tokenizer.json"), js, 0o644))
}

// TestRun exports a tiny random checkpoint, plain and with a LoRA adapter
// merged in: the adapter changes the file, the same inputs give the same
// bytes, and the file is what model.WriteGGUF writes for the merged model.
func TestRun(t *testing.T) {
	cfg, err := model.NamedConfig("tiny")
	require.NoError(t, err)
	dir, tok := t.TempDir(), t.TempDir()
	require.NoError(t, model.WriteRandom(dir, cfg, kernels.BF16, 3, model.RandomOptions{}))
	writeTokenizer(t, tok, cfg.VocabSize)

	m, err := model.Load(dir, ref.Backend{})
	require.NoError(t, err)
	defer m.Close()
	lcfg := model.LoRAConfig{R: 2, Alpha: 4}
	require.NoError(t, model.AttachLoRA(m, lcfg, 7))
	for li := range m.Layers {
		for _, nl := range m.Layers[li].Linears() {
			for i := range nl.Linear.LoRA.B {
				nl.Linear.LoRA.B[i] = 0.25
			}
		}
	}
	adapter := t.TempDir()
	require.NoError(t, model.SaveAdapter(adapter, m, lcfg, dir))
	require.NoError(t, model.MergeLoRA(m))

	out := t.TempDir()
	var stdout, stderr bytes.Buffer
	plain := filepath.Join(out, "plain.gguf")
	require.NoError(t, run([]string{"-model", dir, "-tokenizer", tok, "-out", plain}, &stdout, &stderr))
	assert.Contains(t, stdout.String(), "wrote "+plain)
	merged := filepath.Join(out, "merged.gguf")
	require.NoError(t, run([]string{"-model", dir, "-tokenizer", tok, "-adapter", adapter, "-out", merged}, &stdout, &stderr))
	assert.Contains(t, stdout.String(), "merged LoRA adapter")

	a, err := os.ReadFile(plain)
	require.NoError(t, err)
	b, err := os.ReadFile(merged)
	require.NoError(t, err)
	assert.Equal(t, "GGUF", string(a[:4]))
	assert.Equal(t, len(a), len(b), "same tensors and metadata")
	assert.NotEqual(t, a, b, "the adapter changed the weights")

	ctx, err := model.GGUFContextLength(dir)
	require.NoError(t, err)
	vocab, err := model.ReadGGUFVocab(tok, cfg.VocabSize)
	require.NoError(t, err)
	direct := filepath.Join(out, "direct.gguf")
	require.NoError(t, model.WriteGGUF(direct, m, model.GGUFOptions{ContextLength: ctx, Vocab: vocab}))
	c, err := os.ReadFile(direct)
	require.NoError(t, err)
	assert.Equal(t, c, b, "the command writes what WriteGGUF writes for the merged model")
}

// TestRunErrors: missing flags, stray arguments and bad folders fail with
// a message naming the problem.
func TestRunErrors(t *testing.T) {
	empty := t.TempDir()
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no flags", nil, "-model and -out are required"},
		{"no out", []string{"-model", empty}, "-model and -out are required"},
		{"stray argument", []string{"-model", empty, "-out", "x.gguf", "extra"}, "unexpected arguments"},
		{"no checkpoint", []string{"-model", empty, "-out", filepath.Join(empty, "x.gguf")}, "config.json"},
		{"bad flag", []string{"-nope"}, "not defined"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := run(tc.args, &stdout, &stderr)
			require.Error(t, err)
			assert.Contains(t, err.Error()+stderr.String(), tc.want)
		})
	}
}
