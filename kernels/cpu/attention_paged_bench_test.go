package cpu

import (
	"testing"

	"github.com/x/kernels"
)

// benchPages splits a contiguous [n, rowLen] buffer into blocks of bs rows,
// stored as float32 or raw bf16.
func benchPages(x []float32, n, rowLen, bs int, dt kernels.DType) []kernels.Buffer {
	var out []kernels.Buffer
	for b0 := 0; b0 < n; b0 += bs {
		blk := make([]float32, bs*rowLen)
		copy(blk, x[b0*rowLen:min(n, b0+bs)*rowLen])
		if dt == kernels.F32 {
			out = append(out, kernels.HostF32(blk))
			continue
		}
		h := make([]uint16, len(blk))
		for i, v := range blk {
			h[i] = kernels.F32ToBF16(v)
		}
		out = append(out, kernels.HostBF16(h))
	}
	return out
}

// BenchmarkAttentionPaged: batched decode (16 sequences, each its own K/V, T = 1 at
// depth 1024, the Qwen3-0.6B head layout) reading K/V contiguously and through
// block tables of f32 blocks of 64 positions (read in place) and 16
// (gathered per key block), and bf16 blocks of 64 (widened per key block).
// GB/s counts the K/V bytes read as stored.
func BenchmarkAttentionPaged(b *testing.B) {
	be := New(0)
	defer be.Close()
	const h, kvh, d, seqs, start = 16, 8, 128, 16, 1024
	n := start + 1
	for _, c := range []struct {
		name string
		bs   int
		dt   kernels.DType
	}{{"contiguous", 0, kernels.F32}, {"f32_bs64", 64, kernels.F32}, {"f32_bs16", 16, kernels.F32}, {"bf16_bs64", 64, kernels.BF16}} {
		b.Run(c.name, func(b *testing.B) {
			var batch []kernels.AttentionSeq
			for range seqs {
				s := kernels.AttentionSeq{Q: kernels.HostF32(benchVec(h * d)), Out: kernels.HostF32(make([]float32, h*d)), T: 1, Start: start}
				k, v := benchVec(n*kvh*d), benchVec(n*kvh*d) // each sequence its own memory
				if c.bs == 0 {
					s.K, s.V = kernels.HostF32(k), kernels.HostF32(v)
				} else {
					s.Paged = kernels.PagedKV{BlockSize: c.bs, DType: c.dt}
					s.Paged.K = benchPages(k, n, kvh*d, c.bs, c.dt)
					s.Paged.V = benchPages(v, n, kvh*d, c.bs, c.dt)
				}
				batch = append(batch, s)
			}
			b.ResetTimer()
			for range b.N {
				be.Attention(batch, h, kvh, d, 0.088)
			}
			bytes := float64(seqs * 2 * n * kvh * d * c.dt.Size())
			b.ReportMetric(bytes*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
			b.ReportMetric(b.Elapsed().Seconds()/float64(b.N)*1e3, "ms/op")
		})
	}
}
