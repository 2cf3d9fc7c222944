//go:build cuda

package cuda

import (
	"fmt"
	"math/bits"

	"gorgonia.org/cu"
)

// pool is a caching device allocator: sizes round up to a power of two
// (at least 256 bytes, cudaMalloc's alignment) and freed blocks wait in a
// free list per size class, so the steady state of a training or decode
// loop allocates nothing from the driver. Used only on the driver
// goroutine.
type pool struct {
	free  map[int64][]cu.DevicePtr
	size  map[cu.DevicePtr]int64 // live and free blocks -> their class
	bytes int64                  // total held from the driver
}

func sizeClass(n int64) int64 {
	if n <= 256 {
		return 256
	}
	return int64(1) << bits.Len64(uint64(n-1))
}

// alloc returns a block of at least n bytes (0 for n == 0).
func (p *pool) alloc(n int64) (cu.DevicePtr, error) {
	if n <= 0 {
		return 0, nil
	}
	if p.free == nil {
		p.free, p.size = map[int64][]cu.DevicePtr{}, map[cu.DevicePtr]int64{}
	}
	c := sizeClass(n)
	if l := p.free[c]; len(l) > 0 {
		ptr := l[len(l)-1]
		p.free[c] = l[:len(l)-1]
		return ptr, nil
	}
	ptr, err := cu.MemAlloc(c)
	if err != nil {
		// Give the cached blocks back and try once more.
		p.trim()
		if ptr, err = cu.MemAlloc(c); err != nil {
			return 0, fmt.Errorf("cuda: cuMemAlloc %d bytes (pool holds %d): %w", c, p.bytes, err)
		}
	}
	p.size[ptr] = c
	p.bytes += c
	return ptr, nil
}

// put returns ptr to its free list.
func (p *pool) put(ptr cu.DevicePtr) {
	if ptr == 0 {
		return
	}
	c, ok := p.size[ptr]
	if !ok {
		panic(fmt.Sprintf("kernels/cuda: pool: freeing %v, which the pool did not allocate", ptr))
	}
	p.free[c] = append(p.free[c], ptr)
}

// trim frees every cached block back to the driver.
func (p *pool) trim() {
	for c, l := range p.free {
		for _, ptr := range l {
			_ = cu.MemFree(ptr)
			delete(p.size, ptr)
			p.bytes -= c
		}
		delete(p.free, c)
	}
}

// release frees every block, live or cached (the context is going away).
func (p *pool) release() {
	for ptr := range p.size {
		_ = cu.MemFree(ptr)
	}
	p.free, p.size, p.bytes = nil, nil, 0
}
