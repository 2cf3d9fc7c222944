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

	qDim, kvDim, heads int // the model's H·D, KVH·D and H
	cfg                Config
	off                []int   // [B+1] first row of each sequence
	ids                []int32 // [T]
	pos                []int32 // [T] position within its sequence
	rows               []scoredRow

	logp, ent [][]float32 // [B][scored]

	// In the backend's memory (Backend.Alloc, grown by fit, reused
	// across passes until Trainable.Release): *Mem fields are the
	// allocations, the others views of this pass's size.
	xmem, xs   []kernels.Buffer // layer inputs [T, C] (see layoutActs)
	acts       []layerActs
	checkpoint bool
	xfMem      kernels.Buffer
	xf         kernels.Buffer // [T, C] model.norm(x_L)
	dxfMem     kernels.Buffer
	dxf        kernels.Buffer // [T, C] gradient of xf
	grads      gradBufs
	ipos       kernels.Buffer      // ids [T], positions [T], scored rows [R], their targets [R], QStart [B+1], block tables: one Upload per pass
	lay        kernels.BatchLayout // the pass's attention layout (views of ipos)
	tables     kernels.Buffer      // the pass's block tables in st.kv (a view of ipos)
	hostIP     []int32
	out        kernels.Buffer // [8R] log-probs, entropies, then the loss outputs (see outSlot)
	outMem     kernels.Buffer
	hostOut    []float32
	lossIn     kernels.Buffer // [5R] the loss's per-token inputs (see lossTensors.upload)
	segMem     kernels.Buffer // [S+1] I32 sequence offsets of the loss
	clipMem    kernels.Buffer // [R] U8 the loss's clip flags
	zeros      kernels.Buffer // zeroed, never written: clears scratch by Copy
	kv         trainKV        // the pass's K/V in blocks, read through block tables

	// logits chunk: [K, C] gathered rows, [K, V] logits, [K, C] their
	// gradient
	cxMem, logitsMem, dcxMem kernels.Buffer
}

// Slots of passState.out, each [R], in the order of st.rows.
const (
	outLogP = iota
	outEnt
	outLoss
	outDLogP
	outDEnt
	outRatio
	outKL
	outPhi
	outSlots
)

// outSlot is slot i of st.out.
func (st *passState) outSlot(i int) kernels.Buffer {
	r := len(st.rows)
	return st.out.Slice(i*r, (i+1)*r)
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
	st.qDim, st.kvDim, st.heads, st.cfg = tr.m.Config.QDim(), tr.m.Config.KVDim(), tr.m.Config.NumHeads, tr.m.Config
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
	if err := layoutActs(tr.be, st, m, keep, !tr.opts.KeepActivations); err != nil {
		return err
	}
	defer tr.m.batchInvariant(tr.invariant())()
	if adapters && !tr.invariant() {
		if err := tr.refreshBT(); err != nil {
			return err
		}
	}
	if err := st.kv.reserve(tr.be, c, st); err != nil {
		return err
	}
	if !keep {
		defer st.kv.release() // no backward reads them
	}
	if err := st.uploadIDs(tr.be); err != nil {
		return err
	}
	x0, _ := st.layerIO(0)
	tr.be.Embedding(x0, m.devMat(m.Embed), st.idsBuf())
	var res kernels.Buffer // the previous layer's h, not yet added into its output
	for l := range m.Layers {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("train forward: %w", err)
		}
		in, out := st.layerIO(l)
		if err := tr.layerForward(st, l, in, res, st.actsOf(l), out, adapters); err != nil {
			return err
		}
		res = st.actsOf(l).b.h
	}
	xf, err := fit(tr.be, &st.xfMem, kernels.F32, st.t*c.HiddenSize)
	if err != nil {
		return fmt.Errorf("train forward: %w", err)
	}
	st.xf = xf
	kernels.AddRMSNorm(tr.be, st.xf, st.finalX(len(m.Layers)), res, m.devVec(m.Norm), st.t, c.HiddenSize, c.RMSNormEps)
	return nil
}

