package cpu

import (
	"github.com/x/kernels"
)

// Embedding: out[T,C] = table[ids[t], :]; bf16/f16 rows widen with the
// SIMD converters.
func (b *Backend) Embedding(out kernels.Buffer, table kernels.Mat, ids kernels.Buffer) {
	kernels.CheckEmbedding(out, table, ids)
	b.embedding(out.F32(), table, ids.I32())
}

// embedding is Embedding on host slices.
func (b *Backend) embedding(out []float32, table kernels.Mat, ids []int32) {
	c := table.Cols
	for t, id := range ids {
		dst := out[t*c : (t+1)*c]
		c16 := c &^ (vecSz - 1)
		if b.simd.isa() == isaGeneric || table.DType == kernels.F32 || c16 == 0 {
			table.Row(dst, int(id))
			continue
		}
		kn, _ := b.mm()
		widen(kn, dst, table, int(id), int(id)+1, 0, c16)
		for j := c16; j < c; j++ {
			dst[j] = table.At(int(id), j)
		}
	}
}
