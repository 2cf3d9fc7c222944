package cuda

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/x/kernels"
)

// Device is this package's kernels.Backend: every op checks its shapes,
// stages host arguments, packs its kernel's arguments and queues the
// launch on the Device's stream through a driver, the CUDA driver API on a
// GPU (NewDevice, `cuda` build tag) or the host twin on the CPU (NewHost,
// `cudahost` tag). There is one implementation of the ops, so the host
// build's conformance suite checks the device path itself: memory,
// staging, launch packing, sticky errors, the kernels' index checks and
// the allocator.
//
// Execution is asynchronous and stream-ordered. An op returns once its
// work is queued; the host waits for the device only where it reads a
// value: Download, DownloadAll, the scalars of SumSquares, AllFinite and
// Argmax, Sync, and ops given host output Buffers (which it stages, see
// below). Those are the sync points. Errors follow kernels.Backend: a
// queued op records its failure as the sticky error, and a failure the
// device finds while running (a kernel fault, an index out of range,
// which the kernels report in a status word instead of reading out of
// bounds) is learnt at the next sync point; Err returns what is known
// without waiting.
//
// Memory comes from a caching allocator (alloc.go): Buffers are device
// memory, freed Buffers are reused in stream order, and MemoryStats and
// Trim expose it (kernels.MemoryReporter, kernels.MemoryTrimmer). Host
// Buffers passed to an op are staged: inputs copied to device scratch
// before the launch, outputs copied back after it, which makes the op a
// sync point (kerneltest.Counting counts such arguments; the model passes
// none). Small uploads go through a page-locked staging area, so they do
// not wait for the device either, unless its 4 MiB have filled up since
// the last wait.
//
// A Device is safe for use by one goroutine at a time. NewStream returns
// another Device on its own stream, sharing the memory and the loaded
// kernels, for another goroutine; work on different streams is ordered
// only by events (RecordEvent, WaitEvent).
type Device struct {
	sh     *shared
	stream streamH
	root   bool
	status devptr // statusBytes: the kernels' status words (status.go)
	ring   stager
	err    error
	sess   session
	graph  *Graph // the graph being captured, if any
	closed bool
	prec   kernels.MatMulPrecision // MatMul with bf16 weights (precision.go)
	// splitBlocks is the block count below which the attention forward
	// splits each row's keys over blocks (attnTargetBlocks; tests set it
	// to 0 or to a huge count to force either launch).
	splitBlocks int
	// attnPart (attnPartN bytes) holds a split attention launch's partials:
	// kept across ops, so a captured decode step replays with its address.
	attnPart  devptr
	attnPartN int64
}

// shared is what a Device and the Devices of its NewStream share.
type shared struct {
	drv      driver
	mem      *allocator
	freeOpen int64 // device memory free when the Device opened

	mu      sync.Mutex
	kernels map[string]kernelH
	views   map[*Device]bool
	graphs  map[*Graph]struct{} // live graphs, made stale when an allocation they use is freed
	n       counters
}

// Counters are the work a Device (and its streams) has asked of the
// driver, counted at the seam: what the tests assert (a decode step's
// host waits and launches) and what the seam benchmarks report, identical
// on a GPU and on the host twin.
type Counters struct {
	Launches      int64 // kernels queued
	GraphLaunches int64 // graph replays queued
	Syncs         int64 // host waits for the device (stream, event, copies into pageable memory)
	WaitNanos     int64 // host time spent in those waits: a step's wall time minus this is its host time
	Uploads       int64 // host→device copies
	UploadBytes   int64
	Downloads     int64 // device→host copies
	DownloadBytes int64
	DeviceCopies  int64 // device→device copies
	Memsets       int64
}

type counters struct {
	launches, graphs, syncs, wait, ups, upBytes, downs, downBytes, copies, memsets atomic.Int64
}

func (c *counters) snapshot() Counters {
	return Counters{Launches: c.launches.Load(), GraphLaunches: c.graphs.Load(), Syncs: c.syncs.Load(), WaitNanos: c.wait.Load(),
		Uploads: c.ups.Load(), UploadBytes: c.upBytes.Load(), Downloads: c.downs.Load(), DownloadBytes: c.downBytes.Load(),
		DeviceCopies: c.copies.Load(), Memsets: c.memsets.Load()}
}

