package kerneltest

import "github.com/x/kernels"

// Transfers counts the crossings between the host and a backend, by kind.
type Transfers struct {
	Uploads   int // Upload calls
	Downloads int // Download calls
	Imports   int // Import calls
	Scalars   int // ops that return a scalar to the host (SumSquares, AllFinite, Argmax)
	// UploadElems and DownloadElems are the elements those calls moved.
	UploadElems, DownloadElems int
}

// Total is the number of crossings of every kind.
func (n Transfers) Total() int { return n.Uploads + n.Downloads + n.Imports + n.Scalars }

// Counting wraps a Backend and counts every host↔backend crossing its
// Buffer methods make, so a test can assert how much one decode or
// training step moves. Every other op is the wrapped backend's.
type Counting struct {
	kernels.Backend
	N Transfers
}

// Reset zeroes the counts.
func (c *Counting) Reset() { c.N = Transfers{} }

// Upload counts one upload of src.Len() elements.
func (c *Counting) Upload(dst, src kernels.Buffer) error {
	c.N.Uploads++
	c.N.UploadElems += src.Len()
	return c.Backend.Upload(dst, src)
}

// Download counts one download of src.Len() elements.
func (c *Counting) Download(dst, src kernels.Buffer) error {
	c.N.Downloads++
	c.N.DownloadElems += src.Len()
	return c.Backend.Download(dst, src)
}

// Import counts one import (a copy to a device; none on a CPU backend, but
// counted all the same).
func (c *Counting) Import(src kernels.Buffer) (kernels.Buffer, error) {
	c.N.Imports++
	c.N.UploadElems += src.Len()
	return c.Backend.Import(src)
}

// SumSquares counts one scalar.
func (c *Counting) SumSquares(xs ...kernels.Buffer) (float64, error) {
	c.N.Scalars++
	return c.Backend.SumSquares(xs...)
}

// Argmax counts one scalar.
func (c *Counting) Argmax(x kernels.Buffer) (int32, error) {
	c.N.Scalars++
	return c.Backend.Argmax(x)
}

// AllFinite counts one scalar.
func (c *Counting) AllFinite(xs ...kernels.Buffer) (bool, error) {
	c.N.Scalars++
	return c.Backend.AllFinite(xs...)
}
