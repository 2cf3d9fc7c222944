package cuda

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeMem is a device for the allocator: it hands out address ranges up to
// a capacity, records its calls, and completes events only when a test
// says so (or at drain).
type fakeMem struct {
	capacity, used int64
	next           devptr
	segments       map[devptr]int64
	mallocs, frees int
	drains         int
	events         map[eventH]bool // recorded event -> reached
	nextEvent      eventH
	markErr        error // what mark returns, when set
}

func newFakeMem(capacity int64) *fakeMem {
	return &fakeMem{capacity: capacity, next: 1 << 32, segments: map[devptr]int64{}, events: map[eventH]bool{}}
}

func (f *fakeMem) malloc(n int64) (devptr, error) {
	if f.used+n > f.capacity {
		return 0, fmt.Errorf("fake cuMemAlloc %d bytes: %w", n, errOutOfMemory)
	}
	p := f.next
	f.next += devptr(n) + 4096 // segments are not adjacent
	f.segments[p] = n
	f.used += n
	f.mallocs++
	return p, nil
}

func (f *fakeMem) free(p devptr) error {
	n, ok := f.segments[p]
	if !ok {
		return fmt.Errorf("fake cuMemFree %#x: not a segment", uint64(p))
	}
	delete(f.segments, p)
	f.used -= n
	f.frees++
	return nil
}

func (f *fakeMem) mark(streamH) (eventH, error) {
	if f.markErr != nil {
		return 0, f.markErr
	}
	f.nextEvent++
	f.events[f.nextEvent] = false
	return f.nextEvent, nil
}

func (f *fakeMem) reached(e eventH) (bool, error) { return f.events[e], nil }
func (f *fakeMem) forget(e eventH)                { delete(f.events, e) }

func (f *fakeMem) drain() error {
	f.drains++
	for e := range f.events {
		f.events[e] = true
	}
	return nil
}

const (
	sA streamH = 1
	sB streamH = 2
	mi         = int64(1 << 20)
)

func mustAlloc(t *testing.T, a *allocator, n int64, s streamH) devptr {
	t.Helper()
	p, err := a.alloc(n, s)
	require.NoError(t, err, "alloc %d", n)
	require.NotZero(t, p)
	return p
}

func TestAllocatorRounding(t *testing.T) {
	for _, c := range []struct {
		n, block int64
		segment  int64
	}{
		{1, 512, smallSegment},
		{512, 512, smallSegment},
		{513, 1024, smallSegment},
		{mi, mi, smallSegment},
		{mi + 1, mi + 512, largeSegment},
		{9 * mi, 9 * mi, largeSegment},
		{10 * mi, 10 * mi, 10 * mi},
		{21*mi + 3, 22 * mi, 22 * mi}, // the rest of the segment, under 1 MiB, is not split off
	} {
		t.Run(fmt.Sprint(c.n), func(t *testing.T) {
			f := newFakeMem(1 << 40)
			a := newAllocator(f)
			mustAlloc(t, a, c.n, sA)
			st := a.stats()
			assert.Equal(t, c.block, st.Allocated, "block size")
			assert.Equal(t, c.segment, st.Reserved, "segment size")
			assert.Equal(t, int64(1), st.DeviceAllocs)
		})
	}
}

// TestAllocatorSplitReuseCoalesce: small requests share one segment,
// adjacent; a freed block serves the next request that fits (no new
// segment); freed neighbours merge back into the whole segment, which
// Trim then gives back.
func TestAllocatorSplitReuseCoalesce(t *testing.T) {
	f := newFakeMem(1 << 40)
	a := newAllocator(f)
	p1 := mustAlloc(t, a, 1000, sA) // 1024
	p2 := mustAlloc(t, a, 300*1024, sA)
	p3 := mustAlloc(t, a, 512, sA)
	assert.Equal(t, p1+1024, p2, "split from one segment, adjacent")
	assert.Equal(t, p2+300*1024, p3)
	assert.Equal(t, 1, f.mallocs)

	require.NoError(t, a.free(p2, sA))
	p4 := mustAlloc(t, a, 200*1024, sA) // best fit: p2's block, split again
	assert.Equal(t, p2, p4)
	assert.Equal(t, 1, f.mallocs, "reuse, no new segment")

	n, err := a.trim()
	require.NoError(t, err)
	assert.Zero(t, n, "a segment with live blocks stays")
	for _, p := range []devptr{p1, p4, p3} {
		require.NoError(t, a.free(p, sA))
	}
	assert.Equal(t, 1, len(a.pools[poolKey{sA, true}]), "the freed blocks merged into one")
	n, err = a.trim()
	require.NoError(t, err)
	assert.Equal(t, int64(smallSegment), n)
	st := a.stats()
	assert.Equal(t, int64(0), st.Reserved)
	assert.Equal(t, int64(1), st.DeviceFrees)
	assert.Empty(t, f.segments)
}

