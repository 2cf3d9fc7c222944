package kerneltest

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/kernels"
	"github.com/x/kernels/ref"
)

// The buffer ops' tests give a backend its inputs the way a model will:
// Alloc, then Upload from host memory; they Download the outputs and
// compare them with kernels/ref run on host Buffers. So they hold for a
// device backend as well as for the CPU ones.

// toBackend allocates a Buffer of b holding a copy of the host Buffer h.
func toBackend(t *testing.T, b kernels.Backend, h kernels.Buffer) kernels.Buffer {
	t.Helper()
	d, err := b.Alloc(h.DType(), h.Len())
	require.NoError(t, err, "Alloc")
	t.Cleanup(func() { b.Free(d) })
	require.NoError(t, b.Upload(d, h), "Upload")
	return d
}

// toHost downloads d into a new host Buffer.
func toHost(t *testing.T, b kernels.Backend, d kernels.Buffer) kernels.Buffer {
	t.Helper()
	h, err := kernels.AllocHost(d.DType(), d.Len())
	require.NoError(t, err)
	require.NoError(t, b.Download(h, d), "Download")
	return h
}

// hostBuf returns n random elements of dt as a host Buffer (I32 in
// [0, 1000)); bf16 values are rounded float32s.
func hostBuf(name string, dt kernels.DType, n int) kernels.Buffer {
	rng := newRNG(name)
	switch dt {
	case kernels.BF16:
		u := make([]uint16, n)
		for i, v := range uniform(rng, n, 3) {
			u[i] = kernels.F32ToBF16(v)
		}
		return kernels.HostBF16(u)
	case kernels.F16:
		u := make([]uint16, n)
		for i, v := range uniform(rng, n, 3) {
			u[i] = kernels.F32ToF16(v)
		}
		return kernels.HostF16(u)
	case kernels.I32:
		v := make([]int32, n)
		for i := range v {
			v[i] = int32(rng.IntN(1000))
		}
		return kernels.HostI32(v)
	}
	return kernels.HostF32(uniform(rng, n, 3))
}

// checkSame requires two host Buffers to hold the same dtype, length and
// bits.
func checkSame(t *testing.T, what string, got, want kernels.Buffer) {
	t.Helper()
	require.Equal(t, want.String(), got.String(), "%s: dtype and length", what)
	switch want.DType() {
	case kernels.F32:
		CheckExact(t, what, got.F32(), want.F32())
	case kernels.BF16, kernels.F16:
		assert.Equal(t, want.U16(), got.U16(), what)
	case kernels.I32:
		assert.Equal(t, want.I32(), got.I32(), what)
	case kernels.U8:
		assert.Equal(t, want.U8(), got.U8(), what)
	}
}

var bufferDTypes = []kernels.DType{kernels.F32, kernels.BF16, kernels.F16, kernels.I32}

// Memory checks Alloc (zeroed, every Buffer dtype), Upload and Download
// (round trip), views (a write through Slice lands in the parent, at the
// offset), Import (the data arrives), Err (nil after success), and that a
// bad Alloc is an error naming the op, not a panic.
func Memory(t *testing.T, b kernels.Backend) {
	for _, dt := range bufferDTypes {
		for _, n := range []int{0, 1, 17, 4099} {
			t.Run(fmt.Sprintf("%v/N%d", dt, n), func(t *testing.T) {
				d, err := b.Alloc(dt, n)
				require.NoError(t, err)
				defer b.Free(d)
				require.Equal(t, dt, d.DType())
				require.Equal(t, n, d.Len())
				zero, err := kernels.AllocHost(dt, n)
				require.NoError(t, err)
				checkSame(t, "fresh Alloc", toHost(t, b, d), zero)

				h := hostBuf(fmt.Sprint("Memory", dt, n), dt, n)
				require.NoError(t, b.Upload(d, h))
				checkSame(t, "round trip", toHost(t, b, d), h)

				if n >= 4 { // a view: upload into elements [1, 3) only
					part := hostBuf(fmt.Sprint("MemoryView", dt, n), dt, 2)
					require.NoError(t, b.Upload(d.Slice(1, 3), part))
					want := toHost(t, ref.Backend{}, h) // a host copy of h
					ref.Backend{}.Copy(want.Slice(1, 3), part)
					checkSame(t, "write through a view", toHost(t, b, d), want)
					checkSame(t, "read through a view", toHost(t, b, d.Slice(1, 3)), part)
				}

				imp, err := b.Import(h)
				require.NoError(t, err)
				checkSame(t, "Import", toHost(t, b, imp), h)
				assert.NoError(t, b.Err())
			})
		}
	}
	t.Run("U8", func(t *testing.T) { memoryU8(t, b) })
	_, err := b.Alloc(kernels.DType(99), 4)
	assert.ErrorContains(t, err, "Alloc", "not a Buffer dtype")
	_, err = b.Alloc(kernels.F32, -1)
	assert.ErrorContains(t, err, "Alloc", "negative length")
}

