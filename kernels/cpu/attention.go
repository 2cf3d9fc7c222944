package cpu

import (
	"fmt"
	"math"

	"github.com/x/kernels"
)

// attnBlock is how many keys one online-softmax step scores at once.
const attnBlock = 64

// Attention is causal GQA attention, flash style: each (sequence, token,
// head) row walks its keys in blocks of attnBlock, scoring a block with
// SIMD dot products, rescaling a running max, sum and output accumulator
// (online softmax), and adding the block's probability-weighted V rows. No
// T×T score matrix exists; scratch per worker is attnBlock + 2·D floats.
// Rows are spread over the workers.
func (b *Backend) Attention(seqs []kernels.AttentionSeq, heads, kvHeads, headDim int, scale float32) {
	const op = "Attention"
	checkHeads(op, heads, kvHeads, headDim)
	rowsBefore := make([]int, len(seqs)+1) // prefix sums of T·H
	for si, s := range seqs {
		checkSeq(op, si, s.Q, s.K, s.V, s.Out, s.LSE, s.T, s.Start, heads, kvHeads, headDim)
		rowsBefore[si+1] = rowsBefore[si] + s.T*heads
	}
	total := rowsBefore[len(seqs)]
	if total == 0 {
		return
	}
	group := heads / kvHeads
	d := headDim
	avx := b.simd.avx512
	run := func(w, lo, hi int) {
		buf := b.scratch(w, attnBlock+2*d)
		scores, q, acc := buf[:attnBlock], buf[attnBlock:attnBlock+d], buf[attnBlock+d:]
		si := 0
		for r := lo; r < hi; r++ {
			for rowsBefore[si+1] <= r {
				si++
			}
			s := &seqs[si]
			t, h := (r-rowsBefore[si])/heads, (r-rowsBefore[si])%heads
			kvh := h / group
			for i, v := range s.Q[(t*heads+h)*d : (t*heads+h+1)*d] {
				q[i] = v * scale
			}
			clear(acc)
			mx, sum := float32(math.Inf(-1)), float32(0)
			n := s.Start + t + 1
			stride := kvHeads * d
			for j0 := 0; j0 < n; j0 += attnBlock {
				nb := min(attnBlock, n-j0)
				off := (j0*kvHeads + kvh) * d
				bwDots(avx, scores, q, s.K[off:], stride, nb, d)
				bm := bwMax(avx, scores[:nb])
				if bm > mx {
					c := float32(math.Exp(float64(mx - bm)))
					sum *= c
					bwScale(avx, acc, c)
					mx = bm
				}
				sum += bwExpSum(avx, scores, scores, nb, mx)
				bwAxpys(avx, acc, scores, s.V[off:], stride, nb, d)
			}
			o := s.Out[(t*heads+h)*d : (t*heads+h+1)*d]
			inv := 1 / sum
			for i, v := range acc {
				o[i] = v * inv
			}
			if s.LSE != nil {
				s.LSE[t*heads+h] = mx + float32(math.Log(float64(sum)))
			}
		}
	}
	b.parallelForWorker(total, run)
}

// checkHeads panics unless the head counts describe grouped-query attention.
func checkHeads(op string, heads, kvHeads, headDim int) {
	if heads <= 0 || kvHeads <= 0 || headDim <= 0 || heads%kvHeads != 0 {
		panic(fmt.Sprintf("kernels/cpu: %s: heads %d, kvHeads %d, headDim %d: need positive sizes and heads a multiple of kvHeads",
			op, heads, kvHeads, headDim))
	}
}

// checkSeq panics unless the buffers of sequence si fit its T and Start.
func checkSeq(op string, si int, q, k, v, out, lse []float32, t, start, heads, kvHeads, headDim int) {
	if t < 0 || start < 0 {
		panic(fmt.Sprintf("kernels/cpu: %s: seq %d: T %d, Start %d", op, si, t, start))
	}
	arg := func(name string) string { return fmt.Sprintf("seq %d %s", si, name) }
	need(op, arg("Q"), len(q), t*heads*headDim)
	need(op, arg("Out"), len(out), t*heads*headDim)
	need(op, arg("K"), len(k), (start+t)*kvHeads*headDim)
	need(op, arg("V"), len(v), (start+t)*kvHeads*headDim)
	if lse != nil {
		need(op, arg("LSE"), len(lse), t*heads)
	}
}