// TestAllocatorLargePool: requests under 10 MiB split 20 MiB segments;
// freed blocks serve later requests by best fit (smallest that holds it,
// across segments); a rest of at most 1 MiB stays with its block.
func TestAllocatorLargePool(t *testing.T) {
	f := newFakeMem(1 << 40)
	a := newAllocator(f)
	p1 := mustAlloc(t, a, 6*mi, sA) // segment 1: [6 live][14 free]
	p2 := mustAlloc(t, a, 9*mi, sA) // [6][9][5 free]
	assert.Equal(t, p1+devptr(6*mi), p2)
	mustAlloc(t, a, 7*mi, sA) // no fit: segment 2: [7][13 free]
	assert.Equal(t, 2, f.mallocs)
	require.NoError(t, a.free(p1, sA))   // free: 6 (seg 1 head), 5 (seg 1 tail), 13 (seg 2)
	p4 := mustAlloc(t, a, 4*mi+mi/2, sA) // best fit: the 5 MiB tail, whole
	assert.Equal(t, p2+devptr(9*mi), p4)
	p5 := mustAlloc(t, a, 5*mi+mi/2, sA) // then the 6 MiB head, whole
	assert.Equal(t, p1, p5)
	assert.Equal(t, 2, f.mallocs)
	assert.Equal(t, (6+9+5+7)*mi, a.stats().Allocated)
	mustAlloc(t, a, 14*mi, sA) // over any free block, 10 MiB or more: a segment of its own
	assert.Equal(t, 3, f.mallocs)
	assert.Equal(t, (40+14)*mi, a.stats().Reserved)
}

// TestAllocatorFragmentation: random allocations and frees of mixed sizes
// never hand out overlapping blocks, keep Allocated equal to the live
// blocks' sizes and Reserved to the device's segments, and once all is
// freed Trim gives every byte back.
func TestAllocatorFragmentation(t *testing.T) {
	f := newFakeMem(1 << 40)
	a := newAllocator(f)
	rng := rand.New(rand.NewPCG(1, 2))
	type live struct {
		p    devptr
		n    int64
		s    streamH
		size int64
	}
	var ls []live
	for range 4000 {
		if len(ls) > 0 && rng.IntN(2) == 0 {
			i := rng.IntN(len(ls))
			require.NoError(t, a.free(ls[i].p, ls[i].s))
			ls = slices.Delete(ls, i, i+1)
			continue
		}
		var n int64
		switch rng.IntN(3) {
		case 0:
			n = 1 + rng.Int64N(4096)
		case 1:
			n = 1 + rng.Int64N(mi)
		default:
			n = mi + rng.Int64N(30*mi)
		}
		s := sA
		if rng.IntN(4) == 0 {
			s = sB
		}
		p := mustAlloc(t, a, n, s)
		size := a.live[p].size
		require.GreaterOrEqual(t, size, roundSize(n))
		ls = append(ls, live{p, n, s, size})
	}
	slices.SortFunc(ls, func(x, y live) int { return cmpInt(x.p, y.p) })
	var sum int64
	for i, l := range ls {
		sum += l.size
		if i > 0 {
			assert.LessOrEqual(t, ls[i-1].p+devptr(ls[i-1].size), l.p, "blocks overlap")
		}
	}
	st := a.stats()
	assert.Equal(t, sum, st.Allocated)
	assert.Equal(t, f.used, st.Reserved)
	assert.GreaterOrEqual(t, st.Reserved, st.Allocated)
	t.Logf("%d live blocks, %s allocated, %s reserved, %d segments", len(ls), gib(st.Allocated), gib(st.Reserved), len(f.segments))
	for _, l := range ls {
		require.NoError(t, a.free(l.p, l.s))
	}
	_, err := a.trim()
	require.NoError(t, err)
	assert.Equal(t, int64(0), a.stats().Reserved)
	assert.Empty(t, f.segments)
}

