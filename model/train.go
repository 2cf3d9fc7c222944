package model

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/x/kernels"
)

// TrainOptions configure a Trainable.
type TrainOptions struct {
	// Full trains every weight (embeddings, norms, projections, lm_head) on
	// float32 master copies; the model must carry no adapters. Otherwise
	// only the attached LoRA adapters train and the base stays frozen.
	Full bool
	// KeepActivations keeps every activation of every layer from Forward
	// to Backward. By default (false) training checkpoints activations:
	// Forward keeps only each layer's input and Backward recomputes the
	// layer's activations, so memory per token drops from every activation
	// of every layer (about 2·C + 4·(H+2·KVH)·D + 3·F floats per layer) to
	// one hidden vector per layer, for about one more forward of compute.
	// Set it when memory is plentiful and the recomputation's time matters.
	KeepActivations bool
	// LogitsChunk is how many scored rows of [rows, V] logits exist at a
	// time (default 128: 78 MB at V = 151,936), so a large vocabulary
	// never needs a [tokens, V] buffer.
	LogitsChunk int
	// MicroBatchTokens, if > 0, makes LogProbs and Accumulate run the batch
	// in groups of whole sequences of at most this many tokens, bounding
	// activation memory by the group; Forward/Backward always hold the whole
	// batch.
	MicroBatchTokens int
	// Temperature divides the logits before the log-softmax, as TRL does
	// with the sampling temperature; 0 means 1. LogProbsOptions.Temperature
	// is the same setting for Model.LogProbs, and sampling at temperature T
	// reports Completion.FullLogProbs under the same distribution.
	Temperature float32
	// Reference (Full mode) keeps a frozen bfloat16 copy of the initial
	// weights as the reference policy of the KL term (RefLogProbs); it
	// costs 2 bytes per parameter (bf16 weights are shared, not copied).
	// Without it, a Loss with Beta > 0 is refused in Full mode. In LoRA mode
	// the reference is the base model (adapters off) and this is ignored.
	Reference bool
}

// TrainSeq is one token sequence of a training batch and which of its
// tokens are scored: token IDs[i], i ≥ Start, by the log-probability the
// model gives it after IDs[:i].
//
// The mask convention (shared with Scored): Mask counts from Start, so
// Mask[j] is token IDs[Start+j], the layout of a rollout's completion mask
// (1 = sampled by the model, 0 = tool or template tokens).
type TrainSeq struct {
	IDs   []int32
	Start int // first scored token, ≥ 1 (e.g. the prompt length)
	// Mask, if not nil, has len(IDs)−Start entries; false leaves that token
	// out (its log-prob and entropy read 0 and it gets no gradient), e.g.
	// tool-response tokens inside a multi-turn completion.
	Mask []bool
}

// Scored is the number of tokens the sequence scores, len(IDs) − Start.
func (s TrainSeq) Scored() int { return len(s.IDs) - s.Start }

// Trainable runs training passes over a Model: forward with saved (or
// recomputable) activations, per-token log-probs and entropies, and a
// backward that accumulates (+=) gradients into the trainable parameters,
// either from a Loss the backend evaluates over per-token tensors
// (Accumulate) or from the caller's own d loss / d logp (Forward,
// Backward). If Backward or Accumulate fail midway (a cancelled context),
// the gradients hold part of the batch: call ZeroGrad. Not safe for
// concurrent use; while it trains, the Model must not run inference in
// other goroutines.
type Trainable struct {
	m    *Model
	be   kernels.Backend
	opts TrainOptions

	params []Param
	grads  []kernels.Buffer // every gradient allocGrad made, a Param's or not yet (Close frees them)
	lin    [][7]linGrad     // [L][q,k,v,o,gate,up,down]
	norms  []normGrad       // [L]
	dNorm  kernels.Buffer   // [C] final norm (Full)
	dEmbed kernels.Buffer   // [V, C] (Full)
	dHead  kernels.Buffer   // [V, C] untied lm_head (Full)
	zeros  kernels.Buffer   // zeroed, never written: ZeroGrad copies from it

	lmHeadT kernels.Mat         // [C, V] lm_head transposed (LoRA mode), see headT
	bT      [][7]kernels.Buffer // [L][proj] adapters' Bᵀ [R, Out] (Backend.Alloc), see refreshBT
	bTLen   [][7]int            // [L][proj] elements of bT in use
	// invariantMode: SetBatchInvariant took effect (see invariant).
	invariantMode bool

	ref *Model // frozen bf16 reference policy (Full mode with Reference)

	st      passState // training pass (Forward, Backward, Accumulate)
	inf     passState // LogProbs, so a pending Forward survives it
	pending bool      // a Forward awaits its Backward
}

