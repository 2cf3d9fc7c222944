package kernels

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestCheckAttention: the attention checks read the layout, the paged pool
// and its block tables, and contiguous K/V through KStart, and panic naming
// the op and what is wrong (host index values included).
func TestCheckAttention(t *testing.T) {
	const heads, kvHeads, d, bs = 2, 1, 4, 2
	rl := kvHeads * d
	f32 := func(n int) Buffer { return HostF32(make([]float32, n)) }
	i32 := func(v ...int32) Buffer { return HostI32(v) }
	// Two sequences: 2 tokens from 1 (positions 1, 2) and 1 token at 4.
	layout := func() BatchLayout {
		return BatchLayout{QStart: i32(0, 2, 3), Pos: i32(1, 2, 4), B: 2, N: 3, MaxT: 2, MaxLen: 5}
	}
	paged := func() PagedKV {
		return PagedKV{Pool: f32(4 * 2 * bs * rl), BlockSize: bs, BlockStride: 2 * bs * rl, VOff: bs * rl,
			Tables: i32(0, 1, 9, 2, 3, 0), TableStride: 3}
	}
	batch := func() AttentionBatch {
		return AttentionBatch{Layout: layout(), Q: f32(3 * heads * d), Out: f32(3 * heads * d), LSE: f32(3 * heads), Paged: paged()}
	}
	for _, c := range []struct {
		name string
		edit func(a *AttentionBatch)
		want string // "": valid
	}{
		{"paged f32", func(*AttentionBatch) {}, ""},
		{"paged bf16", func(a *AttentionBatch) { a.Paged.Pool = HostBF16(make([]uint16, 4*2*bs*rl)) }, ""},
		{"contiguous", func(a *AttentionBatch) {
			a.Paged = PagedKV{}
			a.K, a.V, a.KStart = f32(9*rl), f32(9*rl), i32(0, 3, 8)
		}, ""},
		{"f16 pool", func(a *AttentionBatch) { a.Paged.Pool = HostF16(make([]uint16, 4*2*bs*rl)) },
			"kernels: Attention: paged KV pool holds F16, want F32 or BF16"},
		{"V past the block", func(a *AttentionBatch) { a.Paged.VOff++ },
			"kernels: Attention: paged KV: K at 0 and V at 9 of 8 elements do not fit a block stride of 16"},
		{"short table", func(a *AttentionBatch) { a.Paged.TableStride = 2 },
			"kernels: Attention: paged KV: 2 table entries of 2 positions hold fewer than MaxLen 5"},
		{"block outside the pool", func(a *AttentionBatch) { a.Paged.Tables = i32(0, 4, 9, 2, 3, 0) },
			"kernels: Attention: paged KV: sequence 0 block 1 is id 4, outside the pool's [0, 4)"},
		{"QStart not ending at N", func(a *AttentionBatch) { a.Layout.QStart = i32(0, 2, 2) },
			"kernels: Attention: Layout.QStart runs from 0 to 2, want 0 to N = 3"},
		{"decreasing QStart", func(a *AttentionBatch) { a.Layout.QStart = i32(0, 4, 3) },
			"kernels: Attention: Layout.QStart[0:2] = 0, 4: not nondecreasing within [0, 3]"},
		{"positions not consecutive", func(a *AttentionBatch) { a.Layout.Pos = i32(1, 3, 4) },
			"kernels: Attention: sequence 0: Layout.Pos[1] = 3, want 2 (positions are consecutive)"},
		{"T past MaxT", func(a *AttentionBatch) { a.Layout.MaxT = 1 },
			"kernels: Attention: sequence 0 has 2 tokens, more than MaxT 1"},
		{"past MaxLen", func(a *AttentionBatch) { a.Layout.MaxLen = 4 },
			"kernels: Attention: sequence 1: positions 4 .. 4 outside [0, MaxLen 4)"},
		{"short LSE", func(a *AttentionBatch) { a.LSE = f32(5) },
			"kernels: Attention: LSE has 5 elements, need 6"},
		{"overlapping KStart", func(a *AttentionBatch) {
			a.Paged = PagedKV{}
			a.K, a.V, a.KStart = f32(9*rl), f32(9*rl), i32(0, 2, 8)
		}, "kernels: Attention: KStart[0:2] = 0, 2: sequence 0 needs 3 rows"},
		{"short K", func(a *AttentionBatch) {
			a.Paged = PagedKV{}
			a.K, a.V, a.KStart = f32(8*rl-1), f32(9*rl), i32(0, 3, 8)
		}, "kernels: Attention: K has 31 elements, need 32"},
	} {
		a := batch()
		c.edit(&a)
		check := func() { CheckAttention(&a, heads, kvHeads, d) }
		if c.want == "" {
			assert.NotPanics(t, check, c.name)
		} else {
			assert.PanicsWithValue(t, c.want, check, c.name)
		}
	}
	// The backward needs DK and DV placed by KStart, and the LSE.
	g := AttentionGradBatch{AttentionBatch: batch(), DOut: f32(3 * heads * d), DQ: f32(3 * heads * d), DK: f32(8 * rl), DV: f32(8 * rl)}
	g.KStart = i32(0, 3, 8)
	assert.NotPanics(t, func() { CheckAttentionBackward(&g, heads, kvHeads, d) })
	g.DV = f32(8*rl - 1)
	assert.PanicsWithValue(t, "kernels: AttentionBackward: DV has 31 elements, need 32", func() { CheckAttentionBackward(&g, heads, kvHeads, d) })
	g.DV, g.LSE = f32(8*rl), Buffer{}
	assert.PanicsWithValue(t, "kernels: AttentionBackward: LSE has 0 elements, need 6", func() { CheckAttentionBackward(&g, heads, kvHeads, d) })
}
