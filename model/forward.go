package model

import (
	"fmt"

	"github.com/x/kernels"
)

// Runner runs batched forwards of one Model and owns their scratch
// buffers, which only grow, so a decode loop allocates nothing once the
// largest batch has been seen. A Runner is used by one goroutine at a time;
// several Runners may share a Model but must not run at once (see Model).
type Runner struct {
	m *Model
	// NoAdapters runs the base model, ignoring attached LoRA adapters (the
	// reference policy of a KL penalty is the same Model with this set).
	NoAdapters bool

	x     []float32 // [N, C] residual stream (each layer's input and output)
	acts  layerActs // one layer's activations, aliased (see ensure)
	out   []float32 // [N, C] final normed hidden states
	ids   []int32   // [N]
	pos   []int32   // [N]
	aseqs []kernels.AttentionSeq
	lg    []float32 // [rows, V] logits chunk

	// The call in progress, for attend.
	caches []*KVCache
	tokens [][]int32
}

// NewRunner returns a Runner for m.
func (m *Model) NewRunner() *Runner { return &Runner{m: m} }

// Model is the model r runs.
func (r *Runner) Model() *Model { return r.m }

// ensure sizes every scratch buffer for n tokens and b sequences. The
// layer's activations alias where the shared layerForward allows: the
// normed inputs of attention and MLP share one buffer (xn is dead once q,
// k, v exist), q and k are normed and rotated in place, and SwiGLU writes
// over the gate; a layer's output overwrites its input x.
func (r *Runner) ensure(n, b int) {
	c := r.m.Config
	a := &r.acts
	r.x = grow(r.x, n*c.HiddenSize)
	r.out = grow(r.out, n*c.HiddenSize)
	a.xn = grow(a.xn, n*c.HiddenSize)
	a.h = grow(a.h, n*c.HiddenSize)
	a.q = grow(a.q, n*c.QDim())
	a.att = grow(a.att, n*c.QDim())
	a.k = grow(a.k, n*c.KVDim())
	a.v = grow(a.v, n*c.KVDim())
	a.g = grow(a.g, n*c.IntermediateSize)
	a.u = grow(a.u, n*c.IntermediateSize)
	a.hn, a.qr, a.kr, a.act, a.lse = a.xn, a.q, a.k, a.g, nil
	r.ids = grow(r.ids, n)
	r.pos = grow(r.pos, n)
	r.aseqs = grow(r.aseqs, b)
}

// CheckTokens returns an error naming the first id outside [0, V).
func (m *Model) CheckTokens(ids []int32) error {
	for i, id := range ids {
		if id < 0 || int(id) >= m.Config.VocabSize {
			return fmt.Errorf("model: token %d at index %d is outside the vocabulary [0, %d)", id, i, m.Config.VocabSize)
		}
	}
	return nil
}

// Forward appends tokens[i] to the sequence cached in caches[i], for every
// i at once, at positions caches[i].Len, caches[i].Len+1, ..., and returns
// the final hidden states (after model.norm), [N, C] with N the total
// number of tokens, rows in batch order. The result is valid until the next
// call. Token ids must be valid (see CheckTokens); an empty tokens[i] is
// allowed and contributes no rows. It panics if a cache cannot take a
// block from a bounded pool (KVOptions.MaxBytes); TryForward returns that
// as an error instead.
func (r *Runner) Forward(caches []*KVCache, tokens [][]int32) []float32 {
	if len(caches) != len(tokens) {
		panic(fmt.Sprintf("model: Runner.Forward: %d caches for %d token lists", len(caches), len(tokens)))
	}
	if err := r.reserve(caches, tokens); err != nil {
		panic(fmt.Sprintf("model: Runner.Forward: %v", err))
	}
	return r.forward(caches, tokens)
}

// TryForward is Forward returning an error, before computing anything,
// when a token id is outside the vocabulary, a sequence would pass
// Config.MaxPositions, or a cache cannot get the blocks it needs.
func (r *Runner) TryForward(caches []*KVCache, tokens [][]int32) ([]float32, error) {
	if len(caches) != len(tokens) {
		return nil, fmt.Errorf("model: forward: %d caches for %d token lists", len(caches), len(tokens))
	}
	for i, t := range tokens {
		if err := r.m.checkFeed(caches[i], t); err != nil {
			return nil, fmt.Errorf("model: forward sequence %d: %w", i, err)
		}
	}
	if err := r.reserve(caches, tokens); err != nil {
		return nil, err
	}
	return r.forward(caches, tokens), nil
}

