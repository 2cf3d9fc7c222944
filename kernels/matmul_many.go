package kernels

import "fmt"

// MatMulManyer is the optional interface of a Backend that multiplies one
// activation by several weights in a single call: a decoder layer's Q, K
// and V projections, or its gate and up projections, whose separate
// MatMul calls each read the same x and, at decode (M = 1), each launch
// too few blocks to fill a GPU. The model uses it when the backend has it
// (ollama's optional backend methods in spirit) and falls back to one
// MatMul per weight otherwise.
type MatMulManyer interface {
	// MatMulMany sets outs[i][M, ws[i].Rows] = x[M, K]·ws[i]ᵀ for every i,
	// each bit for bit as MatMul(outs[i], x, ws[i], m, false) computes it
	// at the backend's current MatMul precision, so using it changes no
	// result (kerneltest.MatMulMany). Every ws[i] has K columns; the outs
	// do not overlap each other or x.
	MatMulMany(outs []Buffer, x Buffer, ws []Mat, m int)
}

// CheckMatMulMany checks MatMulMany's arguments as CheckMatMul checks each
// product's, and that there are as many outputs as weights.
func CheckMatMulMany(outs []Buffer, x Buffer, ws []Mat, m int) {
	if len(outs) != len(ws) {
		panic(fmt.Sprintf("kernels: MatMulMany: %d outputs for %d weights", len(outs), len(ws)))
	}
	for i, w := range ws {
		if i > 0 && w.Cols != ws[0].Cols {
			panic(fmt.Sprintf("kernels: MatMulMany: weight %d has %d columns, weight 0 has %d", i, w.Cols, ws[0].Cols))
		}
		CheckMatMul(outs[i], x, w, m)
	}
}
