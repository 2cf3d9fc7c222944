package model

// grow returns buf with length n, reusing its memory when its capacity
// suffices; otherwise it allocates with a quarter of headroom (so a slowly
// growing batch does not reallocate every step) and keeps the old
// elements. It is the one resize helper of the package's scratch buffers.
func grow[T any](buf []T, n int) []T {
	if cap(buf) >= n {
		return buf[:n]
	}
	nb := make([]T, n, n+n/4)
	copy(nb, buf)
	return nb
}
