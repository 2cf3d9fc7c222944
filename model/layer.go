package model

import (
	"fmt"
	"math"

	"github.com/x/kernels"
)

// One decoder layer's forward, shared by inference (Runner) and training
// (Trainable): the two differ only in where the activations live (the
// Runner aliases them into a few scratch Buffers from Backend.Alloc,
// training keeps them for the backward) and in where attention reads K
// and V (see attender).

// layerBufs is one layer's activations as the Buffers the ops read and
// write, in backend memory (Backend.Alloc): the Runner's aliased scratch,
// or a training layer's kept activations (layerActs).
type layerBufs struct {
	xn, q, k, v, qr, kr, att, lse, h, hn, g, u, act kernels.Buffer
	lora                                            [7]kernels.Buffer // [T, R] of each adapted projection
}

// attender supplies a layer's attention batch: given layer l's activations
// (a.kr holds this pass's keys after the k-norm, before RoPE, and a.v its
// values), it rotates a.kr in place (RoPE), writes keys and values where
// attention reads them and returns the batch, with Q and Out a.qr and
// a.att. The Runner writes them into the KV cache's blocks, training into
// its pass's blocks (keeping the LSE); both read them back through block
// tables.
type attender interface {
	attend(l int, a *layerBufs) kernels.AttentionBatch
}

// headScale is attention's score scale, 1/√D.
func headScale(headDim int) float32 { return float32(1 / math.Sqrt(float64(headDim))) }

// layerForward computes decoder layer l of m on x [T, C] (positions pos,
// I32 [T]) into out [T, C], filling a. The residual adds are fused into
// the norms that read them (kernels.AddRMSNorm): res, if not empty, is the
// previous layer's h, which x does not hold yet (the layer first adds it:
// x += res, in place), and the layer leaves out = down(act) without its
// own h, which the caller passes as the next layer's res, or adds with the
// final norm (a.h stays valid until the next layer writes it). out may
// alias x (x is last read before the down projection). With an empty out
// the down projection itself is skipped (only its adapter's x·Aᵀ is kept),
// which is all a checkpointed backward needs. bT holds the adapters' Bᵀ
// (see linearForward), or is nil. The weights reach the backend through
// m.dev (Backend.Import, once).
func layerForward(be kernels.Backend, m *Model, l int, x, res, out, pos kernels.Buffer, t int, a *layerBufs, adapters bool, bT *[7]kernels.Buffer, at attender) {
	c, L := m.Config, &m.Layers[l]
	eps := c.RMSNormEps
	bt := func(j int) kernels.Buffer {
		if bT != nil {
			return bT[j]
		}
		return kernels.Buffer{}
	}
	lin := func(j int, lin *Linear, out, x kernels.Buffer) {
		linearForward(be, m, lin, out, x, t, adapters, a.lora[j], bt(j))
	}
	// linMany is lin for several linears of one input: with a backend that
	// implements kernels.MatMulManyer, their base products in one call
	// (the same numbers as one MatMul each), then each adapter's update.
	mm, fused := be.(kernels.MatMulManyer)
	linMany := func(j0 int, lins []*Linear, outs []kernels.Buffer, x kernels.Buffer) {
		if !fused {
			for i, l := range lins {
				lin(j0+i, l, outs[i], x)
			}
			return
		}
		ws := make([]kernels.Mat, len(lins))
		for i, l := range lins {
			ws[i] = m.devMat(l.W)
		}
		mm.MatMulMany(outs, x, ws, t)
		for i, l := range lins {
			linearAdapters(be, m, l, outs[i], x, t, adapters, a.lora[j0+i], bt(j0+i))
		}
	}
	if res.Len() > 0 {
		kernels.AddRMSNorm(be, a.xn, x, res, m.devVec(L.AttnNorm), t, c.HiddenSize, eps)
	} else {
		be.RMSNorm(a.xn, x, m.devVec(L.AttnNorm), t, c.HiddenSize, eps)
	}
	linMany(0, []*Linear{&L.Attn.Q, &L.Attn.K, &L.Attn.V}, []kernels.Buffer{a.q, a.k, a.v}, a.xn)
	be.RMSNorm(a.qr, a.q, m.devVec(L.Attn.QNorm), t*c.NumHeads, c.HeadDim, eps)
	be.RMSNorm(a.kr, a.k, m.devVec(L.Attn.KNorm), t*c.NumKVHeads, c.HeadDim, eps)
	be.RoPE(a.qr, pos, c.NumHeads, c.HeadDim, c.RopeTheta)
	be.Attention(at.attend(l, a), c.NumHeads, c.NumKVHeads, c.HeadDim, headScale(c.HeadDim))
	lin(3, &L.Attn.O, a.h, a.att)
	kernels.AddRMSNorm(be, a.hn, a.h, x, m.devVec(L.MLPNorm), t, c.HiddenSize, eps)
	linMany(4, []*Linear{&L.MLP.Gate, &L.MLP.Up}, []kernels.Buffer{a.g, a.u}, a.hn)
	be.SwiGLU(a.act, a.g, a.u)
	lin(6, &L.MLP.Down, out, a.act)
}

