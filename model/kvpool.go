package model

import (
	"container/heap"
	"fmt"
	"math/bits"
	"slices"
	"sync"

	"github.com/x/kernels"
)

// KVOptions configure a Model's KV cache pool: the blocks every KVCache of
// the Model takes its positions from.
type KVOptions struct {
	// BlockSize is the number of positions per block, at most 65,536; 0
	// means 64, the CPU
	// attention kernel's key block, so a float32 block is read in place.
	BlockSize int
	// DType is the storage type of K and V: kernels.F32 (the default, exact)
	// or kernels.BF16 (half the memory; its error against F32 is
	// Tolerance("AttentionBF16KV") in kernels/kerneltest).
	DType kernels.DType
	// MaxBytes bounds the memory of the pool's blocks; a cache that needs a
	// block past it gets an error wrapping ErrKVPoolFull. 0: not bounded.
	MaxBytes int64
}

// maxKVBlockSize bounds KVOptions.BlockSize: more positions than any
// context needs, and small enough that a block's size cannot overflow.
const maxKVBlockSize = 1 << 16

// KVStats describe a Model's KV cache pool.
type KVStats struct {
	BlockSize     int
	DType         kernels.DType
	BytesPerToken int   // K and V of one position over all layers
	Blocks        int   // blocks holding memory (in use or free)
	InUse         int   // blocks referenced by at least one cache
	Shared        int   // blocks referenced by more than one cache
	Bytes         int64 // memory of the blocks holding memory
	MaxBytes      int64 // KVOptions.MaxBytes of the pool (0: not bounded)
}

// SetKVOptions configures the pool that caches attached from now on use.
// Caches already holding blocks keep their pool until they are Reset or
// released: a Runner refuses them (a batch reads one pool), and Generate
// and Batch release them and feed their sequence's tokens again into the
// new pool. The old pool's memory goes back to the backend as soon as no
// cache uses it, or at Model.Close if some still do then. Like attaching
// adapters, it must not overlap with inference on m.
func (m *Model) SetKVOptions(o KVOptions) error {
	if o.BlockSize < 0 || o.BlockSize > maxKVBlockSize {
		return fmt.Errorf("model: KV block size %d: must be in [0, %d]", o.BlockSize, maxKVBlockSize)
	}
	if o.DType != kernels.F32 && o.DType != kernels.BF16 {
		return fmt.Errorf("model: KV dtype %v: want F32 or BF16", o.DType)
	}
	if o.MaxBytes < 0 {
		return fmt.Errorf("model: KV max bytes %d: must be ≥ 0", o.MaxBytes)
	}
	if m.kv != nil && m.Backend != nil {
		m.kv.retire(m.Backend) // or its blocks' memory would never be freed
		// Close frees what caches still hold; pools they gave back are dropped.
		m.retiredKV = append(slices.DeleteFunc(m.retiredKV, (*kvPool).empty), m.kv)
	}
	m.kv = newKVPool(m.Config, o)
	return nil
}

// KVStats reports the state of the Model's current KV pool.
func (m *Model) KVStats() KVStats { return m.kvPool().stats() }

// TrimKV gives the memory of the KV pool's free blocks past the last block
// in use back to the backend (Backend.Free; the Go heap on a CPU backend)
// and returns how many bytes it dropped: all of the pool's memory when no
// cache holds a block, as between a trainer's generation and learning,
// when the memory is better spent on activations. The pool otherwise keeps
// its peak for reuse. It hands out the lowest free block first, so the
// blocks in use sit at the front of its memory. Blocks in use keep their
// contents, but trimming moves them into a smaller allocation, so call it
// between inference calls, not during one. A later cache grows the pool
// again.
func (m *Model) TrimKV() int64 { return m.kvPool().trim(m.Backend) }

// kvPool returns the Model's pool, creating the default one on first use.
func (m *Model) kvPool() *kvPool {
	if m.kv == nil {
		m.kv = newKVPool(m.Config, KVOptions{})
	}
	return m.kv
}

