package cuda

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"sync"
	"unsafe"
)

// twin is the host twin of the CUDA driver: the driver seam implemented on
// the CPU, so Device's memory layer, staging, sticky errors, status checks,
// allocator and graphs run in the host build's conformance suite.
//
//   - Device memory and page-locked memory are anonymous mappings outside
//     the Go heap (mapAnon), each followed by a guard page; a device
//     address is the mapping's address, which the kernels (run in C++ by
//     the SIMT shim) dereference. Copies check that they stay inside one
//     allocation, as the GPU's memory protection would.
//   - Streams are queues. Nothing queued runs until the host waits for it
//     (streamSync, eventSync, a copy into pageable memory, free), and then
//     it runs in order. This is the laziest schedule a GPU could pick, so
//     code that reads a result without waiting, or writes page-locked
//     memory that a queued copy has yet to read, gets the wrong bytes here
//     every time instead of now and then on a GPU.
//   - Copies from pageable memory take their bytes when called, copies to
//     pageable memory wait for the stream, copies to or from page-locked
//     memory move the bytes when the stream reaches them: CUDA's rules.
//   - Events mark a stream's queue position; an event is reached once the
//     stream has run up to it; a stream waiting for an event runs the other
//     stream up to it first.
//   - A launch checks the packed parameters against the kernel's C
//     signature before queueing it; a kernel that fails when run (a shim
//     deadlock, a warp collective with the wrong mask) fails the whole
//     twin, as a kernel fault does a CUDA context: every later call returns
//     the error.
//   - Graphs: a capturing stream records its work instead of queueing it;
//     a graph launch queues the recording. Copies to or from pageable
//     memory, waits and events are refused while capturing, as CUDA
//     refuses them.
//
// It is safe for concurrent use; one mutex serialises everything,
// kernels included.
type twin struct {
	mu       sync.Mutex
	runner   twinRunner
	workers  int
	capacity int64
	used     int64
	regions  []*twinRegion // sorted by base
	streams  handles[streamH, *twinStream]
	events   handles[eventH, *twinEvent]
	graphs   handles[graphH, *twinGraph]
	kernels  []twinKernel
	failed   error
}

// twinRunner runs kernels for the twin: the SIMT shim in the host build,
// a recorder in the plain-Go tests.
type twinRunner interface {
	// kernel returns kernel name's number and C signature (args' letters).
	kernel(name string) (int, string, error)
	// run runs kernel k over dm with smem bytes of dynamic shared memory
	// per block and the parameter block p, on up to workers OS threads,
	// and returns when it is done.
	run(k int, dm dims, smem int, p []byte, workers int) error
}

type twinRegion struct {
	base   uintptr
	mem    []byte
	pinned bool
	unmap  func() error
}

type twinOp struct {
	what string
	run  func() error
}

type twinStream struct {
	queue   []twinOp
	queued  int64 // ops ever queued
	ran     int64 // ops run
	capture *twinGraph
}

type twinEvent struct {
	s   *twinStream
	seq int64
}

type twinGraph struct{ ops []twinOp }

type twinKernel struct{ name, sig string }

// newTwin returns a twin with capacity bytes of device memory whose
// kernels run through runner on up to workers threads.
func newTwin(runner twinRunner, capacity int64, workers int) *twin {
	return &twin{runner: runner, workers: max(workers, 1), capacity: capacity,
		streams: newHandles[streamH, *twinStream]("twin: stream"), events: newHandles[eventH, *twinEvent]("twin: event"),
		graphs: newHandles[graphH, *twinGraph]("twin: graph")}
}

func (t *twin) describe() string {
	return fmt.Sprintf("host twin (%d workers, %s of memory)", t.workers, gib(t.capacity))
}

func (t *twin) memInfo() (int64, int64, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.capacity - t.used, t.capacity, nil
}

