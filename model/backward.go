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

// gradBufs are the activation-gradient scratch buffers of one layer.
type gradBufs struct {
	dx, dh, dxn, dhn []float32 // [T, C]
	dact, dg, du     []float32 // [T, F]
	datt, dq, dqp    []float32 // [T, H·D]
	dk, dv, dkp      []float32 // [T, KVH·D]
	dlora            []float32 // [T, R]
	dwC, dwD         []float32 // [C], [D] frozen norms' discarded weight gradients
}

func (g *gradBufs) fitTo(c Config, t int) {
	g.dx = grow(g.dx, t*c.HiddenSize)
	g.dh = grow(g.dh, t*c.HiddenSize)
	g.dxn = grow(g.dxn, t*c.HiddenSize)
	g.dhn = grow(g.dhn, t*c.HiddenSize)
	g.dact = grow(g.dact, t*c.IntermediateSize)
	g.dg = grow(g.dg, t*c.IntermediateSize)
	g.du = grow(g.du, t*c.IntermediateSize)
	g.datt = grow(g.datt, t*c.QDim())
	g.dq = grow(g.dq, t*c.QDim())
	g.dqp = grow(g.dqp, t*c.QDim())
	g.dk = grow(g.dk, t*c.KVDim())
	g.dv = grow(g.dv, t*c.KVDim())
	g.dkp = grow(g.dkp, t*c.KVDim())
	g.dwC = grow(g.dwC, c.HiddenSize)
	g.dwD = grow(g.dwD, c.HeadDim)
}

// backward propagates st.dxf (d loss / d model.norm output) down to the
// embeddings, accumulating parameter gradients.
func (tr *Trainable) backward(ctx context.Context, st *passState) error {
	m, be := tr.m, tr.be
	c := m.Config
	g := &st.grads
	g.fitTo(c, st.t)
	be.RMSNormBackward(kernels.HostF32(g.dx), kernels.HostF32(tr.normGrad(tr.dNorm, g.dwC)), kernels.HostF32(st.dxf), kernels.HostF32(st.finalX(len(m.Layers))), kernels.HostF32(m.Norm), st.t, c.HiddenSize, c.RMSNormEps)
	for l := len(m.Layers) - 1; l >= 0; l-- {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("train backward: %w", err)
		}
		x, _ := st.layerIO(l)
		a := st.actsOf(l)
		if st.checkpoint {
			tr.layerForward(st, l, x, a, nil, true)
		}
		tr.layerBackward(st, l, x, a)
	}
	if tr.dEmbed != nil {
		be.EmbeddingBackward(kernels.HostF32(tr.dEmbed), kernels.HostF32(g.dx), kernels.HostI32(st.ids), c.HiddenSize)
	}
	return nil
}

// normGrad returns the parameter gradient to accumulate into, or a cleared
// scratch buffer when the norm is frozen.
func (tr *Trainable) normGrad(dw, scratch []float32) []float32 {
	if dw != nil {
		return dw
	}
	clear(scratch)
	return scratch
}

