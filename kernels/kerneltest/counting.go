package kerneltest

import (
	"fmt"

	"github.com/x/kernels"
)

// Transfers counts the crossings between the host and a backend, by kind.
type Transfers struct {
	Uploads   int // Upload calls
	Downloads int // Download calls
	Imports   int // Import calls
	Scalars   int // ops that return a scalar to the host (SumSquares, AllFinite, Argmax)
	// UploadElems and DownloadElems are the elements those calls moved.
	UploadElems, DownloadElems int
	// HostArgs counts the Buffer arguments of compute ops that are host
	// memory the backend neither allocated (Alloc) nor imported (Import):
	// Go slices wrapped with kernels.HostF32 and friends. A CPU backend
	// reads them in place, but a device backend would stage each one, a
	// copy per op, so each is a hidden crossing. Weights (Mat.Data) count
	// too.
	HostArgs int
}

// Total is the number of crossings of every kind.
func (n Transfers) Total() int {
	return n.Uploads + n.Downloads + n.Imports + n.Scalars + n.HostArgs
}

// Counting wraps a Backend and counts every host↔backend crossing its
// Buffer methods make, so a test can assert how much one decode or
// training step moves: the explicit ones (Upload, Download, Import and the
// scalars of sync-point ops) and the hidden ones, host Buffers passed to a
// compute op that did not come from this wrapper's Alloc or Import (see
// Transfers.HostArgs). To tell the two kinds of host memory apart, it
// remembers the address range of every Buffer its Alloc and Import return
// on a host backend (Free forgets it). Everything else is the wrapped
// backend's.
//
// With CopyImports set, Import behaves as a device backend's does: it
// returns a separate copy of the host Buffer (the wrapped backend's
// Alloc, filled by its Upload) instead of the CPU backends' "the host
// memory itself". Code that runs through such a wrapper must then keep
// host and backend copies apart as it would on a device: a host weight
// written after it was imported is not seen by the ops, and a value
// updated on the backend (an optimizer step) is not seen on the host
// until it is downloaded. Tests run a model through it to catch what the
// CPU backends' aliasing hides; the copy is counted as the one Import.
type Counting struct {
	kernels.Backend
	N Transfers
	// CopyImports makes Import return a separate copy, as a device does
	// (see above). Set it before the first Import.
	CopyImports bool
	// Foreign names the first few host arguments counted in N.HostArgs,
	// as "op arg" (for a test's failure message).
	Foreign []string
	// BadFrees names, with CopyImports set, the first few Frees of host
	// memory the wrapper does not hold: freed already, or never returned
	// by its Alloc or Import. On a device that is a double free, which
	// hands one block to two later allocations; Live cannot show it. (Without
	// CopyImports two imports of one host weight are the same memory, so
	// a second Free is legitimate and not recorded.) Reset keeps it.
	BadFrees []string
	// Bytes is the backend memory live through this wrapper: the bytes of
	// what its Alloc and Import returned that Free has not taken back (an
	// Import that returns the host memory itself, as a CPU backend's does
	// without CopyImports, allocates nothing and adds nothing). Peak is
	// the most Bytes has been since the wrapper was made or ResetPeak: a
	// test's measure of a step's memory on any backend, the one a device
	// would need for the Buffers (a device allocator's rounding and
	// caching come on top).
	Bytes, Peak int64

	owned map[uintptr]ownedMem // host allocations by first byte
}

// ownedMem is one host allocation the wrapper returned. It keeps the
// Buffer itself, not only its address: memory a caller dropped without
// Free must stay allocated (and counted by Live), or the garbage
// collector could hand its address to a later Alloc, whose record would
// then replace this one and make Live depend on when the collector ran.
type ownedMem struct {
	end     uintptr
	buf     kernels.Buffer
	counted int64 // bytes added to Bytes for it (0: the caller's own memory)
}

// maxForeign is how many host arguments Foreign names.
const maxForeign = 16

// Reset zeroes the counts (the record of allocations, Bytes and Peak
// stay).
func (c *Counting) Reset() { c.N, c.Foreign = Transfers{}, nil }

// ResetPeak starts a new peak measurement from the bytes live now.
func (c *Counting) ResetPeak() { c.Peak = c.Bytes }

// sizeOf is b's size in bytes.
func sizeOf(b kernels.Buffer) int64 { return int64(b.Len()) * int64(b.DType().Size()) }

// add counts n more live bytes.
func (c *Counting) add(n int64) {
	c.Bytes += n
	c.Peak = max(c.Peak, c.Bytes)
}

