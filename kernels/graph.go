package kernels

// StepGrapher is the optional interface of a Backend that can record a
// sequence of ops once and replay it with one call (CUDA graphs on the
// device backend): a decode step is hundreds of launches, and queueing each
// costs the host microseconds, so replaying the recorded step is what keeps
// its host time flat. The model's Batch uses it for its decode steps when
// the backend has it (NewStepGraphs), and runs the ops one by one
// otherwise; the CPU backends have no use for it and do not implement it.
type StepGrapher interface {
	// NewStepGraphs returns an empty set of recordings, or nil when the
	// backend cannot record (a wrapper around one that cannot).
	NewStepGraphs() StepGraphs
}

// StepGraphs keeps one recording per key. A recording replays the same
// ops on the same Buffers with the same host arguments, so what a step
// changes must live in Buffers that the caller fills before Run (uploads
// are not recorded), and every host value that shapes the ops (row counts,
// bounds, which ops run) must be in the key. A recording is made again
// when a Buffer it used has been freed since (its memory may hold
// something else now), so Buffers that grow by reallocation stay correct.
// A StepGraphs is used by the goroutine of its backend.
type StepGraphs interface {
	// Run replays key's recording, first recording it from record when
	// there is none or it is stale: record must queue the ops of one step
	// and nothing else (no Alloc, Upload, Download or scalar result: the
	// backend refuses them while recording). A recording the backend
	// refuses is not an error: nothing of it ran, so Run does the work
	// directly instead, then and after (the device backend's Fallback
	// says why). key must be comparable.
	Run(key any, record func() error) error
	// Close discards every recording and the memory they hold.
	Close() error
}

// NewStepGraphs returns be's StepGraphs when it implements StepGrapher
// and can record, else nil.
func NewStepGraphs(be Backend) StepGraphs {
	if g, ok := be.(StepGrapher); ok {
		return g.NewStepGraphs()
	}
	return nil
}
