package cuda

import (
	"encoding/binary"
	"fmt"
	"unsafe"
)

// Status words. Kernels that index with data (ids, row indices, targets,
// segment offsets) check each index against its bound and, instead of
// reading or writing out of bounds, skip it and record the first bad one
// in a status slot of four int32 (flag, position, value, bound; see
// report_bad_index in common.cuh). Each op kind has its own slot, so the
// slot names the op; the Device reads the slots back with every sync
// point's copies (fetch) and turns a raised flag into the sticky error.
// No index crosses to the host before a launch.

const (
	stEmbedding = iota
	stEmbeddingBackward
	stGatherRows
	stScatterRows
	stLogSoftmaxGather
	stLogSoftmaxGatherBackward
	stPolicyLoss
	statusSlots
)

// statusBytes is the size of a Device's status words.
const statusBytes = statusSlots * 16

// statusNames names each slot's op and indexed argument.
var statusNames = [statusSlots][2]string{
	stEmbedding:                {"Embedding", "ids"},
	stEmbeddingBackward:        {"EmbeddingBackward", "ids"},
	stGatherRows:               {"GatherRows", "idx"},
	stScatterRows:              {"ScatterRows", "idx"},
	stLogSoftmaxGather:         {"LogSoftmaxGather", "targets"},
	stLogSoftmaxGatherBackward: {"LogSoftmaxGatherBackward", "targets"},
	stPolicyLoss:               {"PolicyLoss", "Seg"},
}

// statusError is an out-of-range index a kernel found.
type statusError struct {
	slot              int
	pos, value, bound int32
}

func (e *statusError) Error() string {
	op, arg := statusNames[e.slot][0], statusNames[e.slot][1]
	if e.slot == stPolicyLoss {
		return fmt.Sprintf("kernels/cuda: %s: %s[%d] = %d: the offsets must run from 0 to n = %d without decreasing (found on the device)",
			op, arg, e.pos, e.value, e.bound)
	}
	return fmt.Sprintf("kernels/cuda: %s: %s[%d] = %d outside [0, %d) (found on the device)", op, arg, e.pos, e.value, e.bound)
}

// slot is the device address of a status slot.
func (d *Device) slot(i int) devptr { return d.status + devptr(16*i) }

// readStatus returns the first raised slot of the status words at p as a
// statusError (nil if none).
func readStatus(p unsafe.Pointer) error {
	b := unsafe.Slice((*byte)(p), statusBytes)
	for i := range statusSlots {
		w := b[16*i:]
		if binary.LittleEndian.Uint32(w) == 0 {
			continue
		}
		return &statusError{slot: i, pos: int32(binary.LittleEndian.Uint32(w[4:])),
			value: int32(binary.LittleEndian.Uint32(w[8:])), bound: int32(binary.LittleEndian.Uint32(w[12:]))}
	}
	return nil
}