// own records a Buffer that the backend returned; allocated says whether
// it is new memory (counted in Bytes) rather than the caller's own.
func (c *Counting) own(b kernels.Buffer, allocated bool) {
	if b.Len() == 0 {
		return
	}
	var n int64
	if allocated {
		n = sizeOf(b)
		c.add(n)
	}
	if !b.Host() {
		return
	}
	if c.owned == nil {
		c.owned = map[uintptr]ownedMem{}
	}
	lo := uintptr(b.HostPtr())
	c.owned[lo] = ownedMem{end: lo + uintptr(sizeOf(b)), buf: b, counted: n}
}

// Owned reports whether b is backend memory: a device Buffer, an empty
// one, or a view of host memory this wrapper's Alloc or Import returned.
func (c *Counting) Owned(b kernels.Buffer) bool {
	if !b.Host() || b.Len() == 0 {
		return true
	}
	lo := uintptr(b.HostPtr())
	hi := lo + uintptr(b.Len()*b.DType().Size())
	for a, m := range c.owned {
		if lo >= a && hi <= m.end {
			return true
		}
	}
	return false
}

// Live is the number of host allocations from Alloc and Import not yet
// freed (a test's leak check; device Buffers are not tracked).
func (c *Counting) Live() int { return len(c.owned) }

// arg counts b if it is host memory the backend does not own.
func (c *Counting) arg(op, name string, b kernels.Buffer) {
	if c.Owned(b) {
		return
	}
	c.N.HostArgs++
	if len(c.Foreign) < maxForeign {
		c.Foreign = append(c.Foreign, op+" "+name)
	}
}

// args counts each of bs (named name[i]).
func (c *Counting) args(op, name string, bs []kernels.Buffer) {
	for i, b := range bs {
		c.arg(op, fmt.Sprintf("%s[%d]", name, i), b)
	}
}

// Alloc records the Buffer as backend memory.
func (c *Counting) Alloc(dt kernels.DType, n int) (kernels.Buffer, error) {
	b, err := c.Backend.Alloc(dt, n)
	if err == nil {
		c.own(b, true)
	}
	return b, err
}

// Free forgets the Buffer (see BadFrees) and its bytes.
func (c *Counting) Free(b kernels.Buffer) {
	switch {
	case b.Len() == 0:
	case b.Host():
		a := uintptr(b.HostPtr())
		m, ok := c.owned[a]
		if !ok && c.CopyImports && len(c.BadFrees) < maxForeign {
			c.BadFrees = append(c.BadFrees, b.String())
		}
		c.Bytes -= m.counted
		delete(c.owned, a)
	default: // device memory: Free takes what Alloc or Import returned, whole
		c.Bytes -= sizeOf(b)
	}
	c.Backend.Free(b)
}

// Upload counts one upload of src.Len() elements.
func (c *Counting) Upload(dst, src kernels.Buffer) error {
	c.N.Uploads++
	c.N.UploadElems += src.Len()
	return c.Backend.Upload(dst, src)
}

// Download counts one download of src.Len() elements.
func (c *Counting) Download(dst, src kernels.Buffer) error {
	c.N.Downloads++
	c.N.DownloadElems += src.Len()
	return c.Backend.Download(dst, src)
}

// DownloadAll counts one download per transfer and passes them on
// together (kernels.DownloadAll), so a wrapped device still waits once.
func (c *Counting) DownloadAll(ts ...kernels.Transfer) error {
	for _, t := range ts {
		c.N.Downloads++
		c.N.DownloadElems += t.Src.Len()
	}
	return kernels.DownloadAll(c.Backend, ts...)
}

// Import counts one import (a copy to a device; none on a CPU backend, but
// counted all the same) and records the result as backend memory.
func (c *Counting) Import(src kernels.Buffer) (kernels.Buffer, error) {
	c.N.Imports++
	c.N.UploadElems += src.Len()
	b, err := c.importBuf(src)
	if err == nil {
		c.own(b, !b.Host() || b.HostPtr() != src.HostPtr())
	}
	return b, err
}

// importBuf is the wrapped backend's Import, or with CopyImports a copy
// in memory of its own.
func (c *Counting) importBuf(src kernels.Buffer) (kernels.Buffer, error) {
	if !c.CopyImports {
		return c.Backend.Import(src)
	}
	if !src.Host() {
		return kernels.Buffer{}, fmt.Errorf("kerneltest: Counting.Import: src %v is device memory", src)
	}
	b, err := c.Backend.Alloc(src.DType(), src.Len())
	if err != nil {
		return kernels.Buffer{}, fmt.Errorf("kerneltest: Counting.Import: %w", err)
	}
	if err := c.Backend.Upload(b, src); err != nil {
		c.Backend.Free(b)
		return kernels.Buffer{}, fmt.Errorf("kerneltest: Counting.Import: %w", err)
	}
	return b, nil
}

