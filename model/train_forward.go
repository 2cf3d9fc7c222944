package model

import (
	"context"
	"fmt"

	"github.com/x/kernels"
)

// passState is one batch's layout and buffers. Sequences are concatenated
// into T rows ([T, C] activations); attention runs per sequence.
type passState struct {
	seqs []TrainSeq
	t    int

	qDim, kvDim, heads int     // the model's H·D, KVH·D and H
	off                []int   // [B+1] first row of each sequence
	ids                []int32 // [T]
	pos                []int32 // [T] position within its sequence
	rows               []scoredRow

	logp, ent [][]float32 // [B][scored]

	xs         [][]float32 // layer inputs (see storage)
	acts       []layerActs
	checkpoint bool
	xf         []float32 // [T, C] model.norm(x_L)
	dxf        []float32 // [T, C] gradient of xf
	grads      gradBufs
	attn       []kernels.AttentionSeq
	attnGrad   []kernels.AttentionGradSeq
	lbufs      layerBufs // the layer in progress's acts as Buffers

	// logits chunk: [K, C] gathered rows, [K, V] logits, per-row values
	cx, logits, dcx []float32
	tgt             []int32
	gidx            []int32 // [K] the chunk's rows of xf
	lp, en, dlp     []float32
	den             []float32 // d loss / d entropy of the chunk's rows
}

// scoredRow is one scored token: the row whose logits predict it.
type scoredRow struct {
	row, seq, i, tgt int32
}

// prepare validates seqs against the model and lays out st.
func (tr *Trainable) prepare(st *passState, seqs []TrainSeq) error {
	if len(seqs) == 0 {
		return fmt.Errorf("train: empty batch")
	}
	v := int32(tr.m.Config.VocabSize)
	st.seqs = seqs
	st.qDim, st.kvDim, st.heads = tr.m.Config.QDim(), tr.m.Config.KVDim(), tr.m.Config.NumHeads
	st.off = append(st.off[:0], 0)
	st.ids, st.pos, st.rows = st.ids[:0], st.pos[:0], st.rows[:0]
	st.logp, st.ent = make([][]float32, len(seqs)), make([][]float32, len(seqs))
	for s, seq := range seqs {
		n := len(seq.IDs)
		if seq.Start < 1 || seq.Start > n {
			return fmt.Errorf("train: sequence %d: start %d outside [1, %d]", s, seq.Start, n)
		}
		if seq.Mask != nil && len(seq.Mask) != n-seq.Start {
			return fmt.Errorf("train: sequence %d: mask has %d entries, want %d", s, len(seq.Mask), n-seq.Start)
		}
		for i, id := range seq.IDs {
			if id < 0 || id >= v {
				return fmt.Errorf("train: sequence %d token %d: id %d outside the vocabulary [0, %d)", s, i, id, v)
			}
		}
		base := st.off[s]
		st.ids = append(st.ids, seq.IDs...)
		for p := range n {
			st.pos = append(st.pos, int32(p))
		}
		for i := range n - seq.Start {
			if seq.Mask != nil && !seq.Mask[i] {
				continue
			}
			st.rows = append(st.rows, scoredRow{row: int32(base + seq.Start + i - 1), seq: int32(s), i: int32(i), tgt: seq.IDs[seq.Start+i]})
		}
		st.off = append(st.off, base+n)
		st.logp[s] = make([]float32, n-seq.Start)
		st.ent[s] = make([]float32, n-seq.Start)
	}
	st.t = st.off[len(seqs)]
	return nil
}

