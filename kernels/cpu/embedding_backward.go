package cpu

import "github.com/x/kernels"

// EmbeddingBackward adds dout[t, :] to row ids[t] of dtable[V,C] (repeated
// ids accumulate). Tasks own disjoint column blocks and walk t in order,
// so there are no races and every element sums in the same order as a
// serial loop, whatever the thread count.
func (b *Backend) EmbeddingBackward(dtable, dout, ids kernels.Buffer, c int) {
	kernels.CheckEmbeddingBackward(dtable, dout, ids, c)
	b.embeddingBackward(dtable.F32(), dout.F32(), ids.I32(), c)
}

// embeddingBackward is EmbeddingBackward on host slices.
func (b *Backend) embeddingBackward(dtable, dout []float32, ids []int32, c int) {
	const blk = 256
	run := func(lo, hi int) {
		c0, c1 := lo*blk, min(c, hi*blk)
		for t, id := range ids {
			row := dtable[int(id)*c+c0 : int(id)*c+c1]
			src := dout[t*c+c0 : t*c+c1]
			for j := range row {
				row[j] += src[j]
			}
		}
	}
	nblk := (c + blk - 1) / blk
	if len(ids)*c < 1<<14 || nblk == 1 {
		run(0, nblk)
		return
	}
	b.parallelFor(nblk, run)
}
