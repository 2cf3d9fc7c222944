package model

import (
	"fmt"
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
// released; the old pool's blocks' memory goes back to the backend as
// soon as no cache uses them, or at Model.Close for those still held
// then. Like attaching adapters, it must not overlap with inference on m.
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

// TrimKV gives the memory of the KV pool's free blocks back to the
// backend (Backend.Free; the Go heap on a CPU backend) and returns how many
// bytes it dropped; blocks in use stay. The pool otherwise keeps its peak
// for reuse, so a trainer calls it between generation and learning, when
// the caches are released and the memory is better spent on activations. A
// later cache allocates blocks afresh. Blocks in use are untouched, so on a
// CPU backend (whose Free does nothing) it is safe to call concurrently
// with inference; on a backend serving one goroutine at a time, call it
// between inference calls.
func (m *Model) TrimKV() int64 { return m.kvPool().trim(m.Backend) }

// kvPool returns the Model's pool, creating the default one on first use.
func (m *Model) kvPool() *kvPool {
	if m.kv == nil {
		m.kv = newKVPool(m.Config, KVOptions{})
	}
	return m.kv
}

// kvPool hands out fixed-size KV blocks and counts their references. It
// grows on demand up to its limit; freed blocks are kept for reuse until
// trim gives their memory back. It is
// safe for concurrent use (a cleanup may release blocks from another
// goroutine).
type kvPool struct {
	layers, rowLen, bs int
	dtype              kernels.DType
	maxBlocks          int // 0: not bounded
	maxBytes           int64
	blockBytes         int64

	mu sync.Mutex
	// retired is set (to the backend) once the Model replaced the pool
	// (SetKVOptions): a block whose last reference goes is freed at once,
	// since no cache will take it again.
	retired kernels.Backend
	blocks  []kvBlock
	refs    []int32
	free    []int32
}

// kvBlock is one block: [BlockSize, KVH·D] of K and of V for every layer,
// views of one allocation.
type kvBlock struct {
	mem  kernels.Buffer   // the allocation, in the backend's memory
	k, v []kernels.Buffer // [L], each [BlockSize·KVH·D] of the pool's dtype
}

func newKVPool(c Config, o KVOptions) *kvPool {
	if o.BlockSize == 0 {
		o.BlockSize = 64
	}
	p := &kvPool{layers: c.NumLayers, rowLen: c.KVDim(), bs: o.BlockSize, dtype: o.DType, maxBytes: o.MaxBytes}
	p.blockBytes = int64(2*p.layers*p.bs*p.rowLen) * int64(p.dtype.Size())
	if o.MaxBytes > 0 {
		p.maxBlocks = int(max(o.MaxBytes/max(p.blockBytes, 1), 0))
		if p.maxBlocks == 0 {
			p.maxBlocks = -1 // smaller than one block: nothing fits
		}
	}
	return p
}

// alloc takes a block with one reference; new blocks come from be's
// memory.
func (p *kvPool) alloc(be kernels.Backend) (int32, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if n := len(p.free); n > 0 {
		id := p.free[n-1]
		p.free = p.free[:n-1]
		p.refs[id] = 1
		if !p.blocks[id].held() { // trimmed: its memory was given back
			b, err := p.newBlock(be)
			if err != nil {
				p.free = append(p.free, id)
				p.refs[id] = 0
				return 0, err
			}
			p.blocks[id] = b
		}
		return id, nil
	}
	if p.maxBlocks != 0 && len(p.blocks) >= max(p.maxBlocks, 0) {
		return 0, fmt.Errorf("%w: %d blocks of %d bytes in use", ErrKVPoolFull, len(p.blocks), p.blockBytes)
	}
	b, err := p.newBlock(be)
	if err != nil {
		return 0, err
	}
	p.blocks = append(p.blocks, b)
	p.refs = append(p.refs, 1)
	return int32(len(p.blocks) - 1), nil
}

// trim gives the memory of every free block back to be (their ids stay on
// the free list and get memory again when taken) and returns the bytes
// dropped.
func (p *kvPool) trim(be kernels.Backend) int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	var n int64
	for _, id := range p.free {
		if p.blocks[id].held() {
			be.Free(p.blocks[id].mem)
			p.blocks[id] = kvBlock{}
			n += p.blockBytes
		}
	}
	return n
}

// retire marks the pool replaced (SetKVOptions): its free blocks' memory
// goes back to be now, the others' when their caches release them.
func (p *kvPool) retire(be kernels.Backend) {
	p.trim(be)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.retired = be
}

// releaseAll gives the memory of every block back to be, in use or not
// (Model.Close: no cache may use the pool afterwards).
func (p *kvPool) releaseAll(be kernels.Backend) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for id := range p.blocks {
		if p.blocks[id].held() {
			be.Free(p.blocks[id].mem)
			p.blocks[id] = kvBlock{}
		}
	}
}

// empty reports whether no block of p holds memory.
func (p *kvPool) empty() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for id := range p.blocks {
		if p.blocks[id].held() {
			return false
		}
	}
	return true
}

// held reports whether the block has memory (it was not trimmed).
func (b kvBlock) held() bool { return b.k != nil }

// newBlock allocates one block's memory from be: K and V of every layer,
// views of one Buffer.
func (p *kvPool) newBlock(be kernels.Backend) (kvBlock, error) {
	size := p.bs * p.rowLen
	mem, err := be.Alloc(p.dtype, 2*p.layers*size)
	if err != nil {
		return kvBlock{}, fmt.Errorf("model: KV block of %d bytes: %w", p.blockBytes, err)
	}
	b := kvBlock{mem: mem, k: make([]kernels.Buffer, p.layers), v: make([]kernels.Buffer, p.layers)}
	for l := range p.layers {
		b.k[l] = mem.Slice((2*l)*size, (2*l+1)*size)
		b.v[l] = mem.Slice((2*l+1)*size, (2*l+2)*size)
	}
	return b, nil
}

// block returns block id's views.
func (p *kvPool) block(id int32) kvBlock {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.blocks[id]
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
func (p *kvPool) release(ids []int32) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, id := range ids {
		if p.refs[id] <= 0 {
			panic(fmt.Sprintf("model: KV block %d released more often than taken", id))
		}
		p.refs[id]--
		if p.refs[id] == 0 {
			p.free = append(p.free, id)
			if p.retired != nil && p.blocks[id].held() {
				p.retired.Free(p.blocks[id].mem)
				p.blocks[id] = kvBlock{}
			}
		}
	}
}

// shared reports whether block id has more than one reference.
func (p *kvPool) shared(id int32) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.refs[id] > 1
}

// copyRows copies the first rows positions of block src into dst, every
// layer, with be's Copy.
func (p *kvPool) copyRows(be kernels.Backend, dst, src int32, rows int) {
	n := rows * p.rowLen
	d, s := p.block(dst), p.block(src)
	for l := range p.layers {
		be.Copy(d.k[l].Slice(0, n), s.k[l].Slice(0, n))
		be.Copy(d.v[l].Slice(0, n), s.v[l].Slice(0, n))
	}
}

func (p *kvPool) stats() KVStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := KVStats{BlockSize: p.bs, DType: p.dtype, MaxBytes: p.maxBytes,
		BytesPerToken: 2 * p.layers * p.rowLen * p.dtype.Size()}
	for _, b := range p.blocks {
		if b.held() {
			s.Blocks++
		}
	}
	s.Bytes = int64(s.Blocks) * p.blockBytes
	for _, r := range p.refs {
		if r > 0 {
			s.InUse++
		}
		if r > 1 {
			s.Shared++
		}
	}
	return s
}
