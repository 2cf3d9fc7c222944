package kernels

import "fmt"

// Shape checks of the compute ops, shared by every backend: each backend
// method calls its op's Check function first, which panics with a message
// naming the op and the argument when the arrays do not fit the shape
// (programmer errors; data from outside the program is validated before it
// reaches a kernel). Index arguments (token ids, targets) are range-checked
// here too, so a kernel may index without checking.

// need panics unless argument arg of op holds at least want elements.
func need(op, arg string, have, want int) {
	if have < want {
		panic(fmt.Sprintf("kernels: %s: %s has %d elements, need %d", op, arg, have, want))
	}
}

// needDims panics if any dimension of op is negative.
func needDims(op string, dims ...int) {
	for _, d := range dims {
		if d < 0 {
			panic(fmt.Sprintf("kernels: %s: negative dimension in %v", op, dims))
		}
	}
}

// CheckMatMul checks MatMul: F32 x [M, K] and out [M, N] for w [N, K].
func CheckMatMul(out, x Buffer, w Mat, m int) {
	const op = "MatMul"
	w.Check(op)
	needDims(op, m)
	needF32(op, "x", x, m*w.Cols)
	needF32(op, "out", out, m*w.Rows)
}

// CheckMatMulNN checks MatMulNN: F32 dy [M, N] and out [M, K] for w
// [N, K].
func CheckMatMulNN(out, dy Buffer, w Mat, m int) {
	const op = "MatMulNN"
	w.Check(op)
	needDims(op, m)
	needF32(op, "dy", dy, m*w.Rows)
	needF32(op, "out", out, m*w.Cols)
}

// CheckMatMulTN checks MatMulTN: F32 dw [N, K], dy [M, N], x [M, K].
func CheckMatMulTN(dw, dy, x Buffer, m, n, k int) {
	const op = "MatMulTN"
	needDims(op, m, n, k)
	needF32(op, "dw", dw, n*k)
	needF32(op, "dy", dy, m*n)
	needF32(op, "x", x, m*k)
}

// CheckEmbedding checks Embedding: F32 out [T, C] for T = ids.Len(), I32
// ids, and (host ids) every id in [0, table.Rows).
func CheckEmbedding(out Buffer, table Mat, ids Buffer) {
	const op = "Embedding"
	table.Check(op)
	needI32(op, "ids", ids, 0)
	needF32(op, "out", out, ids.Len()*table.Cols)
	checkIDBuf(op, "ids", ids, table.Rows)
}

// CheckEmbeddingBackward checks EmbeddingBackward: c > 0, F32 dtable and
// dout [T, C] for T = ids.Len(), I32 ids, and (for host ids) every id a
// row of dtable [V, C].
func CheckEmbeddingBackward(dtable, dout, ids Buffer, c int) {
	const op = "EmbeddingBackward"
	if c <= 0 {
		panic(fmt.Sprintf("kernels: %s: c = %d", op, c))
	}
	needF32(op, "dtable", dtable, 0)
	needF32(op, "dout", dout, ids.Len()*c)
	needI32(op, "ids", ids, 0)
	checkIDBuf(op, "ids", ids, dtable.Len()/c)
}

// needF32 panics unless argument arg of op is an F32 Buffer of at least
// want elements.
func needF32(op, arg string, b Buffer, want int) {
	if b.dtype != F32 {
		panic(fmt.Sprintf("kernels: %s: %s holds %v, want F32", op, arg, b.dtype))
	}
	need(op, arg, b.n, want)
}

// needI32 panics unless argument arg of op is an I32 Buffer of at least
// want elements.
func needI32(op, arg string, b Buffer, want int) {
	if b.dtype != I32 {
		panic(fmt.Sprintf("kernels: %s: %s holds %v, want I32", op, arg, b.dtype))
	}
	need(op, arg, b.n, want)
}

// checkIDBuf range-checks the indices of an I32 Buffer when they are host
// memory. A device backend checks device-resident indices itself (reading
// them would cost a transfer per op).
func checkIDBuf(op, arg string, ids Buffer, n int) {
	if ids.Host() {
		checkIDs(op, arg, ids.I32(), n)
	}
}

// checkIDs panics unless every id is in [0, n).
func checkIDs(op, arg string, ids []int32, n int) {
	for i, id := range ids {
		if id < 0 || int(id) >= n {
			panic(fmt.Sprintf("kernels: %s: %s[%d] = %d outside [0, %d)", op, arg, i, id, n))
		}
	}
}

// CheckRMSNorm checks RMSNorm: F32 x and out [R, C], w [C].
func CheckRMSNorm(out, x, w Buffer, rows, cols int) { checkRMSNorm("RMSNorm", out, x, w, rows, cols) }

func checkRMSNorm(op string, out, x, w Buffer, rows, cols int) {
	needDims(op, rows, cols)
	needF32(op, "x", x, rows*cols)
	needF32(op, "out", out, rows*cols)
	needF32(op, "w", w, cols)
}