// defaultMemoryFraction of the memory free when a Device opens is what
// its allocator may hold (SetMemoryFraction changes it): room is left for
// the driver's own allocations and other processes.
const defaultMemoryFraction = 0.95

var _ kernels.Backend = (*Device)(nil)
var _ kernels.MemoryReporter = (*Device)(nil)
var _ kernels.MemoryTrimmer = (*Device)(nil)

// newDevice opens a Device over drv: its stream, staging area and status
// words, and the allocator's limit.
func newDevice(drv driver) (*Device, error) {
	sh := &shared{drv: drv, kernels: map[string]kernelH{}, views: map[*Device]bool{}}
	sh.mem = newAllocator(sh)
	free, _, err := drv.memInfo()
	if err != nil {
		return nil, fmt.Errorf("kernels/cuda: opening: %w", err)
	}
	sh.freeOpen = free
	sh.mem.setLimit(int64(float64(free) * defaultMemoryFraction))
	d, err := sh.open(true)
	if err != nil {
		return nil, errors.Join(err, drv.close())
	}
	return d, nil
}

// open makes a Device on a new stream of sh.
func (sh *shared) open(root bool) (*Device, error) {
	s, err := sh.drv.streamCreate()
	if err != nil {
		return nil, fmt.Errorf("kernels/cuda: creating a stream: %w", err)
	}
	d := &Device{sh: sh, stream: s, root: root, splitBlocks: attnTargetBlocks}
	sh.mu.Lock()
	sh.views[d] = true
	sh.mu.Unlock()
	if err := d.ring.open(sh.drv, stagingBytes); err != nil {
		return nil, errors.Join(fmt.Errorf("kernels/cuda: staging area: %w", err), d.release())
	}
	if d.status, err = sh.mem.alloc(statusBytes, s); err == nil {
		err = d.memset8(d.status, 0, statusBytes)
	}
	if err != nil {
		return nil, errors.Join(fmt.Errorf("kernels/cuda: status words: %w", err), d.release())
	}
	return d, nil
}

// NewStream returns a Device on a new stream of d's GPU (or twin): it
// shares d's memory, allocator and kernels and has its own sticky error,
// staging area and status words. Close it before d.
func (d *Device) NewStream() (*Device, error) {
	d.live("NewStream")
	return d.sh.open(false)
}

// Close waits for the Device's work and releases it: a stream's own
// resources, or, for the Device NewDevice or NewHost returned, every
// Buffer, every stream and the device.
func (d *Device) Close() error {
	if d == nil || d.closed {
		return nil
	}
	if !d.root {
		return d.release()
	}
	d.sh.mu.Lock()
	var views []*Device
	for v := range d.sh.views {
		if v != d {
			views = append(views, v)
		}
	}
	d.sh.mu.Unlock()
	var err error
	for _, v := range views {
		err = errors.Join(err, v.release())
	}
	err = errors.Join(err, d.release(), d.sh.mem.close(), d.sh.drv.close())
	if err != nil {
		return fmt.Errorf("kernels/cuda: Close: %w", err)
	}
	return nil
}

// release waits for d's stream and frees its own resources.
func (d *Device) release() error {
	if d.closed {
		return nil
	}
	d.closed = true
	err := d.sh.drv.streamSync(d.stream)
	if d.status != 0 {
		err = errors.Join(err, d.sh.mem.free(d.status, d.stream))
	}
	if d.attnPart != 0 {
		err = errors.Join(err, d.sh.mem.free(d.attnPart, d.stream))
	}
	err = errors.Join(err, d.ring.close(d.sh.drv), d.sh.drv.streamDestroy(d.stream))
	d.sh.mu.Lock()
	delete(d.sh.views, d)
	d.sh.mu.Unlock()
	return err
}

// live panics if d has been closed: using a closed Device is a
// programmer error.
func (d *Device) live(op string) {
	if d.closed {
		panic("kernels/cuda: " + op + ": Device used after Close")
	}
}