// linGrad holds the gradients of one projection's trainable tensors, in
// the backend's memory (empty when not trained).
type linGrad struct {
	dW     kernels.Buffer // [Out, In] (Full)
	dA, dB kernels.Buffer // LoRA
}

// normGrad holds the gradients of one layer's norm weights (Full).
type normGrad struct {
	attn, mlp, q, k kernels.Buffer
}

// zeroChunk is the length of Trainable.zeros: ZeroGrad clears gradients
// in pieces of at most this many elements.
const zeroChunk = 1 << 16

// allocGrad returns a zeroed F32 gradient Buffer of n elements from the
// backend, for param name, and records it for Close (so that one made
// before NewTrainable failed is given back too).
func (tr *Trainable) allocGrad(name string, n int) (kernels.Buffer, error) {
	g, err := tr.be.Alloc(kernels.F32, n)
	if err != nil {
		return kernels.Buffer{}, fmt.Errorf("train: gradient of %s: %w", name, err)
	}
	tr.grads = append(tr.grads, g)
	return g, nil
}

// NewTrainable prepares m for training. With opts.Full every weight is
// copied to a float32 master (memory-mapped or bf16 weights are never
// written) that replaces it in m; otherwise the attached adapters (which
// AttachLoRA and LoadAdapter allocate) are the parameters, and the
// Trainable keeps one transposed copy of the frozen lm_head for a faster
// backward. Each parameter's Data is the Model's import of the weight,
// updated in place in the backend's memory (see Param and
// Model.DownloadParams). Make one Trainable per Model, after attaching
// adapters; Close it when done.
func NewTrainable(m *Model, opts TrainOptions) (*Trainable, error) {
	if opts.LogitsChunk < 0 {
		return nil, fmt.Errorf("train: logits chunk %d < 0", opts.LogitsChunk)
	}
	if opts.LogitsChunk == 0 {
		opts.LogitsChunk = 128
	}
	if t := float64(opts.Temperature); t < 0 || math.IsNaN(t) || math.IsInf(t, 0) {
		return nil, fmt.Errorf("train: temperature %v: must be finite and ≥ 0", opts.Temperature)
	}
	if opts.Temperature == 0 {
		opts.Temperature = 1
	}
	if m.Backend == nil {
		return nil, errors.New("train: model has no backend")
	}
	// The host weights must be current: Full mode copies them into its
	// masters and its reference, and an earlier Trainable may have trained
	// them on the backend.
	if err := m.DownloadParams(); err != nil {
		return nil, fmt.Errorf("train: %w", err)
	}
	tr := &Trainable{m: m, be: m.Backend, opts: opts, lin: make([][7]linGrad, len(m.Layers)), bT: make([][7]kernels.Buffer, len(m.Layers)), bTLen: make([][7]int, len(m.Layers))}
	z, err := tr.be.Alloc(kernels.F32, zeroChunk)
	if err != nil {
		return nil, fmt.Errorf("train: zero buffer: %w", err)
	}
	tr.zeros = z
	if opts.Full {
		err = tr.initFull()
	} else {
		err = tr.initLoRA()
	}
	if err != nil {
		tr.Close() // the gradients allocated so far
		return nil, err
	}
	return tr, nil
}

