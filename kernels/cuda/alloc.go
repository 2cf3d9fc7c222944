package cuda

import (
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/x/kernels"
)

// The caching allocator of device memory, in the manner of PyTorch's
// CUDACachingAllocator (read for reference; written here from its
// documented behaviour):
//
//   - requests round up to 512 bytes; those up to 1 MiB come from a small
//     pool, carved out of 2 MiB segments; larger ones from a large pool,
//     out of 20 MiB segments for requests under 10 MiB and otherwise out
//     of a segment of their own size rounded up to 2 MiB;
//   - a segment is one cudaMalloc; it is split into blocks, the best-fitting
//     free block (smallest that fits, lowest address) serves a request, and
//     the rest stays free when it is worth keeping (at least 512 bytes in
//     the small pool, more than 1 MiB in the large one); a freed block
//     merges with its free neighbours in the segment;
//   - reuse is stream-ordered: a block belongs to the stream that allocated
//     it and goes back to that stream's pool as soon as it is freed (work
//     queued later on that stream runs after the work that used it); a
//     block freed from another stream waits for an event recorded there;
//   - when the device (or the limit) refuses a segment, the allocator waits
//     for the device, gives every cached whole segment back and retries
//     once, before failing with errOutOfMemory and the figures;
//   - a limit caps what it holds (Device sets a fraction of the memory free
//     when it opened); Trim gives back the cache on request.
//
// It is a plain Go type over memSource, so its logic is tested on the CPU
// against a fake (alloc_test.go). It is safe for concurrent use.

// Granularity and pool sizes (bytes).
const (
	minBlock     = 512      // every block is a multiple of this
	smallSize    = 1 << 20  // requests up to this use the small pool
	smallSegment = 2 << 20  // the small pool's segment size
	largeSegment = 20 << 20 // the large pool's segment size for requests under minLargeOwn
	minLargeOwn  = 10 << 20 // requests from this size get a segment of their own
	roundLarge   = 2 << 20  // such segments round up to this
)

// memSource is what the allocator needs from the device: segments, and
// events that tell when a stream has finished with a freed block.
type memSource interface {
	malloc(n int64) (devptr, error) // wraps errOutOfMemory when the device is full
	free(p devptr) error
	// mark records an event on s now; reached reports whether s has
	// passed it; forget destroys it.
	mark(s streamH) (eventH, error)
	reached(e eventH) (bool, error)
	forget(e eventH)
	// drain waits for the work queued on every stream (before segments go
	// back to the device).
	drain() error
}

type blockState uint8

const (
	blockFree    blockState = iota // in its pool
	blockLive                      // handed out
	blockPending                   // freed from another stream, waiting for its event
)

// block is a piece of a segment; prev and next are its neighbours in the
// segment, in address order (nil at the segment's ends).
type block struct {
	ptr        devptr
	size       int64
	stream     streamH
	small      bool
	state      blockState
	prev, next *block
	event      eventH // blockPending: the freeing stream's event
}

// poolKey selects a free list: one per stream and pool.
type poolKey struct {
	stream streamH
	small  bool
}

// allocator is the caching allocator. Its zero value is not usable:
// newAllocator.
type allocator struct {
	mu      sync.Mutex
	src     memSource
	limit   int64 // 0: none
	live    map[devptr]*block
	pools   map[poolKey][]*block // free blocks by (size, ptr)
	pending []*block
	st      kernels.MemoryStats
}

func newAllocator(src memSource) *allocator {
	return &allocator{src: src, live: map[devptr]*block{}, pools: map[poolKey][]*block{}}
}

// roundSize is the block size serving a request of n bytes.
func roundSize(n int64) int64 {
	if n < minBlock {
		return minBlock
	}
	return (n + minBlock - 1) / minBlock * minBlock
}

// segmentSizes are the segment sizes to try for a block of size bytes: the
// pool's usual one, then, if smaller, the least that fits (so a limit or a
// nearly full device can still serve the request).
func segmentSizes(size int64) []int64 {
	if size <= smallSize {
		return []int64{smallSegment}
	}
	least := (size + roundLarge - 1) / roundLarge * roundLarge
	if size < minLargeOwn && least < largeSegment {
		return []int64{largeSegment, least}
	}
	return []int64{least}
}