// mapRegion maps n bytes and records the region.
func (t *twin) mapRegion(n int64, pinned bool) (*twinRegion, error) {
	mem, unmap, err := mapAnon(n)
	if err != nil {
		return nil, err
	}
	r := &twinRegion{base: uintptr(unsafe.Pointer(unsafe.SliceData(mem))), mem: mem, pinned: pinned, unmap: unmap}
	i, _ := slices.BinarySearchFunc(t.regions, r.base, func(x *twinRegion, b uintptr) int { return cmpInt(devptr(x.base), devptr(b)) })
	t.regions = slices.Insert(t.regions, i, r)
	return r, nil
}

// region returns the region holding [p, p+n) and p's offset in it.
func (t *twin) region(p uintptr, n int64) (*twinRegion, int64, bool) {
	i, found := slices.BinarySearchFunc(t.regions, p, func(x *twinRegion, b uintptr) int { return cmpInt(devptr(x.base), devptr(b)) })
	if !found {
		i--
	}
	if i < 0 {
		return nil, 0, false
	}
	r := t.regions[i]
	off := int64(p - r.base)
	if off < 0 || off+n > int64(len(r.mem)) {
		return nil, 0, false
	}
	return r, off, true
}

// unmapRegion removes the region based at p.
func (t *twin) unmapRegion(p uintptr, pinned bool) error {
	r, off, ok := t.region(p, 0)
	if !ok || off != 0 || r.pinned != pinned {
		return fmt.Errorf("freeing %#x: not an allocation", p)
	}
	t.runAll()
	i := slices.Index(t.regions, r)
	t.regions = slices.Delete(t.regions, i, i+1)
	if !pinned {
		t.used -= int64(len(r.mem))
	}
	return r.unmap()
}

func (t *twin) malloc(n int64) (devptr, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.failed != nil {
		return 0, t.failed
	}
	if n <= 0 || t.used+n > t.capacity {
		return 0, fmt.Errorf("twin: cuMemAlloc %d bytes (%s of %s in use): %w", n, gib(t.used), gib(t.capacity), errOutOfMemory)
	}
	r, err := t.mapRegion(n, false)
	if err != nil {
		return 0, fmt.Errorf("twin: cuMemAlloc %d bytes: %w", n, err)
	}
	t.used += n
	return devptr(r.base), nil
}

// free waits for every stream (cuMemFree synchronises), then unmaps.
func (t *twin) free(p devptr) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.unmapRegion(uintptr(p), false); err != nil {
		return fmt.Errorf("twin: cuMemFree: %w", err)
	}
	return t.failed
}

func (t *twin) hostAlloc(n int64) (unsafe.Pointer, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	r, err := t.mapRegion(n, true)
	if err != nil {
		return nil, fmt.Errorf("twin: cuMemAllocHost %d bytes: %w", n, err)
	}
	return unsafe.Pointer(unsafe.SliceData(r.mem)), nil
}

func (t *twin) hostFree(p unsafe.Pointer) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.unmapRegion(uintptr(p), true); err != nil {
		return fmt.Errorf("twin: cuMemFreeHost: %w", err)
	}
	return nil
}

func (t *twin) streamCreate() (streamH, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.streams.add(&twinStream{}), nil
}

func (t *twin) stream(s streamH) (*twinStream, error) { return t.streams.get(s) }

// onStream runs f with s's queue under the lock.
func (t *twin) onStream(s streamH, f func(st *twinStream) error) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	st, err := t.stream(s)
	if err != nil {
		return err
	}
	return f(st)
}

func (t *twin) streamDestroy(s streamH) error {
	return t.onStream(s, func(st *twinStream) error {
		t.runTo(st, st.queued)
		_, err := t.streams.take(s)
		return err
	})
}

// runTo runs st's queue up to op number seq. A failing op fails the twin
// and drops every queue, as a kernel fault ends a CUDA context.
func (t *twin) runTo(st *twinStream, seq int64) {
	for st.ran < seq && len(st.queue) > 0 && t.failed == nil {
		op := st.queue[0]
		st.queue = st.queue[1:]
		st.ran++
		if err := op.run(); err != nil {
			t.failed = fmt.Errorf("twin: %s: %w", op.what, err)
			for _, x := range t.streams.m {
				x.ran, x.queue = x.queued, nil
			}
		}
	}
}

// runAll runs every stream to its end.
func (t *twin) runAll() {
	for _, st := range t.streams.m {
		t.runTo(st, st.queued)
	}
}