func (tr *Trainable) initLoRA() error {
	for li := range tr.m.Layers {
		for j, nl := range tr.m.Layers[li].Linears() {
			a := nl.Linear.LoRA
			if a == nil {
				continue
			}
			in, out := nl.Linear.In(), nl.Linear.Out()
			if a.R <= 0 || len(a.A) != a.R*in || len(a.B) != out*a.R {
				return fmt.Errorf("train: layer %d %s: LoRA r=%d does not fit A %d, B %d for W [%d,%d]", li, nl.Name, a.R, len(a.A), len(a.B), out, in)
			}
			g := &tr.lin[li][j]
			nA, nB := peftName(li, loraTargets[j], "A"), peftName(li, loraTargets[j], "B")
			var err error
			if g.dA, err = tr.allocGrad(nA, len(a.A)); err != nil {
				return err
			}
			if g.dB, err = tr.allocGrad(nB, len(a.B)); err != nil {
				return err
			}
			aH, bH, _ := loraHost(nl.Linear)
			dA, err := tr.m.paramBuf(aH)
			if err != nil {
				return fmt.Errorf("train: %s: %w", nA, err)
			}
			dB, err := tr.m.paramBuf(bH)
			if err != nil {
				return fmt.Errorf("train: %s: %w", nB, err)
			}
			tr.params = append(tr.params,
				Param{Name: nA, Data: dA, Grad: g.dA, Decay: true},
				Param{Name: nB, Data: dB, Grad: g.dB, Decay: true})
		}
	}
	if len(tr.params) == 0 {
		return errors.New("train: the model has no LoRA adapters and Full is not set: nothing to train")
	}
	return nil
}

// masterF32 replaces w with a float32 copy and returns it.
func masterF32(w *kernels.Mat) []float32 {
	data := make([]float32, w.Len())
	for i := range w.Rows {
		w.Row(data[i*w.Cols:(i+1)*w.Cols], i)
	}
	*w = kernels.MatF32(data, w.Rows, w.Cols)
	return data
}

// addParam makes the host weight host (just made by initFull) a trained
// parameter named name: its import is Param.Data (see Model.paramBuf).
func (tr *Trainable) addParam(name string, host []float32, grad kernels.Buffer, decay bool) error {
	d, err := tr.m.paramBuf(kernels.HostF32(host))
	if err != nil {
		return fmt.Errorf("train: %s: %w", name, err)
	}
	tr.params = append(tr.params, Param{Name: name, Data: d, Grad: grad, Decay: decay})
	return nil
}

func (tr *Trainable) initFull() error {
	m := tr.m
	var err error
	// Each trained weight replaces the one the model had, whose import is
	// given back (the reference policy imports what it shares on its own).
	norm := func(name string, w *[]float32) kernels.Buffer {
		g, e := tr.allocGrad(name, len(*w))
		if e != nil {
			err = cmp.Or(err, e)
			return kernels.Buffer{}
		}
		m.forget(kernels.HostF32(*w))
		*w = slices.Clone(*w)
		err = cmp.Or(err, tr.addParam(name, *w, g, false))
		return g
	}
	mat := func(name string, w *kernels.Mat) kernels.Buffer {
		g, e := tr.allocGrad(name, w.Len())
		if e != nil {
			err = cmp.Or(err, e)
			return kernels.Buffer{}
		}
		m.forget(w.Data)
		err = cmp.Or(err, tr.addParam(name, masterF32(w), g, true))
		return g
	}
	// Refuse adapters before converting anything, so an error leaves the
	// model as it was.
	for li := range m.Layers {
		for _, nl := range m.Layers[li].Linears() {
			if nl.Linear.LoRA != nil {
				return fmt.Errorf("train: Full with a LoRA adapter on layer %d %s: merge or detach adapters first", li, nl.Name)
			}
		}
	}
	if tr.opts.Reference {
		tr.ref = frozenBF16(m)
	}
	tr.dEmbed = mat("model.embed_tokens.weight", &m.Embed)
	if m.Config.TieWordEmbeddings {
		m.LMHead = m.Embed
	} else {
		tr.dHead = mat("lm_head.weight", &m.LMHead)
	}
	tr.norms = make([]normGrad, len(m.Layers))
	for li := range m.Layers {
		l := &m.Layers[li]
		p := fmt.Sprintf("model.layers.%d.", li)
		for j, nl := range l.Linears() {
			tr.lin[li][j].dW = mat(p+nl.Name+".weight", &nl.Linear.W)
		}
		ng := &tr.norms[li]
		ng.attn = norm(p+"input_layernorm.weight", &l.AttnNorm)
		ng.q = norm(p+"self_attn.q_norm.weight", &l.Attn.QNorm)
		ng.k = norm(p+"self_attn.k_norm.weight", &l.Attn.KNorm)
		ng.mlp = norm(p+"post_attention_layernorm.weight", &l.MLPNorm)
	}
	tr.dNorm = norm("model.norm.weight", &m.Norm)
	m.DType = kernels.F32
	return err
}

