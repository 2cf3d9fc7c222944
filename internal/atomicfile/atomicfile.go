// Package atomicfile makes the temporary files and folders that outputs
// are written under before a rename puts them in place, with the
// permissions of a plain os.Create or os.Mkdir (0644 and 0755 under the
// usual umask 022), not os.CreateTemp's and os.MkdirTemp's 0600 and 0700:
// a checkpoint or a plot written by a training account must be readable by
// the account that serves or reads it.
package atomicfile

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
)

// Perm and DirPerm are the modes asked for; the process's umask applies.
const (
	Perm    fs.FileMode = 0o644
	DirPerm fs.FileMode = 0o755
)

// tries bounds the names tried before giving up, as os.CreateTemp does.
const tries = 10000

// CreateTemp creates a new file in dir named prefix followed by random
// digits, opened for writing, with mode Perm (less the umask).
func CreateTemp(dir, prefix string) (*os.File, error) {
	for range tries {
		name := filepath.Join(dir, prefix+strconv.FormatUint(rand.Uint64(), 36))
		f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, Perm)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		return f, err
	}
	return nil, fmt.Errorf("create a temporary file %s* in %s: every name tried exists", prefix, dir)
}

// MkdirTemp creates a new folder in dir named prefix followed by random
// digits, with mode DirPerm (less the umask), and returns its path.
func MkdirTemp(dir, prefix string) (string, error) {
	for range tries {
		name := filepath.Join(dir, prefix+strconv.FormatUint(rand.Uint64(), 36))
		err := os.Mkdir(name, DirPerm)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return "", err
		}
		return name, nil
	}
	return "", fmt.Errorf("create a temporary folder %s* in %s: every name tried exists", prefix, dir)
}
