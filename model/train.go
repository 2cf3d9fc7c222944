package model

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/x/kernels"
)

// TrainOptions configure a Trainable.
type TrainOptions struct {
	// Full trains every weight (embeddings, norms, projections, lm_head) on
	// float32 master copies; the model must carry no adapters. Otherwise
	// only the attached LoRA adapters train and the base stays frozen.
	Full bool
	// Checkpoint keeps only each layer's input during Forward and recomputes
	// the layer's activations in Backward (activation checkpointing): memory
	// per token drops from every activation of every layer to one hidden
	// vector per layer, for about one more forward of compute.
	Checkpoint bool
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
	// with the sampling temperature; 0 means 1.
	Temperature float32
}

// TrainSeq is one token sequence of a training batch and which of its
// tokens are scored: token IDs[i], i ≥ Start, by the log-probability the
// model gives it after IDs[:i].
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

// WeightFunc gives d loss / d logp for token i (counted from Start) of
// sequence seq, given that token's log-prob and entropy; Accumulate calls
// it once per scored token as soon as the token's log-prob is known.
type WeightFunc func(seq, i int, logp, entropy float32) float32

// Weights is the WeightFunc of fixed per-token weights w[seq][i].
func Weights(w [][]float32) WeightFunc {
	return func(seq, i int, _, _ float32) float32 { return w[seq][i] }
}

// Trainable runs training passes over a Model: forward with saved (or
// recomputable) activations, per-token log-probs and entropies, and a
// backward from per-token loss weights that accumulates (+=) gradients into
// the trainable parameters. It is loss-agnostic: the caller turns log-probs
// into d loss / d logp. If Backward or Accumulate fail midway (a cancelled
// context), the gradients hold part of the batch: call ZeroGrad. Not safe
// for concurrent use; while it trains, the Model must not run inference in
// other goroutines.
type Trainable struct {
	m    *Model
	be   kernels.Backend
	opts TrainOptions

	params []Param
	lin    [][7]linGrad // [L][q,k,v,o,gate,up,down]
	norms  []normGrad   // [L]
	dNorm  []float32    // [C] final norm (Full)
	dEmbed []float32    // [V, C] (Full)
	dHead  []float32    // [V, C] untied lm_head (Full)

	lmHeadT kernels.Mat    // [C, V] lm_head transposed (LoRA mode), see headT
	bT      [][7][]float32 // [L][proj] adapters' Bᵀ [R, Out], see refreshBT

	st      passState // training pass (Forward, Backward, Accumulate)
	inf     passState // LogProbs, so a pending Forward survives it
	pending bool      // a Forward awaits its Backward
}

// linGrad holds the gradients of one projection's trainable tensors.
type linGrad struct {
	dW     []float32 // [Out, In] (Full)
	dA, dB []float32 // LoRA
}

// normGrad holds the gradients of one layer's norm weights (Full).
type normGrad struct {
	attn, mlp, q, k []float32
}

// NewTrainable prepares m for training. With opts.Full every weight is
// copied to a float32 master (memory-mapped or bf16 weights are never
// written) that replaces it in m; otherwise the attached adapters (which
// AttachLoRA and LoadAdapter allocate) are the parameters, updated in
// place, and the Trainable keeps one transposed copy of the frozen lm_head
// for a faster backward. Make one Trainable per Model, after attaching
// adapters.
func NewTrainable(m *Model, opts TrainOptions) (*Trainable, error) {
	if opts.LogitsChunk < 0 {
		return nil, fmt.Errorf("train: logits chunk %d < 0", opts.LogitsChunk)
	}
	if opts.LogitsChunk == 0 {
		opts.LogitsChunk = 128
	}
	if opts.Temperature < 0 {
		return nil, fmt.Errorf("train: temperature %v < 0", opts.Temperature)
	}
	if opts.Temperature == 0 {
		opts.Temperature = 1
	}
	if m.Backend == nil {
		return nil, errors.New("train: model has no backend")
	}
	tr := &Trainable{m: m, be: m.Backend, opts: opts, lin: make([][7]linGrad, len(m.Layers)), bT: make([][7][]float32, len(m.Layers))}
	if opts.Full {
		if err := tr.initFull(); err != nil {
			return nil, err
		}
	} else if err := tr.initLoRA(); err != nil {
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
			g.dA, g.dB = make([]float32, len(a.A)), make([]float32, len(a.B))
			tr.params = append(tr.params,
				Param{Name: peftName(li, loraTargets[j], "A"), Data: a.A, Grad: g.dA, Decay: true},
				Param{Name: peftName(li, loraTargets[j], "B"), Data: a.B, Grad: g.dB, Decay: true})
		}
	}
	if len(tr.params) == 0 {
		return errors.New("train: the model has no LoRA adapters and Full is not set: nothing to train")
	}
	return nil
}