// alloc returns a block of at least n bytes for stream s (0 for n == 0).
// The memory is not cleared.
func (a *allocator) alloc(n int64, s streamH) (devptr, error) {
	if n < 0 {
		return 0, fmt.Errorf("allocating %d bytes", n)
	}
	if n == 0 {
		return 0, nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := a.settle(); err != nil {
		return 0, err
	}
	size := roundSize(n)
	key := poolKey{s, size <= smallSize}
	b := a.bestFit(key, size)
	if b == nil {
		var err error
		if b, err = a.grow(size, key); err != nil {
			return 0, err
		}
	}
	b.state = blockLive
	a.split(b, size)
	a.live[b.ptr] = b
	a.st.Allocated += b.size
	a.st.PeakAllocated = max(a.st.PeakAllocated, a.st.Allocated)
	return b.ptr, nil
}

// bestFit takes the smallest free block of key's pool that holds size
// bytes out of the pool (nil if none).
func (a *allocator) bestFit(key poolKey, size int64) *block {
	l := a.pools[key]
	i, _ := slices.BinarySearchFunc(l, size, func(b *block, size int64) int {
		if b.size < size {
			return -1
		}
		return 1
	})
	if i == len(l) {
		return nil
	}
	b := l[i]
	a.pools[key] = slices.Delete(l, i, i+1)
	return b
}

// split cuts b down to size bytes when the rest is worth keeping, and
// frees the rest.
func (a *allocator) split(b *block, size int64) {
	rest := b.size - size
	if b.small && rest < minBlock || !b.small && rest <= smallSize {
		return
	}
	r := &block{ptr: b.ptr + devptr(size), size: rest, stream: b.stream, small: b.small, prev: b, next: b.next}
	if b.next != nil {
		b.next.prev = r
	}
	b.next, b.size = r, size
	a.insert(r)
}

// grow allocates a new segment for a block of size bytes; when the
// device or the limit refuses, it gives the cache back and retries once.
func (a *allocator) grow(size int64, key poolKey) (*block, error) {
	b, err := a.segment(size, key)
	if err == nil || !errors.Is(err, errOutOfMemory) {
		return b, err
	}
	a.st.OOMRetries++
	if _, rerr := a.release(); rerr != nil {
		return nil, fmt.Errorf("freeing the cache after %w: %w", err, rerr)
	}
	if b, err = a.segment(size, key); err == nil {
		return b, nil
	}
	if errors.Is(err, errOutOfMemory) {
		a.st.OOMs++
		return nil, fmt.Errorf("%w (%s allocated, %s reserved, limit %s)", err,
			gib(a.st.Allocated), gib(a.st.Reserved), limitString(a.limit))
	}
	return nil, err
}

// segment takes one segment from the device for a block of size bytes.
func (a *allocator) segment(size int64, key poolKey) (*block, error) {
	var err error
	for _, n := range segmentSizes(size) {
		if a.limit > 0 && a.st.Reserved+n > a.limit {
			err = fmt.Errorf("allocating %d bytes: %w: the limit of %s would be passed (%s reserved)", n, errOutOfMemory, gib(a.limit), gib(a.st.Reserved))
			continue
		}
		var p devptr
		if p, err = a.src.malloc(n); err != nil {
			continue
		}
		a.st.DeviceAllocs++
		a.st.Reserved += n
		a.st.PeakReserved = max(a.st.PeakReserved, a.st.Reserved)
		return &block{ptr: p, size: n, stream: key.stream, small: key.small}, nil
	}
	return nil, err
}

// free returns the block at p, freed from stream s. It is reusable at
// once by the stream that allocated it; freed from another stream, after
// an event recorded there now.
func (a *allocator) free(p devptr, s streamH) error {
	if p == 0 {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	b, ok := a.live[p]
	if !ok {
		return fmt.Errorf("freeing %#x, which is not a live allocation (freed twice, or a view)", uint64(p))
	}
	if s != b.stream {
		ev, err := a.src.mark(s)
		if err != nil {
			return err // still live: nothing may reuse it before s is done with it
		}
		delete(a.live, p)
		a.st.Allocated -= b.size
		b.state, b.event = blockPending, ev
		a.pending = append(a.pending, b)
		return nil
	}
	delete(a.live, p)
	a.st.Allocated -= b.size
	a.insert(b)
	return nil
}

// insert frees b, merging it with its free neighbours, into its pool.
func (a *allocator) insert(b *block) {
	b.state = blockFree
	if p := b.prev; p != nil && p.state == blockFree {
		a.remove(p)
		absorb(p, b)
		b = p
	}
	if n := b.next; n != nil && n.state == blockFree {
		a.remove(n)
		absorb(b, n)
	}
	key := poolKey{b.stream, b.small}
	l := a.pools[key]
	i, _ := slices.BinarySearchFunc(l, b, byPlace)
	a.pools[key] = slices.Insert(l, i, b)
}

// absorb merges n, b's next neighbour, into b.
func absorb(b, n *block) {
	b.size += n.size
	b.next = n.next
	if n.next != nil {
		n.next.prev = b
	}
}

// remove takes the free block b out of its pool.
func (a *allocator) remove(b *block) {
	key := poolKey{b.stream, b.small}
	l := a.pools[key]
	i, found := slices.BinarySearchFunc(l, b, byPlace)
	if !found {
		panic("kernels/cuda: allocator: a free block is missing from its pool")
	}
	a.pools[key] = slices.Delete(l, i, i+1)
}

// byPlace orders a pool: by size, then address.
func byPlace(x, y *block) int {
	if x.size != y.size {
		return cmpInt(x.size, y.size)
	}
	return cmpInt(x.ptr, y.ptr)
}

func cmpInt[T int64 | devptr](x, y T) int {
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}

// settle frees the pending blocks whose events have been reached.
func (a *allocator) settle() error {
	kept := a.pending[:0]
	for _, b := range a.pending {
		done, err := a.src.reached(b.event)
		if err != nil {
			return err
		}
		if !done {
			kept = append(kept, b)
			continue
		}
		a.src.forget(b.event)
		a.insert(b)
	}
	clear(a.pending[len(kept):])
	a.pending = kept
	return nil
}

// release waits for the device, then gives every cached whole segment
// back and returns the bytes released.
func (a *allocator) release() (int64, error) {
	if err := a.src.drain(); err != nil {
		return 0, err
	}
	if err := a.settle(); err != nil {
		return 0, err
	}
	var n int64
	for key, l := range a.pools {
		kept := l[:0]
		for _, b := range l {
			if b.prev != nil || b.next != nil {
				kept = append(kept, b)
				continue
			}
			if err := a.src.free(b.ptr); err != nil {
				return n, err
			}
			a.st.DeviceFrees++
			a.st.Reserved -= b.size
			n += b.size
		}
		clear(l[len(kept):])
		a.pools[key] = kept
	}
	return n, nil
}

// trim is release under the lock (MemoryTrimmer).
func (a *allocator) trim() (int64, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.release()
}

// setLimit caps the bytes held from the device (0: no cap). Memory held
// already is not given back.
func (a *allocator) setLimit(n int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.limit = max(n, 0)
	a.st.Limit = a.limit
}

// stats returns the figures.
func (a *allocator) stats() kernels.MemoryStats {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.st
}

// resetPeaks sets the peaks to the current figures.
func (a *allocator) resetPeaks() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.st.PeakAllocated, a.st.PeakReserved = a.st.Allocated, a.st.Reserved
}

// close gives every segment back, live blocks included (the device is
// going away).
func (a *allocator) close() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := a.src.drain(); err != nil {
		return err
	}
	for _, b := range a.pending {
		a.src.forget(b.event)
		b.state = blockFree
	}
	// Every segment starts with a block whose prev is nil; walk from
	// each such block of the three lists.
	var err error
	seen := map[devptr]bool{}
	visit := func(b *block) {
		for b.prev != nil {
			b = b.prev
		}
		if seen[b.ptr] {
			return
		}
		seen[b.ptr] = true
		var size int64
		for x := b; x != nil; x = x.next {
			size += x.size
		}
		if e := a.src.free(b.ptr); e != nil && err == nil {
			err = e
		}
		a.st.DeviceFrees++
		a.st.Reserved -= size
	}
	for _, b := range a.live {
		visit(b)
	}
	for _, b := range a.pending {
		visit(b)
	}
	for _, l := range a.pools {
		for _, b := range l {
			visit(b)
		}
	}
	a.live, a.pools, a.pending = map[devptr]*block{}, map[poolKey][]*block{}, nil
	a.st.Allocated = 0
	return err
}

func gib(n int64) string { return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30)) }

func limitString(n int64) string {
	if n == 0 {
		return "none"
	}
	return gib(n)
}
