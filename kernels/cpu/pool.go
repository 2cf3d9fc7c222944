package cpu

// The worker pool: persistent goroutines owned by a Backend, so that a call
// costs an atomic store and a few loads, not a goroutine start or a channel
// round trip (decode at batch 1 makes thousands of small calls per token).
//
// How to use it from a kernel (all helpers are methods on *Backend):
//
//	b.parallelFor(n, func(lo, hi int) { ... work on items [lo, hi) ... })
//	b.parallelForWorker(n, func(w, lo, hi int) { ... w ∈ [0, b.threads) ... })
//
// parallelFor splits [0, n) into disjoint chunks and calls fn on every chunk,
// on the calling goroutine and the workers at once; it returns when all of
// them are done. fn may be called several times per goroutine, so it must
// not assume one call per worker; parallelForWorker passes the index w of
// the goroutine running the chunk (0 is the caller), for per-worker scratch
// sized b.threads. fn must not call parallelFor itself: a nested call (or a
// call on a Backend after Close) runs inline on the calling goroutine. Jobs
// too small to be worth waking the workers should call fn(0, n) directly.
//
// Workers spin on a generation counter for a short while after each job
// (about spinIters loads, tens of microseconds) and then park on a
// condition variable; the caller wakes parked workers only when some are
// parked.

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// spinIters is how many times an idle worker polls for a new job before it
// parks.
const spinIters = 1 << 15

type pool struct {
	workers int // goroutines besides the caller

	gen     atomic.Uint64 // bumped once per job
	next    atomic.Int64  // next chunk to claim
	pending atomic.Int64  // workers that have not finished the current job
	busy    atomic.Bool   // a job is running (nested calls run inline)
	closed  atomic.Bool

	// The current job, written before gen is bumped.
	fn     func(w, lo, hi int)
	n      int
	chunk  int
	chunks int64

	mu       sync.Mutex
	cond     *sync.Cond
	sleepers int
	wg       sync.WaitGroup
}

func newPool(workers int) *pool {
	p := &pool{workers: workers}
	p.cond = sync.NewCond(&p.mu)
	p.wg.Add(workers)
	for w := 1; w <= workers; w++ {
		go p.work(w)
	}
	return p
}

func (p *pool) work(w int) {
	defer p.wg.Done()
	var seen uint64 // the generation at newPool: a job posted before this goroutine runs is not missed
	for {
		if !p.await(seen) {
			return
		}
		seen = p.gen.Load()
		p.run(w)
		p.pending.Add(-1)
	}
}

// await returns when the generation differs from seen (true) or the pool is
// closed (false).
func (p *pool) await(seen uint64) bool {
	for i := 0; i < spinIters; i++ {
		if p.gen.Load() != seen {
			return !p.closed.Load()
		}
	}
	p.mu.Lock()
	p.sleepers++
	for p.gen.Load() == seen && !p.closed.Load() {
		p.cond.Wait()
	}
	p.sleepers--
	p.mu.Unlock()
	return !p.closed.Load()
}

// run claims chunks of the current job until none are left.
func (p *pool) run(w int) {
	for {
		c := p.next.Add(1) - 1
		if c >= p.chunks {
			return
		}
		lo := int(c) * p.chunk
		p.fn(w, lo, min(lo+p.chunk, p.n))
	}
}

// do runs fn over [0,n) in chunks of size chunk on the caller and the
// workers.
func (p *pool) do(n, chunk int, fn func(w, lo, hi int)) {
	if p.workers == 0 || p.closed.Load() || !p.busy.CompareAndSwap(false, true) {
		for lo := 0; lo < n; lo += chunk {
			fn(0, lo, min(lo+chunk, n))
		}
		return
	}
	p.fn, p.n, p.chunk = fn, n, chunk
	p.chunks = int64((n + chunk - 1) / chunk)
	p.next.Store(0)
	p.pending.Store(int64(p.workers))
	p.gen.Add(1)
	p.mu.Lock()
	if p.sleepers > 0 {
		p.cond.Broadcast()
	}
	p.mu.Unlock()
	p.run(0)
	for i := 0; p.pending.Load() != 0; i++ {
		if i > 256 {
			runtime.Gosched() // a worker may be descheduled on a busy machine
		}
	}
	p.fn = nil
	p.busy.Store(false)
}

// close stops the workers and waits for them.
func (p *pool) close() {
	p.mu.Lock()
	p.closed.Store(true)
	p.cond.Broadcast()
	p.mu.Unlock()
	p.wg.Wait()
}

// parallelFor calls fn on disjoint chunks covering [0, n), spread over the
// caller and the workers, and returns when all are done. See the comment at
// the top of pool.go.
func (b *Backend) parallelFor(n int, fn func(lo, hi int)) {
	b.parallelForWorker(n, func(_, lo, hi int) { fn(lo, hi) })
}

// parallelForWorker is parallelFor that also passes the index w ∈
// [0, b.threads) of the goroutine running the chunk, for per-worker scratch.
func (b *Backend) parallelForWorker(n int, fn func(w, lo, hi int)) {
	if n <= 0 {
		return
	}
	if n == 1 || b.threads == 1 {
		fn(0, 0, n)
		return
	}
	// A few chunks per thread balance load on a shared, noisy machine.
	chunk := max(1, (n+4*b.threads-1)/(4*b.threads))
	b.pool.do(n, chunk, fn)
}
