package cpu

import (
	"fmt"

	"github.com/x/kernels"
)

// Tiling of AttentionBackward (flash-attention style; the T×T score matrix
// never exists). A task is one (sequence, kv head): it owns that head's
// rows of DK and DV, so tasks never write the same memory. Within a task,
// query blocks of attnRows rows — (token, query head of the group) pairs,
// copied into contiguous scratch — meet key blocks of attnKeys keys:
//
//	S  = (scale·Q)·Kᵀ            [rows, keys]  (dots)
//	P  = exp(S − LSE), 0 above the causal diagonal
//	dS = P∘(dOut·Vᵀ − D),  D = rowsum(dOut∘Out)
//	dQ += dS·K;  DK += dSᵀ·(scale·Q);  DV += Pᵀ·dOut   (axpys)
//
// and dQ·scale is written when the query block is done. The scratch of a
// worker is 3·attnRows·D + 4·attnRows·attnKeys floats (about 64 KiB at
// D = 128), sized to stay in L1/L2.
const (
	attnRows = 32
	attnKeys = 64
)

// attnScratch is one worker's tile buffers.
type attnScratch struct {
	q, do, dq []float32 // [rows, D] scale·Q, dOut, dQ accumulator
	s, ds     []float32 // [rows, keys] P and dS of the tile
	pt, dst   []float32 // [keys, rows] P and dS transposed
	dsum, lse []float32 // [rows] D and LSE
	tok       []int     // [rows] token index of each row
}

// AttentionBackward computes the gradients of causal grouped-query
// attention from the forward's Out and LSE (see ref.Backend.AttentionBackward
// for the formulas): DQ written, DK and DV accumulated. Tasks (sequence ×
// kv head) run in parallel; within a task, sums run in a fixed order, so the
// result is deterministic and independent of the thread count. Everything
// is float32 with a vector exp; dot products and row updates use AVX-512
// when headDim is a multiple of 16.
func (b *Backend) AttentionBackward(seqs []kernels.AttentionGradSeq, heads, kvHeads, headDim int, scale float32) {
	const op = "AttentionBackward"
	if heads <= 0 || kvHeads <= 0 || headDim <= 0 || heads%kvHeads != 0 {
		panic(fmt.Sprintf("kernels/cpu: %s: heads %d, kvHeads %d, headDim %d", op, heads, kvHeads, headDim))
	}
	d := headDim
	for si, s := range seqs {
		if s.T < 0 || s.Start < 0 {
			panic(fmt.Sprintf("kernels/cpu: %s: seqs[%d] has T %d, Start %d", op, si, s.T, s.Start))
		}
		name := func(arg string) string { return fmt.Sprintf("seqs[%d].%s", si, arg) }
		nq := s.T * heads * d
		nkv := (s.Start + s.T) * kvHeads * d
		need(op, name("DOut"), len(s.DOut), nq)
		need(op, name("Q"), len(s.Q), nq)
		need(op, name("Out"), len(s.Out), nq)
		need(op, name("DQ"), len(s.DQ), nq)
		need(op, name("LSE"), len(s.LSE), s.T*heads)
		need(op, name("K"), len(s.K), nkv)
		need(op, name("V"), len(s.V), nkv)
		need(op, name("DK"), len(s.DK), nkv)
		need(op, name("DV"), len(s.DV), nkv)
	}
	group := heads / kvHeads
	tokens := max(1, attnRows/group) // tokens per query block
	rows := tokens * group
	scratch := make([]attnScratch, b.threads)
	for w := range scratch {
		buf := make([]float32, 3*rows*d+4*rows*attnKeys+2*rows)
		cut := func(n int) []float32 { s := buf[:n:n]; buf = buf[n:]; return s }
		scratch[w] = attnScratch{
			q: cut(rows * d), do: cut(rows * d), dq: cut(rows * d),
			s: cut(rows * attnKeys), ds: cut(rows * attnKeys),
			pt: cut(attnKeys * rows), dst: cut(attnKeys * rows),
			dsum: cut(rows), lse: cut(rows), tok: make([]int, rows),
		}
	}
	a := attnTask{avx: b.simd.avx512, heads: heads, kvHeads: kvHeads, d: d, group: group, tokens: tokens, scale: scale}
	b.parallelForWorker(len(seqs)*kvHeads, func(w, lo, hi int) {
		for task := lo; task < hi; task++ {
			a.run(&scratch[w], &seqs[task/kvHeads], task%kvHeads)
		}
	})
}