// uploadIDs puts the pass's token ids and positions, the scored rows'
// indices and targets, the sequences' offsets (the attention layout's
// QStart, B+1) and their block tables in st.kv's pool (st.kv.reserve first)
// into st.ipos in one Upload, sets st.lay, and sizes st.out.
func (st *passState) uploadIDs(be kernels.Backend) error {
	r, b := len(st.rows), len(st.off)-1
	st.hostIP = append(append(st.hostIP[:0], st.ids...), st.pos...)
	for _, row := range st.rows {
		st.hostIP = append(st.hostIP, row.row)
	}
	for _, row := range st.rows {
		st.hostIP = append(st.hostIP, row.tgt)
	}
	maxT := 0
	for s := range b {
		st.hostIP = append(st.hostIP, int32(st.off[s]))
		maxT = max(maxT, st.off[s+1]-st.off[s])
	}
	st.hostIP = append(st.hostIP, int32(st.t))
	st.hostIP = st.kv.tables(st.hostIP)
	ip, err := fit(be, &st.ipos, kernels.I32, len(st.hostIP))
	if err != nil {
		return fmt.Errorf("train: ids: %w", err)
	}
	if st.out, err = fit(be, &st.outMem, kernels.F32, outSlots*r); err != nil {
		return fmt.Errorf("train: log-prob outputs: %w", err)
	}
	if err := be.Upload(ip, kernels.HostI32(st.hostIP)); err != nil {
		return fmt.Errorf("train: uploading ids: %w", err)
	}
	q0 := 2*st.t + 2*r
	st.lay = kernels.BatchLayout{QStart: ip.Slice(q0, q0+b+1), Pos: st.posBuf(), B: b, N: st.t, MaxT: maxT,
		MaxLen: st.kv.w * trainKVBlock}
	st.tables = ip.Slice(q0+b+1, len(st.hostIP))
	return nil
}

// rowsBuf and tgtBuf are the scored rows' indices into xf and their
// target ids (I32 [R]) in the backend's memory.
func (st *passState) rowsBuf() kernels.Buffer { return st.ipos.Slice(2*st.t, 2*st.t+len(st.rows)) }
func (st *passState) tgtBuf() kernels.Buffer {
	r := len(st.rows)
	return st.ipos.Slice(2*st.t+r, 2*st.t+2*r)
}

// downloadLogP brings the pass's log-probs and entropies to the host in
// one Download and lays them out in st.logp and st.ent.
func (st *passState) downloadLogP(be kernels.Backend) error {
	r := len(st.rows)
	if r == 0 {
		return nil
	}
	st.hostOut = grow(st.hostOut, 2*r)
	if err := be.Download(kernels.HostF32(st.hostOut), st.out.Slice(0, 2*r)); err != nil {
		return fmt.Errorf("train: downloading log-probs: %w", err)
	}
	for j, row := range st.rows {
		st.logp[row.seq][row.i], st.ent[row.seq][row.i] = st.hostOut[j], st.hostOut[r+j]
	}
	return nil
}

// idsBuf and posBuf are the pass's token ids and positions (I32 [T]) in
// the backend's memory.
func (st *passState) idsBuf() kernels.Buffer { return st.ipos.Slice(0, st.t) }
func (st *passState) posBuf() kernels.Buffer { return st.ipos.Slice(st.t, 2*st.t) }

// fitZeros sizes st.zeros, an allocation never written (Alloc zeroes
// it), to at least n elements, for clear.
func (st *passState) fitZeros(be kernels.Backend, n int) error {
	if _, err := fit(be, &st.zeros, kernels.F32, n); err != nil {
		return fmt.Errorf("train: zeroing scratch: %w", err)
	}
	return nil
}

// clear zeroes b by copying from st.zeros (sized by fitZeros), so no host
// memory crosses.
func (st *passState) clear(be kernels.Backend, b kernels.Buffer) {
	be.Copy(b, st.zeros.Slice(0, b.Len()))
}

// layerForward runs the shared decoder layer (see layerForward in
// layer.go) on st's batch, with the adapters' Bᵀ and attention over each
// sequence's own keys and values; res is the previous layer's h not yet
// added into x, or empty.
func (tr *Trainable) layerForward(st *passState, l int, x, res kernels.Buffer, a *layerActs, out kernels.Buffer, adapters bool) error {
	var bT [7]kernels.Buffer // none in batch-invariant mode: B through MatMul
	for j := range tr.bT[l] {
		if n := tr.bTLen[l][j]; n > 0 && !tr.invariant() {
			bT[j] = tr.bT[l][j].Slice(0, n)
		}
	}
	if err := a.fitLoRA(tr.be, tr.m, l, st.t); err != nil {
		return err
	}
	layerForward(tr.be, tr.m, l, x, res, out, st.posBuf(), st.t, &a.b, adapters, &bT, st)
	return nil
}

// attend is training's attention batch: the pass's keys (rotated in place)
// and values go into its blocks (st.kv) with one WriteKV, and each
// sequence attends to them through its block table, from position 0,
// keeping the LSE for the backward.
func (st *passState) attend(_ int, a *layerBufs) kernels.AttentionBatch {
	c := st.cfg
	n := st.t
	kv := st.kv.paged(st.tables)
	kernels.WriteKVRoPE(st.kv.be, kv, st.lay, a.kr.Slice(0, n*st.kvDim), a.v.Slice(0, n*st.kvDim), c.NumKVHeads, c.HeadDim, c.RopeTheta)
	return st.attnBatch(a)
}