// layerBackward maps g.dx = d loss / d (layer l output) to d loss / d x,
// given the layer's input x and activations a.
func (tr *Trainable) layerBackward(st *passState, l int, x []float32, a *layerActs) {
	be, c, L := tr.be, tr.m.Config, &tr.m.Layers[l]
	g, lg := &st.grads, &tr.lin[l]
	t, eps := st.t, c.RMSNormEps
	var ng normGrad
	if tr.norms != nil {
		ng = tr.norms[l]
	}

	// MLP: out = h + down(silu(gate(hn))·up(hn)), hn = norm(h)
	tr.linBackward(st, &L.MLP.Down, &lg[6], g.dact, g.dx, a.act, a.lora[6], false)
	be.SwiGLUBackward(kernels.HostF32(g.dg), kernels.HostF32(g.du), kernels.HostF32(g.dact), kernels.HostF32(a.g), kernels.HostF32(a.u))
	tr.linBackward(st, &L.MLP.Gate, &lg[4], g.dhn, g.dg, a.hn, a.lora[4], false)
	tr.linBackward(st, &L.MLP.Up, &lg[5], g.dhn, g.du, a.hn, a.lora[5], true)
	be.RMSNormBackward(kernels.HostF32(g.dh), kernels.HostF32(tr.normGrad(ng.mlp, g.dwC)), kernels.HostF32(g.dhn), kernels.HostF32(a.h), kernels.HostF32(L.MLPNorm), t, c.HiddenSize, eps)
	be.Add(kernels.HostF32(g.dh), kernels.HostF32(g.dx))

	// Attention: h = x + o(attn(rope(qnorm(q(xn))), rope(knorm(k(xn))), v(xn)))
	tr.linBackward(st, &L.Attn.O, &lg[3], g.datt, g.dh, a.att, a.lora[3], false)
	clear(g.dk)
	clear(g.dv)
	q, kv := c.QDim(), c.KVDim()
	st.attnGrad = st.attnGrad[:0]
	for s := range st.seqs {
		o0, o1 := st.off[s], st.off[s+1]
		st.attnGrad = append(st.attnGrad, kernels.AttentionGradSeq{
			DOut: kernels.HostF32(g.datt[o0*q : o1*q]), Q: kernels.HostF32(a.qr[o0*q : o1*q]),
			K: kernels.HostF32(a.kr[o0*kv : o1*kv]), V: kernels.HostF32(a.v[o0*kv : o1*kv]),
			Out: kernels.HostF32(a.att[o0*q : o1*q]), LSE: kernels.HostF32(a.lse[o0*c.NumHeads : o1*c.NumHeads]),
			DQ: kernels.HostF32(g.dq[o0*q : o1*q]), DK: kernels.HostF32(g.dk[o0*kv : o1*kv]), DV: kernels.HostF32(g.dv[o0*kv : o1*kv]),
			T: o1 - o0,
		})
	}
	be.AttentionBackward(st.attnGrad, c.NumHeads, c.NumKVHeads, c.HeadDim, headScale(c.HeadDim))
	be.RoPEBackward(kernels.HostF32(g.dq), kernels.HostI32(st.pos), c.NumHeads, c.HeadDim, c.RopeTheta)
	be.RoPEBackward(kernels.HostF32(g.dk), kernels.HostI32(st.pos), c.NumKVHeads, c.HeadDim, c.RopeTheta)
	be.RMSNormBackward(kernels.HostF32(g.dqp), kernels.HostF32(tr.normGrad(ng.q, g.dwD)), kernels.HostF32(g.dq), kernels.HostF32(a.q), kernels.HostF32(L.Attn.QNorm), t*c.NumHeads, c.HeadDim, eps)
	be.RMSNormBackward(kernels.HostF32(g.dkp), kernels.HostF32(tr.normGrad(ng.k, g.dwD)), kernels.HostF32(g.dk), kernels.HostF32(a.k), kernels.HostF32(L.Attn.KNorm), t*c.NumKVHeads, c.HeadDim, eps)
	tr.linBackward(st, &L.Attn.Q, &lg[0], g.dxn, g.dqp, a.xn, a.lora[0], false)
	tr.linBackward(st, &L.Attn.K, &lg[1], g.dxn, g.dkp, a.xn, a.lora[1], true)
	tr.linBackward(st, &L.Attn.V, &lg[2], g.dxn, g.dv, a.xn, a.lora[2], true)
	be.RMSNormBackward(kernels.HostF32(g.dx), kernels.HostF32(tr.normGrad(ng.attn, g.dwC)), kernels.HostF32(g.dxn), kernels.HostF32(x), kernels.HostF32(L.AttnNorm), t, c.HiddenSize, eps)
	be.Add(kernels.HostF32(g.dx), kernels.HostF32(g.dh))
}

// linBackward is the backward of linForward: dx[M, In] (= or +=) from
// dy[M, Out], and the trainable gradients: dW += dyᵀ·x (Full), and for an
// adapter with u = scaling·x·Aᵀ: dB += dyᵀ·u, du = scaling·dy·B,
// dA += duᵀ·x, dx += du·A.
func (tr *Trainable) linBackward(st *passState, lin *Linear, lg *linGrad, dx, dy, x, u []float32, accumulate bool) {
	be, m := tr.be, st.t
	be.MatMulNN(kernels.HostF32(dx), kernels.HostF32(dy), lin.W, m, accumulate)
	if lg.dW != nil {
		be.MatMulTN(kernels.HostF32(lg.dW), kernels.HostF32(dy), kernels.HostF32(x), m, lin.Out(), lin.In())
	}
	a := lin.LoRA
	if a == nil {
		return
	}
	if lg.dB != nil {
		be.MatMulTN(kernels.HostF32(lg.dB), kernels.HostF32(dy), kernels.HostF32(u), m, lin.Out(), a.R)
	}
	du := grow(st.grads.dlora, m*a.R)
	st.grads.dlora = du
	be.MatMulNN(kernels.HostF32(du), kernels.HostF32(dy), kernels.MatF32(a.B, lin.Out(), a.R), m, false)
	be.Scale(kernels.HostF32(du), a.Scaling)
	if lg.dA != nil {
		be.MatMulTN(kernels.HostF32(lg.dA), kernels.HostF32(du), kernels.HostF32(x), m, a.R, lin.In())
	}
	be.MatMulNN(kernels.HostF32(dx), kernels.HostF32(du), kernels.MatF32(a.A, a.R, lin.In()), m, true)
}
