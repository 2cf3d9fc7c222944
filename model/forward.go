package model

import (
	"fmt"
	"math/bits"
	"slices"

	"github.com/x/kernels"
)

// Runner runs batched forwards of one Model and owns their scratch
// buffers, Buffers from the backend's Alloc that only grow, so a decode
// loop allocates nothing once the largest batch has been seen and a device
// backend keeps every activation in its memory. A Runner is used by one
// goroutine at a time; several Runners may share a Model but must not run
// at once (see Model).
type Runner struct {
	m *Model
	// NoAdapters runs the base model, ignoring attached LoRA adapters (the
	// reference policy of a KL penalty is the same Model with this set).
	NoAdapters bool

	x       kernels.Buffer    // [N, C] residual stream (each layer's input and output)
	acts    layerBufs         // one layer's activations, views of scratch (see ensure)
	scratch [9]kernels.Buffer // the allocations behind acts
	out     kernels.Buffer    // [N, C] final normed hidden states
	ipos    kernels.Buffer    // I32: pre, ids [N], positions [N], the layout's QStart [B+1], block tables [B, W] (one upload)
	hostIP  []int32           // host side of ipos
	upLay   []int32           // QStart and the tables as last uploaded (nil: unknown)
	upOff   int               // where upLay sits in ipos
	// pre are words the next forward uploads ahead of its ids, in the same
	// Upload (a Batch's sampling arguments, see sampler.pack; even length,
	// so what follows an even offset in it stays 8-byte aligned); preBuf is
	// their Buffer after the call.
	pre    []int32
	preBuf kernels.Buffer
	lg     kernels.Buffer // [rows, V] logits chunk
	hidden kernels.Buffer // [rows, C] Logits's upload of host hidden states
	host   []float32      // host copies for Forward and Logits on a device backend

	// The call in progress, for attend: its layout and block tables (views
	// of ipos) and the pool they index.
	lay    kernels.BatchLayout
	ids    kernels.Buffer
	tables kernels.Buffer
	tw     int
	pool   *kvPool
}

// NewRunner returns a Runner for m.
func (m *Model) NewRunner() *Runner { return &Runner{m: m} }

// Model is the model r runs.
func (r *Runner) Model() *Model { return r.m }

// Release returns the Runner's scratch memory to the backend
// (Backend.Free; the CPU backends leave it to the garbage collector, so
// there it may be skipped). Results the Runner returned are invalid
// afterwards; a later call allocates again.
func (r *Runner) Release() {
	bufs := []*kernels.Buffer{&r.x, &r.out, &r.ipos, &r.lg, &r.hidden}
	for i := range r.scratch {
		bufs = append(bufs, &r.scratch[i])
	}
	free(r.m.Backend, bufs...)
	r.acts = layerBufs{}
	r.upLay = nil
}

// free returns each non-empty *b to be (Backend.Free) and empties it.
func free(be kernels.Backend, bufs ...*kernels.Buffer) {
	for _, b := range bufs {
		if b.Len() > 0 {
			be.Free(*b)
		}
		*b = kernels.Buffer{}
	}
}

// fit makes *b an F32 or I32 (dt) Buffer from be's Alloc of at least n
// elements, reallocating (with a quarter of headroom, as grow) only when
// it is shorter, and returns its first n elements.
func fit(be kernels.Backend, b *kernels.Buffer, dt kernels.DType, n int) (kernels.Buffer, error) {
	if b.Len() < n || (b.Len() > 0 && b.DType() != dt) {
		nb, err := be.Alloc(dt, n+n/4)
		if err != nil {
			return kernels.Buffer{}, fmt.Errorf("allocating %v scratch of %d elements: %w", dt, n, err)
		}
		free(be, b)
		*b = nb
	}
	return b.Slice(0, n), nil
}

// maxRank is the largest rank of m's attached adapters (0 if none).
func (m *Model) maxRank() int {
	r := 0
	for li := range m.Layers {
		for _, nl := range m.Layers[li].Linears() {
			if a := nl.Linear.LoRA; a != nil {
				r = max(r, a.R)
			}
		}
	}
	return r
}