// Release gives the Trainable's backend scratch back (Backend.Free): the
// activations and their gradients of both passes, the logits chunk, the
// adapters' Bᵀ and lm_head's transposed copy. A later pass allocates them
// again; a pending Forward is dropped. The parameters stay.
func (tr *Trainable) Release() {
	be := tr.be
	tr.st.release(be)
	tr.inf.release(be)
	for li := range tr.bT {
		for j := range tr.bT[li] {
			free(be, &tr.bT[li][j])
			tr.bTLen[li][j] = 0
		}
	}
	if tr.lmHeadT.Rows > 0 {
		free(be, &tr.lmHeadT.Data)
		tr.lmHeadT = kernels.Mat{}
	}
	tr.pending = false
}

// Close gives back everything the Trainable holds in the backend's
// memory: Release's scratch, the gradients, the zeroed buffer ZeroGrad
// copies from, and in Full mode the reference policy's imports. The
// parameters' values are the Model's (its imports of the trained weights)
// and stay with it until Model.Close. The Trainable must not be used
// afterwards.
func (tr *Trainable) Close() {
	be := tr.be
	tr.Release()
	for i := range tr.grads {
		free(be, &tr.grads[i])
	}
	tr.grads = nil
	for i := range tr.params {
		tr.params[i].Grad = kernels.Buffer{}
	}
	for li := range tr.lin {
		tr.lin[li] = [7]linGrad{}
	}
	tr.norms = nil
	tr.dNorm, tr.dEmbed, tr.dHead = kernels.Buffer{}, kernels.Buffer{}, kernels.Buffer{}
	free(be, &tr.zeros)
	if tr.ref != nil {
		_ = tr.ref.Close() // built in memory: nothing to unmap, so no error
		tr.ref = nil
	}
}

// Params are the trainable tensors with their gradients, in a fixed order
// (PEFT names for adapters, Hugging Face names in Full mode); hand them to
// NewAdamW.
func (tr *Trainable) Params() []Param { return tr.params }

// Model is the model being trained.
func (tr *Trainable) Model() *Model { return tr.m }

// ZeroGrad sets every gradient to zero (Copy from a zeroed Buffer, so
// nothing crosses to the host).
func (tr *Trainable) ZeroGrad() {
	for _, p := range tr.params {
		for lo := 0; lo < p.Grad.Len(); lo += zeroChunk {
			hi := min(lo+zeroChunk, p.Grad.Len())
			tr.be.Copy(p.Grad.Slice(lo, hi), tr.zeros.Slice(0, hi-lo))
		}
	}
}

// LogProbs returns the per-token log-probs and entropies of the scored
// tokens without keeping anything for a backward pass, with the adapters
// on or off (off gives the reference policy of a LoRA run), in groups of
// at most MicroBatchTokens tokens. It does not disturb a pending Forward.
func (tr *Trainable) LogProbs(ctx context.Context, seqs []TrainSeq, adapters bool) (logp, entropy [][]float32, err error) {
	if err := tr.checkBatch(seqs); err != nil {
		return nil, nil, err
	}
	for _, g := range tr.groups(seqs) {
		if err := tr.prepare(&tr.inf, seqs[g[0]:g[1]]); err != nil {
			return nil, nil, err
		}
		if err := tr.forward(ctx, &tr.inf, adapters, false); err != nil {
			return nil, nil, err
		}
		if err := tr.logits(ctx, &tr.inf, nil, true); err != nil {
			return nil, nil, err
		}
		logp, entropy = append(logp, tr.inf.logp...), append(entropy, tr.inf.ent...)
	}
	return logp, entropy, nil
}