// attnBatch is the pass's attention batch over the activations a: Q, Out
// and LSE packed [T, ...], K/V through st.kv's block tables, KStart (the
// backward's DK and DV rows) equal to QStart since every sequence starts at
// position 0.
func (st *passState) attnBatch(a *layerBufs) kernels.AttentionBatch {
	n := st.t
	return kernels.AttentionBatch{Layout: st.lay, Q: a.qr.Slice(0, n*st.qDim), Out: a.att.Slice(0, n*st.qDim),
		LSE: a.lse.Slice(0, n*st.heads), Paged: st.kv.paged(st.tables), KStart: st.lay.QStart}
}

// chunkGrad returns d loss / d logp and d loss / d entropy (empty when
// the entropy has no gradient) of the scored rows st.rows[r0 : r0+n], in
// the backend's memory; their log-probs and entropies are already in
// st.out's slots.
type chunkGrad func(r0, n int) (dlp, dent kernels.Buffer)

// logits computes the scored rows' log-probs and entropies chunk by chunk,
// on logits divided by the temperature, into st.out (and, with download,
// st.logp and st.ent). With grad set it also turns each chunk's d loss /
// d logp (and d loss / d entropy) into d loss / d logits and accumulates
// st.dxf (and the lm_head gradient in Full mode) at once, so no [rows, V]
// buffer outlives its chunk. Nothing crosses to the host per chunk.
func (tr *Trainable) logits(ctx context.Context, st *passState, grad chunkGrad, download bool) error {
	m, be := tr.m, tr.be
	defer m.batchInvariant(tr.invariant())() // the lm_head MatMul, as a decode step's
	c, v := m.Config.HiddenSize, m.Config.VocabSize
	k := min(tr.opts.LogitsChunk, max(1, len(st.rows)))
	cxAll, err := fit(be, &st.cxMem, kernels.F32, k*c)
	if err != nil {
		return fmt.Errorf("train logits: %w", err)
	}
	lgAll, err := fit(be, &st.logitsMem, kernels.F32, k*v)
	if err != nil {
		return fmt.Errorf("train logits: %w", err)
	}
	var dcxAll kernels.Buffer
	if grad != nil {
		if dcxAll, err = fit(be, &st.dcxMem, kernels.F32, k*c); err != nil {
			return fmt.Errorf("train logits: %w", err)
		}
		if st.dxf, err = fit(be, &st.dxfMem, kernels.F32, st.t*c); err != nil {
			return fmt.Errorf("train logits: %w", err)
		}
		if err := st.fitZeros(be, st.t*c); err != nil {
			return err
		}
		st.clear(be, st.dxf)
	}
	head := m.devMat(m.LMHead)
	invT := 1 / tr.opts.Temperature
	rowsAll, tgtAll, lpAll, enAll := st.rowsBuf(), st.tgtBuf(), st.outSlot(outLogP), st.outSlot(outEnt)
	for r0 := 0; r0 < len(st.rows); r0 += k {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("train logits: %w", err)
		}
		r1 := min(r0+k, len(st.rows))
		n := r1 - r0
		cx, lg := cxAll.Slice(0, n*c), lgAll.Slice(0, n*v)
		gidx, tgt := rowsAll.Slice(r0, r1), tgtAll.Slice(r0, r1)
		be.GatherRows(cx, st.xf, gidx, c)
		be.MatMul(lg, cx, head, n, false)
		if invT != 1 {
			be.Scale(lg, invT)
		}
		be.LogSoftmaxGather(lpAll.Slice(r0, r1), enAll.Slice(r0, r1), lg, tgt, n, v)
		if grad == nil {
			continue
		}
		dlp, dent := grad(r0, n)
		be.LogSoftmaxGatherBackward(lg, lg, tgt, dlp, dent, n, v)
		if invT != 1 {
			be.Scale(lg, invT)
		}
		dcx := dcxAll.Slice(0, n*c)
		if tr.opts.Full {
			be.MatMulNN(dcx, lg, head, n, false)
		} else {
			ht, err := tr.headT()
			if err != nil {
				return err
			}
			be.MatMul(dcx, lg, ht, n, false)
		}
		// Each scored row appears once and dxf starts at zero, so writing
		// the rows equals adding them.
		be.ScatterRows(st.dxf, dcx, gidx, c)
		if tr.opts.Full {
			dh := tr.dHead
			if dh.Len() == 0 {
				dh = tr.dEmbed
			}
			be.MatMulTN(dh, lg, cx, n, v, c)
		}
	}
	if download {
		return st.downloadLogP(be)
	}
	return nil
}

