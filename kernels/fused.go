package kernels

// Fused ops: optional methods a Backend may implement to run two ops of the
// model as one (one pass over memory on a CPU, one kernel launch on a
// device), found by type assertion as io.Copy finds io.WriterTo (ollama's
// backends offer fused ops the same way). Each must compute exactly, bit
// for bit, what its unfused sequence computes on the same backend
// (kerneltest.Fused checks it), so a model's results do not depend on
// whether a backend fuses. Callers use the functions below, which take the
// fused method when the backend has it and the sequence otherwise.

// AddRMSNormer fuses a residual add into the RMSNorm that reads its sum
// (the residual stream's add at the end of a block with the next block's
// input norm).
type AddRMSNormer interface {
	// AddRMSNorm is Add(x, res) then RMSNorm(out, x, w, rows, cols, eps)
	// on [rows, cols]: x += res, out = w·x/√(mean(x²)+eps). out must not
	// alias x or res.
	AddRMSNorm(out, x, res, w Buffer, rows, cols int, eps float32)
}

// AddRMSNorm is Add(x[:rows·cols], res[:rows·cols]) then RMSNorm(out, x,
// w, rows, cols, eps) on be, in one op when be implements AddRMSNormer.
func AddRMSNorm(be Backend, out, x, res, w Buffer, rows, cols int, eps float32) {
	if f, ok := be.(AddRMSNormer); ok {
		f.AddRMSNorm(out, x, res, w, rows, cols, eps)
		return
	}
	n := rows * cols
	be.Add(x.Slice(0, n), res.Slice(0, n))
	be.RMSNorm(out, x, w, rows, cols, eps)
}

// RoPEKVWriter fuses the keys' RoPE into the KV cache write.
type RoPEKVWriter interface {
	// WriteKVRoPE is RoPE(k, l.Pos[:N], kvHeads, headDim, theta) then
	// WriteKV(kv, l, k, v, kvHeads, headDim): k is rotated in place and
	// the rotated keys and v go into the cache.
	WriteKVRoPE(kv PagedKV, l BatchLayout, k, v Buffer, kvHeads, headDim int, theta float64)
}

// WriteKVRoPE is RoPE(k, l.Pos[:N], ...) then WriteKV(kv, l, k, v, ...) on
// be, in one op when be implements RoPEKVWriter.
func WriteKVRoPE(be Backend, kv PagedKV, l BatchLayout, k, v Buffer, kvHeads, headDim int, theta float64) {
	if f, ok := be.(RoPEKVWriter); ok {
		f.WriteKVRoPE(kv, l, k, v, kvHeads, headDim, theta)
		return
	}
	be.RoPE(k.Slice(0, l.N*kvHeads*headDim), l.Pos.Slice(0, l.N), kvHeads, headDim, theta)
	be.WriteKV(kv, l, k, v, kvHeads, headDim)
}

// CheckAddRMSNorm checks AddRMSNorm: F32 out, x and res [R, C], w [C].
func CheckAddRMSNorm(out, x, res, w Buffer, rows, cols int) {
	const op = "AddRMSNorm"
	checkRMSNorm(op, out, x, w, rows, cols)
	needF32(op, "res", res, rows*cols)
}
