package cuda

import (
	"errors"
	"fmt"

	"github.com/x/kernels"
)

// CUDA graphs. A decode step is a few hundred launches; queueing each costs
// the host microseconds, so the step's host time is bound by the launch
// count unless the launches are recorded once and replayed with one call.
// A graph replays the same kernels with the same arguments, device
// addresses included, so what it records must read and write Buffers that
// stay where they are (the step's inputs are uploaded into the same
// Buffers before each replay, its outputs downloaded from the same
// Buffers after). Capture refuses what a replay could not repeat: copies
// between host and device memory (staged host arguments, uploads,
// downloads, scalar results, Sync) and Alloc; Buffers freed while
// capturing are kept until the Graph is closed, since the graph may still
// use them, and so is the scratch of the ops captured (a split GEMM's
// workspace, RMSNormBackward's rstd), which every replay writes again
// (reused from op to op within the graph, as its ops run one after the
// other, so a graph holds about its largest op's scratch). A Graph
// remembers the allocations its ops used; freeing one of them
// (Free, or the Device's attention partials growing) makes it stale, and
// Graphs records such a key again, so a step whose Buffers were
// reallocated (a KV pool or a scratch that grew) never replays onto memory
// that holds something else now.

// Graph is a recording of a Device's queued work (BeginCapture, EndCapture)
// that Replay queues again with one driver call. The Buffers it uses must
// stay allocated while it lives. A Graph is used by the goroutine of its
// Device.
type Graph struct {
	d     *Device
	g     graphH
	frees []devptr       // Buffers freed during capture, freed at Close
	spare []scratchBlock // the captured ops' scratch, reused within the capture, freed at Close
	uses  map[devptr]struct{}
	// Launches is the number of kernel launches it recorded.
	Launches int64
	start    int64
	closed   bool
	stale    bool // an allocation it uses was freed (guarded by the shared mu)
}

// BeginCapture starts recording the Device's work into a graph instead of
// queueing it: the ops called until EndCapture do not run then, they run
// on Replay.
func (d *Device) BeginCapture() error {
	d.live("BeginCapture")
	if d.err != nil {
		return d.err
	}
	if d.graph != nil {
		return errors.New("kernels/cuda: BeginCapture: already capturing")
	}
	if err := d.sh.drv.captureBegin(d.stream); err != nil {
		err = fmt.Errorf("kernels/cuda: BeginCapture: %w", err)
		d.fail("BeginCapture", err)
		return err
	}
	d.graph = &Graph{d: d, start: d.sh.n.launches.Load(), uses: map[devptr]struct{}{}}
	return nil
}

// EndCapture stops recording and returns the Graph. A failure while
// capturing (an op that is not allowed then) is returned here and is
// sticky.
func (d *Device) EndCapture() (*Graph, error) {
	d.live("EndCapture")
	g := d.graph
	if g == nil {
		return nil, errors.New("kernels/cuda: EndCapture: not capturing")
	}
	d.graph = nil
	h, err := d.sh.drv.captureEnd(d.stream)
	if err == nil && d.err != nil {
		err = d.err
		_ = d.sh.drv.graphDestroy(h)
	}
	if err != nil {
		err = fmt.Errorf("kernels/cuda: EndCapture: %w", err)
		d.fail("EndCapture", err)
		g.release()
		// Nothing recorded will run: its launches do not count.
		d.sh.n.launches.Add(-(d.sh.n.launches.Load() - g.start))
		return nil, err
	}
	g.g = h
	g.Launches = d.sh.n.launches.Load() - g.start
	d.sh.mu.Lock()
	if d.sh.graphs == nil {
		d.sh.graphs = map[*Graph]struct{}{}
	}
	d.sh.graphs[g] = struct{}{}
	d.sh.mu.Unlock()
	// The recorded launches were counted when recorded, not run.
	d.sh.n.launches.Add(-g.Launches)
	return g, nil
}

// Replay queues the recorded work on the Device's stream (no wait).
func (g *Graph) Replay() error {
	d := g.d
	d.live("Replay")
	if g.closed {
		panic("kernels/cuda: Replay: Graph used after Close")
	}
	if d.err != nil {
		return d.err
	}
	if err := d.sh.drv.graphLaunch(g.g, d.stream); err != nil {
		err = fmt.Errorf("kernels/cuda: Replay: %w", err)
		d.fail("Replay", err)
		return err
	}
	d.sh.n.graphs.Add(1)
	return nil
}

// Close destroys the graph and frees the Buffers freed while it was
// captured and the scratch its ops used.
func (g *Graph) Close() error {
	if g == nil || g.closed {
		return nil
	}
	g.closed = true
	g.d.sh.mu.Lock()
	delete(g.d.sh.graphs, g)
	g.d.sh.mu.Unlock()
	var err error
	if g.g != 0 {
		err = g.d.sh.drv.graphDestroy(g.g)
	}
	return errors.Join(err, g.release())
}

// Stale reports whether an allocation g uses has been freed since it was
// captured: replaying it would read and write memory that may hold
// something else.
func (g *Graph) Stale() bool {
	g.d.sh.mu.Lock()
	defer g.d.sh.mu.Unlock()
	return g.stale
}

