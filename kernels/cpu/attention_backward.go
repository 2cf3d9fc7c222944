package cpu

import (
	"github.com/x/kernels"
)

// Tiling of AttentionBackward (flash-attention style; the T×T score matrix
// never exists). A task is one (sequence, kv head): it owns that head's
// rows of DK and DV, so tasks never write the same memory. A task first
// lays out its operands once: scale·Q and dOut of the group's query heads
// as contiguous rows (row = token·group + head in group), and K and V of
// its kv head transposed to [D, keys] (padded with zeros to a multiple of
// attnKeys). Then query blocks of at most attnRows rows meet key blocks of
// attnKeys keys:
//
//	S  = (scale·Q)·Kᵀ            [rows, keys]  two rows at a time, no horizontal sums
//	P  = exp(S − LSE), 0 above the causal diagonal
//	dS = P∘(dOut·Vᵀ − D),  D = rowsum(dOut∘Out)
//	dQ += dS·K;  DK += dSᵀ·(scale·Q);  DV += Pᵀ·dOut   (row updates)
//
// and dQ·scale is written when the query block is done. The task's DK and
// DV rows are summed in contiguous buffers and added to DK and DV at the
// end (rows of one kv head are KVH·D apart in DK; 4 KiB strides alias in
// L1). The tile buffers are 4·attnRows·attnKeys floats; the task layout is
// 2·T·group·D + 6·keys·D floats per worker, reused across tasks.
const (
	attnRows = 32
	attnKeys = 64 // the tile width of bwTile64
)

// attnScratch is one worker's buffers.
type attnScratch struct {
	q, do     []float32 // [T·group, D] scale·Q and dOut of the task
	dsum, lse []float32 // [T·group] D = rowsum(dOut∘Out) and LSE
	kt, vt    []float32 // [D, ldk] K and V of the task's kv head, transposed
	kc        []float32 // [keys, D] K of the task's kv head, contiguous
	vrow      []float32 // [D] a bf16 V row widened (paged K/V)
	dk, dv    []float32 // [keys, D] the task's DK and DV sums, added at the end
	dq        []float32 // [attnRows, D] dQ accumulator of the query block
	s, ds     []float32 // [attnRows, attnKeys] P and dS of the tile
	pt, dst   []float32 // [attnKeys, attnRows] P and dS transposed
}

// grow returns buf resliced to n elements, reallocated if it is too short.
func grow(buf []float32, n int) []float32 {
	if cap(buf) < n {
		return make([]float32, n)
	}
	return buf[:n]
}

// AttentionBackward computes the gradients of causal grouped-query
// attention from the forward's Out and LSE (see ref.Backend.AttentionBackward
// for the formulas): DQ written, DK and DV accumulated. Tasks (sequence ×
// kv head) run in parallel; within a task, sums run in a fixed order, so the
// result is deterministic and independent of the thread count. Everything
// is float32 with a vector exp; with AVX-512 the score tiles use any head
// dim and the row updates a head dim that is a multiple of 16. Paged K/V
// (kernels.PagedKV) are read row by row into the task's layout, so the
// tiles see the same floats as for contiguous K/V.
func (b *Backend) AttentionBackward(g kernels.AttentionGradBatch, heads, kvHeads, headDim int, scale float32) {
	kernels.CheckAttentionBackward(&g, heads, kvHeads, headDim)
	hostBatch("AttentionBackward", &g.AttentionBatch, g.DOut, g.DQ, g.DK, g.DV)
	hs := g.Host(heads, kvHeads, headDim)
	d := headDim
	group := heads / kvHeads
	tokens := max(1, attnRows/group) // tokens per query block
	rows := tokens * group
	scratch := make([]attnScratch, b.threads)
	for w := range scratch {
		scratch[w] = attnScratch{
			dq: make([]float32, rows*d),
			s:  make([]float32, rows*attnKeys), ds: make([]float32, rows*attnKeys),
			pt: make([]float32, attnKeys*rows), dst: make([]float32, attnKeys*rows),
		}
	}
	a := attnTask{avx: b.simd.isa(), heads: heads, kvHeads: kvHeads, d: d, group: group, tokens: tokens, scale: scale}
	if kn, simd := b.mm(); simd && d%kn.vec == 0 {
		a.cvt = kn.cvt[1] // bf16 pages widen with the forward's SIMD conversion
	}
	b.parallelForWorker(len(hs)*kvHeads, func(w, lo, hi int) {
		for task := lo; task < hi; task++ {
			a.run(&scratch[w], &hs[task/kvHeads], task%kvHeads)
		}
	})
}

// attnTask holds the shape of one AttentionBackward call.
type attnTask struct {
	avx               isa
	heads, kvHeads, d int
	group, tokens     int
	scale             float32
	cvt               func(*float32, *uint16, int) // bf16 → f32 widening of D elements (nil: scalar)
}

