package cpu

import (
	"github.com/x/kernels"
)

// WriteKV stores each row of k and v at its position in the paged cache
// (rounded to bf16 for a BF16 pool, as Copy rounds), rows in parallel when
// there are more than serialMove elements.
func (b *Backend) WriteKV(kv kernels.PagedKV, l kernels.BatchLayout, k, v kernels.Buffer, kvHeads, headDim int) {
	kernels.CheckWriteKV(&kv, &l, k, v, kvHeads, headDim)
	for _, x := range []kernels.Buffer{kv.Pool, kv.Tables, l.QStart, l.Pos, k, v} {
		if !x.Host() {
			panic("kernels/cpu: WriteKV: device memory is not host memory")
		}
	}
	rl := kvHeads * headDim
	qs, pos, tab := l.QStart.I32(), l.Pos.I32(), kv.Tables.I32()
	ks, vs := k.F32(), v.F32()
	seqOf := make([]int32, l.N) // row → sequence
	for s := range l.B {
		for i := qs[s]; i < qs[s+1]; i++ {
			seqOf[i] = int32(s)
		}
	}
	run := func(lo, hi int) {
		for i := lo; i < hi; i++ {
			p := int(pos[i])
			base := int(tab[int(seqOf[i])*kv.TableStride+p/kv.BlockSize])*kv.BlockStride + (p%kv.BlockSize)*rl
			src := [2][]float32{ks[i*rl : (i+1)*rl], vs[i*rl : (i+1)*rl]}
			for j, off := range [2]int{kv.KOff, kv.VOff} {
				o := base + off
				if kv.Pool.DType() == kernels.F32 {
					copy(kv.Pool.F32()[o:o+rl], src[j])
					continue
				}
				d := kv.Pool.BF16()[o : o+rl]
				for c, x := range src[j] {
					d[c] = kernels.F32ToBF16(x)
				}
			}
		}
	}
	if l.N*rl <= serialMove {
		run(0, l.N)
		return
	}
	b.parallelFor(l.N, run)
}

// AddRMSNorm is Add(x, res) then RMSNorm(out, x, w) in one pass over each
// row (kernels.AddRMSNormer): the same additions and the same row norm, so
// bit for bit the two ops.
func (b *Backend) AddRMSNorm(out, x, res, w kernels.Buffer, rows, cols int, eps float32) {
	kernels.CheckAddRMSNorm(out, x, res, w, rows, cols)
	xs, rs, os, ws := x.F32(), res.F32(), out.F32(), w.F32()
	if rows == 0 || cols == 0 {
		return
	}
	run := func(lo, hi int) {
		for r := lo; r < hi; r++ {
			d, s := xs[r*cols:(r+1)*cols], rs[r*cols:(r+1)*cols]
			for i := range d {
				d[i] += s[i]
			}
			rmsNormRow(os[r*cols:(r+1)*cols], d, ws, cols, eps)
		}
	}
	if rows*cols <= grain {
		run(0, rows)
		return
	}
	b.parallelFor(rows, run)
}
