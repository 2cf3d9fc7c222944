package cpu

import (
	"testing"

	"github.com/x/kernels"
)

// benchPool stores each sequence's contiguous K and V (n positions,
// [n, rowLen] each) in its own blocks of bs positions of one paged pool
// (block b holds K then V, float32 or raw bf16), sequence s's table row
// listing its blocks in order.
func benchPool(ks, vs [][]float32, n, rowLen, bs int, dt kernels.DType) kernels.PagedKV {
	per := (n + bs - 1) / bs
	size := bs * rowLen
	mem := make([]float32, len(ks)*per*2*size)
	tab := make([]int32, len(ks)*per)
	for s := range ks {
		for b := range per {
			id := s*per + b
			rows := min(bs, n-b*bs) * rowLen
			copy(mem[2*id*size:], ks[s][b*size:b*size+rows])
			copy(mem[(2*id+1)*size:], vs[s][b*size:b*size+rows])
			tab[id] = int32(id)
		}
	}
	return kernels.PagedKV{Pool: kernels.HostRounded(dt, mem), BlockSize: bs, BlockStride: 2 * size, VOff: size,
		Tables: kernels.HostI32(tab), TableStride: per}
}

// BenchmarkAttentionPaged: batched decode (16 sequences, each its own K/V, T = 1 at
// depth 1024, the Qwen3-0.6B head layout) reading K/V contiguously and through
// block tables of f32 blocks of 64 positions (read in place) and 16
// (gathered per key block), and bf16 blocks of 64 (widened per key block).
// Each sequence's blocks are its own pool's (the benchmark before the one-pool
// seam gave each block its own allocation; the bytes read are the same).
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
			var spans []kernels.Span
			var k, v [][]float32
			for range seqs {
				spans = append(spans, kernels.Span{T: 1, Start: start})
				k, v = append(k, benchVec(n*kvh*d)), append(v, benchVec(n*kvh*d)) // each sequence its own memory
			}
			lay, _, _, _ := kernels.AppendLayout(nil, spans)
			a := kernels.AttentionBatch{
				Layout: kernels.BatchLayout{QStart: kernels.HostI32(lay[:seqs+1]), Pos: kernels.HostI32(lay[seqs+1:]), B: seqs, N: seqs, MaxT: 1, MaxLen: n},
				Q:      kernels.HostF32(benchVec(seqs * h * d)), Out: kernels.HostF32(make([]float32, seqs*h*d)),
			}
			if c.bs == 0 {
				var kk, vv []float32
				ks := make([]int32, seqs+1)
				for i := range seqs {
					kk, vv = append(kk, k[i]...), append(vv, v[i]...)
					ks[i+1] = int32((i + 1) * n)
				}
				a.K, a.V, a.KStart = kernels.HostF32(kk), kernels.HostF32(vv), kernels.HostI32(ks)
			} else {
				a.Paged = benchPool(k, v, n, kvh*d, c.bs, c.dt)
			}
			b.ResetTimer()
			for range b.N {
				be.Attention(a, h, kvh, d, 0.088)
			}
			bytes := float64(seqs * 2 * n * kvh * d * c.dt.Size())
			b.ReportMetric(bytes*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
			b.ReportMetric(b.Elapsed().Seconds()/float64(b.N)*1e3, "ms/op")
		})
	}
}