// linearForward is the one LoRA linear path: out[M, Out] = x·Wᵀ, plus
// (scaling·x·Aᵀ)·Bᵀ when an adapter is attached and adapters is true,
// keeping the scaled x·Aᵀ [M, R] in u (for a backward; at least M·R
// long). An empty out computes only u. The rank-R update reads B [Out, R]
// with MatMul, or, when bT (Bᵀ [R, Out]) is given, MatMulNN, whose CPU
// kernel handles the inner dimension R ≪ Out about three times faster;
// training refreshes Bᵀ once per pass (see Trainable.refreshBT), inference,
// whose B may change between any two calls, reads B. W, A and B reach the
// backend through m (a Model's devMat and devBuf).
func linearForward(be kernels.Backend, m weightSource, lin *Linear, out, x kernels.Buffer, rows int, adapters bool, u, bT kernels.Buffer) {
	if out.Len() > 0 {
		be.MatMul(out, x, m.devMat(lin.W), rows, false)
	}
	linearAdapters(be, m, lin, out, x, rows, adapters, u, bT)
}

// linearAdapters is linearForward after the base product (out already
// holds x·Wᵀ): the adapter's update, if any.
func linearAdapters(be kernels.Backend, m weightSource, lin *Linear, out, x kernels.Buffer, rows int, adapters bool, u, bT kernels.Buffer) {
	a := lin.LoRA
	if a == nil || !adapters {
		return
	}
	aH, bH, ok := loraHost(lin)
	if !ok {
		panic(fmt.Sprintf("model: linear forward: LoRA r=%d does not fit A %d, B %d for W [%d,%d]", a.R, len(a.A), len(a.B), lin.Out(), lin.In()))
	}
	u = u.Slice(0, rows*a.R)
	be.MatMul(u, x, kernels.MatOf(m.devBuf(aH), a.R, lin.In()), rows, false)
	be.Scale(u, a.Scaling)
	switch {
	case out.Len() == 0:
	case bT.Len() > 0:
		be.MatMulNN(out, u, kernels.MatOf(bT, a.R, lin.Out()), rows, true)
	default:
		be.MatMul(out, u, kernels.MatOf(m.devBuf(bH), lin.Out(), a.R), rows, true)
	}
}

// weightSource gives the ops a weight in the backend's memory: a Model
// imports it once (see Model.devBuf); hostWeights passes host memory.
type weightSource interface {
	devMat(w kernels.Mat) kernels.Mat
	devBuf(b kernels.Buffer) kernels.Buffer
}

// hostWeights passes weights as host Buffers, for Linear.Forward on host
// slices.
type hostWeights struct{}

func (hostWeights) devMat(w kernels.Mat) kernels.Mat       { return w }
func (hostWeights) devBuf(b kernels.Buffer) kernels.Buffer { return b }
