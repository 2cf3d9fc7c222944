package cuda

import "fmt"

// dims is a launch configuration: grid and block sizes.
type dims struct {
	gx, gy, gz uint32
	bx, by, bz uint32
}

// CUDA's launch limits on sm_90 (the programming guide's table of
// technical specifications per compute capability).
const (
	maxGridX       = 1<<31 - 1
	maxGridYZ      = 65535
	maxBlockXY     = 1024
	maxBlockZ      = 64
	maxThreads     = 1024
	maxDynamicSmem = 227 << 10 // with cuFuncSetAttribute (driver_cgo_cuda.go sets it past 48 KB)
)

// check returns an error naming kernel when dm or smem bytes of dynamic
// shared memory exceed what a launch may ask for: the GPU would refuse it
// with CUDA_ERROR_INVALID_VALUE, and the host twin would run it, so the
// Device checks before either sees it.
func (dm dims) check(kernel string, smem int) error {
	threads := int64(dm.bx) * int64(dm.by) * int64(dm.bz)
	switch {
	case dm.gx > maxGridX || dm.gy > maxGridYZ || dm.gz > maxGridYZ:
		return fmt.Errorf("kernels/cuda: launch of %s: grid %d×%d×%d exceeds CUDA's %d×%d×%d", kernel, dm.gx, dm.gy, dm.gz,
			maxGridX, maxGridYZ, maxGridYZ)
	case dm.bx > maxBlockXY || dm.by > maxBlockXY || dm.bz > maxBlockZ || threads > maxThreads || threads == 0:
		return fmt.Errorf("kernels/cuda: launch of %s: block %d×%d×%d is not 1 to %d threads", kernel, dm.bx, dm.by, dm.bz, maxThreads)
	case smem < 0 || smem > maxDynamicSmem:
		return fmt.Errorf("kernels/cuda: launch of %s: %d bytes of dynamic shared memory exceed %d", kernel, smem, maxDynamicSmem)
	}
	return nil
}

// ceilDiv is ⌈a/b⌉ for a ≥ 0, b > 0.
func ceilDiv(a, b int) int { return (a + b - 1) / b }

// maxElementwiseBlocks caps grid-stride kernels' grids.
const maxElementwiseBlocks = 4096

// elementwisePlan covers n elements with 256-thread blocks and a
// grid-stride loop (add, scale, swiglu, adamw).
func elementwisePlan(n int) dims {
	return dims{gx: uint32(max(1, min(ceilDiv(n, 256), maxElementwiseBlocks))), gy: 1, gz: 1, bx: 256, by: 1, bz: 1}
}

// elementwiseGrid gives one thread to each of n elements, 256 per block,
// without a grid-stride loop (write_kv, write_kv_rope).
func elementwiseGrid(n int) dims {
	return dims{gx: uint32(ceilDiv(n, 256)), gy: 1, gz: 1, bx: 256, by: 1, bz: 1}
}

// rowPlan gives one block of threads threads to each of rows rows.
func rowPlan(rows, threads int) dims {
	return dims{gx: uint32(rows), gy: 1, gz: 1, bx: uint32(threads), by: 1, bz: 1}
}

// columnPlan gives one thread to each of n columns, 256 per block.
func columnPlan(n int) dims {
	return dims{gx: uint32(ceilDiv(n, 256)), gy: 1, gz: 1, bx: 256, by: 1, bz: 1}
}

// warpRowsPlan gives one warp to each of rows rows of each of nseq
// sequences, 4 warps per block (attention kernels).
func warpRowsPlan(rows, nseq int) dims {
	return dims{gx: uint32(max(1, ceilDiv(rows, 4))), gy: uint32(nseq), gz: 1, bx: 128, by: 1, bz: 1}
}

// singleBlockPlan is one block of 512 threads (argmax).
func singleBlockPlan() dims { return dims{gx: 1, gy: 1, gz: 1, bx: 512, by: 1, bz: 1} }

// Kernel limits the launchers check before launching.
const (
	maxHeadDim = 256 // attention: 32 lanes × 8 registers per row
)

// attnChunk is the key chunk of the tensor-core attention forward
// (attention_fwd.cu's CH), attnTargetBlocks the number of blocks below
// which it splits each row's chunks over blocks (two per SM of an H200).
const (
	attnChunk        = 64
	attnTargetBlocks = 264
	attnMMAMaxDim    = 128
	maxGridZ         = 65535 // a grid's z extent
)

// attnFwd is a launch of attention_fwd1/attention_fwd4 (and, when
// nsplit > 1, attention_combine).
type attnFwd struct {
	kernel                 string
	d                      dims
	nsplit, cps, maxChunks int
}

// useAttnMMA reports whether the tensor-core forward handles head dim d
// (a multiple of 16 up to 128); other head dims take attention_forward,
// for every shape, so a model's rows always run the same arithmetic.
func useAttnMMA(d int) bool { return d%16 == 0 && d <= attnMMAMaxDim }

// attnFwdPlan plans the tensor-core forward for b sequences of up to maxT
// tokens and maxLen positions: 16-row tiles of tokens × the group's query
// heads, one warp per tile (attention_fwd1) when a sequence's rows fit one
// tile (decode), else four (attention_fwd4); grid (tiles, kvHeads,
// b·nsplit). When there are fewer blocks than splitBlocks (the device's
// attnTargetBlocks) and rows have more than one chunk of keys, each row's chunks are split over nsplit blocks
// of cps chunks (flash-decoding), folded by attention_combine. The plan
// depends only on the host bounds, never on the data, so a decode step's
// launches repeat.
func attnFwdPlan(b, kvHeads, group, maxT, maxLen, splitBlocks int) attnFwd {
	rows := maxT * group
	p := attnFwd{kernel: "attention_fwd4", maxChunks: max(1, ceilDiv(maxLen, attnChunk)), nsplit: 1}
	warps := 4
	if rows <= 16 {
		p.kernel, warps = "attention_fwd1", 1
	}
	tiles := max(1, ceilDiv(ceilDiv(rows, 16), warps))
	if blocks := tiles * kvHeads * b; blocks < splitBlocks && p.maxChunks > 1 {
		p.nsplit = max(1, min(p.maxChunks, ceilDiv(splitBlocks, blocks), maxGridZ/max(b, 1)))
	}
	p.cps = ceilDiv(p.maxChunks, p.nsplit)
	p.nsplit = ceilDiv(p.maxChunks, p.cps)
	p.d = dims{gx: uint32(tiles), gy: uint32(kvHeads), gz: uint32(b * p.nsplit), bx: uint32(32 * warps), by: 1, bz: 1}
	return p
}

// attnBwdPlans are the grids of attention_bwd_dq (16-row query tiles) and
// attention_bwd_dkdv (16-key tiles), two warps a block, for b sequences of
// up to maxT tokens and maxLen positions.
func attnBwdPlans(b, kvHeads, group, maxT, maxLen int) (dq, dkdv dims) {
	dq = dims{gx: uint32(max(1, ceilDiv(ceilDiv(maxT*group, 16), 2))), gy: uint32(kvHeads), gz: uint32(b), bx: 64, by: 1, bz: 1}
	dkdv = dims{gx: uint32(max(1, ceilDiv(ceilDiv(maxLen, 16), 2))), gy: uint32(kvHeads), gz: uint32(b), bx: 64, by: 1, bz: 1}
	return dq, dkdv
}
