package model

import (
	"fmt"

	"github.com/x/kernels"
)

// Activation storage for the training pass. Without checkpointing every
// layer keeps its layerActs from Forward to Backward; with checkpointing
// only the layer inputs xs[l] are kept and one scratch layerActs is refilled
// by recomputing layer l's forward just before its backward. Both run the
// same ops on the same inputs in the same order, so gradients are
// bit-identical.

// layerActs is what one layer's backward needs from its forward, in the
// backend's memory: b holds views of t tokens (the shared layerForward's
// layerBufs: xn = input_layernorm(x), q/k/v the projections before the
// q/k norms, qr/kr after the norms and RoPE, att the attention output,
// lse its log-sum-exp [T, H], h = x + o_proj(att), hn its norm, g/u the
// gate and up projections, act = silu(g)·u, lora[j] the scaled x·Aᵀ
// [T, R] of adapted projection j); mem holds the allocations behind them
// (Backend.Alloc, grown by fit).
type layerActs struct {
	b   layerBufs
	mem [13 + 7]kernels.Buffer
}

// fit sizes a's activations for t tokens of m (the adapters' x·Aᵀ are
// sized per layer by fitLoRA).
func (a *layerActs) fit(be kernels.Backend, m *Model, t int) error {
	c := m.Config
	C, QD, KVD, F, H := c.HiddenSize, c.QDim(), c.KVDim(), c.IntermediateSize, c.NumHeads
	b := &a.b
	views := [13]*kernels.Buffer{&b.xn, &b.q, &b.k, &b.v, &b.qr, &b.kr, &b.att, &b.lse, &b.h, &b.hn, &b.g, &b.u, &b.act}
	sizes := [13]int{C, QD, KVD, KVD, QD, KVD, QD, H, C, C, F, F, F}
	for i, v := range views {
		buf, err := fit(be, &a.mem[i], kernels.F32, t*sizes[i])
		if err != nil {
			return fmt.Errorf("train: activations: %w", err)
		}
		*v = buf
	}
	return nil
}

// fitLoRA sizes a's x·Aᵀ buffers for t tokens of layer l of m.
func (a *layerActs) fitLoRA(be kernels.Backend, m *Model, l, t int) error {
	for j, nl := range m.Layers[l].Linears() {
		a.b.lora[j] = kernels.Buffer{}
		if r := nl.Linear.LoRA; r != nil {
			buf, err := fit(be, &a.mem[13+j], kernels.F32, t*r.R)
			if err != nil {
				return fmt.Errorf("train: adapter activations: %w", err)
			}
			a.b.lora[j] = buf
		}
	}
	return nil
}

// release gives a's allocations back to be.
func (a *layerActs) release(be kernels.Backend) {
	for i := range a.mem {
		free(be, &a.mem[i])
	}
	a.b = layerBufs{}
}

// layoutActs lays out st's activation buffers for a pass in be's memory:
// keep says whether a backward will follow, checkpoint whether layers are
// recomputed.
func layoutActs(be kernels.Backend, st *passState, m *Model, keep, checkpoint bool) error {
	c := m.Config
	n := st.t * c.HiddenSize
	nx, na := 2, 1 // inference: ping-pong inputs, one scratch layer
	if keep {
		nx = c.NumLayers + 1
		if !checkpoint {
			na = c.NumLayers
		}
	}
	// Buffers beyond what this pass uses are given back, so a pass
	// without keep does not hold a previous pass's layers.
	for i := nx; i < len(st.xmem); i++ {
		free(be, &st.xmem[i])
	}
	st.xmem = grow(st.xmem, nx)
	st.xs = grow(st.xs, nx)
	for i := range st.xs {
		buf, err := fit(be, &st.xmem[i], kernels.F32, n)
		if err != nil {
			return fmt.Errorf("train: layer inputs: %w", err)
		}
		st.xs[i] = buf
	}
	for i := na; i < len(st.acts); i++ {
		st.acts[i].release(be)
	}
	if len(st.acts) < na {
		st.acts = append(st.acts, make([]layerActs, na-len(st.acts))...)
	}
	st.acts = st.acts[:na]
	for i := range st.acts {
		if err := st.acts[i].fit(be, m, st.t); err != nil {
			return err
		}
	}
	st.checkpoint = keep && checkpoint
	return nil
}

// layerIO returns the input buffer of layer l and where its output goes.
func (st *passState) layerIO(l int) (in, out kernels.Buffer) {
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
func (st *passState) finalX(layers int) kernels.Buffer {
	if len(st.xs) == 2 {
		return st.xs[layers%2]
	}
	return st.xs[layers]
}

// ActivationBytes is the memory the Trainable holds for activations and
// their gradients, in bytes (the buffers of the largest batch so far; they
// are reused across passes until Release), including the blocks that hold
// one layer's K/V for attention (see trainKV).
func (tr *Trainable) ActivationBytes() int64 {
	st := &tr.st
	n := 0
	add := func(bs ...kernels.Buffer) {
		for _, b := range bs {
			n += b.Len()
		}
	}
	add(st.xmem...)
	for i := range st.acts {
		add(st.acts[i].mem[:]...)
	}
	add(st.xfMem, st.dxfMem, st.cxMem, st.logitsMem, st.dcxMem, st.outMem)
	add(st.grads.mem[:]...)
	var kv int64
	if st.kv.pool != nil {
		kv = st.kv.pool.stats().Bytes
	}
	return int64(n)*4 + kv
}

// release gives every Buffer of st back to be.
func (st *passState) release(be kernels.Backend) {
	for i := range st.xmem {
		free(be, &st.xmem[i])
	}
	st.xmem, st.xs = st.xmem[:0], st.xs[:0]
	for i := range st.acts {
		st.acts[i].release(be)
	}
	st.acts = st.acts[:0]
	free(be, &st.xfMem, &st.dxfMem, &st.cxMem, &st.logitsMem, &st.dcxMem, &st.ipos, &st.zeros, &st.outMem, &st.lossIn, &st.segMem, &st.clipMem)
	st.grads.release(be)
	st.kv.free(be)
}
