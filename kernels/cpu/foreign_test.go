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

// TestForeignAttention: Attention given a device Buffer (another
// backend's) as an operand or as a paged K/V block panics on the caller's
// goroutine with a message naming the op, on every SIMD path, rather than
// inside a pool worker (which no caller can recover: it ends the process).
func TestForeignAttention(t *testing.T) {
	const heads, kvHeads, d, tt, bs = 2, 1, 16, 3, 4
	host := func(n int) kernels.Buffer { return kernels.HostF32(make([]float32, n)) }
	dev := func(dt kernels.DType, n int) kernels.Buffer { return kernels.DeviceBuffer(fakeDeviceMem(n), dt, 0, n) }
	paged := func(blk func() kernels.Buffer) kernels.PagedKV {
		return kernels.PagedKV{BlockSize: bs, DType: kernels.F32, K: []kernels.Buffer{blk()}, V: []kernels.Buffer{blk()}}
	}
	for _, c := range []struct {
		name string
		seq  kernels.AttentionSeq
	}{
		{"device Q", kernels.AttentionSeq{Q: dev(kernels.F32, tt*heads*d), Out: host(tt * heads * d), K: host(tt * kvHeads * d), V: host(tt * kvHeads * d), T: tt}},
		{"device Out", kernels.AttentionSeq{Q: host(tt * heads * d), Out: dev(kernels.F32, tt*heads*d), K: host(tt * kvHeads * d), V: host(tt * kvHeads * d), T: tt}},
		{"device K", kernels.AttentionSeq{Q: host(tt * heads * d), Out: host(tt * heads * d), K: dev(kernels.F32, tt*kvHeads*d), V: host(tt * kvHeads * d), T: tt}},
		{"device paged blocks", kernels.AttentionSeq{Q: host(tt * heads * d), Out: host(tt * heads * d), T: tt,
			Paged: paged(func() kernels.Buffer { return dev(kernels.F32, bs*kvHeads*d) })}},
	} {
		forEachBackend(t, func(t *testing.T, b *Backend) {
			assert.PanicsWithValue(t, "kernels/cpu: Attention: device memory is not host memory", func() {
				b.Attention([]kernels.AttentionSeq{c.seq}, heads, kvHeads, d, 1)
			}, c.name)
		})
	}
}

// TestForeignAttentionBackward: AttentionBackward given paged K/V blocks in
// device memory panics on the caller's goroutine with a message naming the
// block, instead of unwrapping them inside a pool worker.
func TestForeignAttentionBackward(t *testing.T) {
	const heads, kvHeads, d, tt, bs = 2, 1, 16, 3, 2
	host := func(n int) kernels.Buffer { return kernels.HostF32(make([]float32, n)) }
	dev := func(n int) kernels.Buffer { return kernels.DeviceBuffer(fakeDeviceMem(n), kernels.F32, 0, n) }
	blocks := []kernels.Buffer{host(bs * kvHeads * d), dev(bs * kvHeads * d)}
	nq, nkv := tt*heads*d, tt*kvHeads*d
	seq := kernels.AttentionGradSeq{DOut: host(nq), Q: host(nq), Out: host(nq), LSE: host(tt * heads), DQ: host(nq),
		DK: host(nkv), DV: host(nkv), T: tt, Paged: kernels.PagedKV{BlockSize: bs, DType: kernels.F32, K: blocks, V: blocks}}
	forEachBackend(t, func(t *testing.T, b *Backend) {
		assert.PanicsWithValue(t, "kernels: AttentionGradSeq.Host: paged block 1 is device memory, not host memory", func() {
			b.AttentionBackward([]kernels.AttentionGradSeq{seq}, heads, kvHeads, d, 1)
		})
	})
}
