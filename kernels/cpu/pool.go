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
// call on a Backend after Close) runs inline on the calling goroutine, and
// a nested call passes w = 0, so it must not touch per-worker scratch. Jobs
// too small to be worth waking the workers should call fn(0, n) directly.
//
// Workers spin on a generation counter for a short while after each job
// (about spinIters loads, some 150 µs) and then park on a
// condition variable; the caller wakes parked workers only when some are
// parked. Chunks are claimed from an atomic counter, so a worker that is
// slow to wake (a busy machine) just finds less work: the caller waits for
// the chunks to finish, not for every worker to check in.

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// spinIters is how many times an idle worker polls for a new job before it
// parks: about 150 µs on a Zen 4 core (1<<15 polls took 36 µs). Decode at
// batch 1 leaves gaps of 5–100 µs between jobs (norms, RoPE, the residual
// adds run on the caller); with the shorter spin the worker parked about 44
// times a token and every wake-up came late (BENCHMARKS.md, "Decode at
// batch 1 with two threads").
const spinIters = 1 << 17

// waitSpinIters is how many times the caller polls for the workers' last
// chunks before it yields between polls: a worker's last chunk usually ends
// within microseconds, and runtime.Gosched costs about one.
const waitSpinIters = 1 << 13

type pool struct {
	workers int // goroutines besides the caller

	gen    atomic.Uint64       // bumped once per job
	job    atomic.Pointer[job] // the current job, published before gen is bumped
	busy   atomic.Bool         // a job is running (nested calls run inline)
	closed atomic.Bool

	mu       sync.Mutex
	cond     *sync.Cond
	sleepers int
	wg       sync.WaitGroup
}

// job is one parallelFor call. Each call gets a fresh job, so a worker that
// wakes late and still holds an old one finds its chunks all claimed and
// touches nothing; the caller waits for its chunks, never for the workers.
type job struct {
	fn     func(w, lo, hi int)
	n      int
	chunk  int          // items per chunk; with guided, the smallest chunk
	chunks int64        // chunks of size chunk (unused with guided)
	guided int          // > 0: claim max(chunk, remaining/guided) items at a time
	next   atomic.Int64 // next chunk to claim; with guided, next item
	done   atomic.Int64 // items finished
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
		if j := p.job.Load(); j != nil {
			j.run(w)
		}
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

// run claims chunks of j until none are left.
func (j *job) run(w int) {
	if j.guided > 0 {
		j.runGuided(w)
		return
	}
	for {
		c := j.next.Add(1) - 1
		if c >= j.chunks {
			return
		}
		lo := int(c) * j.chunk
		hi := min(lo+j.chunk, j.n)
		j.fn(w, lo, hi)
		j.done.Add(int64(hi - lo))
	}
}

// runGuided claims chunks that shrink with the work left (guided
// scheduling): large ones first, so that each goroutine mostly walks long
// contiguous ranges, and small ones at the end, so that the goroutines
// finish close together.
func (j *job) runGuided(w int) {
	n := int64(j.n)
	for {
		lo := j.next.Load()
		if lo >= n {
			return
		}
		hi := min(n, lo+max(int64(j.chunk), (n-lo)/int64(j.guided)))
		if !j.next.CompareAndSwap(lo, hi) {
			continue
		}
		j.fn(w, int(lo), int(hi))
		j.done.Add(hi - lo)
	}
}

// do runs fn over [0,n) on the caller and the workers, in chunks of size
// chunk or, with guided > 0, in guided chunks (see runGuided) of at least
// chunk items.
func (p *pool) do(n, chunk, guided int, fn func(w, lo, hi int)) {
	if p.workers == 0 || p.closed.Load() || !p.busy.CompareAndSwap(false, true) {
		for lo := 0; lo < n; lo += chunk {
			fn(0, lo, min(lo+chunk, n))
		}
		return
	}
	j := &job{fn: fn, n: n, chunk: chunk, chunks: int64((n + chunk - 1) / chunk), guided: guided}
	p.job.Store(j)
	p.gen.Add(1)
	p.mu.Lock()
	if p.sleepers > 0 {
		p.cond.Broadcast()
	}
	p.mu.Unlock()
	j.run(0)
	for i := 0; j.done.Load() != int64(n); i++ {
		if i > waitSpinIters {
			runtime.Gosched() // a worker may be descheduled on a busy machine
		}
	}
	p.job.Store(nil)
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
	// Several chunks per thread balance load (the last chunk of a call is
	// where one thread idles) on a shared, noisy machine; a chunk costs one
	// atomic add.
	chunk := max(1, (n+8*b.threads-1)/(8*b.threads))
	b.pool.do(n, chunk, 0, fn)
}

// parallelForGuided is parallelFor with guided chunks: each claim takes
// max(minChunk, remaining/(4·threads)) items, so the goroutines walk long
// contiguous ranges first and finish close together on small ones.
func (b *Backend) parallelForGuided(n, minChunk int, fn func(lo, hi int)) {
	if n <= 0 {
		return
	}
	if n <= minChunk || b.threads == 1 {
		fn(0, n)
		return
	}
	b.pool.do(n, minChunk, 4*b.threads, func(_, lo, hi int) { fn(lo, hi) })
}