// kvPool hands out fixed-size KV blocks and counts their references. Every
// block lives in one backend Buffer (mem), block id b at b·stride, so
// attention reads a batch's blocks by id through device-side block tables
// (kernels.PagedKV) and a decode step's addresses stay fixed while the pool
// does not grow. Inside a block, layer l's K [BlockSize, KVH·D] is at
// 2l·BlockSize·KVH·D and its V right after, so a copy on write moves a
// block with one Copy.
//
// The pool grows on demand up to its limit, by reallocating mem to the next
// size of a ladder of four sizes per doubling (growth costs one Copy of the
// old memory; the ladder bounds the unused blocks at a quarter), and takes
// the lowest free id first, so blocks in use gather at the front; trim
// gives back the memory past the last block in use. It is safe for
// concurrent use (a cleanup may release blocks from another goroutine);
// growing and trimming move the blocks in use, so they must not overlap
// with inference on the pool.
type kvPool struct {
	layers, rowLen, bs int
	dtype              kernels.DType
	stride             int // elements per block
	maxBlocks          int // 0: not bounded
	maxBytes           int64
	blockBytes         int64

	mu sync.Mutex
	// retired is set (to the backend) once the Model replaced the pool
	// (SetKVOptions): when its last block in use is released its memory
	// is freed at once, since no cache will take a block again.
	retired kernels.Backend
	mem     kernels.Buffer // cap·stride elements of dtype
	refs    []int32        // per id < cap
	free    idHeap         // ids < cap with no reference, lowest first
	inUse   int
}

func newKVPool(c Config, o KVOptions) *kvPool {
	if o.BlockSize == 0 {
		o.BlockSize = 64
	}
	p := &kvPool{layers: c.NumLayers, rowLen: c.KVDim(), bs: o.BlockSize, dtype: o.DType, maxBytes: o.MaxBytes}
	p.stride = 2 * p.layers * p.bs * p.rowLen
	p.blockBytes = int64(p.stride) * int64(p.dtype.Size())
	if o.MaxBytes > 0 {
		p.maxBlocks = int(max(o.MaxBytes/max(p.blockBytes, 1), 0))
		if p.maxBlocks == 0 {
			p.maxBlocks = -1 // smaller than one block: nothing fits
		}
	}
	return p
}

// cap is the number of blocks the pool's memory holds.
func (p *kvPool) capBlocks() int { return len(p.refs) }

// alloc takes a block with one reference, growing the pool's memory (from
// be) when no block is free.
func (p *kvPool) alloc(be kernels.Backend) (int32, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.free.Len() == 0 {
		if err := p.grow(be); err != nil {
			return 0, err
		}
	}
	id := p.free.pop()
	p.refs[id] = 1
	p.inUse++
	return id, nil
}

// grow reallocates the pool's memory for the next size of the ladder
// (growLadder), copying the blocks over, within the limit.
func (p *kvPool) grow(be kernels.Backend) error {
	old := p.capBlocks()
	n := growLadder(old + 1)
	if p.maxBlocks != 0 {
		n = min(n, max(p.maxBlocks, 0))
	}
	if n <= old {
		return fmt.Errorf("%w: %d blocks of %d bytes in use", ErrKVPoolFull, old, p.blockBytes)
	}
	if err := p.resize(be, n); err != nil {
		return err
	}
	for id := old; id < n; id++ {
		p.free.push(int32(id))
	}
	return nil
}

// reserveFree grows the pool's memory, within its limit, until at least n
// blocks are free, so that the caches it serves can take n more blocks
// without the pool moving (a move makes every recorded decode step stale).
// At the limit it grows as far as the limit allows and leaves the rest to
// alloc, which reports a real shortage when a block is taken.
func (p *kvPool) reserveFree(be kernels.Backend, n int) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	short := n - p.free.Len()
	if short <= 0 {
		return nil
	}
	old := p.capBlocks()
	want := growLadder(old + short)
	if p.maxBlocks != 0 {
		want = min(want, max(p.maxBlocks, 0))
	}
	if want <= old {
		return nil
	}
	if err := p.resize(be, want); err != nil {
		return err
	}
	for id := old; id < want; id++ {
		p.free.push(int32(id))
	}
	return nil
}

// growLadder is the smallest pool size of at least n blocks: n itself up
// to 8, then multiples of a quarter of the power of two below n (4, 5, 6,
// 7 times 2^k), so a growing pool reallocates O(log n) times and holds at
// most a quarter more blocks than it needed.
func growLadder(n int) int {
	if n <= 8 {
		return n
	}
	step := 1 << (bits.Len(uint(n)) - 3)
	return (n + step - 1) / step * step
}

// resize gives the pool memory for n blocks (none when n is 0), keeping
// the first min(n, cap) blocks' contents, and sets refs to n entries.
func (p *kvPool) resize(be kernels.Backend, n int) error {
	var mem kernels.Buffer
	if n > 0 {
		var err error
		if mem, err = be.Alloc(p.dtype, n*p.stride); err != nil {
			return fmt.Errorf("model: KV pool of %d blocks of %d bytes: %w", n, p.blockBytes, err)
		}
		if keep := min(n, p.capBlocks()) * p.stride; keep > 0 {
			be.Copy(mem.Slice(0, keep), p.mem.Slice(0, keep))
		}
	}
	if p.mem.Len() > 0 {
		be.Free(p.mem)
	}
	p.mem = mem
	if n < len(p.refs) {
		p.refs = p.refs[:n]
	} else {
		p.refs = append(p.refs, make([]int32, n-len(p.refs))...)
	}
	return nil
}

