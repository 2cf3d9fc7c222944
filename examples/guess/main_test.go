package main

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/env/guess"
	"github.com/x/grpo"
	"github.com/x/grpo/warmstart"
	"github.com/x/kernels/device"
)

// TestExpertGames checks the SFT data: every game is binary search and
// ends with the number found.
func TestExpertGames(t *testing.T) {
	rules := guess.Rules{Max: 16}
	cfg := grpo.DefaultConfig()
	convs, err := warmstart.Conversations(context.Background(), guess.NewFactory(guess.Options{Rules: rules}), seedRows(0, 20), binarySearch, grpo.PlayOptions{Config: &cfg})
	require.NoError(t, err)
	for seed, c := range convs {
		target := guess.TargetForSeed(rules, int64(seed))
		lo, hi := 1, 16
		calls := 0
		for _, m := range c.Messages {
			if len(m.ToolCalls) == 0 {
				continue
			}
			calls++
			var a guess.GuessArgs
			require.NoError(t, json.Unmarshal(m.ToolCalls[0].Arguments, &a))
			mid := (lo + hi) / 2
			assert.Equal(t, mid, a.Number)
			if target > mid {
				lo = mid + 1
			} else {
				hi = mid - 1
			}
		}
		assert.LessOrEqual(t, calls, 5, "binary search over 1..16")
		assert.Contains(t, c.Messages[len(c.Messages)-1].Content, "the number is")
	}
}

// TestRunTiny runs the program for a couple of steps at a tiny size.
func TestRunTiny(t *testing.T) {
	dir := t.TempDir()
	var out bytes.Buffer
	err := run(context.Background(), []string{"-max", "8", "-sft-steps", "2", "-steps", "2", "-generations", "2",
		"-eval", "2", "-hidden", "32", "-threads", "1", "-out", dir}, &out)
	require.NoError(t, err, out.String())
	steps, err := grpo.ReadMetrics(filepath.Join(dir, grpo.MetricsFile))
	require.NoError(t, err)
	assert.Len(t, steps, 2)
	assert.Contains(t, out.String(), "after GRPO")
}

func TestBadFlags(t *testing.T) {
	assert.ErrorContains(t, run(context.Background(), []string{"-max", "1"}, &bytes.Buffer{}), "-max")
	assert.ErrorContains(t, run(context.Background(), []string{"-device", "gpu"}, &bytes.Buffer{}), `-device: device "gpu"`)
}

// TestDeviceWithoutCUDA: -device cuda in a binary built without the cuda
// tag is ErrNoCUDA, before any model is loaded.
func TestDeviceWithoutCUDA(t *testing.T) {
	if device.CUDAEnabled {
		t.Skip("built with -tags cuda")
	}
	err := run(context.Background(), []string{"-device", "cuda:1", "-out", t.TempDir()}, &bytes.Buffer{})
	require.ErrorIs(t, err, device.ErrNoCUDA)
	assert.ErrorContains(t, err, "-device: device cuda:1: this binary was built without CUDA")
}
