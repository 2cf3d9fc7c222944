package ref

import (
	"github.com/x/kernels"
)

// Embedding: out[T,C] = table[ids[t], :].
func (Backend) Embedding(out kernels.Buffer, table kernels.Mat, ids kernels.Buffer) {
	kernels.CheckEmbedding(out, table, ids)
	embedding(out.F32(), table, ids.I32())
}

// embedding is Embedding on host slices.
func embedding(out []float32, table kernels.Mat, ids []int32) {
	c := table.Cols
	for t, id := range ids {
		table.Row(out[t*c:(t+1)*c], int(id))
	}
}