// use records that the graph being captured reads or writes the
// allocation at p.
func (g *Graph) use(p devptr) { g.uses[p] = struct{}{} }

// invalidate marks stale every graph that uses the allocation at p, which
// is being freed.
func (sh *shared) invalidate(p devptr) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	for g := range sh.graphs {
		if _, ok := g.uses[p]; ok {
			g.stale = true
		}
	}
}

// takeSpare returns the smallest spare scratch block of at least n bytes,
// taken out of the spares until its op ends.
func (g *Graph) takeSpare(n int64) (scratchBlock, bool) {
	best := -1
	for i, b := range g.spare {
		if b.n >= n && (best < 0 || b.n < g.spare[best].n) {
			best = i
		}
	}
	if best < 0 {
		return scratchBlock{}, false
	}
	b := g.spare[best]
	g.spare = append(g.spare[:best], g.spare[best+1:]...)
	return b, true
}

func (g *Graph) release() error {
	var err error
	for _, p := range g.frees {
		err = errors.Join(err, g.d.sh.mem.free(p, g.d.stream))
	}
	for _, b := range g.spare {
		err = errors.Join(err, g.d.sh.mem.free(b.p, g.d.stream))
	}
	g.frees, g.spare = nil, nil
	return err
}

// Graphs keeps one Graph per key, such as a decode step's batch-size
// bucket (Bucket) and the host values that shape its launches (it is
// kernels.StepGraphs): Run runs a key's work directly the first time,
// records it the second and replays it after.
type Graphs struct {
	d    *Device
	m    map[any]*Graph
	seen map[any]bool // keys run directly once, since their last recording went stale
	// Captures counts the recordings made (a stale one recorded again
	// counts again).
	Captures int
	// Fallback is why gs stopped recording: a recording the driver or the
	// Device refused (an op that cannot be captured, a driver without
	// graph support). Nothing of a refused recording ran, so Run then did
	// the key's work directly, and every later Run does too: a step
	// graphs cannot hold costs host time, never the run. nil while gs
	// records.
	Fallback error
}

// NewGraphs returns an empty set of graphs of d.
func (d *Device) NewGraphs() *Graphs { return &Graphs{d: d, m: map[any]*Graph{}, seen: map[any]bool{}} }

// NewStepGraphs is NewGraphs as a kernels.StepGraphs (kernels.StepGrapher).
func (d *Device) NewStepGraphs() kernels.StepGraphs { return d.NewGraphs() }

var _ kernels.StepGrapher = (*Device)(nil)

// Run does key's work: the first time (and the first time after its graph
// went stale) by calling record directly, which also grows what the ops
// keep on the Device (the attention partials) to the key's size, since
// nothing may be allocated while capturing; the next time by capturing
// record into a graph and replaying it; after that by replaying it. record
// must queue the same work on the same Buffers every time. key must be
// comparable.
func (gs *Graphs) Run(key any, record func() error) error {
	if gs.Fallback != nil {
		return record()
	}
	g, ok := gs.m[key]
	if ok && g.Stale() {
		delete(gs.m, key)
		delete(gs.seen, key)
		if err := g.Close(); err != nil {
			return fmt.Errorf("kernels/cuda: closing the stale graph %v: %w", key, err)
		}
		ok = false
	}
	if !ok {
		if !gs.seen[key] {
			gs.seen[key] = true
			return record()
		}
		if gs.d.err != nil {
			return gs.d.err // a failure from before: not the recording's
		}
		if err := gs.d.BeginCapture(); err != nil {
			return gs.fallBack(key, err, record)
		}
		rerr := record()
		g2, err := gs.d.EndCapture()
		if rerr != nil || err != nil {
			return gs.fallBack(key, errors.Join(rerr, err, g2.Close()), record)
		}
		gs.m[key], g = g2, g2
		gs.Captures++
	}
	return g.Replay()
}

// fallBack records why recording key failed in gs.Fallback, clears the
// Device's error that the failed recording left (it was the recording's
// alone: the Device had none before it, and a recording runs nothing, so
// a fault of earlier work is still the driver's and comes back at the
// next wait), and does key's work directly.
func (gs *Graphs) fallBack(key any, err error, record func() error) error {
	gs.Fallback = fmt.Errorf("kernels/cuda: recording graph %v: %w", key, err)
	gs.d.err = nil
	return record()
}

// Len is the number of graphs captured.
func (gs *Graphs) Len() int { return len(gs.m) }

// Close closes every graph.
func (gs *Graphs) Close() error {
	var err error
	for k, g := range gs.m {
		err = errors.Join(err, g.Close())
		delete(gs.m, k)
	}
	clear(gs.seen)
	return err
}

// Bucket is the batch size a decode step of batch rows is captured at:
// the next power of two (so at most log₂ of the largest batch graphs
// exist; a step runs padded rows up to its bucket).
func Bucket(batch int) int {
	b := 1
	for b < batch {
		b <<= 1
	}
	return b
}