// SumSquares counts one scalar.
func (c *Counting) SumSquares(xs ...kernels.Buffer) (float64, error) {
	c.N.Scalars++
	c.args("SumSquares", "xs", xs)
	return c.Backend.SumSquares(xs...)
}

// Argmax counts one scalar.
func (c *Counting) Argmax(x kernels.Buffer) (int32, error) {
	c.N.Scalars++
	c.arg("Argmax", "x", x)
	return c.Backend.Argmax(x)
}

// AllFinite counts one scalar.
func (c *Counting) AllFinite(xs ...kernels.Buffer) (bool, error) {
	c.N.Scalars++
	c.args("AllFinite", "xs", xs)
	return c.Backend.AllFinite(xs...)
}

// Copy checks its arguments (see Transfers.HostArgs).
func (c *Counting) Copy(dst, src kernels.Buffer) {
	c.arg("Copy", "dst", dst)
	c.arg("Copy", "src", src)
	c.Backend.Copy(dst, src)
}

// GatherRows checks its arguments.
func (c *Counting) GatherRows(dst, src, idx kernels.Buffer, cols int) {
	c.args("GatherRows", "dst,src,idx", []kernels.Buffer{dst, src, idx})
	c.Backend.GatherRows(dst, src, idx, cols)
}

// ScatterRows checks its arguments.
func (c *Counting) ScatterRows(dst, src, idx kernels.Buffer, cols int) {
	c.args("ScatterRows", "dst,src,idx", []kernels.Buffer{dst, src, idx})
	c.Backend.ScatterRows(dst, src, idx, cols)
}

// Transpose checks its arguments.
func (c *Counting) Transpose(dst, src kernels.Buffer, rows, cols int) {
	c.args("Transpose", "dst,src", []kernels.Buffer{dst, src})
	c.Backend.Transpose(dst, src, rows, cols)
}

// MatMul checks its arguments.
func (c *Counting) MatMul(out, x kernels.Buffer, w kernels.Mat, m int, accumulate bool) {
	c.args("MatMul", "out,x,w", []kernels.Buffer{out, x, w.Data})
	c.Backend.MatMul(out, x, w, m, accumulate)
}

// MatMulNN checks its arguments.
func (c *Counting) MatMulNN(out, dy kernels.Buffer, w kernels.Mat, m int, accumulate bool) {
	c.args("MatMulNN", "out,dy,w", []kernels.Buffer{out, dy, w.Data})
	c.Backend.MatMulNN(out, dy, w, m, accumulate)
}

// MatMulTN checks its arguments.
func (c *Counting) MatMulTN(dw, dy, x kernels.Buffer, m, n, k int) {
	c.args("MatMulTN", "dw,dy,x", []kernels.Buffer{dw, dy, x})
	c.Backend.MatMulTN(dw, dy, x, m, n, k)
}

// Embedding checks its arguments.
func (c *Counting) Embedding(out kernels.Buffer, table kernels.Mat, ids kernels.Buffer) {
	c.args("Embedding", "out,table,ids", []kernels.Buffer{out, table.Data, ids})
	c.Backend.Embedding(out, table, ids)
}

// EmbeddingBackward checks its arguments.
func (c *Counting) EmbeddingBackward(dtable, dout, ids kernels.Buffer, cols int) {
	c.args("EmbeddingBackward", "dtable,dout,ids", []kernels.Buffer{dtable, dout, ids})
	c.Backend.EmbeddingBackward(dtable, dout, ids, cols)
}

// RMSNorm checks its arguments.
func (c *Counting) RMSNorm(out, x, w kernels.Buffer, rows, cols int, eps float32) {
	c.args("RMSNorm", "out,x,w", []kernels.Buffer{out, x, w})
	c.Backend.RMSNorm(out, x, w, rows, cols, eps)
}

// RMSNormBackward checks its arguments.
func (c *Counting) RMSNormBackward(dx, dw, dout, x, w kernels.Buffer, rows, cols int, eps float32) {
	c.args("RMSNormBackward", "dx,dw,dout,x,w", []kernels.Buffer{dx, dw, dout, x, w})
	c.Backend.RMSNormBackward(dx, dw, dout, x, w, rows, cols, eps)
}

