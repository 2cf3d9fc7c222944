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

// TestRunTiny runs the program for a couple of steps at a tiny size.
func TestRunTiny(t *testing.T) {
	dir := t.TempDir()
	var out bytes.Buffer
	err := run(context.Background(), []string{"-sft-steps", "2", "-steps", "2", "-generations", "2",
		"-hidden", "32", "-threads", "1", "-max-completion", "96", "-out", dir}, &out)
	require.NoError(t, err, out.String())
	steps, err := grpo.ReadMetrics(filepath.Join(dir, grpo.MetricsFile))
	require.NoError(t, err)
	require.Len(t, steps, 2)
	_, ok := steps[1].Metrics[grpo.RewardMeanName("caught")]
	assert.True(t, ok)
	assert.Contains(t, out.String(), "before GRPO")
}

func TestBadFlags(t *testing.T) {
	assert.Error(t, run(context.Background(), []string{"-lora-rank", "0"}, &bytes.Buffer{}))
}
