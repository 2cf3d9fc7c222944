package cpu

import (
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestParallelFor checks that every index is visited exactly once, that
// worker indices stay in [0, threads), across sizes, thread counts, a
// nested call (which must run inline) and use after Close.
func TestParallelFor(t *testing.T) {
	for _, threads := range []int{1, 2, 3, 8} {
		b := New(threads)
		require.Equal(t, threads, b.Threads())
		for _, n := range []int{0, 1, 2, 7, 64, 1000, 100003} {
			hits := make([]atomic.Int32, n)
			var badWorker atomic.Bool
			for range 3 { // repeated jobs reuse the same workers
				b.parallelForWorker(n, func(w, lo, hi int) {
					if w < 0 || w >= threads {
						badWorker.Store(true)
					}
					for i := lo; i < hi; i++ {
						hits[i].Add(1)
					}
				})
			}
			for i := range hits {
				if !assert.EqualValues(t, 3, hits[i].Load(), "threads %d n %d index %d", threads, n, i) {
					break
				}
			}
			assert.False(t, badWorker.Load(), "worker index out of range")
		}
		var inner atomic.Int64
		b.parallelFor(10, func(lo, hi int) {
			for range hi - lo {
				b.parallelFor(5, func(lo2, hi2 int) { inner.Add(int64(hi2 - lo2)) })
			}
		})
		assert.EqualValues(t, 50, inner.Load(), "nested calls")
		b.Close()
		var after atomic.Int64
		b.parallelFor(100, func(lo, hi int) { after.Add(int64(hi - lo)) })
		assert.EqualValues(t, 100, after.Load(), "after Close")
	}
}

// TestNewDefaultThreads: threads ≤ 0 means one per CPU.
func TestNewDefaultThreads(t *testing.T) {
	b := New(0)
	defer b.Close()
	assert.Positive(t, b.Threads())
	assert.Contains(t, []string{"avx512", "avx2", "generic"}, b.SIMD())
}

// BenchmarkParallelForOverhead is the fixed cost of one parallelFor over
// the workers with (almost) no work: what decode pays per kernel call.
func BenchmarkParallelForOverhead(b *testing.B) {
	be := New(0)
	defer be.Close()
	var sink atomic.Int64
	for range b.N {
		be.parallelFor(be.threads, func(lo, hi int) { sink.Add(int64(hi - lo)) })
	}
}

// TestParallelForGuided checks that guided chunks cover every index exactly
// once, that no chunk is smaller than minChunk except the last, and that a
// nested call runs inline.
func TestParallelForGuided(t *testing.T) {
	for _, threads := range []int{1, 2, 3, 8} {
		b := New(threads)
		for _, tc := range []struct{ n, minChunk int }{
			{0, 16}, {1, 16}, {16, 16}, {17, 16}, {1000, 16}, {1024, 1}, {151936, 16}, {100003, 7},
		} {
			hits := make([]atomic.Int32, tc.n)
			var small atomic.Int32 // chunks below minChunk that do not end at n
			for range 3 {
				b.parallelForGuided(tc.n, tc.minChunk, func(lo, hi int) {
					if hi-lo < tc.minChunk && hi != tc.n {
						small.Add(1)
					}
					for i := lo; i < hi; i++ {
						hits[i].Add(1)
					}
				})
			}
			for i := range hits {
				if !assert.EqualValues(t, 3, hits[i].Load(), "threads %d n %d index %d", threads, tc.n, i) {
					break
				}
			}
			assert.Zero(t, small.Load(), "threads %d n %d: chunks under minChunk", threads, tc.n)
		}
		var inner atomic.Int64
		b.parallelForGuided(100, 4, func(lo, hi int) {
			b.parallelForGuided(50, 4, func(lo2, hi2 int) { inner.Add(int64(hi2 - lo2)) })
		})
		assert.Positive(t, inner.Load(), "nested calls")
		assert.Zero(t, inner.Load()%50, "nested calls cover all 50 items each time")
		b.Close()
		var after atomic.Int64
		b.parallelForGuided(100, 4, func(lo, hi int) { after.Add(int64(hi - lo)) })
		assert.EqualValues(t, 100, after.Load(), "after Close")
	}
}
