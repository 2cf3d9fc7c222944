package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/x/tokenizer"
)

func TestRun(t *testing.T) {
	assert.ErrorContains(t, run(""), "-out is required")
	assert.Error(t, run(filepath.Join(t.TempDir(), "no", "such", "dir", "tokenizer.json")))
	out := filepath.Join(t.TempDir(), "tokenizer.json")
	require.NoError(t, run(out))
	got, err := os.ReadFile(out)
	require.NoError(t, err)
	assert.Equal(t, string(tokenizer.TinyJSON()), string(got), "the command must reproduce the embedded file")
}
