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

// TestCountingDownloadAll: DownloadAll counts one download per transfer
// and moves every one (through kernels.DownloadAll's fallback on a
// backend without the batched form).
func TestCountingDownloadAll(t *testing.T) {
	c := &Counting{Backend: ref.Backend{}}
	d, err := c.Import(kernels.HostF32([]float32{1, 2, 3}))
	require.NoError(t, err)
	e, err := c.Import(kernels.HostI32([]int32{4, 5}))
	require.NoError(t, err)
	c.Reset()
	f, i := make([]float32, 3), make([]int32, 2)
	require.NoError(t, kernels.DownloadAll(c, kernels.Transfer{Dst: kernels.HostF32(f), Src: d}, kernels.Transfer{Dst: kernels.HostI32(i), Src: e}))
	assert.Equal(t, Transfers{Downloads: 2, DownloadElems: 5}, c.N)
	assert.Equal(t, []float32{1, 2, 3}, f)
	assert.Equal(t, []int32{4, 5}, i)
}

// TestCountingHostArgs: a compute op's host Buffer that did not come from
// the wrapper's Alloc or Import counts as a hidden crossing (HostArgs),
// and Foreign names it; views of allocations and imports do not count;
// after Free the memory is no longer the backend's.
func TestCountingHostArgs(t *testing.T) {
	c := &Counting{Backend: ref.Backend{}}
	d, err := c.Alloc(kernels.F32, 6)
	require.NoError(t, err)
	w, err := c.Import(kernels.HostF32([]float32{1, 1, 1}))
	require.NoError(t, err)
	c.Reset()

	c.Add(d.Slice(0, 3), w)                                   // both the backend's
	c.Scale(d.Slice(3, 6), 2)                                 // a view
	c.Add(d.Slice(0, 3), kernels.HostF32([]float32{1, 2, 3})) // one host argument
	m := kernels.MatF32([]float32{1, 0, 0, 1}, 2, 2)
	c.MatMul(d.Slice(0, 2), d.Slice(2, 4), m, 1, false) // a host weight
	assert.Equal(t, Transfers{HostArgs: 2}, c.N)
	assert.Equal(t, []string{"Add dst,src[1]", "MatMul out,x,w[2]"}, c.Foreign)
	assert.Equal(t, 2, c.N.Total())

	assert.Equal(t, 2, c.Live())
	c.Free(d)
	assert.Equal(t, 1, c.Live())
	c.Reset()
	c.Scale(d, 1)
	assert.Equal(t, Transfers{HostArgs: 1}, c.N, "freed memory is not the backend's")
}

// TestCountingCopyImports: with CopyImports, Import returns a separate
// copy holding src's values, as a device does (without it, the CPU
// backends' Import returns src itself); the copy is backend memory, counted
// as one Import, and Free forgets it.
func TestCountingCopyImports(t *testing.T) {
	for _, copies := range []bool{false, true} {
		c := &Counting{Backend: ref.Backend{}, CopyImports: copies}
		src := []float32{1, 2, 3}
		d, err := c.Import(kernels.HostF32(src))
		require.NoError(t, err)
		assert.Equal(t, src, d.F32(), "copies=%v: the import holds src's values", copies)
		assert.Equal(t, !copies, d.HostPtr() == kernels.HostF32(src).HostPtr(), "copies=%v: same memory only without CopyImports", copies)
		src[0] = 9 // a host write after the import
		assert.Equal(t, copies, d.F32()[0] == 1, "copies=%v: the copy does not see a later host write", copies)
		assert.Equal(t, Transfers{Imports: 1, UploadElems: 3}, c.N, "copies=%v", copies)
		assert.True(t, c.Owned(d))
		assert.Equal(t, 1, c.Live())
		c.Free(d)
		assert.Equal(t, 0, c.Live())
	}
	_, err := (&Counting{Backend: ref.Backend{}, CopyImports: true}).Import(kernels.DeviceBuffer(fakeMem(4), kernels.F32, 0, 4))
	assert.ErrorContains(t, err, "device memory")
}

// TestCountingBadFrees: with CopyImports, a second Free of one allocation
// and a Free of memory the wrapper never returned are recorded in
// BadFrees (a double free on a device); without it, where an import is
// the host memory itself, they are not.
func TestCountingBadFrees(t *testing.T) {
	for _, copies := range []bool{false, true} {
		c := &Counting{Backend: ref.Backend{}, CopyImports: copies}
		d, err := c.Alloc(kernels.F32, 4)
		require.NoError(t, err)
		w, err := c.Import(kernels.HostF32([]float32{1, 2}))
		require.NoError(t, err)
		c.Free(d)
		c.Free(w)
		assert.Empty(t, c.BadFrees, "copies=%v: one Free each", copies)
		c.Free(d)
		c.Free(kernels.HostF32(make([]float32, 3)))
		c.Reset()
		if copies {
			assert.Equal(t, []string{"F32[4]", "F32[3]"}, c.BadFrees, "a second Free, a Free of foreign memory")
		} else {
			assert.Empty(t, c.BadFrees)
		}
	}
}

// deviceAllocs is a backend whose Alloc and Import return device Buffers
// (fakeMem), as a GPU's do.
type deviceAllocs struct{ ref.Backend }

func (deviceAllocs) Alloc(dt kernels.DType, n int) (kernels.Buffer, error) {
	return kernels.DeviceBuffer(fakeMem(n), dt, 0, n), nil
}

func (deviceAllocs) Import(src kernels.Buffer) (kernels.Buffer, error) {
	return kernels.DeviceBuffer(fakeMem(src.Len()), src.DType(), 0, src.Len()), nil
}

