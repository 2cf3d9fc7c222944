package model

import (
	"errors"
	"fmt"
	"runtime"

	"github.com/x/kernels"
)

// KVCache holds one sequence's keys (after q/k-norm and RoPE) and values
// for every layer, paged: positions live in fixed-size blocks of its
// Model's pool (see KVOptions), listed by id in the cache's block table;
// a batch's tables go to the backend with the step's token ids, and the
// backend reads the blocks by id (kernels.PagedKV).
// Blocks are reference counted, so a Fork shares its parent's blocks and
// copies one only when it writes into it (copy on write): G generations of
// one prompt prefill it once. The zero KVCache is empty and attaches to the
// Model's pool on its first Forward.
//
// Release (or Reset) returns the blocks to the pool; a cache dropped
// without it returns them when the garbage collector finds it unreachable.
// Copying a KVCache value aliases its blocks (as copying a slice does):
// use Sequence.Fork to share them safely.
type KVCache struct {
	Len int // positions 0 .. Len−1 are filled
	st  *kvState
}

// kvState holds a cache's block table. It is separate from KVCache so that
// a cleanup can return the blocks when the state becomes unreachable.
type kvState struct {
	own *kvOwned
}

// kvOwned is the block table: the blocks a cache holds one reference to.
type kvOwned struct {
	pool *kvPool
	ids  []int32
}

// release returns every block of o to its pool.
func (o *kvOwned) release() {
	if len(o.ids) > 0 {
		o.pool.release(o.ids)
		o.ids = o.ids[:0]
	}
}

// Cap is the number of positions the cache's blocks hold before it takes
// another block from the pool. kvDim is not used (it is kept so callers
// written for contiguous caches still compile).
func (c *KVCache) Cap(kvDim int) int {
	if c.st == nil {
		return 0
	}
	return len(c.st.own.ids) * c.st.own.pool.bs
}

// Blocks is the number of blocks in the cache's block table.
func (c *KVCache) Blocks() int {
	if c.st == nil {
		return 0
	}
	return len(c.st.own.ids)
}

// attach gives c a block table on p if it has none.
func (c *KVCache) attach(p *kvPool) {
	if c.st != nil {
		return
	}
	st := &kvState{own: &kvOwned{pool: p}}
	runtime.AddCleanup(st, func(o *kvOwned) { o.release() }, st.own)
	c.st = st
}

// setPage points block-table entry i (i ≤ the current length) at pool
// block id.
func (st *kvState) setPage(i int, id int32) {
	if i == len(st.own.ids) {
		st.own.ids = append(st.own.ids, id)
	} else {
		st.own.ids[i] = id
	}
}

// reserve makes positions Len .. n−1 writable: it takes new blocks from
// the pool for positions past the table, and copies any block in that
// range that another cache shares (copy on write), so writes touch only
// this cache's blocks. It fails, leaving the cache valid, when the pool is
// at its limit.
func (c *KVCache) reserve(be kernels.Backend, p *kvPool, n int) error {
	if c.st != nil && c.st.own.pool != p {
		if len(c.st.own.ids) > 0 {
			return fmt.Errorf("model: KV cache holds blocks of a pool SetKVOptions replaced: release it (Generate does, and feeds the sequence's tokens again)")
		}
		c.st = nil // empty (reset or released): it takes the Model's current pool
	}
	c.attach(p)
	st := c.st
	bs := p.bs
	if c.Len > len(st.own.ids)*bs {
		return fmt.Errorf("model: KV cache of %d positions holds blocks for only %d (Len set by hand, or a copy of a released KVCache)", c.Len, len(st.own.ids)*bs)
	}
	need := (n + bs - 1) / bs
	for i := c.Len / bs; i < need; i++ {
		if i < len(st.own.ids) {
			old := st.own.ids[i]
			if !p.shared(old) {
				continue
			}
			id, err := p.alloc(be)
			if err != nil {
				return fmt.Errorf("model: KV cache copy on write at position %d: %w", c.Len, err)
			}
			p.copyBlock(be, id, old)
			p.release([]int32{old})
			st.setPage(i, id)
			continue
		}
		id, err := p.alloc(be)
		if err != nil {
			return fmt.Errorf("model: KV cache for %d positions: %w", n, err)
		}
		st.setPage(i, id)
	}
	return nil
}

// heldIn is the number of blocks c holds in p.
func (c *KVCache) heldIn(p *kvPool) int {
	if c.st == nil || c.st.own.pool != p {
		return 0
	}
	return len(c.st.own.ids)
}

// stale reports whether c holds blocks of a pool other than p (one
// SetKVOptions replaced).
func (c *KVCache) stale(p *kvPool) bool {
	return c.st != nil && c.st.own.pool != p && len(c.st.own.ids) > 0
}

// table appends the cache's block ids to dst, padded with block 0 to
// width entries (a row of a batch's block tables; entries past the
// cache's blocks are never read).
func (c *KVCache) table(dst []int32, width int) []int32 {
	n := 0
	if c.st != nil {
		dst = append(dst, c.st.own.ids...)
		n = len(c.st.own.ids)
	}
	for ; n < width; n++ {
		dst = append(dst, 0)
	}
	return dst
}

// fork returns a cache that shares every block of c (one more reference
// each); either may then write, copying a shared block first.
func (c *KVCache) fork() KVCache {
	if c.st == nil {
		return KVCache{Len: c.Len}
	}
	f := KVCache{Len: c.Len}
	f.attach(c.st.own.pool)
	c.st.own.pool.retain(c.st.own.ids)
	f.st.own.ids = append(f.st.own.ids, c.st.own.ids...)
	return f
}

// Reset empties the cache and returns its blocks to the pool.
func (c *KVCache) Reset() {
	c.Len = 0
	if c.st != nil {
		c.st.own.release()
	}
}

// Truncate drops every position from n on (n ≤ Len), e.g. to rewind a
// sequence, returning the blocks past position n to the pool.
func (c *KVCache) Truncate(n int) {
	if n >= c.Len {
		return
	}
	c.Len = max(n, 0)
	if c.st == nil {
		return
	}
	keep := (c.Len + c.st.own.pool.bs - 1) / c.st.own.pool.bs
	if ids := c.st.own.ids; keep < len(ids) {
		c.st.own.pool.release(ids[keep:])
		c.st.own.ids = ids[:keep]
	}
}

// Release returns the cache's blocks to the pool and empties it.
func (c *KVCache) Release() { c.Reset() }

// Release returns the sequence's KV blocks to its Model's pool. Its tokens
// stay; a later Generate or Prefill recomputes the cache from them.
func (s *Sequence) Release() { s.Cache.Release() }

// ErrKVPoolFull is returned (wrapped) when a KV cache needs a block and
// the pool is at KVOptions.MaxBytes.
var ErrKVPoolFull = errors.New("KV cache pool is full")
