package model

import "github.com/x/kernels"

// freeCounting counts the Free calls that reach the wrapped backend.
type freeCounting struct {
	kernels.Backend
	frees int
}

// Free counts one call and frees b.
func (f *freeCounting) Free(b kernels.Buffer) {
	f.frees++
	f.Backend.Free(b)
}