// attnTask holds the shape of one AttentionBackward call.
type attnTask struct {
	avx               bool
	heads, kvHeads, d int
	group, tokens     int
	scale             float32
}

// run does kv head g of sequence s.
func (a *attnTask) run(sc *attnScratch, s *kernels.AttentionGradSeq, g int) {
	d, avx := a.d, a.avx
	strideKV := a.kvHeads * d
	for t0 := 0; t0 < s.T; t0 += a.tokens {
		t1 := min(s.T, t0+a.tokens)
		rows := (t1 - t0) * a.group
		for r := range rows {
			t := t0 + r/a.group
			h := g*a.group + r%a.group
			off := (t*a.heads + h) * d
			q, do := sc.q[r*d:(r+1)*d], sc.do[r*d:(r+1)*d]
			var dsum float64
			for i := range d {
				q[i] = a.scale * s.Q[off+i]
				do[i] = s.DOut[off+i]
				dsum += float64(do[i] * s.Out[off+i])
			}
			sc.dsum[r] = float32(dsum)
			sc.lse[r] = s.LSE[t*a.heads+h]
			sc.tok[r] = t
		}
		clear(sc.dq[:rows*d])
		keys := s.Start + t1 // keys 0 .. Start+t1−1 are visible to some row
		for j0 := 0; j0 < keys; j0 += attnKeys {
			nk := min(attnKeys, keys-j0)
			kb := s.K[(j0*a.kvHeads+g)*d:]
			vb := s.V[(j0*a.kvHeads+g)*d:]
			for r := range rows {
				p := sc.s[r*attnKeys : (r+1)*attnKeys]
				ds := sc.ds[r*attnKeys : (r+1)*attnKeys]
				nv := min(nk, max(0, s.Start+sc.tok[r]+1-j0)) // causal
				bwDots(avx, p, sc.q[r*d:], kb, strideKV, nv, d)
				bwDots(avx, ds, sc.do[r*d:], vb, strideKV, nv, d)
				bwExpSum(avx, p, p, nv, sc.lse[r])
				dsum := sc.dsum[r]
				for j := range nv {
					ds[j] = p[j] * (ds[j] - dsum)
				}
				clear(p[nv:nk])
				clear(ds[nv:nk])
				bwAxpys(avx, sc.dq[r*d:], ds, kb, strideKV, nv, d)
			}
			for j := range nk {
				pt := sc.pt[j*rows : (j+1)*rows]
				dst := sc.dst[j*rows : (j+1)*rows]
				for r := range rows {
					pt[r] = sc.s[r*attnKeys+j]
					dst[r] = sc.ds[r*attnKeys+j]
				}
			}
			for j := range nk {
				// Rows of tokens before key j0+j−Start see no such key; they
				// are a prefix, skipped.
				first := min(rows, max(0, j0+j-s.Start-t0)*a.group)
				if first == rows {
					continue
				}
				kv := ((j0+j)*a.kvHeads + g) * d
				n := rows - first
				bwAxpys(avx, s.DK[kv:], sc.dst[j*rows+first:], sc.q[first*d:], d, n, d)
				bwAxpys(avx, s.DV[kv:], sc.pt[j*rows+first:], sc.do[first*d:], d, n, d)
			}
		}
		for r := range rows {
			t := sc.tok[r]
			h := g*a.group + r%a.group
			off := (t*a.heads + h) * d
			dq := sc.dq[r*d : (r+1)*d]
			out := s.DQ[off : off+d]
			for i := range d {
				out[i] = a.scale * dq[i]
			}
		}
	}
}