// checkFeed returns an error if tokens cannot be appended to c: an id
// outside the vocabulary or a sequence longer than Config.MaxPositions.
func (m *Model) checkFeed(c *KVCache, tokens []int32) error {
	if err := m.CheckTokens(tokens); err != nil {
		return err
	}
	if mp := m.Config.MaxPositions; mp > 0 && c.Len+len(tokens) > mp {
		return fmt.Errorf("model: sequence of %d positions is %w %d (max_position_embeddings)", c.Len+len(tokens), ErrContextLength, mp)
	}
	return nil
}

// reserve makes every cache writable for its new tokens.
func (r *Runner) reserve(caches []*KVCache, tokens [][]int32) error {
	pool := r.m.kvPool()
	for i, t := range tokens {
		if err := caches[i].reserve(r.m.Backend, pool, caches[i].Len+len(t)); err != nil {
			return fmt.Errorf("sequence %d: %w", i, err)
		}
	}
	return nil
}

// forward is Forward on caches already reserved for the tokens.
func (r *Runner) forward(caches []*KVCache, tokens [][]int32) []float32 {
	m, cfg, b := r.m, r.m.Config, r.m.Backend
	n := 0
	for _, t := range tokens {
		n += len(t)
	}
	r.ensure(n, len(caches))
	if n == 0 {
		return r.out[:0]
	}
	C := cfg.HiddenSize
	at := 0
	for i, t := range tokens {
		c := caches[i]
		copy(r.ids[at:], t)
		for j := range t {
			r.pos[at+j] = int32(c.Len + j)
		}
		at += len(t)
	}
	r.caches, r.tokens = caches, tokens
	x := r.x[:n*C]
	b.Embedding(kernels.HostF32(x), m.Embed, kernels.HostI32(r.ids))
	for li := range m.Layers {
		layerForward(b, m, li, x, x, r.pos[:n], n, &r.acts, !r.NoAdapters, nil, r)
	}
	r.caches, r.tokens = nil, nil
	for i, t := range tokens {
		caches[i].Len += len(t)
	}
	out := r.out[:n*C]
	b.RMSNorm(kernels.HostF32(out), kernels.HostF32(x), kernels.HostF32(m.Norm), n, C, cfg.RMSNormEps)
	return out
}

// attend writes this layer's keys and values into each sequence's KV cache
// and returns the batch reading them back through the block tables.
func (r *Runner) attend(li int, a *layerActs) []kernels.AttentionSeq {
	QD, KVD := r.m.Config.QDim(), r.m.Config.KVDim()
	at := 0
	for i, t := range r.tokens {
		c := r.caches[i]
		T := len(t)
		if T > 0 {
			c.write(r.m.Backend, li, a.kr[at*KVD:(at+T)*KVD], a.v[at*KVD:(at+T)*KVD], T)
		}
		r.aseqs[i] = kernels.AttentionSeq{
			Out:   kernels.HostF32(a.att[at*QD : (at+T)*QD]),
			Q:     kernels.HostF32(a.qr[at*QD : (at+T)*QD]),
			T:     T,
			Start: c.Len,
		}
		if c.st != nil {
			r.aseqs[i].Paged = c.paged(li)
		}
		at += T
	}
	return r.aseqs[:len(r.tokens)]
}

// Logits computes lm_head for rows hidden states, hidden [rows, C], and
// returns the logits [rows, V], valid until the next call.
func (r *Runner) Logits(hidden []float32, rows int) []float32 {
	v := r.m.Config.VocabSize
	r.lg = grow(r.lg, rows*v)
	r.m.Backend.MatMul(kernels.HostF32(r.lg), kernels.HostF32(hidden), r.m.LMHead, rows, false)
	return r.lg
}

// Logits runs tokens through a fresh cache and returns the logits of every
// position, [T, V]. It is the plain full-sequence forward, for checks and
// small inputs; Generate and LogProbs never build a [T, V] buffer for long
// batches.
func (m *Model) Logits(tokens []int32, opts Options) ([]float32, error) {
	if err := m.CheckTokens(tokens); err != nil {
		return nil, err
	}
	r := m.NewRunner()
	r.NoAdapters = opts.NoAdapters
	var c KVCache
	defer c.Release()
	h, err := r.TryForward([]*KVCache{&c}, [][]int32{tokens})
	if err != nil {
		return nil, fmt.Errorf("model: logits: %w", err)
	}
	out := make([]float32, len(tokens)*m.Config.VocabSize)
	copy(out, r.Logits(h, len(tokens)))
	return out, nil
}

// Options are the per-call switches shared by the forward entry points.
type Options struct {
	// NoAdapters ignores attached LoRA adapters for the call.
	NoAdapters bool
}
