package cuda

// Launch plans of matmul.cu's GEMMs, shared by the host build and the
// device launcher. A plan changes only where the work runs, never the
// result: the bf16 kernels' arithmetic is fixed by the reduction length
// alone (matmul.cu's conventions comment), so the choices below are
// performance decisions that tests cannot see except through
// kerneltest.MatMulBatchInvariance, which runs shapes on both sides of
// every threshold.

// gemmChunk is matmul.cu's kChunk: reduction terms per tensor-core chain,
// the unit of split-K.
const gemmChunk = 128

// gemmSkinnyRows is the largest I the skinny (s) variant takes: one tile
// of 16 rows of x per block, the decode GEMV.
const gemmSkinnyRows = 16

// gemmTargetBlocks is how many blocks a GEMM should have before split-K
// stops adding more: two per SM of an H200 (132 SMs) for the large
// variant; four for the skinny one, whose blocks are small and bound by
// the weight bytes they keep in flight.
const (
	gemmTargetBlocks       = 264
	gemmTargetBlocksSkinny = 528
)

// gemmMaxWorkspace bounds split-K's workspace in bytes: a plan that would
// need more runs unsplit.
const gemmMaxWorkspace = 64 << 20

// Activation terms of the bf16 GEMMs: termsExact splits each f32
// activation into three bf16 terms (an f32 GEMM's products), termsBF16
// rounds it to bf16 once.
const (
	termsExact = 3
	termsBF16  = 1
)

// gemmVariant names one gemm_bf16_* kernel.
type gemmVariant struct {
	large bool // l (128-row tiles, 256 threads) rather than s (16×64, 128)
	wt    bool // weight [J,R] (MatMul) rather than [R,J] (MatMulNN)
	terms int  // termsExact or termsBF16
}

// gemmPlan is one GEMM: its launch (smem bytes of dynamic shared
// memory), split-K factor, and the partials gemm_splitk_reduce adds when
// split (parts slices of I·J floats of workspace; 0 when unsplit).
type gemmPlan struct {
	d      dims
	smem   int
	splits int
	parts  int
}

// ws is the workspace in floats for an [I,J] output.
func (p gemmPlan) ws(i, j int) int { return p.parts * i * j }

// gemmSplits is the split-K factor for tiles blocks over units of the
// reduction (chunks, or 16-term steps), with wsPerPart floats of
// workspace per partial (one per unit when perUnit, else one per split):
// enough splits to reach target blocks, none past the units or the
// workspace bound, and rebalanced so every split gets a unit.
func gemmSplits(tiles, target, units, wsPerPart int, perUnit bool) int {
	if tiles >= target || units < 2 {
		return 1
	}
	s := min(units, ceilDiv(target, tiles))
	need := s * wsPerPart
	if perUnit {
		need = units * wsPerPart // every unit's partial is kept
	}
	if 4*need > gemmMaxWorkspace {
		return 1
	}
	return ceilDiv(units, ceilDiv(units, s))
}

// gemmBF16Plan plans gemm_bf16_* for out[I,J] over R terms.
func gemmBF16Plan(i, j, r int, v gemmVariant) gemmPlan {
	bm, bn := gemmBF16Tile(v)
	threads := 128
	if v.large {
		threads = 256
	}
	tiles := ceilDiv(i, bm) * ceilDiv(j, bn)
	chunks := ceilDiv(r, gemmChunk)
	target := gemmTargetBlocksSkinny
	if v.large {
		target = gemmTargetBlocks
	}
	splits := gemmSplits(tiles, target, chunks, i*j, true)
	p := gemmPlan{splits: splits, smem: gemmBF16Smem(v),
		d: dims{gx: uint32(ceilDiv(j, bn)), gy: uint32(ceilDiv(i, bm)), gz: uint32(splits), bx: uint32(threads), by: 1, bz: 1}}
	if splits > 1 {
		p.parts = chunks
	}
	return p
}

// gemmBF16Tile is a variant's block tile, I × J: s 16 × 64; l 128 × 128
// (x1) or 128 × 64 (x3).
func gemmBF16Tile(v gemmVariant) (bm, bn int) {
	switch {
	case !v.large:
		return 16, 64
	case v.terms == termsBF16:
		return 128, 128
	}
	return 128, 64
}

// gemmBF16MultiPlan plans a gemm_bf16_*_multi launch of GEMMs out_p[I,
// js[p]] over R terms (variant v, wt), and returns each GEMM's first
// blockIdx.x: the GEMMs' tiles side by side along x, split as one GEMM of
// their total width would be.
func gemmBF16MultiPlan(i int, js []int, r int, v gemmVariant) (gemmPlan, []int) {
	bm, bn := gemmBF16Tile(v)
	threads, target := 128, gemmTargetBlocksSkinny
	if v.large {
		threads, target = 256, gemmTargetBlocks
	}
	tile0 := make([]int, len(js))
	gx, width := 0, 0
	for p, j := range js {
		tile0[p] = gx
		gx += ceilDiv(j, bn)
		width += j
	}
	chunks := ceilDiv(r, gemmChunk)
	splits := gemmSplits(gx*ceilDiv(i, bm), target, chunks, i*width, true)
	p := gemmPlan{splits: splits, smem: gemmBF16Smem(v),
		d: dims{gx: uint32(gx), gy: uint32(ceilDiv(i, bm)), gz: uint32(splits), bx: uint32(threads), by: 1, bz: 1}}
	if splits > 1 {
		p.parts = chunks
	}
	return p, tile0
}

// gemmBF16Variant is the variant for an [I,J] output of a MatMul (wt) or
// MatMulNN at the given activation terms.
func gemmBF16Variant(i int, wt bool, terms int) gemmVariant {
	return gemmVariant{large: i > gemmSkinnyRows, wt: wt, terms: terms}
}

// gemmBF16Smem is the dynamic shared memory of a variant: matmul.cu's
// TC::kSmem (a ring of 6 (s) or 4 (l) stages of the f32 A tile and the
// bf16 B tile, rows padded by 8 bf16, and two bf16 A tiles of terms
// terms), written out
// here for the launch; every gemm_bf16 kernel compares the size it was
// launched with against its own (a trap on the GPU, a launch error on the
// host build), so the two cannot drift apart unnoticed.
func gemmBF16Smem(v gemmVariant) int {
	const bk, pad = 32, 8
	stages := 6
	if v.large {
		stages = 4
	}
	bm, bn := gemmBF16Tile(v)
	b := bn * (bk + pad)
	if !v.wt {
		b = bk * (bn + pad)
	}
	return stages*bm*bk*4 + stages*b*2 + 2*v.terms*bm*(bk+pad)*2
}

// gemmF32Plan plans gemm_f32 for out[I,J] over R terms: 64×64 tiles of
// 256 threads, split over R (in whole 16-term steps) when split is true
// and the tiles are few.
func gemmF32Plan(i, j, r int, split bool) gemmPlan {
	tiles := ceilDiv(i, 64) * ceilDiv(j, 64)
	splits := 1
	if split {
		splits = gemmSplits(tiles, gemmTargetBlocks, ceilDiv(r, 16), i*j, false)
	}
	p := gemmPlan{splits: splits, d: dims{gx: uint32(ceilDiv(j, 64)), gy: uint32(ceilDiv(i, 64)), gz: uint32(splits), bx: 256, by: 1, bz: 1}}
	if splits > 1 {
		p.parts = splits
	}
	return p
}

// reducePlan is gemm_splitk_reduce's grid over n outputs.
func reducePlan(n int) dims { return elementwisePlan(n) }
