package cpu

import (
	"math"
	"unsafe"

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
func (b *Backend) Attention(a kernels.AttentionBatch, heads, kvHeads, headDim int, scale float32) {
	kernels.CheckAttention(&a, heads, kvHeads, headDim)
	hostBatch("Attention", &a)
	seqs := a.Host(heads, kvHeads, headDim)
	rowsBefore := make([]int, len(seqs)+1) // prefix sums of T·H
	for si, s := range seqs {
		rowsBefore[si+1] = rowsBefore[si] + s.T*heads
	}
	total := rowsBefore[len(seqs)]
	if total == 0 {
		return
	}
	if b.simd.avx512 && headDim%vecSz == 0 {
		b.attentionTiled(seqs, heads, kvHeads, headDim, scale)
		return
	}
	group := heads / kvHeads
	d := headDim
	avx := b.simd.isa()
	run := func(w, lo, hi int) {
		buf := b.scratch(w, attnBlock+2*d+2*attnBlock*d)
		scores, q, acc := buf[:attnBlock], buf[attnBlock:attnBlock+d], buf[attnBlock+d:attnBlock+2*d]
		kbuf, vbuf := buf[attnBlock+2*d:][:attnBlock*d], buf[attnBlock+2*d+attnBlock*d:][:attnBlock*d]
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
			for j0 := 0; j0 < n; j0 += attnBlock {
				nb := min(attnBlock, n-j0)
				kr, vr, stride := b.kvRows(s, kvh, j0, nb, kvHeads, d, kbuf, vbuf)
				bwDots(avx, scores, q, kr, stride, nb, d)
				bm := bwMax(avx, scores[:nb])
				if bm > mx {
					c := float32(math.Exp(float64(mx - bm)))
					sum *= c
					bwScale(avx, acc, c)
					mx = bm
				}
				sum += bwExpSum(avx, scores, scores, nb, mx)
				bwAxpys(avx, acc, scores, vr, stride, nb, d)
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

// attnTileRows is the most query rows (tokens × the heads of one GQA group) an
// attentionTiled tile holds.
const attnTileRows = 64

// attentionTiled is Attention on the matmul micro-kernels, flash style: a
// task owns one kv head and a tile of up to attnTileRows query rows (a block of
// tokens × the query heads that share the kv head, so each K and V row is
// loaded once for the whole group). For each block of attnBlock keys it
// computes the score tile S = (scale·Q)·Kᵀ with dotNT, masks the causal
// part, updates each row's running max and sum (online softmax, rescaling
// the row's output accumulator when the max grows), and adds P·V with axpy.
// The task's scratch is about 2·attnTileRows·D + attnTileRows·attnBlock floats.
func (b *Backend) attentionTiled(seqs []kernels.HostSeq, heads, kvHeads, d int, scale float32) {
	group := heads / kvHeads
	bq := max(1, attnTileRows/group) // tokens per tile
	tasksBefore := make([]int, len(seqs)+1)
	for si, s := range seqs {
		tasksBefore[si+1] = tasksBefore[si] + kvHeads*((s.T+bq-1)/bq)
	}
	b.parallelForWorker(tasksBefore[len(seqs)], func(w, lo, hi int) {
		rows := bq * group
		buf := b.scratch(w, 2*rows*d+rows*attnBlock+2*rows+2*attnBlock*d)
		kbuf := buf[2*rows*d+rows*attnBlock+2*rows:][:attnBlock*d]
		vbuf := buf[2*rows*d+rows*attnBlock+2*rows+attnBlock*d:][:attnBlock*d]
		qp, o := buf[:rows*d], buf[rows*d:2*rows*d]
		sc := buf[2*rows*d : 2*rows*d+rows*attnBlock]
		mx, sum := buf[2*rows*d+rows*attnBlock:][:rows], buf[2*rows*d+rows*attnBlock+rows:][:rows]
		si := 0
		for task := lo; task < hi; task++ {
			for tasksBefore[si+1] <= task {
				si++
			}
			s := &seqs[si]
			qBlocks := (s.T + bq - 1) / bq
			kvh, qb := (task-tasksBefore[si])/qBlocks, (task-tasksBefore[si])%qBlocks
			t0 := qb * bq
			nt := min(bq, s.T-t0)
			r := nt * group // row i is token t0 + i/group, head kvh·group + i%group
			for i := 0; i < r; i++ {
				t, h := t0+i/group, kvh*group+i%group
				q := s.Q[(t*heads+h)*d : (t*heads+h+1)*d]
				for c, v := range q {
					qp[i*d+c] = v * scale
				}
				mx[i], sum[i] = float32(math.Inf(-1)), 0
			}
			clear(o[:r*d])
			keys := s.Start + t0 + nt // the last row sees keys [0, keys)
			for j0 := 0; j0 < keys; j0 += attnBlock {
				nb := min(attnBlock, keys-j0)
				kp, vp, dt, ld := b.kvPtrs(s, kvh, j0, nb, kvHeads, d, kbuf, vbuf)
				es := 4 // bytes per K/V element
				if dt == 1 {
					es = 2
				}
				for i0 := 0; i0 < r; i0 += mr {
					for jj := 0; jj < nb; jj += nr {
						dotNTAsm(dt, min(mr, r-i0), min(nr, nb-jj), &qp[i0*d], d*4, unsafe.Add(kp, jj*ld), ld, d/vecSz,
							&sc[i0*attnBlock+jj], attnBlock*4, 0)
					}
				}
				for i := 0; i < r; i++ {
					row := sc[i*attnBlock : i*attnBlock+nb]
					vis := min(nb, s.Start+t0+i/group+1-j0) // keys of this block row i may see
					if vis <= 0 {
						clear(row)
						continue
					}
					if bm := bwMax(isaAVX512, row[:vis]); bm > mx[i] {
						if sum[i] != 0 {
							c := float32(math.Exp(float64(mx[i] - bm)))
							sum[i] *= c
							bwScale(isaAVX512, o[i*d:(i+1)*d], c)
						}
						mx[i] = bm
					}
					sum[i] += bwExpSum(isaAVX512, row, row, vis, mx[i])
					clear(row[vis:])
				}
				for i0 := 0; i0 < r; i0 += mr {
					for c0 := 0; c0 < d; c0 += cols {
						axpyAsm(dt, min(mr, r-i0), min(cols, d-c0)/vecSz, &sc[i0*attnBlock], attnBlock*4, 4,
							unsafe.Add(vp, c0*es), ld, nb, &o[i0*d+c0], d*4, 1)
					}
				}
			}
			for i := 0; i < r; i++ {
				t, h := t0+i/group, kvh*group+i%group
				out := s.Out[(t*heads+h)*d : (t*heads+h+1)*d]
				inv := 1 / sum[i]
				for c, v := range o[i*d : (i+1)*d] {
					out[c] = v * inv
				}
				if s.LSE != nil {
					s.LSE[t*heads+h] = mx[i] + float32(math.Log(float64(sum[i])))
				}
			}
		}
	})
}

// hostBatch panics, on the caller's goroutine and naming op, unless every
// Buffer of a (the layout, K/V contiguous or paged, and the tables) is host
// memory: the kernels unwrap them inside pool workers, where a panic would
// end the process instead of reaching the caller.
func hostBatch(op string, a *kernels.AttentionBatch, more ...kernels.Buffer) {
	bufs := append([]kernels.Buffer{a.Layout.QStart, a.Layout.Pos, a.Q, a.Out, a.LSE, a.K, a.V, a.KStart,
		a.Paged.Pool, a.Paged.Tables}, more...)
	for _, x := range bufs {
		if !x.Host() {
			panic("kernels/cpu: " + op + ": device memory is not host memory")
		}
	}
}

// AttentionBatchInvariant reports whether this backend's Attention is
// batch-invariant (kernels.AttentionInvariant): on the generic and AVX2
// paths each row walks its keys in blocks of attnBlock on its own, the same
// way in any batch; the AVX-512 tiled kernel is not, because the dotNT
// micro-kernels that score a tile reduce a row's products in an order that
// depends on how many rows the kernel holds (a decode step's tile has a
// GQA group's rows, a prefill's up to attnTileRows), so a row's scores
// there can differ in the last bits between a decode step and a prefill.
func (b *Backend) AttentionBatchInvariant() bool { return !b.simd.avx512 }