func (t *twin) streamSync(s streamH) error {
	return t.onStream(s, func(st *twinStream) error {
		if st.capture != nil {
			return errors.New("twin: cuStreamSynchronize on a capturing stream")
		}
		t.runTo(st, st.queued)
		return t.failed
	})
}

// enqueue queues op on s, or records it when s is capturing.
func (t *twin) enqueue(s streamH, what string, run func() error) error {
	if t.failed != nil {
		return t.failed
	}
	st, err := t.stream(s)
	if err != nil {
		return err
	}
	op := twinOp{what: what, run: run}
	if st.capture != nil {
		st.capture.ops = append(st.capture.ops, op)
		return nil
	}
	st.queue = append(st.queue, op)
	st.queued++
	return nil
}

func (t *twin) eventCreate() (eventH, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.events.add(&twinEvent{}), nil
}

func (t *twin) eventDestroy(e eventH) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, err := t.events.take(e)
	return err
}

func (t *twin) event(e eventH) (*twinEvent, error) { return t.events.get(e) }

func (t *twin) eventRecord(e eventH, s streamH) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	ev, err := t.event(e)
	if err != nil {
		return err
	}
	st, err := t.stream(s)
	if err != nil {
		return err
	}
	if st.capture != nil {
		return errors.New("twin: cuEventRecord on a capturing stream")
	}
	ev.s, ev.seq = st, st.queued
	return t.failed
}

func (t *twin) eventSync(e eventH) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	ev, err := t.event(e)
	if err != nil {
		return err
	}
	if ev.s != nil {
		t.runTo(ev.s, ev.seq)
	}
	return t.failed
}

func (t *twin) eventQuery(e eventH) (bool, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	ev, err := t.event(e)
	if err != nil {
		return false, err
	}
	return ev.s == nil || ev.s.ran >= ev.seq, t.failed
}

func (t *twin) streamWait(s streamH, e eventH) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	ev, err := t.event(e)
	if err != nil {
		return err
	}
	other, seq := ev.s, ev.seq
	if other == nil {
		return nil
	}
	return t.enqueue(s, "cuStreamWaitEvent", func() error {
		t.runTo(other, seq)
		return nil
	})
}

// device returns the bytes of device memory [p, p+n).
func (t *twin) device(call string, p devptr, n int64) ([]byte, error) {
	r, off, ok := t.region(uintptr(p), n)
	if !ok || r.pinned {
		return nil, fmt.Errorf("twin: %s: device range [%#x, +%d) is not inside one allocation", call, uint64(p), n)
	}
	return r.mem[off : off+n], nil
}

// host returns host memory [p, p+n) and whether it is page-locked (then
// as the region's own bytes).
func (t *twin) host(p unsafe.Pointer, n int64) ([]byte, bool) {
	if r, off, ok := t.region(uintptr(p), n); ok && r.pinned {
		return r.mem[off : off+n], true
	}
	return unsafe.Slice((*byte)(p), n), false
}

func (t *twin) capturing(s streamH) bool {
	st, ok := t.streams.m[s]
	return ok && st.capture != nil
}

func (t *twin) copyHtoD(dst devptr, src unsafe.Pointer, n int64, s streamH) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	d, err := t.device("cuMemcpyHtoDAsync", dst, n)
	if err != nil {
		return err
	}
	h, pinned := t.host(src, n)
	if !pinned {
		if t.capturing(s) {
			return errors.New("twin: cuMemcpyHtoDAsync from pageable memory on a capturing stream")
		}
		h = bytes.Clone(h) // read now, as CUDA stages pageable memory before returning
	}
	return t.enqueue(s, "cuMemcpyHtoDAsync", func() error { copy(d, h); return nil })
}

func (t *twin) copyDtoH(dst unsafe.Pointer, src devptr, n int64, s streamH) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	d, err := t.device("cuMemcpyDtoHAsync", src, n)
	if err != nil {
		return err
	}
	h, pinned := t.host(dst, n)
	if err := t.enqueue(s, "cuMemcpyDtoHAsync", func() error { copy(h, d); return nil }); err != nil {
		return err
	}
	if pinned {
		return nil
	}
	// Into pageable memory the copy returns once the data is there.
	st, _ := t.stream(s)
	if st.capture != nil {
		return errors.New("twin: cuMemcpyDtoHAsync into pageable memory on a capturing stream")
	}
	t.runTo(st, st.queued)
	return t.failed
}

