package ref

import (
	"github.com/x/kernels"
)

// Embedding: out[T,C] = table[ids[t], :].
func (Backend) Embedding(out []float32, table kernels.Mat, ids []int32) {
	kernels.CheckEmbedding(out, table, ids)
	c := table.Cols
	for t, id := range ids {
		table.Row(out[t*c:(t+1)*c], int(id))
	}
}