// Copy checks dst = src for each dtype and the F32 ↔ BF16 casts (F32 →
// BF16 rounds to nearest even, including NaN and ±Inf), bit-exact.
func Copy(t *testing.T, b kernels.Backend) {
	var r ref.Backend
	casts := [][2]kernels.DType{{kernels.F32, kernels.F32}, {kernels.BF16, kernels.BF16}, {kernels.F16, kernels.F16}, {kernels.I32, kernels.I32},
		{kernels.F32, kernels.BF16}, {kernels.BF16, kernels.F32}}
	for _, c := range casts {
		for _, n := range []int{0, 1, 17, 4099, 1<<16 + 3} {
			t.Run(fmt.Sprintf("%v_to_%v/N%d", c[0], c[1], n), func(t *testing.T) {
				src := hostBuf(fmt.Sprint("Copy", c, n), c[0], n)
				if c[0] == kernels.F32 && n > 3 { // the special values the cast must keep
					s := src.F32()
					s[0], s[1], s[2] = float32(math.NaN()), float32(math.Inf(-1)), math.MaxFloat32 // rounds to +Inf
				}
				want, err := kernels.AllocHost(c[1], n)
				require.NoError(t, err)
				r.Copy(want, src)
				dst, err := b.Alloc(c[1], n)
				require.NoError(t, err)
				defer b.Free(dst)
				b.Copy(dst, toBackend(t, b, src))
				require.NoError(t, b.Err())
				got := toHost(t, b, dst)
				if c[1] == kernels.F32 {
					CheckExact(t, "dst", got.F32(), want.F32())
				} else {
					checkSame(t, "dst", got, want)
				}
			})
		}
	}
}

// GatherRows and ScatterRows check row moves in every dtype, with repeated
// indices (gather), a permutation (scatter), one row, wide rows, and a move
// large enough (300 × 1024) that a CPU backend splits it over threads.
func GatherRows(t *testing.T, b kernels.Backend) {
	var r ref.Backend
	for _, dt := range bufferDTypes {
		for _, s := range []struct{ rows, cols, n int }{{1, 1, 1}, {5, 3, 7}, {64, 1024, 40}, {300, 100, 300}, {8, 4096, 0}, {600, 1024, 300}} {
			t.Run(fmt.Sprintf("%v/%dx%d_n%d", dt, s.rows, s.cols, s.n), func(t *testing.T) {
				src := hostBuf(fmt.Sprint("Gather", dt, s), dt, s.rows*s.cols)
				rng := newRNG(fmt.Sprint("GatherIdx", s))
				ix := make([]int32, s.n)
				for i := range ix {
					ix[i] = int32(rng.IntN(s.rows))
				}
				idx := kernels.HostI32(ix)
				want, _ := kernels.AllocHost(dt, s.n*s.cols)
				r.GatherRows(want, src, idx, s.cols)
				dst, err := b.Alloc(dt, s.n*s.cols)
				require.NoError(t, err)
				defer b.Free(dst)
				b.GatherRows(dst, toBackend(t, b, src), toBackend(t, b, idx), s.cols)
				require.NoError(t, b.Err())
				checkSame(t, "dst", toHost(t, b, dst), want)
			})
		}
	}
}

// ScatterRows: see GatherRows.
func ScatterRows(t *testing.T, b kernels.Backend) {
	var r ref.Backend
	for _, dt := range bufferDTypes {
		for _, s := range []struct{ rows, cols, n int }{{1, 1, 1}, {7, 3, 5}, {64, 1024, 40}, {300, 100, 300}, {600, 1024, 300}} {
			t.Run(fmt.Sprintf("%v/%dx%d_n%d", dt, s.rows, s.cols, s.n), func(t *testing.T) {
				base := hostBuf(fmt.Sprint("ScatterBase", dt, s), dt, s.rows*s.cols)
				src := hostBuf(fmt.Sprint("Scatter", dt, s), dt, s.n*s.cols)
				perm := newRNG(fmt.Sprint("ScatterIdx", s)).Perm(s.rows)[:s.n]
				ix := make([]int32, s.n)
				for i, p := range perm {
					ix[i] = int32(p)
				}
				idx := kernels.HostI32(ix)
				want := toHost(t, r, base)
				r.ScatterRows(want, src, idx, s.cols)
				dst := toBackend(t, b, base)
				b.ScatterRows(dst, toBackend(t, b, src), toBackend(t, b, idx), s.cols)
				require.NoError(t, b.Err())
				checkSame(t, "dst", toHost(t, b, dst), want)
			})
		}
	}
}