// kvRow returns position j of kv head g of s's K (v false) or V, D floats:
// a view of the contiguous K or V or of an f32 page, or a bf16 page row
// widened exactly into dst, with the forward's SIMD conversion where it
// applies. The layout then holds the same floats whatever the storage, so
// the paged gradients equal the contiguous ones bit for bit.
func (a *attnTask) kvRow(dst []float32, s *kernels.HostSeq, v bool, j, g int) []float32 {
	p := &s.Paged
	if p.BlockSize > 0 && p.DType == kernels.BF16 && a.cvt != nil {
		a.cvt(&dst[0], &p.BF16[p.Offset(v, j, g, a.kvHeads, a.d)], a.d)
		return dst[:a.d]
	}
	return s.KV(dst, v, j, g, a.kvHeads, a.d)
}

// layout fills the task's contiguous query rows and transposed keys and
// values, and returns the leading dimension of kt and vt.
func (a *attnTask) layout(sc *attnScratch, s *kernels.HostSeq, g int) int {
	d := a.d
	n := s.T * a.group
	sc.q, sc.do = grow(sc.q, n*d), grow(sc.do, n*d)
	sc.dsum, sc.lse = grow(sc.dsum, n), grow(sc.lse, n)
	for r := range n {
		t, h := r/a.group, g*a.group+r%a.group
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
	}
	keys := s.Start + s.T
	ldk := (keys + attnKeys - 1) / attnKeys * attnKeys
	sc.kt, sc.vt = grow(sc.kt, d*ldk), grow(sc.vt, d*ldk)
	sc.kc = grow(sc.kc, keys*d)
	sc.dk, sc.dv = grow(sc.dk, keys*d), grow(sc.dv, keys*d)
	clear(sc.dk)
	clear(sc.dv)
	sc.vrow = grow(sc.vrow, d)
	for j := range keys {
		k := a.kvRow(sc.kc[j*d:(j+1)*d], s, false, j, g)
		v := a.kvRow(sc.vrow, s, true, j, g)
		copy(sc.kc[j*d:(j+1)*d], k)
		for i := range d {
			sc.kt[i*ldk+j] = k[i]
			sc.vt[i*ldk+j] = v[i]
		}
	}
	for i := range d {
		clear(sc.kt[i*ldk+keys : (i+1)*ldk])
		clear(sc.vt[i*ldk+keys : (i+1)*ldk])
	}
	return ldk
}

// run does kv head g of sequence s.
func (a *attnTask) run(sc *attnScratch, s *kernels.HostSeq, g int) {
	if s.T == 0 {
		return
	}
	d, avx := a.d, a.avx
	ldk := a.layout(sc, s, g)
	for t0 := 0; t0 < s.T; t0 += a.tokens {
		t1 := min(s.T, t0+a.tokens)
		rows := (t1 - t0) * a.group
		base := t0 * a.group // first row of the block in sc.q
		q, do := sc.q[base*d:], sc.do[base*d:]
		clear(sc.dq[:rows*d])
		keys := s.Start + t1 // keys 0 .. Start+t1−1 are visible to some row
		for j0 := 0; j0 < keys; j0 += attnKeys {
			nk := min(attnKeys, keys-j0)
			for r := 0; r < rows; r += 2 {
				r1 := min(r+1, rows-1)
				bwTile64(avx, sc.s[r*attnKeys:], sc.s[r1*attnKeys:], q[r*d:], q[r1*d:], sc.kt[j0:], d, ldk)
				bwTile64(avx, sc.ds[r*attnKeys:], sc.ds[r1*attnKeys:], do[r*d:], do[r1*d:], sc.vt[j0:], d, ldk)
			}
			kb := sc.kc[j0*d:]
			for r := range rows {
				p := sc.s[r*attnKeys : (r+1)*attnKeys]
				ds := sc.ds[r*attnKeys : (r+1)*attnKeys]
				nv := min(nk, max(0, s.Start+t0+r/a.group+1-j0)) // causal
				bwExpSum(avx, p, p, nv, sc.lse[base+r])
				dsum := sc.dsum[base+r]
				for j := range nv {
					ds[j] = p[j] * (ds[j] - dsum)
				}
				clear(p[nv:nk])
				clear(ds[nv:nk])
				bwAxpys(avx, sc.dq[r*d:], ds, kb, d, nv, d)
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
				kv := (j0 + j) * d
				n := rows - first
				bwAxpys(avx, sc.dk[kv:], sc.dst[j*rows+first:], q[first*d:], d, n, d)
				bwAxpys(avx, sc.dv[kv:], sc.pt[j*rows+first:], do[first*d:], d, n, d)
			}
		}
		for r := range rows {
			t, h := t0+r/a.group, g*a.group+r%a.group
			off := (t*a.heads + h) * d
			dq, out := sc.dq[r*d:(r+1)*d], s.DQ[off:off+d]
			for i := range d {
				out[i] = a.scale * dq[i]
			}
		}
	}
	for j := range s.Start + s.T {
		off := (j*a.kvHeads + g) * d
		dk, dv := s.DK[off:off+d], s.DV[off:off+d]
		for i, x := range sc.dk[j*d : (j+1)*d] {
			dk[i] += x
		}
		for i, x := range sc.dv[j*d : (j+1)*d] {
			dv[i] += x
		}
	}
}
