//go:build !unix

package model

import (
	"errors"
	"os"
)

// mapFile reads the whole file (no mmap on this platform).
func mapFile(path string) ([]byte, func() error, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	if len(data) == 0 {
		return nil, nil, errors.New("empty file")
	}
	return data, func() error { return nil }, nil
}
