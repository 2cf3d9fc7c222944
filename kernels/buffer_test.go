package kernels_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/x/kernels"
)

// TestBufferViews: a view shares memory with its parent at its offset, and
// a view of a view composes.
func TestBufferViews(t *testing.T) {
	s := []float32{0, 1, 2, 3, 4, 5}
	b := kernels.HostF32(s)
	v := b.Slice(2, 5).Slice(1, 3)
	assert.Equal(t, []float32{3, 4}, v.F32())
	v.F32()[0] = 30
	assert.Equal(t, float32(30), s[3], "a view writes its parent's memory")
	assert.Equal(t, "F32[2]", v.String())
	assert.True(t, v.Host())
}

// TestBufferMisuse: out-of-range views, the wrong typed accessor, and
// misfit buffer-op shapes panic naming the op and what was wrong.
func TestBufferMisuse(t *testing.T) {
	f := kernels.HostF32(make([]float32, 6))
	h := kernels.HostBF16(make([]uint16, 6))
	ix := kernels.HostI32([]int32{0, 1})
	for _, c := range []struct {
		name, want string
		fn         func()
	}{
		{"slice past end", "Buffer.Slice: [4, 7)", func() { f.Slice(4, 7) }},
		{"slice reversed", "Buffer.Slice: [3, 2)", func() { f.Slice(3, 2) }},
		{"wrong accessor", "Buffer.BF16: buffer holds F32", func() { f.BF16() }},
		{"transfer dtype", "Upload: dst holds F32, src BF16", func() { kernels.CheckTransfer("Upload", f, h) }},
		{"transfer length", "Download: dst has 6 elements, src 2", func() { kernels.CheckTransfer("Download", f, f.Slice(0, 2)) }},
		{"copy length", "Copy: dst has 6 elements, src 5", func() { kernels.CheckCopy(f, f.Slice(0, 5)) }},
		{"copy int cast", "Copy: cannot cast F32 to I32", func() { kernels.CheckCopy(kernels.HostI32(make([]int32, 6)), f) }},
		{"copy f16 cast", "Copy: cannot cast BF16 to F16", func() { kernels.CheckCopy(kernels.HostF16(make([]uint16, 6)), h) }},
		{"rows idx dtype", "GatherRows: idx holds F32", func() { kernels.CheckRows("GatherRows", f, f, f, 3) }},
		{"rows short", "ScatterRows: packed rows have 6 elements, need 2 rows of 4", func() { kernels.CheckRows("ScatterRows", f, kernels.HostF32(make([]float32, 8)), ix, 4) }},
		{"rows ragged table", "GatherRows: table of 6 elements is not rows of 4", func() { kernels.CheckRows("GatherRows", kernels.HostF32(make([]float32, 8)), f, ix, 4) }},
		{"transpose short", "Transpose: src has 6 and dst 6 elements, need [2,4]", func() { kernels.CheckTranspose(f, f, 2, 4) }},
		{"reduce dtype", "SumSquares: buffer 1 holds BF16", func() { kernels.CheckReduce("SumSquares", []kernels.Buffer{f, h}) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			defer func() {
				msg, _ := recover().(string)
				assert.Contains(t, msg, "kernels: "+c.want)
			}()
			c.fn()
		})
	}
}
