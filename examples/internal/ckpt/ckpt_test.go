package ckpt

import (
	"flag"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/grpo"
)

func TestFlags(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	f := Register(fs)
	require.NoError(t, fs.Parse([]string{"-save-steps", "3", "-resume"}))
	assert.Equal(t, Flags{SaveSteps: 3, Resume: true}, *f)
	assert.NoError(t, f.Check())
	assert.ErrorContains(t, (&Flags{SaveSteps: -1}).Check(), "-save-steps -1")

	var cfg grpo.Config
	f.GRPO(&cfg)
	assert.Equal(t, 3, cfg.SaveSteps)

	// The warm start resumes only from a checkpoint that is there.
	sc := grpo.DefaultSFTConfig()
	sc.OutputDir = t.TempDir()
	require.NoError(t, f.SFT(&sc))
	assert.Equal(t, 3, sc.SaveSteps)
	assert.Empty(t, sc.ResumeFrom, "nothing to resume: a fresh warm start")
	require.NoError(t, os.Mkdir(filepath.Join(sc.OutputDir, "checkpoint-2"), 0o755))
	require.NoError(t, f.SFT(&sc))
	assert.Equal(t, "latest", sc.ResumeFrom)
	sc.ResumeFrom = ""
	require.NoError(t, (&Flags{}).SFT(&sc))
	assert.Empty(t, sc.ResumeFrom, "without -resume")
}