func (deviceAllocs) Free(kernels.Buffer) {}

// TestCountingBytes: Bytes follows the live allocations (Alloc, copying
// or device Imports; not an Import that is the host memory itself), on
// host and device Buffers alike, a bad Free takes nothing off, and Peak
// holds the most since ResetPeak.
func TestCountingBytes(t *testing.T) {
	tests := []struct {
		name       string
		be         kernels.Backend
		copies     bool
		importSize int64 // bytes an import of 2 F32 adds
	}{
		{"host, imports are the memory", ref.Backend{}, false, 0},
		{"host, copying imports", ref.Backend{}, true, 8},
		{"device", deviceAllocs{}, false, 8},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &Counting{Backend: tt.be, CopyImports: tt.copies}
			a, err := c.Alloc(kernels.F32, 4) // 16 bytes
			require.NoError(t, err)
			b, err := c.Alloc(kernels.BF16, 6) // 12 bytes
			require.NoError(t, err)
			w, err := c.Import(kernels.HostF32([]float32{1, 2}))
			require.NoError(t, err)
			assert.Equal(t, 28+tt.importSize, c.Bytes)
			assert.Equal(t, 28+tt.importSize, c.Peak)
			c.Free(a)
			assert.Equal(t, 12+tt.importSize, c.Bytes)
			c.ResetPeak()
			assert.Equal(t, 12+tt.importSize, c.Peak, "ResetPeak starts from what is live")
			u, err := c.Alloc(kernels.U8, 3)
			require.NoError(t, err)
			c.Free(u)
			assert.Equal(t, 15+tt.importSize, c.Peak, "the peak outlives the Free")
			c.Free(w)
			c.Free(b)
			assert.Zero(t, c.Bytes)
			if tt.be == (ref.Backend{}) {
				c.Free(b) // a second Free of host memory takes nothing off
				assert.Zero(t, c.Bytes)
			}
		})
	}
}

// fakeMem is a DeviceMem no backend can reach.
type fakeMem int

func (f fakeMem) Elems() int { return int(f) }

// TestCountingAttentionPagedArgs: Attention, AttentionBackward and
// WriteKV check the paged pool and the block tables too (the model passes
// K/V only through them), so a foreign host pool or table counts as a
// hidden crossing in each; Buffers the wrapper allocated do not.
func TestCountingAttentionPagedArgs(t *testing.T) {
	const heads, kvHeads, d, tt, bs = 2, 1, 4, 3, 2
	c := &Counting{Backend: ref.Backend{}}
	alloc := func(dt kernels.DType, n int) kernels.Buffer {
		b, err := c.Alloc(dt, n)
		require.NoError(t, err)
		return b
	}
	upload := func(v []int32) kernels.Buffer {
		b := alloc(kernels.I32, len(v))
		require.NoError(t, c.Upload(b, kernels.HostI32(v)))
		return b
	}
	nq, nkv, blk := tt*heads*d, tt*kvHeads*d, bs*kvHeads*d
	lay := kernels.BatchLayout{QStart: upload([]int32{0, tt}), Pos: upload([]int32{0, 1, 2}), B: 1, N: tt, MaxT: tt, MaxLen: tt}
	own := kernels.PagedKV{Pool: alloc(kernels.F32, 2*2*blk), BlockSize: bs, BlockStride: 2 * blk, VOff: blk,
		Tables: upload([]int32{1, 0}), TableStride: 2}
	foreignPool, foreignTables := own, own
	foreignPool.Pool = kernels.HostF32(make([]float32, 2*2*blk))
	foreignTables.Tables = kernels.HostI32([]int32{1, 0})
	q, out, lse := alloc(kernels.F32, nq), alloc(kernels.F32, nq), alloc(kernels.F32, tt*heads)
	kv := alloc(kernels.F32, nkv)
	for _, tc := range []struct {
		name  string
		paged kernels.PagedKV
		want  []string
	}{
		{"own pool and tables", own, nil},
		{"a foreign pool", foreignPool, []string{"WriteKV pool,tables,qstart,pos,k,v[0]",
			"Attention qstart,pos,q,out,lse,k,v,kstart,pool,tables[8]",
			"AttentionBackward qstart,pos,q,out,lse,k,v,kstart,pool,tables,dout,dq,dk,dv[8]"}},
		{"foreign tables", foreignTables, []string{"WriteKV pool,tables,qstart,pos,k,v[1]",
			"Attention qstart,pos,q,out,lse,k,v,kstart,pool,tables[9]",
			"AttentionBackward qstart,pos,q,out,lse,k,v,kstart,pool,tables,dout,dq,dk,dv[9]"}},
	} {
		c.Reset()
		c.WriteKV(tc.paged, lay, kv, kv, kvHeads, d)
		a := kernels.AttentionBatch{Layout: lay, Q: q, Out: out, LSE: lse, Paged: tc.paged}
		c.Attention(a, heads, kvHeads, d, 0.5)
		a.KStart = upload([]int32{0, tt})
		c.AttentionBackward(kernels.AttentionGradBatch{AttentionBatch: a, DOut: alloc(kernels.F32, nq), DQ: alloc(kernels.F32, nq),
			DK: alloc(kernels.F32, nkv), DV: alloc(kernels.F32, nkv)}, heads, kvHeads, d, 0.5)
		assert.Equal(t, len(tc.want), c.N.HostArgs, tc.name)
		assert.Equal(t, tc.want, c.Foreign, tc.name)
	}
}
