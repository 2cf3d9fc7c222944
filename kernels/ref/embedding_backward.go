package ref

import "github.com/x/kernels"

// EmbeddingBackward adds dout[t, :] to row ids[t] of dtable[V,C]; repeated
// ids accumulate. The rows of dout that land on one id are summed in
// float64 together with dtable's value and rounded once. dtable's V is
// len(dtable)/c.
func (Backend) EmbeddingBackward(dtable, dout, ids kernels.Buffer, c int) {
	kernels.CheckEmbeddingBackward(dtable, dout, ids, c)
	embeddingBackward(dtable.F32(), dout.F32(), ids.I32(), c)
}

// embeddingBackward is EmbeddingBackward on host slices.
func embeddingBackward(dtable, dout []float32, ids []int32, c int) {
	acc := make(map[int32][]float64)
	var order []int32
	for t, id := range ids {
		a, ok := acc[id]
		if !ok {
			a = make([]float64, c)
			for j, x := range dtable[int(id)*c : int(id+1)*c] {
				a[j] = float64(x)
			}
			acc[id] = a
			order = append(order, id)
		}
		for j, x := range dout[t*c : (t+1)*c] {
			a[j] += float64(x)
		}
	}
	for _, id := range order {
		row := dtable[int(id)*c : int(id+1)*c]
		for j, x := range acc[id] {
			row[j] = float32(x)
		}
	}
}