// groups splits seqs into runs of whole sequences of at most
// MicroBatchTokens tokens (a longer sequence runs alone).
func (tr *Trainable) groups(seqs []TrainSeq) [][2]int {
	limit := tr.opts.MicroBatchTokens
	if limit <= 0 {
		return [][2]int{{0, len(seqs)}}
	}
	var out [][2]int
	start, n := 0, 0
	for i, s := range seqs {
		if i > start && n+len(s.IDs) > limit {
			out = append(out, [2]int{start, i})
			start, n = i, 0
		}
		n += len(s.IDs)
	}
	return append(out, [2]int{start, len(seqs)})
}

// checkBatch validates a whole batch before any group runs, so a bad
// sequence late in the batch leaves no gradient half-accumulated.
func (tr *Trainable) checkBatch(seqs []TrainSeq) error {
	var st passState
	return tr.prepare(&st, seqs)
}

// Forward runs the model over seqs with adapters on, keeping what Backward
// needs, and returns the scored tokens' log-probs and entropies (indexed
// [seq][i], i counted from Start). The slices are valid until the next
// Forward, Accumulate or Backward.
func (tr *Trainable) Forward(ctx context.Context, seqs []TrainSeq) (logp, entropy [][]float32, err error) {
	tr.pending = false
	if err := tr.prepare(&tr.st, seqs); err != nil {
		return nil, nil, err
	}
	if err := tr.forward(ctx, &tr.st, true, true); err != nil {
		return nil, nil, err
	}
	if err := tr.logits(ctx, &tr.st, nil, true); err != nil {
		return nil, nil, err
	}
	tr.pending = true
	return tr.st.logp, tr.st.ent, nil
}

// Backward takes dlogp[seq][i] = d loss / d logp for every scored token of
// the last Forward and accumulates the gradients of all trainable
// parameters. Masked tokens' weights are ignored. It recomputes the logits
// chunk by chunk (they are never stored). Accumulate, which evaluates a
// Loss on the backend, is the usual way to train; Backward is for losses
// the backend does not know.
func (tr *Trainable) Backward(ctx context.Context, dlogp [][]float32) error {
	if !tr.pending {
		return errors.New("train: Backward without a pending Forward")
	}
	st := &tr.st
	if len(dlogp) != len(st.seqs) {
		return fmt.Errorf("train: Backward got weights for %d sequences, Forward had %d", len(dlogp), len(st.seqs))
	}
	for s, w := range dlogp {
		if len(w) != st.seqs[s].Scored() {
			return fmt.Errorf("train: Backward: sequence %d has %d weights, want %d", s, len(w), st.seqs[s].Scored())
		}
	}
	tr.pending = false
	// The weights go up in one Upload, in the order of the scored rows.
	st.hostOut = st.hostOut[:0]
	for _, r := range st.rows {
		st.hostOut = append(st.hostOut, dlogp[r.seq][r.i])
	}
	dl := st.outSlot(outDLogP)
	if dl.Len() > 0 {
		if err := tr.be.Upload(dl, kernels.HostF32(st.hostOut)); err != nil {
			return fmt.Errorf("train: Backward: uploading weights: %w", err)
		}
	}
	grad := func(r0, n int) (kernels.Buffer, kernels.Buffer) {
		return dl.Slice(r0, r0+n), kernels.Buffer{}
	}
	if err := tr.logits(ctx, st, grad, false); err != nil {
		return err
	}
	return tr.backward(ctx, st)
}

