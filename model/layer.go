package model

import (
	"fmt"
	"math"

	"github.com/x/kernels"
)

// One decoder layer's forward, shared by inference (Runner) and training
// (Trainable): the two differ only in where the activations live (the
// Runner aliases them into a few scratch buffers, training keeps them for
// the backward) and in where attention reads K and V (see attender).

// attender supplies a layer's attention batch: given layer l's activations
// (a.kr and a.v hold this pass's keys and values, RoPE applied), it returns
// one AttentionSeq per sequence, with Out and Q set inside a.att and a.qr.
// The Runner writes K and V into the KV cache and reads them back through
// the block tables; training reads them in place and keeps the LSE.
type attender interface {
	attend(l int, a *layerActs) []kernels.AttentionSeq
}

// headScale is attention's score scale, 1/√D.
func headScale(headDim int) float32 { return float32(1 / math.Sqrt(float64(headDim))) }

// layerForward computes decoder layer l of m on x [T, C] (positions pos)
// into out [T, C], filling a. out may alias x (x is last read before the
// down projection). With a nil out the down projection itself is skipped
// (only its adapter's x·Aᵀ is kept), which is all a checkpointed backward
// needs. bT holds the adapters' Bᵀ (see linearForward), or is nil.
func layerForward(be kernels.Backend, m *Model, l int, x, out []float32, pos []int32, t int, a *layerActs, adapters bool, bT *[7][]float32, at attender) {
	c, L := m.Config, &m.Layers[l]
	eps := c.RMSNormEps
	lin := func(j int, lin *Linear, out, x []float32) {
		var bt []float32
		if bT != nil {
			bt = bT[j]
		}
		linearForward(be, lin, out, x, t, adapters, &a.lora[j], bt)
	}
	be.RMSNorm(kernels.HostF32(a.xn), kernels.HostF32(x), kernels.HostF32(L.AttnNorm), t, c.HiddenSize, eps)
	lin(0, &L.Attn.Q, a.q, a.xn)
	lin(1, &L.Attn.K, a.k, a.xn)
	lin(2, &L.Attn.V, a.v, a.xn)
	be.RMSNorm(kernels.HostF32(a.qr), kernels.HostF32(a.q), kernels.HostF32(L.Attn.QNorm), t*c.NumHeads, c.HeadDim, eps)
	be.RMSNorm(kernels.HostF32(a.kr), kernels.HostF32(a.k), kernels.HostF32(L.Attn.KNorm), t*c.NumKVHeads, c.HeadDim, eps)
	be.RoPE(kernels.HostF32(a.qr), kernels.HostI32(pos), c.NumHeads, c.HeadDim, c.RopeTheta)
	be.RoPE(kernels.HostF32(a.kr), kernels.HostI32(pos), c.NumKVHeads, c.HeadDim, c.RopeTheta)
	be.Attention(at.attend(l, a), c.NumHeads, c.NumKVHeads, c.HeadDim, headScale(c.HeadDim))
	lin(3, &L.Attn.O, a.h, a.att)
	be.Add(kernels.HostF32(a.h), kernels.HostF32(x))
	be.RMSNorm(kernels.HostF32(a.hn), kernels.HostF32(a.h), kernels.HostF32(L.MLPNorm), t, c.HiddenSize, eps)
	lin(4, &L.MLP.Gate, a.g, a.hn)
	lin(5, &L.MLP.Up, a.u, a.hn)
	be.SwiGLU(kernels.HostF32(a.act), kernels.HostF32(a.g), kernels.HostF32(a.u))
	lin(6, &L.MLP.Down, out, a.act)
	if out != nil {
		be.Add(kernels.HostF32(out), kernels.HostF32(a.h))
	}
}

// linearForward is the one LoRA linear path: out[M, Out] = x·Wᵀ, plus
// (scaling·x·Aᵀ)·Bᵀ when an adapter is attached and adapters is true,
// keeping the scaled x·Aᵀ [M, R] in *u (for a backward; grown as needed).
// A nil out computes only *u. The rank-R update reads B [Out, R] with
// MatMul, or, when bT (Bᵀ [R, Out]) is given, MatMulNN, whose CPU kernel
// handles the inner dimension R ≪ Out about three times faster; training
// refreshes Bᵀ once per pass (see Trainable.refreshBT), inference, whose B
// may change between any two calls, reads B.
func linearForward(be kernels.Backend, lin *Linear, out, x []float32, m int, adapters bool, u *[]float32, bT []float32) {
	if out != nil {
		be.MatMul(kernels.HostF32(out), kernels.HostF32(x), lin.W, m, false)
	}
	a := lin.LoRA
	if a == nil || !adapters {
		return
	}
	if len(a.A) < a.R*lin.In() || len(a.B) < lin.Out()*a.R {
		panic(fmt.Sprintf("model: linear forward: LoRA r=%d does not fit A %d, B %d for W [%d,%d]", a.R, len(a.A), len(a.B), lin.Out(), lin.In()))
	}
	*u = grow(*u, m*a.R)
	be.MatMul(kernels.HostF32(*u), kernels.HostF32(x), kernels.MatF32(a.A, a.R, lin.In()), m, false)
	be.Scale(kernels.HostF32(*u), a.Scaling)
	switch {
	case out == nil:
	case bT != nil:
		be.MatMulNN(kernels.HostF32(out), kernels.HostF32(*u), kernels.MatF32(bT, a.R, lin.Out()), m, true)
	default:
		be.MatMul(kernels.HostF32(out), kernels.HostF32(*u), kernels.MatF32(a.B, lin.Out(), a.R), m, true)
	}
}
