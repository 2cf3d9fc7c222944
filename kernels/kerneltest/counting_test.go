package kerneltest

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/kernels"
	"github.com/x/kernels/ref"
)

// TestCounting: every crossing is counted once, with its elements; ops
// that stay on the backend (Alloc, Copy, Transpose, Scale) are not
// crossings; Argmax's result is a scalar crossing.
func TestCounting(t *testing.T) {
	c := &Counting{Backend: ref.Backend{}}
	d, err := c.Alloc(kernels.F32, 6)
	require.NoError(t, err)
	e, err := c.Alloc(kernels.F32, 6)
	require.NoError(t, err)
	require.NoError(t, c.Upload(d, kernels.HostF32([]float32{1, 2, 3, 4, 5, 6})))
	c.Transpose(e, d, 2, 3)
	c.Copy(d.Slice(0, 3), e.Slice(3, 6))
	_, err = c.Import(kernels.HostI32([]int32{1, 2}))
	require.NoError(t, err)
	s, err := c.SumSquares(d)
	require.NoError(t, err)
	ok, err := c.AllFinite(d, e)
	require.NoError(t, err)
	c.Scale(d, 2) // a compute op on backend Buffers: no crossing
	id, err := c.Argmax(d)
	require.NoError(t, err)
	host := make([]float32, 6)
	require.NoError(t, c.Download(kernels.HostF32(host), e))

	assert.Equal(t, Transfers{Uploads: 1, Downloads: 1, Imports: 1, Scalars: 3, UploadElems: 8, DownloadElems: 6}, c.N)
	assert.Equal(t, 6, c.N.Total())
	assert.Equal(t, int32(2), id, "d = 2·(5, 3, 6, 4, 5, 6): the first maximum is at index 2")
	assert.Equal(t, []float32{1, 4, 2, 5, 3, 6}, host)
	assert.Equal(t, float64(5*5+3*3+6*6+4*4+5*5+6*6), s)
	assert.True(t, ok)
	c.Reset()
	assert.Zero(t, c.N.Total())
}
