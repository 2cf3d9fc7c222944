package kernels

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestCheckAttentionBackwardPaged: AttentionBackward's shape check reads
// paged K/V through PagedKV.Check (contiguous K and V are then not
// required) and panics naming the sequence and what is wrong.
func TestCheckAttentionBackwardPaged(t *testing.T) {
	const heads, kvHeads, d, tt, bs = 2, 1, 4, 3, 2
	f32 := func(n int) Buffer { return HostF32(make([]float32, n)) }
	bf16 := func(n int) Buffer { return HostBF16(make([]uint16, n)) }
	nq, nkv, blk := tt*heads*d, tt*kvHeads*d, bs*kvHeads*d
	seq := func(p PagedKV) []AttentionGradSeq {
		return []AttentionGradSeq{{DOut: f32(nq), Q: f32(nq), Out: f32(nq), LSE: f32(tt * heads), DQ: f32(nq),
			DK: f32(nkv), DV: f32(nkv), T: tt, Paged: p}}
	}
	two := func(mk func(int) Buffer, n int) []Buffer { return []Buffer{mk(n), mk(n)} }
	for _, c := range []struct {
		name  string
		paged PagedKV
		want  string // "" : valid
	}{
		{"f32 blocks", PagedKV{BlockSize: bs, DType: F32, K: two(f32, blk), V: two(f32, blk)}, ""},
		{"bf16 blocks", PagedKV{BlockSize: bs, DType: BF16, K: two(bf16, blk), V: two(bf16, blk)}, ""},
		{"too few blocks", PagedKV{BlockSize: bs, DType: F32, K: two(f32, blk)[:1], V: two(f32, blk)},
			"kernels: AttentionBackward: seqs[0]: paged KV: 1 K and 2 V blocks for 3 positions of block size 2"},
		{"short block", PagedKV{BlockSize: bs, DType: F32, K: two(f32, blk-1), V: two(f32, blk)},
			"kernels: AttentionBackward: seqs[0]: paged KV: block 0 holds 7 K and 8 V elements, want 8"},
		{"dtype mismatch", PagedKV{BlockSize: bs, DType: BF16, K: two(f32, blk), V: two(f32, blk)},
			"kernels: AttentionBackward: seqs[0]: paged KV: block 0 holds F32 K and F32 V, want BF16"},
		{"f16 pages", PagedKV{BlockSize: bs, DType: F16, K: two(f32, blk), V: two(f32, blk)},
			"kernels: AttentionBackward: seqs[0]: paged KV: dtype F16: want F32 or BF16"},
	} {
		check := func() { CheckAttentionBackward(seq(c.paged), heads, kvHeads, d) }
		if c.want == "" {
			assert.NotPanics(t, check, c.name)
		} else {
			assert.PanicsWithValue(t, c.want, check, c.name)
		}
	}
	// Unpaged, the contiguous K and V are required.
	assert.Panics(t, func() { CheckAttentionBackward(seq(PagedKV{}), heads, kvHeads, d) }, "no K/V at all")
}
