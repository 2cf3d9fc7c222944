package model

import "github.com/x/kernels"

// Activation storage for the training pass. Without checkpointing every
// layer keeps its layerActs from Forward to Backward; with checkpointing
// only the layer inputs xs[l] are kept and one scratch layerActs is refilled
// by recomputing layer l's forward just before its backward. Both run the
// same ops on the same inputs in the same order, so gradients are
// bit-identical.

// layerActs is what one layer's backward needs from its forward.
type layerActs struct {
	xn   []float32    // [T, C] input_layernorm(x)
	q    []float32    // [T, H·D] q_proj output, before q_norm
	k    []float32    // [T, KVH·D] k_proj output, before k_norm
	v    []float32    // [T, KVH·D]
	qr   []float32    // [T, H·D] q after q_norm and RoPE
	kr   []float32    // [T, KVH·D] k after k_norm and RoPE
	att  []float32    // [T, H·D] attention output
	lse  []float32    // [T, H] attention log-sum-exp
	h    []float32    // [T, C] x + o_proj(att)
	hn   []float32    // [T, C] post_attention_layernorm(h)
	g    []float32    // [T, F] gate_proj
	u    []float32    // [T, F] up_proj
	act  []float32    // [T, F] silu(g)·u
	lora [7][]float32 // [T, R] scaling·x·Aᵀ of each adapted projection
}

// bufs sizes a's adapter buffers for t tokens of layer l of m and returns
// a's slices as host Buffers, for the shared layerForward.
func (a *layerActs) bufs(m *Model, l, t int) layerBufs {
	for j, nl := range m.Layers[l].Linears() {
		if r := nl.Linear.LoRA; r != nil {
			a.lora[j] = grow(a.lora[j], t*r.R)
		}
	}
	b := layerBufs{xn: kernels.HostF32(a.xn), q: kernels.HostF32(a.q), k: kernels.HostF32(a.k), v: kernels.HostF32(a.v),
		qr: kernels.HostF32(a.qr), kr: kernels.HostF32(a.kr), att: kernels.HostF32(a.att), lse: kernels.HostF32(a.lse),
		h: kernels.HostF32(a.h), hn: kernels.HostF32(a.hn), g: kernels.HostF32(a.g), u: kernels.HostF32(a.u), act: kernels.HostF32(a.act)}
	for j, u := range a.lora {
		b.lora[j] = kernels.HostF32(u)
	}
	return b
}

// fitActs sizes a for t tokens of m.
func fitActs(a *layerActs, m *Model, t int) {
	c := m.Config
	a.xn = grow(a.xn, t*c.HiddenSize)
	a.q = grow(a.q, t*c.QDim())
	a.k = grow(a.k, t*c.KVDim())
	a.v = grow(a.v, t*c.KVDim())
	a.qr = grow(a.qr, t*c.QDim())
	a.kr = grow(a.kr, t*c.KVDim())
	a.att = grow(a.att, t*c.QDim())
	a.lse = grow(a.lse, t*c.NumHeads)
	a.h = grow(a.h, t*c.HiddenSize)
	a.hn = grow(a.hn, t*c.HiddenSize)
	a.g = grow(a.g, t*c.IntermediateSize)
	a.u = grow(a.u, t*c.IntermediateSize)
	a.act = grow(a.act, t*c.IntermediateSize)
}

// layoutActs lays out st's activation buffers for a pass: keep says whether a
// backward will follow, checkpoint whether layers are recomputed.
func layoutActs(st *passState, m *Model, keep, checkpoint bool) {
	c := m.Config
	n := st.t * c.HiddenSize
	nx, na := 2, 1 // inference: ping-pong inputs, one scratch layer
	if keep {
		nx = c.NumLayers + 1
		if !checkpoint {
			na = c.NumLayers
		}
	}
	st.xs = grow(st.xs, nx)
	for i := range st.xs {
		st.xs[i] = grow(st.xs[i], n)
	}
	if len(st.acts) < na {
		st.acts = append(st.acts, make([]layerActs, na-len(st.acts))...)
	}
	st.acts = st.acts[:na]
	for i := range st.acts {
		fitActs(&st.acts[i], m, st.t)
	}
	st.checkpoint = keep && checkpoint
}

// layerIO returns the input buffer of layer l and where its output goes.
func (st *passState) layerIO(l int) (in, out []float32) {
	if len(st.xs) == 2 {
		return st.xs[l%2], st.xs[(l+1)%2]
	}
	return st.xs[l], st.xs[l+1]
}

// actsOf returns the buffers that hold layer l's activations.
func (st *passState) actsOf(l int) *layerActs {
	if len(st.acts) == 1 {
		return &st.acts[0]
	}
	return &st.acts[l]
}

// finalX is the residual stream after the last layer.
func (st *passState) finalX(layers int) []float32 {
	if len(st.xs) == 2 {
		return st.xs[layers%2]
	}
	return st.xs[layers]
}

// ActivationBytes is the memory the Trainable holds for activations and
// their gradients, in bytes (the buffers of the largest batch so far; they
// are reused across passes).
func (tr *Trainable) ActivationBytes() int64 {
	st := &tr.st
	n := 0
	add := func(bs ...[]float32) {
		for _, b := range bs {
			n += cap(b)
		}
	}
	add(st.xs...)
	for i := range st.acts {
		a := &st.acts[i]
		add(a.xn, a.q, a.k, a.v, a.qr, a.kr, a.att, a.lse, a.h, a.hn, a.g, a.u, a.act)
		add(a.lora[:]...)
	}
	g := &st.grads
	add(st.xf, st.dxf, st.cx, st.logits, st.dcx, g.dx, g.dh, g.dxn, g.dhn, g.dact, g.dg, g.du, g.datt, g.dq, g.dqp, g.dk, g.dv, g.dkp, g.dlora)
	return int64(n) * 4
}
