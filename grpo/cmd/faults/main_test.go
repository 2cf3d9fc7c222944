package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseFlags(t *testing.T) {
	c, err := parseFlags(nil, &bytes.Buffer{})
	require.NoError(t, err)
	assert.Equal(t, []string{"kill", "restart", "dead"}, c.modes)
	assert.Equal(t, 30*time.Second, c.down)
	assert.Contains(t, c.args, "-sft-steps")
	for _, bad := range [][]string{{"-modes", "kill,explode"}, {"-kills", "0"}, {"-down", "-1s"}, {"x"}} {
		_, err := parseFlags(bad, &bytes.Buffer{})
		assert.Error(t, err, "%q", bad)
	}
}

// TestCompareRuns: equal folders pass; a changed adapter, a metric that
// differs, a step logged twice or a temporary folder left fail, each
// named; wall-time metrics may differ.
func TestCompareRuns(t *testing.T) {
	write := func(dir, rel, data string) {
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(dir, rel)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, rel), []byte(data), 0o644))
	}
	fill := func(dir, adapter, metrics string) {
		for _, rel := range []string{"base-model/model.safetensors", "eval.md", "grpo/completions.jsonl", "sft/checkpoint-2/model.safetensors", "grpo/checkpoint-2/adapter_model.safetensors"} {
			write(dir, rel, "x")
		}
		write(dir, "adapter/adapter_model.safetensors", adapter)
		abs, _ := filepath.Abs(dir)
		write(dir, "adapter/adapter_config.json", `{"base_model_name_or_path":"`+abs+`/base-model"}`)
		write(dir, "sft/metrics.jsonl", metrics)
		write(dir, "grpo/metrics.jsonl", metrics)
	}
	want := t.TempDir()
	fill(want, "a", "{\"step\":1,\"loss\":1,\"step_time\":3}\n{\"step\":2,\"loss\":0.5}\n")
	got := t.TempDir()
	fill(got, "a", "{\"step\":1,\"loss\":1,\"step_time\":4}\n{\"step\":2,\"loss\":0.5}\n")
	assert.NoError(t, compareRuns(want, got, &bytes.Buffer{}))

	for _, tc := range []struct {
		name, adapter, metrics, temp, want string
	}{
		{"adapter", "b", "{\"step\":1,\"loss\":1}\n{\"step\":2,\"loss\":0.5}\n", "", "adapter/adapter_model.safetensors differs"},
		{"metric", "a", "{\"step\":1,\"loss\":1}\n{\"step\":2,\"loss\":0.25}\n", "", "step 2 loss = 0.25"},
		{"step twice", "a", "{\"step\":1,\"loss\":1}\n{\"step\":1,\"loss\":1}\n{\"step\":2,\"loss\":0.5}\n", "", "3 lines"},
		{"temporary folder", "a", "{\"step\":1,\"loss\":1}\n{\"step\":2,\"loss\":0.5}\n", ".checkpoint-3.tmp9", "temporary checkpoint folders left: .checkpoint-3.tmp9"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := t.TempDir()
			fill(got, tc.adapter, tc.metrics)
			if tc.temp != "" {
				require.NoError(t, os.Mkdir(filepath.Join(got, "grpo", tc.temp), 0o755))
			}
			assert.ErrorContains(t, compareRuns(want, got, &bytes.Buffer{}), tc.want)
		})
	}
}
