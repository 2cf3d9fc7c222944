package cpu

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/x/kernels"
)

// fakeDeviceMem is an allocation of some device backend: a CPU Backend
// holds no device memory, so a Buffer over it is a programmer error.
type fakeDeviceMem int

func (m fakeDeviceMem) Elems() int { return int(m) }

// TestForeignWeights: MatMul and MatMulNN given a weight Mat whose data is
// device memory (another backend's) panic with a message naming the op
// and the device memory, on every SIMD path and at decode (M < mBig),
// batched (mBig ≤ M < mDirect) and prefill (M ≥ mDirect) sizes, instead
// of handing a nil host address to the assembly kernels.
func TestForeignWeights(t *testing.T) {
	const n, k = 8, 32
	forEachBackend(t, func(t *testing.T, b *Backend) {
		for _, dt := range []kernels.DType{kernels.F32, kernels.BF16} {
			w := kernels.MatOf(kernels.DeviceBuffer(fakeDeviceMem(n*k), dt, 0, n*k), n, k)
			for _, m := range []int{1, mBig, mDirect} {
				x, out := make([]float32, m*k), make([]float32, m*n)
				assert.PanicsWithValue(t, "kernels/cpu: MatMul: weight data is device memory, not host memory", func() {
					b.MatMul(kernels.HostF32(out), kernels.HostF32(x), w, m, false)
				}, "%v weights, M = %d", dt, m)
				assert.PanicsWithValue(t, "kernels/cpu: MatMulNN: weight data is device memory, not host memory", func() {
					b.MatMulNN(kernels.HostF32(x), kernels.HostF32(out), w, m, false)
				}, "%v weights, M = %d", dt, m)
			}
		}
	})
}

// TestForeignAttention: Attention, AttentionBackward and WriteKV given a
// device Buffer (another backend's) as an operand, as the paged pool or as
// the block tables panic on the caller's goroutine with a message naming
// the op, on every SIMD path, rather than inside a pool worker (which no
// caller can recover: it ends the process).
func TestForeignAttention(t *testing.T) {
	const heads, kvHeads, d, tt, bs = 2, 1, 16, 3, 4
	host := func(n int) kernels.Buffer { return kernels.HostF32(make([]float32, n)) }
	dev := func(dt kernels.DType, n int) kernels.Buffer { return kernels.DeviceBuffer(fakeDeviceMem(n), dt, 0, n) }
	nq, blk := tt*heads*d, bs*kvHeads*d
	batch := func() kernels.AttentionBatch {
		a := kernels.OneSeq(make([]float32, nq), make([]float32, nq), make([]float32, tt*heads), nil, nil, tt, 0)
		a.Paged = kernels.PagedKV{Pool: host(2 * blk), BlockSize: bs, BlockStride: 2 * blk, VOff: blk,
			Tables: kernels.HostI32([]int32{0}), TableStride: 1}
		return a
	}
	for _, c := range []struct {
		name string
		edit func(a *kernels.AttentionBatch)
	}{
		{"device Q", func(a *kernels.AttentionBatch) { a.Q = dev(kernels.F32, nq) }},
		{"device Out", func(a *kernels.AttentionBatch) { a.Out = dev(kernels.F32, nq) }},
		{"device pool", func(a *kernels.AttentionBatch) { a.Paged.Pool = dev(kernels.F32, 2*blk) }},
		{"device tables", func(a *kernels.AttentionBatch) { a.Paged.Tables = dev(kernels.I32, 1) }},
		{"device positions", func(a *kernels.AttentionBatch) { a.Layout.Pos = dev(kernels.I32, tt) }},
	} {
		a := batch()
		c.edit(&a)
		g := kernels.AttentionGradBatch{AttentionBatch: a, DOut: host(nq), DQ: host(nq), DK: host(tt * kvHeads * d), DV: host(tt * kvHeads * d)}
		k := host(tt * kvHeads * d)
		forEachBackend(t, func(t *testing.T, b *Backend) {
			assert.PanicsWithValue(t, "kernels/cpu: Attention: device memory is not host memory", func() {
				b.Attention(a, heads, kvHeads, d, 1)
			}, c.name)
			assert.PanicsWithValue(t, "kernels/cpu: AttentionBackward: device memory is not host memory", func() {
				b.AttentionBackward(g, heads, kvHeads, d, 1)
			}, c.name)
			if c.name != "device Q" && c.name != "device Out" {
				assert.PanicsWithValue(t, "kernels/cpu: WriteKV: device memory is not host memory", func() {
					b.WriteKV(a.Paged, a.Layout, k, k, kvHeads, d)
				}, c.name)
			}
		})
	}
}