// masterF32 replaces w with a float32 copy and returns it with its gradient.
func masterF32(w *kernels.Mat) ([]float32, []float32) {
	data := make([]float32, w.Len())
	for i := range w.Rows {
		w.Row(data[i*w.Cols:(i+1)*w.Cols], i)
	}
	*w = kernels.MatF32(data, w.Rows, w.Cols)
	return data, make([]float32, len(data))
}

func (tr *Trainable) initFull() error {
	m := tr.m
	norm := func(name string, w *[]float32) []float32 {
		*w = slices.Clone(*w)
		g := make([]float32, len(*w))
		tr.params = append(tr.params, Param{Name: name, Data: *w, Grad: g})
		return g
	}
	mat := func(name string, w *kernels.Mat) []float32 {
		d, g := masterF32(w)
		tr.params = append(tr.params, Param{Name: name, Data: d, Grad: g, Decay: true})
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
	return nil
}

// Params are the trainable tensors with their gradients, in a fixed order
// (PEFT names for adapters, Hugging Face names in Full mode); hand them to
// NewAdamW.
func (tr *Trainable) Params() []Param { return tr.params }

// Model is the model being trained.
func (tr *Trainable) Model() *Model { return tr.m }

// ZeroGrad sets every gradient to zero.
func (tr *Trainable) ZeroGrad() {
	for _, p := range tr.params {
		clear(p.Grad)
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
		if err := tr.logits(ctx, &tr.inf, nil); err != nil {
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
	if err := tr.logits(ctx, &tr.st, nil); err != nil {
		return nil, nil, err
	}
	tr.pending = true
	return tr.st.logp, tr.st.ent, nil
}

// Backward takes dlogp[seq][i] = d loss / d logp for every scored token of
// the last Forward and accumulates the gradients of all trainable
// parameters. Masked tokens' weights are ignored. It recomputes the logits
// chunk by chunk (they are never stored).
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
	if err := tr.logits(ctx, st, Weights(dlogp)); err != nil {
		return err
	}
	return tr.backward(ctx, st)
}

// Accumulate is Forward then Backward in one pass, with the weight of each
// token given by w as soon as its log-prob is known, which saves Backward's
// recomputation of the logits. Use Weights for fixed weights (SFT, or GRPO
// on-policy where the ratio is 1). With MicroBatchTokens set the batch runs
// in groups whose gradients add up, so memory is bounded by the group.
func (tr *Trainable) Accumulate(ctx context.Context, seqs []TrainSeq, w WeightFunc) (logp, entropy [][]float32, err error) {
	tr.pending = false
	if err := tr.checkBatch(seqs); err != nil {
		return nil, nil, err
	}
	st := &tr.st
	for _, g := range tr.groups(seqs) {
		if err := tr.prepare(st, seqs[g[0]:g[1]]); err != nil {
			return nil, nil, err
		}
		if err := tr.forward(ctx, st, true, true); err != nil {
			return nil, nil, err
		}
		first := g[0]
		shifted := func(s, i int, lp, ent float32) float32 { return w(first+s, i, lp, ent) }
		if err := tr.logits(ctx, st, shifted); err != nil {
			return nil, nil, err
		}
		if err := tr.backward(ctx, st); err != nil {
			return nil, nil, err
		}
		logp, entropy = append(logp, st.logp...), append(entropy, st.ent...)
	}
	return logp, entropy, nil
}
