//go:build cudahost || cuda

package cuda

import (
	"fmt"
)

// Argument checks shared by the host build and the device launcher: shape
// errors are programmer errors and panic naming the op (kernels.Backend's
// convention).

func need(op, arg string, have, want int) {
	if have < want {
		panic(fmt.Sprintf("kernels/cuda: %s: %s has %d elements, need %d", op, arg, have, want))
	}
}

func needDims(op string, ds ...int) {
	for _, d := range ds {
		if d < 0 {
			panic(fmt.Sprintf("kernels/cuda: %s: negative dimension in %v", op, ds))
		}
	}
}

func checkIDs(op string, ids []int32, rows int) {
	for i, id := range ids {
		if id < 0 || int(id) >= rows {
			panic(fmt.Sprintf("kernels/cuda: %s: ids[%d] = %d outside [0,%d)", op, i, id, rows))
		}
	}
}

func checkHeads(op string, heads, kvHeads, headDim int) {
	needDims(op, heads, kvHeads, headDim)
	if kvHeads == 0 || heads%kvHeads != 0 {
		panic(fmt.Sprintf("kernels/cuda: %s: %d heads not a multiple of %d kv heads", op, heads, kvHeads))
	}
	if headDim > maxHeadDim {
		panic(fmt.Sprintf("kernels/cuda: %s: head dim %d > %d", op, headDim, maxHeadDim))
	}
}

func checkTargets(op string, targets []int32, rows, v int) {
	need(op, "targets", len(targets), rows)
	for r, tg := range targets[:rows] {
		if tg < 0 || int(tg) >= v {
			panic(fmt.Sprintf("kernels/cuda: %s: targets[%d] = %d outside [0,%d)", op, r, tg, v))
		}
	}
}

// logitsRowThreads is the block size of the per-row log-softmax kernels.
const logitsRowThreads = 512