// CheckRMSNormBackward checks RMSNormBackward: F32 dx, dout, x [R, C], w
// and dw [C].
func CheckRMSNormBackward(dx, dw, dout, x, w Buffer, rows, cols int) {
	const op = "RMSNormBackward"
	needDims(op, rows, cols)
	n := rows * cols
	needF32(op, "dx", dx, n)
	needF32(op, "dout", dout, n)
	needF32(op, "x", x, n)
	needF32(op, "w", w, cols)
	needF32(op, "dw", dw, cols)
}

// CheckRoPE checks RoPE and RoPEBackward (op): an even head dim, I32 pos
// and F32 x [T, H, D] for T = pos.Len().
func CheckRoPE(op string, x, pos Buffer, heads, headDim int) {
	needDims(op, heads, headDim)
	if headDim%2 != 0 {
		panic("kernels: " + op + ": odd head dim")
	}
	needI32(op, "pos", pos, 0)
	needF32(op, "x", x, pos.Len()*heads*headDim)
}

// CheckSwiGLU checks SwiGLU: F32 buffers, gate and up hold out.Len()
// elements.
func CheckSwiGLU(out, gate, up Buffer) {
	const op = "SwiGLU"
	needF32(op, "out", out, 0)
	needF32(op, "gate", gate, out.Len())
	needF32(op, "up", up, out.Len())
}

// CheckSwiGLUBackward checks SwiGLUBackward: F32 buffers, each holding
// dout.Len() elements.
func CheckSwiGLUBackward(dgate, dup, dout, gate, up Buffer) {
	const op = "SwiGLUBackward"
	n := dout.Len()
	needF32(op, "dout", dout, n)
	needF32(op, "dgate", dgate, n)
	needF32(op, "dup", dup, n)
	needF32(op, "gate", gate, n)
	needF32(op, "up", up, n)
}

// CheckAdd checks Add: F32 buffers, src holds dst.Len() elements.
func CheckAdd(dst, src Buffer) {
	needF32("Add", "dst", dst, 0)
	needF32("Add", "src", src, dst.Len())
}

// CheckScale checks Scale: x is F32.
func CheckScale(x Buffer) { needF32("Scale", "x", x, 0) }

// CheckLogSoftmaxGather checks LogSoftmaxGather: F32 logits [R, V], logp
// (and entropy, if not empty) [R], I32 targets [R], each (host targets)
// in [0, V).
func CheckLogSoftmaxGather(logp, entropy, logits, targets Buffer, rows, v int) {
	const op = "LogSoftmaxGather"
	needDims(op, rows, v)
	needF32(op, "logits", logits, rows*v)
	needI32(op, "targets", targets, rows)
	needF32(op, "logp", logp, rows)
	if entropy.Len() > 0 {
		needF32(op, "entropy", entropy, rows)
	}
	checkIDBuf(op, "targets", targets.Slice(0, rows), v)
}

// CheckLogSoftmaxGatherBackward checks LogSoftmaxGatherBackward: F32
// dlogits and logits [R, V], dlogp (and dentropy, if not empty) [R], I32
// targets [R], each (host targets) in [0, V).
func CheckLogSoftmaxGatherBackward(dlogits, logits, targets, dlogp, dentropy Buffer, rows, v int) {
	const op = "LogSoftmaxGatherBackward"
	needDims(op, rows, v)
	needF32(op, "dlogits", dlogits, rows*v)
	needF32(op, "logits", logits, rows*v)
	needI32(op, "targets", targets, rows)
	needF32(op, "dlogp", dlogp, rows)
	if dentropy.Len() > 0 {
		needF32(op, "dentropy", dentropy, rows)
	}
	checkIDBuf(op, "targets", targets.Slice(0, rows), v)
}

// CheckSoftmax checks Softmax: F32 x [R, V].
func CheckSoftmax(x Buffer, rows, v int) {
	needDims("Softmax", rows, v)
	needF32("Softmax", "x", x, rows*v)
}

// CheckArgmax checks Argmax: x is a non-empty F32 Buffer.
func CheckArgmax(x Buffer) {
	needF32("Argmax", "x", x, 0)
	if x.Len() == 0 {
		panic("kernels: Argmax: empty input")
	}
}

// CheckAdamW checks AdamW: F32 buffers, grad, m, v hold param.Len()
// elements and step counts from 1.
func CheckAdamW(param, grad, m, v Buffer, step int) {
	const op = "AdamW"
	n := param.Len()
	needF32(op, "param", param, n)
	needF32(op, "grad", grad, n)
	needF32(op, "m", m, n)
	needF32(op, "v", v, n)
	if step < 1 {
		panic(fmt.Sprintf("kernels: %s: step %d < 1", op, step))
	}
}

// checkHeads panics unless the head counts describe grouped-query
// attention.
func checkHeads(op string, heads, kvHeads, headDim int) {
	if heads <= 0 || kvHeads <= 0 || headDim <= 0 || heads%kvHeads != 0 {
		panic(fmt.Sprintf("kernels: %s: heads %d, kvHeads %d, headDim %d: need positive sizes and heads a multiple of kvHeads",
			op, heads, kvHeads, headDim))
	}
}
