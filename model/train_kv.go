package model

import (
	"fmt"

	"github.com/x/kernels"
)

// trainKV holds one layer's keys and values (after RoPE) of a training
// pass in blocks of its own float32 pool, one block table per sequence, so
// the forward's Attention and the backward's AttentionBackward read them
// through block tables, as inference does. The blocks hold a single layer
// (the layer being computed): the forward writes each layer's K/V before
// its attention (one WriteKV for the batch, RoPE fused into it where the
// backend has it), and the backward writes layer l's again (from the kept
// activations, or from the checkpointed recompute) before its attention
// backward, so the pool costs one layer's K/V, T·KVH·D·2 floats, not L of
// them. The pool is float32 whatever the Model's KVOptions say, and
// attention reads the same floats through the table as in place, so losses
// and gradients are bit for bit those of contiguous K/V. The block tables
// cross with the pass's token ids (passState.uploadIDs). The blocks go
// back to the pool when the pass is done (release) and the pool's memory
// to the backend with passState.release.
type trainKV struct {
	be     kernels.Backend
	pool   *kvPool
	caches []KVCache
	w      int // entries per block-table row
}

// trainKVBlock is the training pool's block size: the CPU attention
// kernels' key block, so a key block lies in one block and is read in place.
const trainKVBlock = 64

// reserve takes blocks for every sequence of st (lengths from st.off) from
// the pool, creating it for c on first use.
func (kv *trainKV) reserve(be kernels.Backend, c Config, st *passState) error {
	kv.release()
	if kv.pool == nil {
		c.NumLayers = 1 // one layer at a time
		kv.pool = newKVPool(c, KVOptions{BlockSize: trainKVBlock, DType: kernels.F32})
	}
	kv.be = be
	n := len(st.off) - 1
	if cap(kv.caches) < n {
		kv.caches = make([]KVCache, n)
	}
	kv.caches = kv.caches[:n]
	kv.w = 1
	for s := range n {
		if err := kv.caches[s].reserve(be, kv.pool, st.off[s+1]-st.off[s]); err != nil {
			kv.release()
			return fmt.Errorf("train: KV blocks of sequence %d: %w", s, err)
		}
		kv.w = max(kv.w, kv.caches[s].Blocks())
	}
	return nil
}

// tables appends the sequences' block tables ([B, w]) to dst.
func (kv *trainKV) tables(dst []int32) []int32 {
	for s := range kv.caches {
		dst = kv.caches[s].table(dst, kv.w)
	}
	return dst
}

// paged is the pool's view for the pass's layer, through the block tables
// tab (the uploaded tables).
func (kv *trainKV) paged(tab kernels.Buffer) kernels.PagedKV { return kv.pool.paged(0, tab, kv.w) }

// release returns every sequence's blocks to the pool (kept for the next
// pass).
func (kv *trainKV) release() {
	for s := range kv.caches {
		kv.caches[s].Release()
	}
	kv.caches = kv.caches[:0]
}

// free releases the blocks and gives the pool's memory back to be.
func (kv *trainKV) free(be kernels.Backend) {
	kv.release()
	if kv.pool != nil {
		kv.pool.trim(be)
	}
}