// forward runs the decoder over st's batch; keep saves what backward needs
// (all activations, or layer inputs under checkpointing).
func (tr *Trainable) forward(ctx context.Context, st *passState, adapters, keep bool) error {
	m := tr.m
	c := m.Config
	layoutActs(st, m, keep, tr.opts.Checkpoint)
	if adapters {
		tr.refreshBT()
	}
	x0, _ := st.layerIO(0)
	tr.be.Embedding(kernels.HostF32(x0), m.Embed, kernels.HostI32(st.ids))
	for l := range m.Layers {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("train forward: %w", err)
		}
		in, out := st.layerIO(l)
		tr.layerForward(st, l, in, st.actsOf(l), out, adapters)
	}
	st.xf = grow(st.xf, st.t*c.HiddenSize)
	tr.be.RMSNorm(kernels.HostF32(st.xf), kernels.HostF32(st.finalX(len(m.Layers))), kernels.HostF32(m.Norm), st.t, c.HiddenSize, c.RMSNormEps)
	return nil
}

// layerForward runs the shared decoder layer (see layerForward in
// layer.go) on st's batch, with the adapters' Bᵀ and attention over each
// sequence's own keys and values.
// Training's activations are host slices, passed as host Buffers.
func (tr *Trainable) layerForward(st *passState, l int, x []float32, a *layerActs, out []float32, adapters bool) {
	var bT [7]kernels.Buffer
	for j, t := range tr.bT[l] {
		bT[j] = kernels.HostF32(t)
	}
	st.lbufs = a.bufs(tr.m, l, st.t)
	layerForward(tr.be, tr.m, l, kernels.HostF32(x), kernels.HostF32(out), kernels.HostI32(st.pos), st.t, &st.lbufs, adapters, &bT, st)
}

// attend is training's attention batch: each sequence attends to its own
// keys and values in place, from position 0, keeping the LSE for the
// backward.
func (st *passState) attend(_ int, a *layerBufs) []kernels.AttentionSeq {
	q, kv, h := st.qDim, st.kvDim, st.heads
	st.attn = st.attn[:0]
	for s := range st.seqs {
		o0, o1 := st.off[s], st.off[s+1]
		st.attn = append(st.attn, kernels.AttentionSeq{
			Out: a.att.Slice(o0*q, o1*q), Q: a.qr.Slice(o0*q, o1*q),
			K: a.kr.Slice(o0*kv, o1*kv), V: a.v.Slice(o0*kv, o1*kv),
			LSE: a.lse.Slice(o0*h, o1*h), T: o1 - o0,
		})
	}
	return st.attn
}

// chunkGrad fills d loss / d logp (dlp) and d loss / d entropy (dent) of
// the scored rows st.rows[r0 : r0+len(dlp)], whose log-probs and entropies
// are st.lp and st.en, and reports whether dent is used.
type chunkGrad func(r0 int, dlp, dent []float32) bool

