package ref

import (
	"fmt"

	"github.com/x/kernels"
)

// Embedding: out[T,C] = table[ids[t], :].
func (Backend) Embedding(out []float32, table kernels.Mat, ids []int32) {
	const op = "Embedding"
	table.Check(op)
	c := table.Cols
	need(op, "out", len(out), len(ids)*c)
	for t, id := range ids {
		if id < 0 || int(id) >= table.Rows {
			panic(fmt.Sprintf("kernels/ref: %s: id %d at %d outside [0,%d)", op, id, t, table.Rows))
		}
		table.Row(out[t*c:(t+1)*c], int(id))
	}
}