// ensure sizes every activation buffer for n tokens. The
// layer's activations alias where the shared layerForward allows: the
// normed inputs of attention and MLP share one buffer (xn is dead once q,
// k, v exist), q and k are normed and rotated in place, and SwiGLU writes
// over the gate; a layer's output overwrites its input x. The adapters'
// x·Aᵀ of the seven projections share one buffer (inference does not keep
// them).
func (r *Runner) ensure(n int) error {
	c, be := r.m.Config, r.m.Backend
	var err error
	f := func(dst *kernels.Buffer, dt kernels.DType, n int) kernels.Buffer {
		v, e := fit(be, dst, dt, n)
		if e != nil && err == nil {
			err = e
		}
		return v
	}
	C, QD, KVD, F := c.HiddenSize, c.QDim(), c.KVDim(), c.IntermediateSize
	f(&r.x, kernels.F32, n*C)
	f(&r.out, kernels.F32, n*C)
	sc := &r.scratch
	xn, h := f(&sc[0], kernels.F32, n*C), f(&sc[1], kernels.F32, n*C)
	q, att := f(&sc[2], kernels.F32, n*QD), f(&sc[3], kernels.F32, n*QD)
	k, v := f(&sc[4], kernels.F32, n*KVD), f(&sc[5], kernels.F32, n*KVD)
	g, u := f(&sc[6], kernels.F32, n*F), f(&sc[7], kernels.F32, n*F)
	lora := f(&sc[8], kernels.F32, n*max(1, r.m.maxRank()))
	if err != nil {
		return fmt.Errorf("model: forward: %w", err)
	}
	r.acts = layerBufs{xn: xn, q: q, k: k, v: v, qr: q, kr: k, att: att, h: h, hn: xn, g: g, u: u, act: g}
	for j := range r.acts.lora {
		r.acts.lora[j] = lora
	}
	return nil
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
// call; on a host backend it is the backend's buffer itself, on a device
// backend a Download of it. Token ids must be valid (see CheckTokens); an
// empty tokens[i] is allowed and contributes no rows. It panics if a cache
// cannot take a block from a bounded pool (KVOptions.MaxBytes) or the
// backend fails; TryForward returns that as an error instead.
func (r *Runner) Forward(caches []*KVCache, tokens [][]int32) []float32 {
	if len(caches) != len(tokens) {
		panic(fmt.Sprintf("model: Runner.Forward: %d caches for %d token lists", len(caches), len(tokens)))
	}
	if err := r.reserve(caches, tokens); err != nil {
		panic(fmt.Sprintf("model: Runner.Forward: %v", err))
	}
	h, err := r.forward(caches, tokens)
	if err == nil {
		var out []float32
		if out, err = r.toHost(h); err == nil {
			return out
		}
	}
	panic(fmt.Sprintf("model: Runner.Forward: %v", err))
}

// TryForward is Forward returning an error, before computing anything,
// when a token id is outside the vocabulary, a sequence would pass
// Config.MaxPositions, or a cache cannot get the blocks it needs, and
// returning the backend's failure as an error.
func (r *Runner) TryForward(caches []*KVCache, tokens [][]int32) ([]float32, error) {
	h, err := r.tryForward(caches, tokens)
	if err != nil {
		return nil, err
	}
	return r.toHost(h)
}

// tryForward is TryForward returning the hidden states in the backend's
// memory.
func (r *Runner) tryForward(caches []*KVCache, tokens [][]int32) (kernels.Buffer, error) {
	if len(caches) != len(tokens) {
		return kernels.Buffer{}, fmt.Errorf("model: forward: %d caches for %d token lists", len(caches), len(tokens))
	}
	for i, t := range tokens {
		if err := r.m.checkFeed(caches[i], t); err != nil {
			return kernels.Buffer{}, fmt.Errorf("model: forward sequence %d: %w", i, err)
		}
	}
	if err := r.reserve(caches, tokens); err != nil {
		return kernels.Buffer{}, err
	}
	return r.forward(caches, tokens)
}

// toHost returns the F32 Buffer b as host memory: b's own on a host
// backend, else a Download into the Runner's host scratch (valid until the
// next call).
func (r *Runner) toHost(b kernels.Buffer) ([]float32, error) {
	if b.Host() {
		return b.F32(), nil
	}
	r.host = grow(r.host, b.Len())
	if err := r.m.Backend.Download(kernels.HostF32(r.host), b); err != nil {
		return nil, fmt.Errorf("model: downloading %v: %w", b, err)
	}
	return r.host, nil
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

// forward is Forward on caches already reserved for the tokens, returning
// the hidden states [N, C] in the backend's memory. What crosses to the
// backend is one Upload (see upload).
func (r *Runner) forward(caches []*KVCache, tokens [][]int32) (kernels.Buffer, error) {
	n, err := r.prepare(caches, tokens)
	if err != nil || n == 0 {
		return r.out.Slice(0, 0), err
	}
	out := r.run(n)
	advance(caches, tokens)
	if err := r.m.Backend.Err(); err != nil {
		return kernels.Buffer{}, fmt.Errorf("model: forward: %w", err)
	}
	return out, nil
}

// prepare sizes the activations for the tokens and uploads the call's
// host data (see upload): everything of a forward but its ops, which run
// queues. It returns the number of tokens.
func (r *Runner) prepare(caches []*KVCache, tokens [][]int32) (int, error) {
	n := 0
	for _, t := range tokens {
		n += len(t)
	}
	if err := r.ensure(n); err != nil {
		return 0, err
	}
	if n == 0 {
		return 0, nil
	}
	return n, r.upload(caches, tokens, n)
}

// run queues the forward's ops over the n tokens that prepare uploaded and
// returns the hidden states [N, C]. It reads only what prepare left on the
// backend, so a backend can record it once and replay it (see
// Batch.graphStep).
func (r *Runner) run(n int) kernels.Buffer {
	m, cfg, b := r.m, r.m.Config, r.m.Backend
	C := cfg.HiddenSize
	x := r.x.Slice(0, n*C)
	b.Embedding(x, m.devMat(m.Embed), r.ids)
	var res kernels.Buffer // the previous layer's h, not yet added into x
	for li := range m.Layers {
		layerForward(b, m, li, x, res, x, r.lay.Pos, n, &r.acts, !r.NoAdapters, nil, r)
		res = r.acts.h
	}
	out := r.out.Slice(0, n*C)
	kernels.AddRMSNorm(b, out, x, res, m.devVec(m.Norm), n, C, cfg.RMSNormEps)
	return out
}

// advance moves each cache past the tokens a forward fed it.
func advance(caches []*KVCache, tokens [][]int32) {
	for i, t := range tokens {
		caches[i].Len += len(t)
	}
}

// upload puts r.pre, the step's token ids, their positions, the batch's
// layout (QStart) and the caches' block tables ([B, W], W the largest
// block count rounded up to a power of two, so it changes rarely) into
// r.ipos with one Upload, and sets r.preBuf, r.ids, r.lay, r.tables and
// r.tw to views of it. When the layout and tables are what the previous
// call uploaded at the same offset (a decode step that neither started a
// block nor changed the batch), only r.pre, the ids and the positions
// cross: the same elements as before the block tables moved to the
// backend.
func (r *Runner) upload(caches []*KVCache, tokens [][]int32, n int) error {
	b := len(caches)
	r.pool = r.m.kvPool()
	w, maxT := 1, 0
	for i, c := range caches {
		w, maxT = max(w, c.Blocks()), max(maxT, len(tokens[i]))
	}
	w = 1 << bits.Len(uint(w-1))
	h := append(r.hostIP[:0], r.pre...)
	p := len(h)
	for _, t := range tokens {
		h = append(h, t...)
	}
	for i, t := range tokens {
		for j := range t {
			h = append(h, int32(caches[i].Len+j))
		}
	}
	at := int32(0)
	for _, t := range tokens {
		h = append(h, at)
		at += int32(len(t))
	}
	h = append(h, at)
	for _, c := range caches {
		h = c.table(h, w)
	}
	r.hostIP = h
	total, lay := len(h), p+2*n
	if r.ipos.Len() < total || r.ipos.DType() != kernels.I32 {
		r.upLay = nil // a new allocation holds nothing yet
	}
	ip, err := fit(r.m.Backend, &r.ipos, kernels.I32, total)
	if err != nil {
		return fmt.Errorf("model: forward: %w", err)
	}
	up := total
	if r.upLay != nil && r.upOff == lay && slices.Equal(r.upLay, h[lay:]) {
		up = lay // the layout and tables on the backend are these
	}
	if err := r.m.Backend.Upload(ip.Slice(0, up), kernels.HostI32(h[:up])); err != nil {
		return fmt.Errorf("model: forward: uploading token ids: %w", err)
	}
	r.upLay, r.upOff = append(r.upLay[:0], h[lay:]...), lay
	r.preBuf, r.ids = ip.Slice(0, p), ip.Slice(p, p+n)
	r.lay = kernels.BatchLayout{QStart: ip.Slice(lay, lay+b+1), Pos: ip.Slice(p+n, lay), B: b, N: n, MaxT: maxT, MaxLen: w * r.pool.bs}
	r.tables, r.tw = ip.Slice(lay+b+1, total), w
	return nil
}

// attend writes this layer's keys (rotating them in place: RoPE fused into
// the write where the backend has it) and values into the caches' blocks,
// one WriteKV for the batch, and returns the batch reading them back
// through the block tables.
func (r *Runner) attend(li int, a *layerBufs) kernels.AttentionBatch {
	c, n := r.m.Config, r.lay.N
	QD, KVD := c.QDim(), c.KVDim()
	kv := r.pool.paged(li, r.tables, r.tw)
	kernels.WriteKVRoPE(r.m.Backend, kv, r.lay, a.kr.Slice(0, n*KVD), a.v.Slice(0, n*KVD), c.NumKVHeads, c.HeadDim, c.RopeTheta)
	return kernels.AttentionBatch{Layout: r.lay, Q: a.qr.Slice(0, n*QD), Out: a.att.Slice(0, n*QD), Paged: kv}
}

// Logits computes lm_head for rows hidden states, hidden [rows, C] on the
// host, and returns the logits [rows, V] on the host, valid until the next
// call: on a host backend the backend's buffer itself; on a device backend
// hidden is uploaded and the logits downloaded (Batch and LogProbs keep
// both on the backend; this is for checks and tools).
func (r *Runner) Logits(hidden []float32, rows int) []float32 {
	C := r.m.Config.HiddenSize
	h, err := fit(r.m.Backend, &r.hidden, kernels.F32, rows*C)
	if err == nil {
		err = r.m.Backend.Upload(h, kernels.HostF32(hidden[:rows*C]))
	}
	var lg kernels.Buffer
	if err == nil {
		lg, err = r.logits(h, rows)
	}
	var out []float32
	if err == nil {
		out, err = r.toHost(lg)
	}
	if err != nil {
		panic(fmt.Sprintf("model: Runner.Logits: %v", err))
	}
	return out
}

// logits is lm_head on rows hidden states in the backend's memory,
// returning the logits [rows, V] there (valid until the next call).
func (r *Runner) logits(hidden kernels.Buffer, rows int) (kernels.Buffer, error) {
	lg, err := fit(r.m.Backend, &r.lg, kernels.F32, rows*r.m.Config.VocabSize)
	if err != nil {
		return kernels.Buffer{}, fmt.Errorf("model: logits: %w", err)
	}
	r.m.Backend.MatMul(lg, hidden, r.m.devMat(r.m.LMHead), rows, false)
	return lg, nil
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
	defer r.Release()
	r.NoAdapters = opts.NoAdapters
	var c KVCache
	defer c.Release()
	h, err := r.tryForward([]*KVCache{&c}, [][]int32{tokens})
	var lg kernels.Buffer
	if err == nil {
		lg, err = r.logits(h, len(tokens))
	}
	out := make([]float32, len(tokens)*m.Config.VocabSize)
	if err == nil {
		err = m.Backend.Download(kernels.HostF32(out), lg)
	}
	if err != nil {
		return nil, fmt.Errorf("model: logits: %w", err)
	}
	return out, nil
}

// Options are the per-call switches shared by the forward entry points.
type Options struct {
	// NoAdapters ignores attached LoRA adapters for the call.
	NoAdapters bool
}
