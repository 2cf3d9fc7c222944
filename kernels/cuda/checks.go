package cuda

import (
	"fmt"
)

// Argument checks of the host build and the device launcher that kernels'
// shared Check* functions do not cover (the ops call those first): shape
// errors are programmer errors and panic naming the op (kernels.Backend's
// convention).

func needDims(op string, ds ...int) {
	for _, d := range ds {
		if d < 0 {
			panic(fmt.Sprintf("kernels/cuda: %s: negative dimension in %v", op, ds))
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

// rowIndices checks idx against rows (op names the caller).
func rowIndices(op string, idx []int32, rows int) {
	for i, r := range idx {
		if r < 0 || int(r) >= rows {
			panic(fmt.Sprintf("kernels/cuda: %s: idx[%d] = %d outside [0, %d)", op, i, r, rows))
		}
	}
}
