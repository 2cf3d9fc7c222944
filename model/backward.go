package model

import (
	"context"
	"fmt"

	"github.com/x/kernels"
)

// Backward pass, llm.c style: each op's backward is a kernels.Backend call
// in the reverse order of layerForward. Activation gradients are written
// (=) into per-pass scratch, parameter gradients accumulate (+=) into the
// Trainable's Params.

// gradBufs are the activation-gradient scratch buffers of one layer, in
// the backend's memory: views of t tokens over mem (Backend.Alloc, grown
// by fit).
type gradBufs struct {
	dx, dh, dxn, dhn kernels.Buffer // [T, C]
	dact, dg, du     kernels.Buffer // [T, F]
	datt, dq, dqp    kernels.Buffer // [T, H·D]
	dk, dv, dkp      kernels.Buffer // [T, KVH·D]
	dlora            kernels.Buffer // [T, R] the adapters' du (largest rank)
	dwC, dwD         kernels.Buffer // [C], [D] frozen norms' discarded weight gradients
	mem              [16]kernels.Buffer
}

// fitTo sizes g for t tokens of a model of config c whose largest adapter
// rank is r.
func (g *gradBufs) fitTo(be kernels.Backend, c Config, t, r int) error {
	C, QD, KVD, F := c.HiddenSize, c.QDim(), c.KVDim(), c.IntermediateSize
	views := [16]*kernels.Buffer{&g.dx, &g.dh, &g.dxn, &g.dhn, &g.dact, &g.dg, &g.du, &g.datt, &g.dq, &g.dqp, &g.dk, &g.dv, &g.dkp, &g.dwC, &g.dwD, &g.dlora}
	sizes := [16]int{t * C, t * C, t * C, t * C, t * F, t * F, t * F, t * QD, t * QD, t * QD, t * KVD, t * KVD, t * KVD, C, c.HeadDim, t * max(1, r)}
	for i, v := range views {
		buf, err := fit(be, &g.mem[i], kernels.F32, sizes[i])
		if err != nil {
			return fmt.Errorf("train backward: gradients: %w", err)
		}
		*v = buf
	}
	return nil
}

// release gives g's allocations back to be.
func (g *gradBufs) release(be kernels.Backend) {
	for i := range g.mem {
		free(be, &g.mem[i])
	}
	*g = gradBufs{}
}

// backward propagates st.dxf (d loss / d model.norm output) down to the
// embeddings, accumulating parameter gradients.
func (tr *Trainable) backward(ctx context.Context, st *passState) error {
	m, be := tr.m, tr.be
	c := m.Config
	g := &st.grads
	defer m.batchInvariant(tr.invariant())() // the checkpointed recompute's MatMuls
	if err := g.fitTo(be, c, st.t, m.maxRank()); err != nil {
		return err
	}
	if err := st.fitZeros(be, max(st.t*c.KVDim(), c.HiddenSize, c.HeadDim)); err != nil {
		return err
	}
	dNorm := tr.normGrad(st, tr.dNorm, g.dwC)
	be.RMSNormBackward(g.dx, dNorm, st.dxf, st.finalX(len(m.Layers)), m.devVec(m.Norm), st.t, c.HiddenSize, c.RMSNormEps)
	for l := len(m.Layers) - 1; l >= 0; l-- {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("train backward: %w", err)
		}
		x, _ := st.layerIO(l)
		a := st.actsOf(l)
		if st.checkpoint {
			if err := tr.layerForward(st, l, x, kernels.Buffer{}, a, kernels.Buffer{}, true); err != nil {
				return err
			}
		}
		tr.layerBackward(st, l, x, a)
	}
	if tr.dEmbed.Len() > 0 {
		be.EmbeddingBackward(tr.dEmbed, g.dx, st.idsBuf(), c.HiddenSize)
	}
	st.kv.release() // the pass's K/V blocks go back to the pool
	return nil
}

// normGrad returns the parameter gradient to accumulate into, or scratch
// cleared when the norm is frozen.
func (tr *Trainable) normGrad(st *passState, dw, scratch kernels.Buffer) kernels.Buffer {
	if dw.Len() > 0 {
		return dw
	}
	st.clear(tr.be, scratch)
	return scratch
}

