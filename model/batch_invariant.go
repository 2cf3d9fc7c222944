package model

import "github.com/x/kernels"

// batchInvariant turns the backend's batch-invariant MatMul on when on is
// set and the backend has the mode, and returns what puts the backend's
// previous setting back.
func (m *Model) batchInvariant(on bool) (restore func()) {
	b, ok := m.Backend.(kernels.BatchInvariantSetter)
	if !on || !ok {
		return func() {}
	}
	prev := b.BatchInvariant()
	b.SetBatchInvariant(true)
	return func() { b.SetBatchInvariant(prev) }
}

// chunkLen is how many of a sequence's pending tokens at position pos a
// step feeds, given budget prefill tokens left in the step (chunk per
// step in all); first is the first sequence with a prompt in the step,
// which always makes progress. Normally that is min(pending, budget), at
// least 1 for the first. With invariant set a chunk never crosses a
// multiple of chunk positions: it is [pos, min(pos+pending, next
// multiple)), fed whole or, when the budget is short and it is not the
// first, not at all in this step. Where a sequence's prompt is cut then
// depends on the sequence alone, not on the others sharing the steps, and
// so do its attention sums (a chunk's tokens are one tile of the
// attention kernel).
func chunkLen(pos, pending, budget, chunk int, first, invariant bool) int {
	if !invariant {
		n := min(pending, budget)
		if first {
			n = max(n, 1)
		}
		return n
	}
	n := min(pending, (pos/chunk+1)*chunk-pos)
	if n > budget && !first {
		return 0
	}
	return n
}
