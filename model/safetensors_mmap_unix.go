//go:build unix

package model

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// mapFile maps the whole file read-only; the returned func unmaps it.
func mapFile(path string) ([]byte, func() error, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	size := st.Size()
	if size == 0 {
		return nil, nil, errors.New("empty file")
	}
	if int64(int(size)) != size {
		return nil, nil, fmt.Errorf("file of %d bytes is too large to map", size)
	}
	data, err := unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, nil, fmt.Errorf("mmap: %w", err)
	}
	return data, func() error { return unix.Munmap(data) }, nil
}