// Name describes the device (and, on a GPU, where each kernel family was
// loaded from).
func (d *Device) Name() string { return d.sh.drv.describe() }

// MemInfo returns the device's free and total memory in bytes.
func (d *Device) MemInfo() (free, total int64, err error) {
	free, total, err = d.sh.drv.memInfo()
	if err != nil {
		err = fmt.Errorf("kernels/cuda: MemInfo: %w", err)
	}
	return free, total, err
}

// MemoryStats returns the allocator's figures (kernels.MemoryReporter).
func (d *Device) MemoryStats() kernels.MemoryStats { return d.sh.mem.stats() }

// Trim waits for the device and gives the allocator's cached free memory
// back to it (kernels.MemoryTrimmer); it returns the bytes released.
func (d *Device) Trim() (int64, error) {
	d.live("Trim")
	n, err := d.sh.mem.trim()
	if err != nil {
		err = fmt.Errorf("kernels/cuda: Trim: %w", err)
		d.fail("Trim", err)
	}
	return n, err
}

// SetMemoryFraction caps the memory the allocator may hold at f (0 < f ≤
// 1) of the device memory that was free when the Device opened (0.95 by
// default). Memory already held is kept; later allocations past the cap
// first give the cache back, then fail.
func (d *Device) SetMemoryFraction(f float64) error {
	if !(f > 0 && f <= 1) {
		return fmt.Errorf("kernels/cuda: SetMemoryFraction: %v not in (0, 1]", f)
	}
	d.sh.mem.setLimit(int64(f * float64(d.sh.freeOpen)))
	return nil
}

// ResetPeakMemory sets MemoryStats's peaks to the current figures (for a
// per-phase peak).
func (d *Device) ResetPeakMemory() { d.sh.mem.resetPeaks() }

// Counters returns the work asked of the driver so far, for d and every
// stream sharing its memory.
func (d *Device) Counters() Counters { return d.sh.n.snapshot() }

// Err is the first failure of an op that returns no error, as known
// without waiting for the device (kernels.Backend); Sync waits and
// reports what the device found.
func (d *Device) Err() error { return d.err }

// fail records err (from op) as the sticky error if there is none yet.
func (d *Device) fail(op string, err error) {
	if err == nil || d.err != nil {
		return
	}
	var se *statusError
	if !errors.As(err, &se) && !strings.HasPrefix(err.Error(), "kernels/cuda: ") {
		err = fmt.Errorf("kernels/cuda: %s: %w", op, err)
	}
	d.err = err
}

// kernel returns the driver's handle for a kernel, resolved once.
func (sh *shared) kernel(name string) (kernelH, error) {
	sh.mu.Lock()
	k, ok := sh.kernels[name]
	sh.mu.Unlock()
	if ok {
		return k, nil
	}
	k, err := sh.drv.kernel(name)
	if err != nil {
		return 0, err
	}
	sh.mu.Lock()
	sh.kernels[name] = k
	sh.mu.Unlock()
	return k, nil
}

// The allocator's memSource: segments from the driver, events on its
// streams, and a wait for all of them.

func (sh *shared) malloc(n int64) (devptr, error) { return sh.drv.malloc(n) }
func (sh *shared) free(p devptr) error            { return sh.drv.free(p) }

func (sh *shared) mark(s streamH) (eventH, error) {
	e, err := sh.drv.eventCreate()
	if err != nil {
		return 0, err
	}
	if err := sh.drv.eventRecord(e, s); err != nil {
		_ = sh.drv.eventDestroy(e)
		return 0, err
	}
	return e, nil
}

func (sh *shared) reached(e eventH) (bool, error) { return sh.drv.eventQuery(e) }
func (sh *shared) forget(e eventH)                { _ = sh.drv.eventDestroy(e) }

func (sh *shared) drain() error {
	sh.mu.Lock()
	var ss []*Device
	for v := range sh.views {
		ss = append(ss, v)
	}
	sh.mu.Unlock()
	var err error
	for _, v := range ss {
		sh.n.syncs.Add(1)
		t0 := time.Now()
		err = errors.Join(err, sh.drv.streamSync(v.stream))
		sh.n.wait.Add(int64(time.Since(t0)))
	}
	return err
}