// RoPE checks its arguments.
func (c *Counting) RoPE(x, pos kernels.Buffer, heads, headDim int, theta float64) {
	c.args("RoPE", "x,pos", []kernels.Buffer{x, pos})
	c.Backend.RoPE(x, pos, heads, headDim, theta)
}

// RoPEBackward checks its arguments.
func (c *Counting) RoPEBackward(dx, pos kernels.Buffer, heads, headDim int, theta float64) {
	c.args("RoPEBackward", "dx,pos", []kernels.Buffer{dx, pos})
	c.Backend.RoPEBackward(dx, pos, heads, headDim, theta)
}

// attnBufs lists the Buffers of an attention batch: its layout, Q, Out,
// LSE, contiguous K/V and KStart, and the paged pool and tables.
func attnBufs(a *kernels.AttentionBatch) []kernels.Buffer {
	return []kernels.Buffer{a.Layout.QStart, a.Layout.Pos, a.Q, a.Out, a.LSE, a.K, a.V, a.KStart, a.Paged.Pool, a.Paged.Tables}
}

// Attention checks every Buffer of the batch, the paged pool and the block
// tables included.
func (c *Counting) Attention(a kernels.AttentionBatch, heads, kvHeads, headDim int, scale float32) {
	c.args("Attention", "qstart,pos,q,out,lse,k,v,kstart,pool,tables", attnBufs(&a))
	c.Backend.Attention(a, heads, kvHeads, headDim, scale)
}

// AttentionBackward checks every Buffer of the batch and its gradients.
func (c *Counting) AttentionBackward(g kernels.AttentionGradBatch, heads, kvHeads, headDim int, scale float32) {
	c.args("AttentionBackward", "qstart,pos,q,out,lse,k,v,kstart,pool,tables,dout,dq,dk,dv",
		append(attnBufs(&g.AttentionBatch), g.DOut, g.DQ, g.DK, g.DV))
	c.Backend.AttentionBackward(g, heads, kvHeads, headDim, scale)
}

// WriteKV checks its arguments.
func (c *Counting) WriteKV(kv kernels.PagedKV, l kernels.BatchLayout, k, v kernels.Buffer, kvHeads, headDim int) {
	c.args("WriteKV", "pool,tables,qstart,pos,k,v", []kernels.Buffer{kv.Pool, kv.Tables, l.QStart, l.Pos, k, v})
	c.Backend.WriteKV(kv, l, k, v, kvHeads, headDim)
}

// AddRMSNorm checks its arguments and runs the backend's fused op, or the
// unfused sequence when it has none (kernels.AddRMSNorm).
func (c *Counting) AddRMSNorm(out, x, res, w kernels.Buffer, rows, cols int, eps float32) {
	c.args("AddRMSNorm", "out,x,res,w", []kernels.Buffer{out, x, res, w})
	kernels.AddRMSNorm(c.Backend, out, x, res, w, rows, cols, eps)
}

// WriteKVRoPE checks its arguments and runs the backend's fused op, or the
// unfused sequence when it has none (kernels.WriteKVRoPE).
func (c *Counting) WriteKVRoPE(kv kernels.PagedKV, l kernels.BatchLayout, k, v kernels.Buffer, kvHeads, headDim int, theta float64) {
	c.args("WriteKVRoPE", "pool,tables,qstart,pos,k,v", []kernels.Buffer{kv.Pool, kv.Tables, l.QStart, l.Pos, k, v})
	kernels.WriteKVRoPE(c.Backend, kv, l, k, v, kvHeads, headDim, theta)
}

// SwiGLU checks its arguments.
func (c *Counting) SwiGLU(out, gate, up kernels.Buffer) {
	c.args("SwiGLU", "out,gate,up", []kernels.Buffer{out, gate, up})
	c.Backend.SwiGLU(out, gate, up)
}

// SwiGLUBackward checks its arguments.
func (c *Counting) SwiGLUBackward(dgate, dup, dout, gate, up kernels.Buffer) {
	c.args("SwiGLUBackward", "dgate,dup,dout,gate,up", []kernels.Buffer{dgate, dup, dout, gate, up})
	c.Backend.SwiGLUBackward(dgate, dup, dout, gate, up)
}

// Add checks its arguments.
func (c *Counting) Add(dst, src kernels.Buffer) {
	c.args("Add", "dst,src", []kernels.Buffer{dst, src})
	c.Backend.Add(dst, src)
}

