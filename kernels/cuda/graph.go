package cuda

import (
	"errors"
	"fmt"
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
// workspace, RMSNormBackward's rstd), which every replay writes again.

// Graph is a recording of a Device's queued work (BeginCapture, EndCapture)
// that Replay queues again with one driver call. The Buffers it uses must
// stay allocated while it lives. A Graph is used by the goroutine of its
// Device.
type Graph struct {
	d     *Device
	g     graphH
	frees []devptr // Buffers freed and op scratch used during capture, freed at Close
	// Launches is the number of kernel launches it recorded.
	Launches int64
	start    int64
	closed   bool
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
	d.graph = &Graph{d: d, start: d.sh.n.launches.Load()}
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
		return nil, err
	}
	g.g = h
	g.Launches = d.sh.n.launches.Load() - g.start
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
	var err error
	if g.g != 0 {
		err = g.d.sh.drv.graphDestroy(g.g)
	}
	return errors.Join(err, g.release())
}

func (g *Graph) release() error {
	var err error
	for _, p := range g.frees {
		err = errors.Join(err, g.d.sh.mem.free(p, g.d.stream))
	}
	g.frees = nil
	return err
}

// Graphs keeps one Graph per key, such as a decode step's batch-size
// bucket (Bucket): Run records a key's work the first time and replays it
// after.
type Graphs struct {
	d *Device
	m map[int]*Graph
}

// NewGraphs returns an empty set of graphs of d.
func (d *Device) NewGraphs() *Graphs { return &Graphs{d: d, m: map[int]*Graph{}} }

// Run replays key's graph, capturing it from record first if there is
// none: record must queue the same work on the same Buffers every time.
func (gs *Graphs) Run(key int, record func() error) error {
	g, ok := gs.m[key]
	if !ok {
		if err := gs.d.BeginCapture(); err != nil {
			return err
		}
		rerr := record()
		g2, err := gs.d.EndCapture()
		if rerr != nil {
			return errors.Join(fmt.Errorf("kernels/cuda: recording graph %d: %w", key, rerr), g2.Close())
		}
		if err != nil {
			return err
		}
		gs.m[key], g = g2, g2
	}
	return g.Replay()
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
