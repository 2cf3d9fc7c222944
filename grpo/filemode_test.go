//go:build unix

package grpo

import (
	"io/fs"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/model"
)

// TestOutputsReadableByOthers writes what a run leaves behind (LoRA and
// full checkpoints, the plot) under the usual umask 022 and
// checks another account can read it: folders 0755, files 0644, as
// os.Mkdir and os.Create give, not the 0700/0600 of temporary names.
func TestOutputsReadableByOthers(t *testing.T) {
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	out := t.TempDir()
	dir := tinyModelDir(t)
	_, err := SaveCheckpoint(out, 1, 0, trainedWeights(t, dir, &model.LoRAConfig{R: 2, Alpha: 4}, 1), testState{}, nil)
	require.NoError(t, err)
	full := trainedWeights(t, dir, nil, 1)
	_, err = SaveCheckpoint(out, 2, 0, full, testState{}, nil)
	require.NoError(t, err)
	require.NoError(t, WritePlot(filepath.Join(out, "plot.png"), runCurves(3), PlotOptions{Width: 128, Height: 128}))

	n := 0
	require.NoError(t, filepath.WalkDir(out, func(path string, d fs.DirEntry, err error) error {
		require.NoError(t, err)
		if path == out {
			return nil
		}
		info, err := d.Info()
		require.NoError(t, err)
		want := fs.FileMode(0o644)
		if d.IsDir() {
			want = 0o755
		}
		assert.Equal(t, want, info.Mode().Perm(), "%s", path[len(out):])
		n++
		return nil
	}))
	assert.GreaterOrEqual(t, n, 10, "both checkpoints' files and the plot")
}