func (t *twin) copyDtoD(dst, src devptr, n int64, s streamH) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	d, err := t.device("cuMemcpyDtoDAsync", dst, n)
	if err != nil {
		return err
	}
	from, err := t.device("cuMemcpyDtoDAsync", src, n)
	if err != nil {
		return err
	}
	return t.enqueue(s, "cuMemcpyDtoDAsync", func() error { copy(d, from); return nil })
}

func (t *twin) memset8(dst devptr, v byte, n int64, s streamH) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	d, err := t.device("cuMemsetD8Async", dst, n)
	if err != nil {
		return err
	}
	return t.enqueue(s, "cuMemsetD8Async", func() error {
		for i := range d {
			d[i] = v
		}
		return nil
	})
}

func (t *twin) memset32(dst devptr, v uint32, n int64, s streamH) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	d, err := t.device("cuMemsetD32Async", dst, 4*n)
	if err != nil {
		return err
	}
	return t.enqueue(s, "cuMemsetD32Async", func() error {
		for i := 0; i < len(d); i += 4 {
			d[i], d[i+1], d[i+2], d[i+3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
		}
		return nil
	})
}

func (t *twin) kernel(name string) (kernelH, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.runner == nil {
		return 0, fmt.Errorf("twin: kernel %s: this twin runs no kernels", name)
	}
	k, sig, err := t.runner.kernel(name)
	if err != nil {
		return 0, err
	}
	for len(t.kernels) <= k {
		t.kernels = append(t.kernels, twinKernel{})
	}
	t.kernels[k] = twinKernel{name: name, sig: sig}
	return kernelH(k), nil
}

func (t *twin) launchKernel(k kernelH, dm dims, smem int, a *args, s streamH) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if int(k) >= len(t.kernels) || t.kernels[k].name == "" {
		return fmt.Errorf("twin: launch of unresolved kernel %d", k)
	}
	kn := t.kernels[k]
	if string(a.sig) != kn.sig {
		return fmt.Errorf("twin: cuLaunchKernel %s: the launch packs parameters (%s), the kernel takes (%s)", kn.name, a.sig, kn.sig)
	}
	p := bytes.Clone(a.b)
	return t.enqueue(s, "cuLaunchKernel "+kn.name, func() error { return t.runner.run(int(k), dm, smem, p, t.workers) })
}

func (t *twin) captureBegin(s streamH) error {
	return t.onStream(s, func(st *twinStream) error {
		if st.capture != nil {
			return errors.New("twin: cuStreamBeginCapture: already capturing")
		}
		st.capture = &twinGraph{}
		return t.failed
	})
}

func (t *twin) captureEnd(s streamH) (graphH, error) {
	var g graphH
	err := t.onStream(s, func(st *twinStream) error {
		if st.capture == nil {
			return errors.New("twin: cuStreamEndCapture: not capturing")
		}
		g = t.graphs.add(st.capture)
		st.capture = nil
		return t.failed
	})
	return g, err
}

func (t *twin) graphLaunch(g graphH, s streamH) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	gr, err := t.graphs.get(g)
	if err != nil {
		return err
	}
	return t.enqueue(s, "cuGraphLaunch", func() error {
		for _, op := range gr.ops {
			if err := op.run(); err != nil {
				return fmt.Errorf("%s: %w", op.what, err)
			}
		}
		return nil
	})
}

func (t *twin) graphDestroy(g graphH) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, err := t.graphs.take(g)
	return err
}

// close unmaps whatever is left.
func (t *twin) close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.runAll()
	var err error
	for _, r := range t.regions {
		err = errors.Join(err, r.unmap())
	}
	t.regions, t.used = nil, 0
	return err
}

// pending is the number of ops queued on s and not yet run (for tests).
func (t *twin) pending(s streamH) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.streams.m[s].queue)
}