// Accumulate runs the batch forward, evaluates loss on the backend over
// per-token tensors (kernels.Backend.PolicyLoss), and accumulates (+=) the
// gradient of the total loss, entropy term included, into the trainable
// parameters. Per-token objectives are evaluated chunk by chunk as the
// log-probs come out of the lm_head, so the logits are computed once;
// sequence-level ratios and VESPO need a sequence's every log-prob first,
// so the logits are computed twice. With MicroBatchTokens set the batch
// runs in groups of whole sequences whose gradients add up. In Full mode
// a loss with Beta > 0 needs TrainOptions.Reference.
func (tr *Trainable) Accumulate(ctx context.Context, seqs []TrainSeq, loss Loss) (LossResult, error) {
	tr.pending = false
	if err := tr.checkBatch(seqs); err != nil {
		return LossResult{}, err
	}
	if err := loss.check(seqs); err != nil {
		return LossResult{}, err
	}
	if loss.Beta != 0 && tr.opts.Full && tr.ref == nil {
		return LossResult{}, errors.New("train: a KL term (Beta > 0) in Full mode needs a reference policy: set TrainOptions.Reference to keep a frozen bf16 copy of the initial weights")
	}
	lt := newLossTensors(seqs, &loss)
	st := &tr.st
	base := 0
	for _, g := range tr.groups(seqs) {
		if err := tr.prepare(st, seqs[g[0]:g[1]]); err != nil {
			return LossResult{}, err
		}
		if err := tr.forward(ctx, st, true, true); err != nil {
			return LossResult{}, err
		}
		n := len(st.rows)
		in, out, err := lt.upload(tr.be, st, base, g)
		if err != nil {
			return LossResult{}, err
		}
		dent := func(r0, k int) kernels.Buffer {
			if loss.EntropyCoef == 0 {
				return kernels.Buffer{}
			}
			return out.DEntropy.Slice(r0, r0+k)
		}
		if loss.NeedsSegments() {
			// Every log-prob of the group first, then the loss over whole
			// sequences, then the gradient with the logits recomputed.
			if err := tr.logits(ctx, st, nil, false); err != nil {
				return LossResult{}, err
			}
			tr.be.PolicyLoss(out, in, loss.LossParams, n)
			grad := func(r0, k int) (kernels.Buffer, kernels.Buffer) {
				return out.DLogP.Slice(r0, r0+k), dent(r0, k)
			}
			if err := tr.logits(ctx, st, grad, false); err != nil {
				return LossResult{}, err
			}
		} else {
			grad := func(r0, k int) (kernels.Buffer, kernels.Buffer) {
				tr.be.PolicyLoss(sliceLossOutput(out, r0, r0+k), sliceLossInput(in, r0, r0+k), loss.LossParams, k)
				return out.DLogP.Slice(r0, r0+k), dent(r0, k)
			}
			if err := tr.logits(ctx, st, grad, false); err != nil {
				return LossResult{}, err
			}
		}
		if err := lt.download(tr.be, st, base); err != nil {
			return LossResult{}, err
		}
		if err := tr.backward(ctx, st); err != nil {
			return LossResult{}, err
		}
		base += n
	}
	return lt.result(seqs), nil
}

// RefLogProbs returns the reference policy's log-probs of the scored tokens
// ([seq][i], i from Start), at the training temperature: the base model
// with adapters off in LoRA mode, the frozen bf16 copy in Full mode with
// TrainOptions.Reference, and an error in Full mode without it.
func (tr *Trainable) RefLogProbs(ctx context.Context, seqs []TrainSeq) ([][]float32, error) {
	if !tr.opts.Full {
		logp, _, err := tr.LogProbs(ctx, seqs, false)
		return logp, err
	}
	if tr.ref == nil {
		return nil, errors.New("train: Full mode keeps no reference policy: set TrainOptions.Reference")
	}
	if err := tr.checkBatch(seqs); err != nil {
		return nil, err
	}
	scored := make([]Scored, len(seqs))
	for i, s := range seqs {
		scored[i] = Scored{Tokens: s.IDs, Start: s.Start, Mask: s.Mask}
	}
	res, err := tr.ref.LogProbs(ctx, scored, LogProbsOptions{Temperature: tr.opts.Temperature, StepTokens: tr.opts.MicroBatchTokens})
	if err != nil {
		return nil, fmt.Errorf("train: reference log-probs: %w", err)
	}
	out := make([][]float32, len(seqs))
	for i, s := range seqs {
		out[i] = res[i].LogProbs[s.Start:]
	}
	return out, nil
}
