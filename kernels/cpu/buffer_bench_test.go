package cpu

import (
	"testing"

	"github.com/x/kernels"
)

// BenchmarkBufferOps measures the buffer ops at Qwen3-0.6B sizes: lm_head's
// transposed copy (bf16 [151936, 1024]), the squared norm of 16M gradient
// elements, an f32 → bf16 cast of one KV block set and a gather of 64
// hidden rows. GB/s counts bytes read plus written.
func BenchmarkBufferOps(b *testing.B) {
	be := New(0)
	defer be.Close()
	const V, C = 151936, 1024
	lm16, _ := kernels.AllocHost(kernels.BF16, V*C)
	lmT, _ := kernels.AllocHost(kernels.BF16, V*C)
	grad, _ := kernels.AllocHost(kernels.F32, 1<<24)
	kv32, _ := kernels.AllocHost(kernels.F32, 1<<20)
	kv16, _ := kernels.AllocHost(kernels.BF16, 1<<20)
	hid, _ := kernels.AllocHost(kernels.F32, 512*C)
	sel, _ := kernels.AllocHost(kernels.F32, 64*C)
	ix := make([]int32, 64)
	for i := range ix {
		ix[i] = int32(i * 7)
	}
	idx := kernels.HostI32(ix)
	for _, c := range []struct {
		name  string
		bytes float64
		fn    func()
	}{
		{"Transpose_lmhead_bf16", 2 * 2 * V * C, func() { be.Transpose(lmT, lm16, V, C) }},
		{"SumSquares_16M", 4 << 24, func() { _, _ = be.SumSquares(grad) }},
		{"Copy_f32_to_bf16_1M", 6 << 20, func() { be.Copy(kv16, kv32) }},
		{"GatherRows_64x1024", 2 * 4 * 64 * C, func() { be.GatherRows(sel, hid, idx, C) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				c.fn()
			}
			b.ReportMetric(c.bytes*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
		})
	}
}
