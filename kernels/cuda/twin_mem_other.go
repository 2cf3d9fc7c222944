//go:build !unix

package cuda

// mapAnon returns n zeroed bytes from the Go heap (no mmap on this
// platform; the twin then runs only Go-side fakes, never C++ kernels).
func mapAnon(n int64) ([]byte, func() error, error) {
	return make([]byte, n), func() error { return nil }, nil
}
