package grpo

import (
	"bufio"
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCompletionsLine(t *testing.T) {
	var buf bytes.Buffer
	w := NewCompletionsWriter(&buf)
	rec := CompletionRecord{Step: 2, PolicyVersion: 1, Group: 1, Env: "guess", Prompt: "<|im_start|>user\nhi<|im_end|>\n", Completion: "ok<|im_end|>",
		Rewards: map[string]float64{"win": 1, "fmt": math.NaN()}, Reward: 1, Advantage: -0.5, ToolCalls: 3, ToolFailures: 1}
	require.NoError(t, w.Write(rec))
	assert.JSONEq(t, `{"step":2,"policy_version":1,"group":1,"env":"guess","prompt":"<|im_start|>user\nhi<|im_end|>\n","completion":"ok<|im_end|>",
		"rewards":{"fmt":null,"win":1},"reward":1,"advantage":-0.5,"tool_calls":3,"tool_failures":1}`, buf.String())
	assert.Equal(t, byte('\n'), buf.Bytes()[buf.Len()-1], "flushed, one line")
}

func TestCompletionsFileRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "completions.jsonl")
	w, err := CreateCompletionsFile(path)
	require.NoError(t, err)
	in := []CompletionRecord{
		{Step: 1, Prompt: "p", Completion: "c", Rewards: map[string]float64{"a": 0.25}, Reward: 0.25, Advantage: 0.7071067811865476},
		{Step: 1, Group: 0, Prompt: "p", Completion: "", Rewards: map[string]float64{"a": math.NaN()}, Reward: math.NaN(), Error: "env lost: session gone", Truncated: true},
	}
	require.NoError(t, w.Write(in...))
	require.NoError(t, w.Close())
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	var out []CompletionRecord
	for sc.Scan() {
		var r CompletionRecord
		require.NoError(t, json.Unmarshal(sc.Bytes(), &r))
		out = append(out, r)
	}
	require.Len(t, out, 2)
	assert.Equal(t, in[0], out[0])
	assert.True(t, math.IsNaN(out[1].Reward))
	assert.True(t, math.IsNaN(out[1].Rewards["a"]))
	assert.Equal(t, in[1].Error, out[1].Error)
	assert.True(t, out[1].Truncated)
}

func TestCompletionsRejectsNonFiniteAdvantage(t *testing.T) {
	w := NewCompletionsWriter(&bytes.Buffer{})
	err := w.Write(CompletionRecord{Step: 4, Advantage: math.Inf(1)})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "step 4")
}
