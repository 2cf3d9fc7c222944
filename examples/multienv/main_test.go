package main

import (
	"bytes"
	"context"
	"math"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/grpo"
)

// TestRunTiny runs two steps at a tiny size and checks that each env's
// reward functions are logged separately.
func TestRunTiny(t *testing.T) {
	dir := t.TempDir()
	var out bytes.Buffer
	err := run(context.Background(), []string{"-sft-steps", "2", "-steps", "2", "-generations", "2",
		"-hidden", "32", "-threads", "1", "-max-completion", "96", "-out", dir}, &out)
	require.NoError(t, err, out.String())
	steps, err := grpo.ReadMetrics(filepath.Join(dir, grpo.MetricsFile))
	require.NoError(t, err)
	require.Len(t, steps, 2)
	for _, name := range []string{"wordle_win", "wordle_greens", "wordle_invalid", "catch_caught"} {
		seen := false
		for _, s := range steps {
			if v, ok := s.Metrics[grpo.RewardMeanName(name)]; ok && !math.IsNaN(v) {
				seen = true
			}
		}
		assert.True(t, seen, "%s is logged", name)
	}
	assert.Contains(t, out.String(), "Catch caught")
}