// Transpose checks dst = srcᵀ in every dtype at shapes that are not
// multiples of any tile, one row, one column, and a vocabulary-wide
// matrix.
func Transpose(t *testing.T, b kernels.Backend) {
	var r ref.Backend
	for _, dt := range bufferDTypes {
		for _, s := range [][2]int{{1, 1}, {1, 37}, {37, 1}, {65, 129}, {128, 64}, {1000, 3}, {64, 4099}} {
			t.Run(fmt.Sprintf("%v/%dx%d", dt, s[0], s[1]), func(t *testing.T) {
				src := hostBuf(fmt.Sprint("Transpose", dt, s), dt, s[0]*s[1])
				want, _ := kernels.AllocHost(dt, s[0]*s[1])
				r.Transpose(want, src, s[0], s[1])
				dst, err := b.Alloc(dt, s[0]*s[1])
				require.NoError(t, err)
				defer b.Free(dst)
				b.Transpose(dst, toBackend(t, b, src), s[0], s[1])
				require.NoError(t, b.Err())
				checkSame(t, "dst", toHost(t, b, dst), want)
			})
		}
	}
}

// SumSquares checks Σ x² over several buffers (empty, odd sizes, over a
// million elements) against the reference within Tolerance("SumSquares"),
// and that it is the same on every call.
func SumSquares(t *testing.T, b kernels.Backend) {
	var r ref.Backend
	for _, sizes := range [][]int{{}, {0}, {1}, {17, 4099}, {1<<20 + 5, 3, 1 << 14}} {
		t.Run(fmt.Sprint(sizes), func(t *testing.T) {
			var hs, ds []kernels.Buffer
			for i, n := range sizes {
				h := hostBuf(fmt.Sprint("SumSquares", i, n), kernels.F32, n)
				hs, ds = append(hs, h), append(ds, toBackend(t, b, h))
			}
			want, err := r.SumSquares(hs...)
			require.NoError(t, err)
			got, err := b.SumSquares(ds...)
			require.NoError(t, err)
			assert.InDelta(t, want, got, Tolerance("SumSquares").RTol*want)
			again, err := b.SumSquares(ds...)
			require.NoError(t, err)
			assert.Equal(t, got, again, "repeated call")
		})
	}
}

// AllFinite checks finite buffers and one NaN, +Inf or −Inf placed first,
// last or in the middle of the last of several buffers.
func AllFinite(t *testing.T, b kernels.Backend) {
	for _, n := range []int{1, 17, 1<<16 + 1} {
		for _, bad := range []float64{0, math.NaN(), math.Inf(1), math.Inf(-1)} {
			for _, at := range []int{0, n / 2, n - 1} {
				t.Run(fmt.Sprintf("N%d/%v@%d", n, bad, at), func(t *testing.T) {
					first := hostBuf("AllFiniteFirst", kernels.F32, 100)
					h := hostBuf(fmt.Sprint("AllFinite", n), kernels.F32, n)
					h.F32()[at] = float32(bad)
					ok, err := b.AllFinite(toBackend(t, b, first), toBackend(t, b, h))
					require.NoError(t, err)
					assert.Equal(t, bad == 0, ok)
				})
			}
		}
	}
	ok, err := b.AllFinite()
	require.NoError(t, err)
	assert.True(t, ok, "no buffers")
}

// memoryU8 checks the U8 Buffers that hold PolicyLoss's clip flags: a
// zeroed Alloc, an Upload/Download round trip and a write through a view.
// The data-movement ops refuse U8 (kernels.CheckCopy), so nothing else
// moves them.
func memoryU8(t *testing.T, b kernels.Backend) {
	const n = 37
	d, err := b.Alloc(kernels.U8, n)
	require.NoError(t, err)
	defer b.Free(d)
	checkSame(t, "fresh Alloc", toHost(t, b, d), kernels.HostU8(make([]uint8, n)))
	h := make([]uint8, n)
	for i := range h {
		h[i] = uint8(3*i + 1)
	}
	require.NoError(t, b.Upload(d, kernels.HostU8(h)))
	checkSame(t, "round trip", toHost(t, b, d), kernels.HostU8(h))
	require.NoError(t, b.Upload(d.Slice(5, 7), kernels.HostU8([]uint8{200, 201})))
	h[5], h[6] = 200, 201
	checkSame(t, "write through a view", toHost(t, b, d), kernels.HostU8(h))
	assert.NoError(t, b.Err())
}