// TestAllocatorStreams: a block freed on its own stream is reused by that
// stream at once but never by another stream; freed from another stream it
// waits for that stream's event.
func TestAllocatorStreams(t *testing.T) {
	f := newFakeMem(1 << 40)
	a := newAllocator(f)
	p := mustAlloc(t, a, 4096, sA)
	require.NoError(t, a.free(p, sA))
	q := mustAlloc(t, a, 4096, sB)
	assert.NotEqual(t, p, q, "stream B got stream A's block")
	assert.Equal(t, 2, f.mallocs)
	assert.Equal(t, p, mustAlloc(t, a, 4096, sA), "stream A reuses its block")

	// p is live on A; free it from B: pending until B's event.
	require.NoError(t, a.free(p, sB))
	assert.Len(t, f.events, 1)
	r := mustAlloc(t, a, 4096, sA)
	assert.NotEqual(t, p, r, "reused before the freeing stream's event")
	for e := range f.events {
		f.events[e] = true
	}
	assert.Equal(t, p, mustAlloc(t, a, 4096, sA), "reused after the event")
	assert.Empty(t, f.events, "event destroyed")
}

// TestAllocatorFreeEventFails: a block freed from another stream whose
// event cannot be recorded stays live (still counted, not reusable, freed
// again later) instead of dropping out of every list: a segment holding
// it could then never be given back, and Allocated would undercount.
func TestAllocatorFreeEventFails(t *testing.T) {
	f := newFakeMem(1 << 40)
	a := newAllocator(f)
	p := mustAlloc(t, a, 4096, sA)
	f.markErr = errors.New("fake cuEventCreate: out of resources")
	require.ErrorContains(t, a.free(p, sB), "out of resources")
	assert.Equal(t, int64(4096), a.stats().Allocated, "still counted")
	assert.NotEqual(t, p, mustAlloc(t, a, 4096, sA), "not reused")
	f.markErr = nil
	require.NoError(t, a.free(p, sB))
	for e := range f.events {
		f.events[e] = true
	}
	assert.Equal(t, p, mustAlloc(t, a, 4096, sA), "reused after the event")
}

// TestAllocatorOOMRetry: when the device is full, the allocator waits for
// it, frees its cached segments and retries, and says so in its figures;
// when even that fails, the error wraps errOutOfMemory and names the
// figures.
func TestAllocatorOOMRetry(t *testing.T) {
	f := newFakeMem(44 * mi)
	a := newAllocator(f)
	p1 := mustAlloc(t, a, 15*mi, sA) // 20 MiB segment
	p2 := mustAlloc(t, a, 15*mi, sA) // 20 MiB segment: 40 of 44 used
	require.NoError(t, a.free(p1, sA))
	require.NoError(t, a.free(p2, sA))
	// 20 MiB free blocks are cached; a 21 MiB request needs a new 22 MiB
	// segment, which does not fit until the cache is given back.
	p3, err := a.alloc(21*mi, sA)
	require.NoError(t, err)
	require.NotZero(t, p3)
	st := a.stats()
	assert.Equal(t, int64(1), st.OOMRetries)
	assert.Equal(t, int64(2), st.DeviceFrees)
	assert.Equal(t, 1, f.drains, "waited for the device before freeing")
	assert.Equal(t, 22*mi, st.Reserved)

	_, err = a.alloc(30*mi, sA)
	require.ErrorIs(t, err, errOutOfMemory)
	assert.ErrorContains(t, err, "allocated")
	st = a.stats()
	assert.Equal(t, int64(2), st.OOMRetries)
	assert.Equal(t, int64(1), st.OOMs)
}

// TestAllocatorLimit: a segment that would take the allocator past its
// limit is refused as the device would refuse it; the least segment that
// fits is tried first, then the cache is freed and the request retried,
// then it fails; setLimit(0) lifts the limit.
func TestAllocatorLimit(t *testing.T) {
	f := newFakeMem(1 << 40)
	a := newAllocator(f)
	a.setLimit(30 * mi)
	mustAlloc(t, a, 2*mi, sA) // a 20 MiB segment
	mustAlloc(t, a, 9*mi, sA) // split from it
	mustAlloc(t, a, 8*mi, sA) // its last 9 MiB (a 1 MiB rest is not split off)
	assert.Equal(t, 1, f.mallocs)
	mustAlloc(t, a, 5*mi, sA) // 20 more would pass the limit: the least segment, 6 MiB
	st := a.stats()
	assert.Equal(t, 26*mi, st.Reserved)
	assert.Equal(t, int64(0), st.OOMRetries)
	_, err := a.alloc(5*mi, sA) // 6 more would pass it too
	require.ErrorIs(t, err, errOutOfMemory)
	assert.ErrorContains(t, err, "limit")
	st = a.stats()
	assert.Equal(t, int64(1), st.OOMRetries)
	assert.Equal(t, int64(1), st.OOMs)
	assert.Equal(t, 30*mi, st.Limit)
	a.setLimit(0)
	mustAlloc(t, a, 5*mi, sA)
}