// layerBackward maps g.dx = d loss / d (layer l output) to d loss / d x,
// given the layer's input x and activations a.
func (tr *Trainable) layerBackward(st *passState, l int, x kernels.Buffer, acts *layerActs) {
	be, m, c, L := tr.be, tr.m, tr.m.Config, &tr.m.Layers[l]
	g, lg, a := &st.grads, &tr.lin[l], &acts.b
	t, eps := st.t, c.RMSNormEps
	var ng normGrad
	if tr.norms != nil {
		ng = tr.norms[l]
	}

	// MLP: out = h + down(silu(gate(hn))·up(hn)), hn = norm(h)
	tr.linBackward(st, &L.MLP.Down, &lg[6], g.dact, g.dx, a.act, a.lora[6], false)
	be.SwiGLUBackward(g.dg, g.du, g.dact, a.g, a.u)
	tr.linBackward(st, &L.MLP.Gate, &lg[4], g.dhn, g.dg, a.hn, a.lora[4], false)
	tr.linBackward(st, &L.MLP.Up, &lg[5], g.dhn, g.du, a.hn, a.lora[5], true)
	be.RMSNormBackward(g.dh, tr.normGrad(st, ng.mlp, g.dwC), g.dhn, a.h, m.devVec(L.MLPNorm), t, c.HiddenSize, eps)
	be.Add(g.dh, g.dx)

	// Attention: h = x + o(attn(rope(qnorm(q(xn))), rope(knorm(k(xn))), v(xn)))
	tr.linBackward(st, &L.Attn.O, &lg[3], g.datt, g.dh, a.att, a.lora[3], false)
	st.clear(be, g.dk)
	st.clear(be, g.dv)
	if !st.checkpoint { // the blocks hold a later layer's K/V; the recompute wrote this one's
		n, kvd := st.t, c.KVDim()
		be.WriteKV(st.kv.paged(st.tables), st.lay, a.kr.Slice(0, n*kvd), a.v.Slice(0, n*kvd), c.NumKVHeads, c.HeadDim)
	}
	q, kv := c.QDim(), c.KVDim()
	be.AttentionBackward(kernels.AttentionGradBatch{AttentionBatch: st.attnBatch(a), DOut: g.datt.Slice(0, st.t*q),
		DQ: g.dq.Slice(0, st.t*q), DK: g.dk.Slice(0, st.t*kv), DV: g.dv.Slice(0, st.t*kv)}, c.NumHeads, c.NumKVHeads, c.HeadDim, headScale(c.HeadDim))
	be.RoPEBackward(g.dq, st.posBuf(), c.NumHeads, c.HeadDim, c.RopeTheta)
	be.RoPEBackward(g.dk, st.posBuf(), c.NumKVHeads, c.HeadDim, c.RopeTheta)
	be.RMSNormBackward(g.dqp, tr.normGrad(st, ng.q, g.dwD), g.dq, a.q, m.devVec(L.Attn.QNorm), t*c.NumHeads, c.HeadDim, eps)
	be.RMSNormBackward(g.dkp, tr.normGrad(st, ng.k, g.dwD), g.dk, a.k, m.devVec(L.Attn.KNorm), t*c.NumKVHeads, c.HeadDim, eps)
	tr.linBackward(st, &L.Attn.Q, &lg[0], g.dxn, g.dqp, a.xn, a.lora[0], false)
	tr.linBackward(st, &L.Attn.K, &lg[1], g.dxn, g.dkp, a.xn, a.lora[1], true)
	tr.linBackward(st, &L.Attn.V, &lg[2], g.dxn, g.dv, a.xn, a.lora[2], true)
	be.RMSNormBackward(g.dx, tr.normGrad(st, ng.attn, g.dwC), g.dxn, x, m.devVec(L.AttnNorm), t, c.HiddenSize, eps)
	be.Add(g.dx, g.dh)
}

// linBackward is the backward of linForward: dx[M, In] (= or +=) from
// dy[M, Out], and the trainable gradients: dW += dyᵀ·x (Full), and for an
// adapter with u = scaling·x·Aᵀ: dB += dyᵀ·u, du = scaling·dy·B,
// dA += duᵀ·x, dx += du·A.
func (tr *Trainable) linBackward(st *passState, lin *Linear, lg *linGrad, dx, dy, x, u kernels.Buffer, accumulate bool) {
	be, m := tr.be, st.t
	be.MatMulNN(dx, dy, tr.m.devMat(lin.W), m, accumulate)
	if lg.dW.Len() > 0 {
		be.MatMulTN(lg.dW, dy, x, m, lin.Out(), lin.In())
	}
	a := lin.LoRA
	if a == nil {
		return
	}
	if lg.dB.Len() > 0 {
		be.MatMulTN(lg.dB, dy, u, m, lin.Out(), a.R)
	}
	aW, bW := tr.m.loraDev(lin) // the values AdamW updates (Param.Data)
	du := st.grads.dlora.Slice(0, m*a.R)
	be.MatMulNN(du, dy, bW, m, false)
	be.Scale(du, a.Scaling)
	if lg.dA.Len() > 0 {
		be.MatMulTN(lg.dA, du, x, m, a.R, lin.In())
	}
	be.MatMulNN(dx, du, aW, m, true)
}
