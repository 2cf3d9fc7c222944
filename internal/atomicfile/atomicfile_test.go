//go:build unix

package atomicfile

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestModesFollowTheUmask checks the temporary file and folder get Perm
// and DirPerm less the umask, as os.Create and os.Mkdir would, under two
// umasks, with fresh names each time.
func TestModesFollowTheUmask(t *testing.T) {
	for _, tc := range []struct {
		umask         int
		file, dirMode fs.FileMode
	}{
		{0o022, 0o644, 0o755},
		{0o077, 0o600, 0o700},
	} {
		old := syscall.Umask(tc.umask)
		dir := t.TempDir()
		f, err := CreateTemp(dir, ".x.tmp")
		require.NoError(t, err)
		require.NoError(t, f.Close())
		g, err := CreateTemp(dir, ".x.tmp")
		require.NoError(t, err)
		require.NoError(t, g.Close())
		d, err := MkdirTemp(dir, ".c.tmp")
		syscall.Umask(old)
		require.NoError(t, err)

		assert.NotEqual(t, f.Name(), g.Name())
		assert.True(t, strings.HasPrefix(filepath.Base(f.Name()), ".x.tmp"))
		assert.True(t, strings.HasPrefix(filepath.Base(d), ".c.tmp"))
		for path, want := range map[string]fs.FileMode{f.Name(): tc.file, d: tc.dirMode} {
			info, err := os.Stat(path)
			require.NoError(t, err)
			assert.Equal(t, want, info.Mode().Perm(), "umask %o: %s", tc.umask, path)
		}
	}
	_, err := CreateTemp(filepath.Join(t.TempDir(), "missing"), "x")
	assert.ErrorIs(t, err, fs.ErrNotExist)
}
