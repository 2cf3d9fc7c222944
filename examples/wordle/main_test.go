package main

import (
	"bytes"
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/env/openenv"
	"github.com/x/env/wordle"
	"github.com/x/grpo"
)

// tinyArgs is a run of a couple of steps at a tiny size.
func tinyArgs(out string) []string {
	return []string{"-words", "crane,plant,brick,chart", "-sft-words", "2", "-sft-steps", "3",
		"-steps", "2", "-prompts", "2", "-generations", "2", "-hidden", "32", "-threads", "1", "-out", out}
}

// TestRunTiny runs the whole program for a couple of steps and checks
// every output it promises.
func TestRunTiny(t *testing.T) {
	dir := t.TempDir()
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), tinyArgs(dir), &out), out.String())
	for _, f := range []string{
		filepath.Join(sftDir, grpo.MetricsFile), filepath.Join(sftDir, grpo.PlotFile),
		filepath.Join(grpoDir, grpo.MetricsFile), filepath.Join(grpoDir, grpo.PlotFile), filepath.Join(grpoDir, grpo.CompletionsFile),
		filepath.Join(adapterDir, "adapter_config.json"), filepath.Join(adapterDir, "adapter_model.safetensors"),
		filepath.Join(baseDir, "config.json"), filepath.Join(baseDir, "model.safetensors"), filepath.Join(baseDir, "tokenizer.json"),
		tableFile,
	} {
		fi, err := os.Stat(filepath.Join(dir, f))
		if assert.NoError(t, err, f) {
			assert.NotZero(t, fi.Size(), f)
		}
	}
	steps, err := grpo.ReadMetrics(filepath.Join(dir, grpoDir, grpo.MetricsFile))
	require.NoError(t, err)
	require.Len(t, steps, 2, "one line per GRPO step")
	for _, name := range []string{grpo.MetricReward, grpo.RewardMeanName("win"), grpo.RewardMeanName("greens"), grpo.RewardMeanName("invalid")} {
		_, ok := steps[0].Metrics[name]
		assert.True(t, ok, "metrics.jsonl has %s", name)
	}
	table, err := os.ReadFile(filepath.Join(dir, tableFile))
	require.NoError(t, err)
	for _, row := range []string{"| before SFT | ", "| after SFT | ", "| after GRPO | "} {
		assert.Contains(t, string(table), row)
		assert.Contains(t, out.String(), row)
	}
	assert.Contains(t, out.String(), "grpo step 2/2")
}

// TestRemoteEnvRun is the README's remote run on loopback: a Wordle server
// that requires a token, and the program playing on it with -env-url and
// -env-token.
func TestRemoteEnvRun(t *testing.T) {
	srv := openenv.NewServer(wordle.NewEnvironmentFactory(wordle.Options{}), openenv.RequireBearerToken("s3cret"))
	hs := httptest.NewServer(srv)
	defer hs.Close()
	defer srv.Shutdown(context.Background())

	args := append(tinyArgs(t.TempDir()), "-env-url", hs.URL, "-env-token", "s3cret", "-sft-steps", "0")
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), args, &out), out.String())
	assert.Contains(t, out.String(), "played on "+hs.URL)
	assert.Contains(t, out.String(), "| after GRPO | ")

	bad := append(tinyArgs(t.TempDir()), "-env-url", hs.URL, "-env-token", "wrong", "-sft-steps", "0")
	assert.Error(t, run(context.Background(), bad, &bytes.Buffer{}), "a wrong token must fail the run")
}

func TestFlags(t *testing.T) {
	tests := []struct {
		args    []string
		wantErr string
	}{
		{args: []string{"-generations", "1"}, wantErr: "at least 2"},
		{args: []string{"-sft-words", "99"}, wantErr: "-sft-words"},
		{args: []string{"-words", "crane,cran"}, wantErr: "five letters"},
		{args: []string{"-eval-words", "zebra"}, wantErr: "not one of -words"},
		{args: []string{"-lr", "0"}, wantErr: "-lr"},
		{args: []string{"-hidden", "33"}, wantErr: "-hidden"},
		{args: []string{"extra"}, wantErr: "unexpected"},
		{args: []string{"-eval-words", "crane,chart"}},
	}
	for _, tc := range tests {
		c, err := parseFlags(tc.args, &bytes.Buffer{})
		if tc.wantErr != "" {
			assert.ErrorContains(t, err, tc.wantErr, "%q", tc.args)
			continue
		}
		require.NoError(t, err)
		assert.Equal(t, []string{"crane", "chart"}, c.EvalWords)
		assert.Len(t, c.Words, 10)
	}
}

// TestGRPOImprovesOnSFT is the demo's claim at a smaller size: the GRPO
// phase itself raises the greedy evaluation (the recipe's mean reward per
// game, which counts wins, greens and invalid guesses) above the SFT
// model's. The warm start is deliberately short, so that the SFT model
// still makes invalid guesses and its rollouts differ in reward; GRPO
// trains LoRA adapters at the default rate, as the demo does.
func TestGRPOImprovesOnSFT(t *testing.T) {
	if testing.Short() {
		t.Skip("trains for about a minute")
	}
	args := []string{"-words", smallWords, "-sft-words", "5", "-sft-steps", smallSFTSteps,
		"-steps", smallGRPOSteps, "-prompts", "2", "-generations", "8",
		"-threads", "1", "-out", t.TempDir()}
	cfg, err := parseFlags(args, &bytes.Buffer{})
	require.NoError(t, err)
	var out bytes.Buffer
	res, err := train(context.Background(), cfg, &out)
	require.NoError(t, err, out.String())
	t.Logf("after SFT: %s; after GRPO: %s", res.AfterSFT, res.AfterGRPO)
	assert.Greater(t, res.AfterGRPO.meanReward(), res.AfterSFT.meanReward(), "GRPO must raise the mean reward of the greedy games")
	assert.LessOrEqual(t, res.AfterGRPO.Invalid, res.AfterSFT.Invalid, "GRPO must not add invalid guesses")
}

// The smaller run of TestGRPOImprovesOnSFT: five of the default words, a
// short warm start, a few GRPO steps.
const (
	smallWords     = "brave,brick,bride,chair,crane"
	smallSFTSteps  = "50"
	smallGRPOSteps = "10"
)
