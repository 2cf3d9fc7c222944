//go:build unix

package cuda

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// mapAnon returns n zeroed bytes of anonymous memory outside the Go heap
// (the twin's device and page-locked memory: kernels in C++ read it by
// address), followed by an inaccessible guard page, so a kernel that runs
// past the end of a segment faults instead of reading its neighbour's
// bytes. The function returned unmaps it.
func mapAnon(n int64) ([]byte, func() error, error) {
	page := int64(os.Getpagesize())
	size := (n + page - 1) / page * page
	mem, err := unix.Mmap(-1, 0, int(size+page), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return nil, nil, fmt.Errorf("mmap %d bytes: %w", size+page, err)
	}
	if err := unix.Mprotect(mem[size:], unix.PROT_NONE); err != nil {
		_ = unix.Munmap(mem)
		return nil, nil, fmt.Errorf("mprotect guard page: %w", err)
	}
	return mem[:n:n], func() error { return unix.Munmap(mem) }, nil
}