// logits computes the scored rows' log-probs and entropies chunk by chunk,
// on logits divided by the temperature. With grad set it also turns each
// chunk's d loss / d logp (and d loss / d entropy) into d loss / d logits
// and accumulates st.dxf (and the lm_head gradient in Full mode) at once,
// so no [rows, V] buffer outlives its chunk.
func (tr *Trainable) logits(ctx context.Context, st *passState, grad chunkGrad) error {
	m, be := tr.m, tr.be
	c, v := m.Config.HiddenSize, m.Config.VocabSize
	k := min(tr.opts.LogitsChunk, max(1, len(st.rows)))
	st.cx = grow(st.cx, k*c)
	st.logits = grow(st.logits, k*v)
	st.tgt = st.tgt[:0]
	st.lp, st.en, st.dlp, st.den = grow(st.lp, k), grow(st.en, k), grow(st.dlp, k), grow(st.den, k)
	if grad != nil {
		st.dcx = grow(st.dcx, k*c)
		st.dxf = grow(st.dxf, st.t*c)
		clear(st.dxf)
	}
	invT := 1 / tr.opts.Temperature
	for r0 := 0; r0 < len(st.rows); r0 += k {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("train logits: %w", err)
		}
		rows := st.rows[r0:min(r0+k, len(st.rows))]
		n := len(rows)
		st.tgt, st.gidx = st.tgt[:0], st.gidx[:0]
		for _, r := range rows {
			st.gidx = append(st.gidx, r.row)
			st.tgt = append(st.tgt, r.tgt)
		}
		cx, lg := st.cx[:n*c], st.logits[:n*v]
		be.GatherRows(kernels.HostF32(cx), kernels.HostF32(st.xf[:st.t*c]), kernels.HostI32(st.gidx), c)
		be.MatMul(kernels.HostF32(lg), kernels.HostF32(cx), m.LMHead, n, false)
		if invT != 1 {
			be.Scale(kernels.HostF32(lg), invT)
		}
		be.LogSoftmaxGather(kernels.HostF32(st.lp[:n]), kernels.HostF32(st.en[:n]), kernels.HostF32(lg), kernels.HostI32(st.tgt), n, v)
		for j, r := range rows {
			st.logp[r.seq][r.i], st.ent[r.seq][r.i] = st.lp[j], st.en[j]
		}
		if grad == nil {
			continue
		}
		var dent []float32
		if grad(r0, st.dlp[:n], st.den[:n]) {
			dent = st.den[:n]
		}
		be.LogSoftmaxGatherBackward(kernels.HostF32(lg), kernels.HostF32(lg), kernels.HostI32(st.tgt), kernels.HostF32(st.dlp[:n]), kernels.HostF32(dent), n, v)
		if invT != 1 {
			be.Scale(kernels.HostF32(lg), invT)
		}
		if tr.opts.Full {
			be.MatMulNN(kernels.HostF32(st.dcx[:n*c]), kernels.HostF32(lg), m.LMHead, n, false)
		} else {
			be.MatMul(kernels.HostF32(st.dcx[:n*c]), kernels.HostF32(lg), tr.headT(), n, false)
		}
		for j, r := range rows {
			be.Add(kernels.HostF32(st.dxf[int(r.row)*c:(int(r.row)+1)*c]), kernels.HostF32(st.dcx[j*c:(j+1)*c]))
		}
		if tr.opts.Full {
			dh := tr.dHead
			if dh == nil {
				dh = tr.dEmbed
			}
			be.MatMulTN(kernels.HostF32(dh), kernels.HostF32(lg), kernels.HostF32(cx), n, v, c)
		}
	}
	return nil
}

// headT is lm_head transposed, [C, V] in its storage type, made once: in
// LoRA mode lm_head is frozen, and d xf = dlogits·W runs about twice as
// fast as MatMul against Wᵀ as MatMulNN against W at V ≫ C (a CPU
// backend measurement; see "Training throughput" in BENCHMARKS.md). It
// costs one copy of lm_head, made by the backend's Transpose.
func (tr *Trainable) headT() kernels.Mat {
	if tr.lmHeadT.Rows == 0 {
		tr.lmHeadT = transposeMat(tr.be, tr.m.LMHead)
	}
	return tr.lmHeadT
}

// transposeMat returns wᵀ in w's storage type, transposed by be.
func transposeMat(be kernels.Backend, w kernels.Mat) kernels.Mat {
	t := kernels.NewHostMat(w.DType, w.Cols, w.Rows)
	be.Transpose(t.Data, w.Data, w.Rows, w.Cols)
	return t
}

// refreshBT transposes every adapter's B [Out, R] into tr.bT as Bᵀ [R, Out]
// (the backend's Transpose):
// the rank-R update u·Bᵀ then runs as MatMulNN(u, Bᵀ), whose CPU kernel
// handles the inner dimension R ≪ Out about three times faster than
// MatMul's. B changes at every optimizer step, so this runs at the start
// of every forward (Σ Out·R elements, a few ms at 0.6B).
func (tr *Trainable) refreshBT() {
	for li := range tr.m.Layers {
		for j, nl := range tr.m.Layers[li].Linears() {
			a := nl.Linear.LoRA
			if a == nil {
				continue
			}
			out := nl.Linear.Out()
			t := grow(tr.bT[li][j], a.R*out)
			tr.be.Transpose(kernels.HostF32(t), kernels.HostF32(a.B[:out*a.R]), out, a.R)
			tr.bT[li][j] = t
		}
	}
}
