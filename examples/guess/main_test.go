package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/env/guess"
	"github.com/x/model"
)

func testConfig() config {
	c := defaultConfig()
	c.Steps, c.Batch, c.EvalGames, c.Max, c.LogEvery = 4, 2, 3, 8, 1
	return c
}

// TestExpertGames checks the training data: every game is won by binary
// search, and the scored tokens are exactly the assistant turns, which parse
// back into the guesses the expert made.
func TestExpertGames(t *testing.T) {
	cfg := testConfig()
	p, err := newPlayer(cfg)
	require.NoError(t, err)
	defer p.Close()
	ctx := context.Background()

	for seed := range int64(20) {
		ts, err := p.expertGame(ctx, seed)
		require.NoError(t, err, "seed %d", seed)
		require.Len(t, ts.Mask, len(ts.IDs)-ts.Start)
		require.True(t, ts.Mask[0], "the first completion token is scored")

		// Split the scored runs (assistant turns) and parse each one.
		var turns [][]int32
		for i := 0; i < len(ts.Mask); {
			if !ts.Mask[i] {
				i++
				continue
			}
			j := i
			for j < len(ts.Mask) && ts.Mask[j] {
				j++
			}
			turns = append(turns, ts.IDs[ts.Start+i:ts.Start+j])
			i = j
		}
		target := guess.TargetForSeed(p.rules, seed)
		lo, hi := 1, cfg.Max
		for k, turn := range turns {
			msg, ok := p.chat.ParseAssistant(turn)
			require.True(t, ok, "seed %d turn %d parses", seed, k)
			if k == len(turns)-1 {
				assert.Empty(t, msg.ToolCalls, "the last turn announces the number")
				assert.Contains(t, msg.Content, "the number is")
				continue
			}
			require.Len(t, msg.ToolCalls, 1)
			var args guess.GuessArgs
			require.NoError(t, json.Unmarshal(msg.ToolCalls[0].Arguments, &args))
			mid := (lo + hi) / 2
			assert.Equal(t, mid, args.Number, "seed %d turn %d", seed, k)
			if target > mid {
				lo = mid + 1
			} else {
				hi = mid - 1
			}
		}
		assert.LessOrEqual(t, len(turns)-1, 4, "binary search over 1..8 needs at most 4 guesses")
	}
}

func TestCompletionIDs(t *testing.T) {
	tests := []struct {
		name         string
		prefix, full []int32
		want         []int32
		wantErr      string
	}{
		{name: "turn", prefix: []int32{1, 2}, full: []int32{1, 2, 5, 6, 9, 3}, want: []int32{5, 6, 9}},
		{name: "prefix changed", prefix: []int32{1, 2}, full: []int32{1, 3, 5, 9}, wantErr: "prefix"},
		{name: "shorter", prefix: []int32{1, 2, 3}, full: []int32{1, 2}, wantErr: "prefix"},
		{name: "no end", prefix: []int32{1}, full: []int32{1, 5, 6}, wantErr: "end token"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := completionIDs(tt.prefix, tt.full, 9)
			if tt.wantErr != "" {
				assert.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestConfigValidate(t *testing.T) {
	for name, mutate := range map[string]func(*config){
		"steps":   func(c *config) { c.Steps = -1 },
		"batch":   func(c *config) { c.Batch = 0 },
		"lr":      func(c *config) { c.LR = 0 },
		"eval":    func(c *config) { c.EvalGames = 0 },
		"max":     func(c *config) { c.Max = 1 },
		"threads": func(c *config) { c.Threads = -2 },
	} {
		c := defaultConfig()
		mutate(&c)
		assert.ErrorContains(t, run(context.Background(), c, &bytes.Buffer{}), "-"+name, name)
	}
}

// TestRun runs the whole job briefly: it evaluates, trains (the loss must
// fall), evaluates again and saves a checkpoint that loads.
func TestRun(t *testing.T) {
	cfg := testConfig()
	cfg.SaveDir = t.TempDir()
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), cfg, &out))
	text := out.String()
	assert.Contains(t, text, "before: won")
	assert.Contains(t, text, "after:  won")
	assert.Contains(t, text, "step    4")

	var first, last float64
	n := 0
	for _, line := range bytes.Split(out.Bytes(), []byte("\n")) {
		var step int
		var loss float64
		if _, err := fmt.Sscanf(string(line), "step %d  loss %f", &step, &loss); err == nil {
			if n == 0 {
				first = loss
			}
			last = loss
			n++
		}
	}
	require.Equal(t, cfg.Steps, n, "one loss line per step:\n%s", text)
	assert.Less(t, last, first, "training lowers the loss:\n%s", text)

	for _, f := range []string{"config.json", "model.safetensors", "tokenizer.json"} {
		_, err := os.Stat(filepath.Join(cfg.SaveDir, f))
		require.NoError(t, err)
	}
	m, err := model.Load(cfg.SaveDir, nil)
	require.NoError(t, err, "the saved checkpoint loads")
	require.NoError(t, m.Close())
}
