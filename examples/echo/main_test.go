package main

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/grpo"
)

// TestRunTiny runs the program for a couple of steps at a tiny size and
// checks that the env's own reward is logged under its type's name.
func TestRunTiny(t *testing.T) {
	dir := t.TempDir()
	var out bytes.Buffer
	err := run(context.Background(), []string{"-sft-steps", "2", "-steps", "2", "-generations", "2",
		"-hidden", "32", "-threads", "1", "-out", dir}, &out)
	require.NoError(t, err, out.String())
	steps, err := grpo.ReadMetrics(filepath.Join(dir, grpo.MetricsFile))
	require.NoError(t, err)
	require.Len(t, steps, 2)
	_, ok := steps[1].Metrics[grpo.RewardMeanName("Env")]
	assert.True(t, ok, "the echo env's reward is a column named after its type")
	assert.FileExists(t, filepath.Join(dir, grpo.PlotFile))
	assert.FileExists(t, filepath.Join(dir, grpo.CompletionsFile))
}

func TestBadFlags(t *testing.T) {
	assert.Error(t, run(context.Background(), []string{"-generations", "1"}, &bytes.Buffer{}))
	assert.Error(t, run(context.Background(), []string{"-nope"}, &bytes.Buffer{}))
}
