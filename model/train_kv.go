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
// its attention, and the backward writes layer l's again (from the kept
// activations, or from the checkpointed recompute) before its attention
// backward, so the pool costs one layer's K/V, T·KVH·D·2 floats, not L of
// them. The pool is float32 whatever the Model's KVOptions say, and
// attention reads the same floats through the table as in place, so losses
// and gradients are bit for bit those of contiguous K/V. The blocks go
// back to the pool when the pass is done (release) and the pool's memory
// to the backend with passState.release.
type trainKV struct {
	be     kernels.Backend
	pool   *kvPool
	caches []KVCache
}

// trainKVBlock is the training pool's block size: the CPU attention
// kernels' key block, so a key block lies in one page and is read in place.
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
	for s := range n {
		if err := kv.caches[s].reserve(be, kv.pool, st.off[s+1]-st.off[s]); err != nil {
			kv.release()
			return fmt.Errorf("train: KV blocks of sequence %d: %w", s, err)
		}
	}
	return nil
}

// write stores sequence s's t rows of keys and values of the layer being
// computed, k and v [t, KVH·D], at positions 0 .. t−1 of its blocks.
func (kv *trainKV) write(s int, k, v kernels.Buffer, t int) {
	c := &kv.caches[s]
	c.Len = 0
	c.write(kv.be, 0, k, v, t)
	c.Len = t
}

// paged is sequence s's K/V through its block table, as last written.
func (kv *trainKV) paged(s int) kernels.PagedKV { return kv.caches[s].paged(0) }

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
