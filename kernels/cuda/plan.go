package cuda

// dims is a launch configuration: grid and block sizes.
type dims struct {
	gx, gy, gz uint32
	bx, by, bz uint32
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

// rowPlan gives one block of threads threads to each of rows rows.
func rowPlan(rows, threads int) dims {
	return dims{gx: uint32(rows), gy: 1, gz: 1, bx: uint32(threads), by: 1, bz: 1}
}

// columnPlan gives one thread to each of n columns, 256 per block.
func columnPlan(n int) dims {
	return dims{gx: uint32(ceilDiv(n, 256)), gy: 1, gz: 1, bx: 256, by: 1, bz: 1}
}

// gemmBF16Plan is gemm_bf16_*'s grid for an [I,J] output: 32×64 tiles,
// 4 warps.
func gemmBF16Plan(i, j int) dims {
	return dims{gx: uint32(ceilDiv(j, 64)), gy: uint32(ceilDiv(i, 32)), gz: 1, bx: 128, by: 1, bz: 1}
}

// gemmF32Plan is gemm_f32's grid for an [I,J] output: 64×64 tiles, 256
// threads.
func gemmF32Plan(i, j int) dims {
	return dims{gx: uint32(ceilDiv(j, 64)), gy: uint32(ceilDiv(i, 64)), gz: 1, bx: 256, by: 1, bz: 1}
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