// headT is lm_head transposed, [C, V] in its storage type, made once: in
// LoRA mode lm_head is frozen, and d xf = dlogits·W runs about twice as
// fast as MatMul against Wᵀ as MatMulNN against W at V ≫ C (a CPU
// backend measurement; see "Training throughput" in BENCHMARKS.md). It
// costs one copy of lm_head, made by the backend's Transpose.
func (tr *Trainable) headT() (kernels.Mat, error) {
	if tr.lmHeadT.Rows == 0 {
		t, err := transposeMat(tr.be, tr.m.devMat(tr.m.LMHead))
		if err != nil {
			return kernels.Mat{}, fmt.Errorf("train: lm_head transposed: %w", err)
		}
		tr.lmHeadT = t
	}
	return tr.lmHeadT, nil
}

// transposeMat returns wᵀ in w's storage type, in be's memory (Alloc),
// transposed by be.
func transposeMat(be kernels.Backend, w kernels.Mat) (kernels.Mat, error) {
	buf, err := be.Alloc(w.DType, w.Len())
	if err != nil {
		return kernels.Mat{}, err
	}
	be.Transpose(buf, w.Data, w.Rows, w.Cols)
	return kernels.MatOf(buf, w.Cols, w.Rows), nil
}

// SetBatchInvariant makes the passes compute with the arithmetic of a
// batch-invariant generation step (BatchOptions.BatchInvariant), or stop:
// the backend's batch-invariant MatMul (kernels.BatchInvariantSetter)
// around every forward, the checkpointed recompute included, and each
// adapter's B read by MatMul as inference reads it rather than as Bᵀ by
// MatMulNN. A token's log-prob is then the one its sampling recorded
// (Completion.FullLogProbs), bit for bit (DESIGN.md, "Sampled log-probs
// are the trained ones"). It applies only where that is the outcome: on a
// backend with the mode whose attention is batch-invariant too
// (kernels.AttentionInvariant). On kernels/cpu with AVX-512, whose tiled
// attention is not, the two passes' logits differ anyway, and the mode
// would cost a LoRA step a third to two thirds more for nothing
// (BenchmarkTrainStepInvariant), so it changes nothing there; on a
// backend without the mode (cuda.Device, batch-invariant by construction)
// neither. Off by default; grpo turns it on with
// Config.BatchInvariantRollouts.
func (tr *Trainable) SetBatchInvariant(on bool) {
	tr.invariantMode = on && hasBatchInvariantMode(tr.be) && attentionInvariant(tr.be)
}

// invariant reports whether the passes run in the backend's batch-invariant
// mode (SetBatchInvariant took effect).
func (tr *Trainable) invariant() bool { return tr.invariantMode }

// hasBatchInvariantMode reports whether be has a batch-invariant MatMul
// mode that takes effect: a kernels.BatchInvariantSetter whose setting
// reads back (a wrapper such as kerneltest.Counting forwards the setter to
// a backend that may not have one).
func hasBatchInvariantMode(be kernels.Backend) bool {
	b, ok := be.(kernels.BatchInvariantSetter)
	if !ok {
		return false
	}
	if b.BatchInvariant() {
		return true
	}
	b.SetBatchInvariant(true)
	defer b.SetBatchInvariant(false)
	return b.BatchInvariant()
}

// attentionInvariant reports whether be says its attention is
// batch-invariant (kernels.AttentionInvariant).
func attentionInvariant(be kernels.Backend) bool {
	a, ok := be.(kernels.AttentionInvariant)
	return ok && a.AttentionBatchInvariant()
}

// refreshBT transposes every adapter's B [Out, R] into tr.bT as Bᵀ [R, Out]
// (the backend's Transpose, into Backend.Alloc memory):
// the rank-R update u·Bᵀ then runs as MatMulNN(u, Bᵀ), whose CPU kernel
// handles the inner dimension R ≪ Out about three times faster than
// MatMul's. B changes at every optimizer step, so this runs at the start
// of every forward (Σ Out·R elements, a few ms at 0.6B).
func (tr *Trainable) refreshBT() error {
	for li := range tr.m.Layers {
		for j, nl := range tr.m.Layers[li].Linears() {
			a := nl.Linear.LoRA
			if a == nil {
				tr.bTLen[li][j] = 0
				continue
			}
			out := nl.Linear.Out()
			t, err := fit(tr.be, &tr.bT[li][j], kernels.F32, a.R*out)
			if err != nil {
				return fmt.Errorf("train: adapters' Bᵀ: %w", err)
			}
			tr.bTLen[li][j] = a.R * out
			_, b := tr.m.loraDev(nl.Linear) // B as AdamW updates it (Param.Data)
			tr.be.Transpose(t, b.Data, out, a.R)
		}
	}
	return nil
}