// Scale checks its argument.
func (c *Counting) Scale(x kernels.Buffer, s float32) {
	c.arg("Scale", "x", x)
	c.Backend.Scale(x, s)
}

// LogSoftmaxGather checks its arguments.
func (c *Counting) LogSoftmaxGather(logp, entropy, logits, targets kernels.Buffer, rows, v int) {
	c.args("LogSoftmaxGather", "logp,entropy,logits,targets", []kernels.Buffer{logp, entropy, logits, targets})
	c.Backend.LogSoftmaxGather(logp, entropy, logits, targets, rows, v)
}

// LogSoftmaxGatherBackward checks its arguments.
func (c *Counting) LogSoftmaxGatherBackward(dlogits, logits, targets, dlogp, dentropy kernels.Buffer, rows, v int) {
	c.args("LogSoftmaxGatherBackward", "dlogits,logits,targets,dlogp,dentropy", []kernels.Buffer{dlogits, logits, targets, dlogp, dentropy})
	c.Backend.LogSoftmaxGatherBackward(dlogits, logits, targets, dlogp, dentropy, rows, v)
}

// Softmax checks its argument.
func (c *Counting) Softmax(x kernels.Buffer, rows, v int) {
	c.arg("Softmax", "x", x)
	c.Backend.Softmax(x, rows, v)
}

// SampleRows checks its Buffers, the per-row arguments included.
func (c *Counting) SampleRows(ids, logp, fullLogp, logits kernels.Buffer, args kernels.SampleArgs, rows, v int) {
	c.args("SampleRows", "ids,logp,fullLogp,logits,params,u", []kernels.Buffer{ids, logp, fullLogp, logits, args.Params, args.U})
	c.Backend.SampleRows(ids, logp, fullLogp, logits, args, rows, v)
}

// PolicyLoss checks every input and output Buffer.
func (c *Counting) PolicyLoss(out kernels.LossOutput, in kernels.LossInput, p kernels.LossParams, n int) {
	c.args("PolicyLoss", "in LogP,Entropy,OldLogP,RefLogP,Adv,SeqAdv,Mask,ISRatio,Weight,Seg",
		[]kernels.Buffer{in.LogP, in.Entropy, in.OldLogP, in.RefLogP, in.Adv, in.SeqAdv, in.Mask, in.ISRatio, in.Weight, in.Seg})
	c.args("PolicyLoss", "out Loss,DLogP,DEntropy,Ratio,KL,Clip,Phi",
		[]kernels.Buffer{out.Loss, out.DLogP, out.DEntropy, out.Ratio, out.KL, out.Clip, out.Phi})
	c.Backend.PolicyLoss(out, in, p, n)
}

// NewStepGraphs returns the wrapped backend's recordings
// (kernels.StepGrapher), or nil when it has none. The ops a recording is
// made from go through the wrapper and are counted then; a replay crosses
// nothing.
func (c *Counting) NewStepGraphs() kernels.StepGraphs { return kernels.NewStepGraphs(c.Backend) }

// AdamW checks its arguments.
func (c *Counting) AdamW(param, grad, m, v kernels.Buffer, p kernels.AdamWParams, step int) {
	c.args("AdamW", "param,grad,m,v", []kernels.Buffer{param, grad, m, v})
	c.Backend.AdamW(param, grad, m, v, p, step)
}

var (
	_ kernels.BatchInvariantSetter = (*Counting)(nil)
	_ kernels.AttentionInvariant   = (*Counting)(nil)
)

// SetBatchInvariant sets the wrapped backend's batch-invariant mode when it
// has one (kernels.BatchInvariantSetter), so that a model run through the
// wrapper computes as it would on the backend itself; on a backend
// without the mode it does nothing, and BatchInvariant stays false (how
// model tells that the mode did not take).
func (c *Counting) SetBatchInvariant(on bool) {
	if b, ok := c.Backend.(kernels.BatchInvariantSetter); ok {
		b.SetBatchInvariant(on)
	}
}

// AttentionBatchInvariant reports what the wrapped backend says of its
// attention (kernels.AttentionInvariant; false when it says nothing).
func (c *Counting) AttentionBatchInvariant() bool {
	a, ok := c.Backend.(kernels.AttentionInvariant)
	return ok && a.AttentionBatchInvariant()
}

// BatchInvariant reports the wrapped backend's mode (false without one).
func (c *Counting) BatchInvariant() bool {
	b, ok := c.Backend.(kernels.BatchInvariantSetter)
	return ok && b.BatchInvariant()
}