// trim gives the memory of the free blocks past the last block in use back
// to be (all of it when no block is in use) and returns the bytes dropped.
func (p *kvPool) trim(be kernels.Backend) int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.trimLocked(be)
}

func (p *kvPool) trimLocked(be kernels.Backend) int64 {
	old := p.capBlocks()
	n := old
	for n > 0 && p.refs[n-1] == 0 {
		n--
	}
	if n == old {
		return 0
	}
	if err := p.resize(be, n); err != nil {
		return 0 // no memory for the smaller copy: the pool keeps its own
	}
	p.free.keepBelow(int32(n))
	return int64(old-n) * p.blockBytes
}

// retire marks the pool replaced (SetKVOptions): its memory goes back to be
// now if no block is in use, else when the last one is released.
func (p *kvPool) retire(be kernels.Backend) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.trimLocked(be)
	p.retired = be
}

// releaseAll gives the pool's memory back to be, blocks in use or not
// (Model.Close: no cache may use the pool afterwards).
func (p *kvPool) releaseAll(be kernels.Backend) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mem.Len() > 0 {
		be.Free(p.mem)
	}
	p.mem = kernels.Buffer{}
	p.refs, p.free, p.inUse = nil, nil, 0
}

// empty reports whether the pool holds no memory.
func (p *kvPool) empty() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mem.Len() == 0
}

// retain adds a reference to each block.
func (p *kvPool) retain(ids []int32) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, id := range ids {
		p.refs[id]++
	}
}

// release drops a reference to each block, freeing those left with none.
// Blocks of a pool whose memory Model.Close gave back are ignored.
func (p *kvPool) release(ids []int32) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, id := range ids {
		if int(id) >= len(p.refs) {
			continue // the pool's memory was given back (releaseAll)
		}
		if p.refs[id] <= 0 {
			panic(fmt.Sprintf("model: KV block %d released more often than taken", id))
		}
		p.refs[id]--
		if p.refs[id] == 0 {
			p.free.push(id)
			p.inUse--
		}
	}
	if p.retired != nil && p.inUse == 0 && p.mem.Len() > 0 {
		p.retired.Free(p.mem)
		p.mem = kernels.Buffer{}
		p.refs, p.free = nil, nil
	}
}

// shared reports whether block id has more than one reference.
func (p *kvPool) shared(id int32) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.refs[id] > 1
}

// copyBlock copies block src into dst (every layer, K and V, all
// positions) with one Copy.
func (p *kvPool) copyBlock(be kernels.Backend, dst, src int32) {
	p.mu.Lock()
	mem := p.mem
	p.mu.Unlock()
	be.Copy(mem.Slice(int(dst)*p.stride, int(dst+1)*p.stride), mem.Slice(int(src)*p.stride, int(src+1)*p.stride))
}

// paged returns layer l's view of the pool for attention and the KV write,
// reading block ids from tables ([B, stride]).
func (p *kvPool) paged(l int, tables kernels.Buffer, stride int) kernels.PagedKV {
	p.mu.Lock()
	defer p.mu.Unlock()
	size := p.bs * p.rowLen
	return kernels.PagedKV{Pool: p.mem, BlockSize: p.bs, BlockStride: p.stride, KOff: 2 * l * size, VOff: (2*l + 1) * size,
		Tables: tables, TableStride: stride}
}

func (p *kvPool) stats() KVStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := KVStats{BlockSize: p.bs, DType: p.dtype, MaxBytes: p.maxBytes,
		BytesPerToken: 2 * p.layers * p.rowLen * p.dtype.Size(), Blocks: p.capBlocks(), InUse: p.inUse}
	s.Bytes = int64(s.Blocks) * p.blockBytes
	for _, r := range p.refs {
		if r > 1 {
			s.Shared++
		}
	}
	return s
}

// idHeap is a min-heap of block ids (container/heap).
type idHeap []int32

func (h idHeap) Len() int           { return len(h) }
func (h idHeap) Less(i, j int) bool { return h[i] < h[j] }
func (h idHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *idHeap) Push(x any)        { *h = append(*h, x.(int32)) }
func (h *idHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

func (h *idHeap) push(id int32) { heap.Push(h, id) }
func (h *idHeap) pop() int32    { return heap.Pop(h).(int32) }

// keepBelow drops the ids ≥ n.
func (h *idHeap) keepBelow(n int32) {
	*h = slices.DeleteFunc(*h, func(id int32) bool { return id >= n })
	heap.Init(h)
}
