package grpo

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/env"
	"github.com/x/kernels"
	"github.com/x/kernels/cpu"
	"github.com/x/kernels/kerneltest"
)

// phaseMeter is a counting backend that splits a GRPO step's backend
// memory by phase: generation runs from the step's start until the last
// turn decoder closes, learning (the KV pool's trim, the scoring and
// reference passes, every micro-batch's forward and backward, AdamW) from
// there to the step's end. For each phase it records the live bytes when
// it began and the most live at any allocation during it.
type phaseMeter struct {
	*kerneltest.Counting
	phase int      // index into start/peak
	start [2]int64 // live when the phase began
	first [2]int64 // live just before its first allocation (-1: none yet)
	peak  [2]int64 // the most live at any allocation
}

// Phases of phaseMeter.
const (
	phaseGenerate = iota
	phaseLearn
)

// begin starts phase ph.
func (p *phaseMeter) begin(ph int) {
	p.phase = ph
	p.start[ph] = p.Bytes
	p.first[ph] = -1
	p.peak[ph] = p.Bytes
}

// allocating records the live bytes before an allocation.
func (p *phaseMeter) allocating() {
	if p.first[p.phase] < 0 {
		p.first[p.phase] = p.Bytes
	}
}

// Alloc records the allocation in the current phase.
func (p *phaseMeter) Alloc(dt kernels.DType, n int) (kernels.Buffer, error) {
	p.allocating()
	b, err := p.Counting.Alloc(dt, n)
	p.peak[p.phase] = max(p.peak[p.phase], p.Bytes)
	return b, err
}

// Import records the import in the current phase.
func (p *phaseMeter) Import(src kernels.Buffer) (kernels.Buffer, error) {
	p.allocating()
	b, err := p.Counting.Import(src)
	p.peak[p.phase] = max(p.peak[p.phase], p.Bytes)
	return b, err
}

// meteredDecoder ends the generation phase when the batch's decoder
// closes (the trainer closes it once every rollout is done), after calling
// ended if set.
type meteredDecoder struct {
	turnDecoder
	m     *phaseMeter
	ended func()
}

func (d meteredDecoder) close() {
	d.turnDecoder.close()
	if d.ended != nil {
		d.ended()
	}
	d.m.begin(phaseLearn)
}

// stepPhases is one step's measurement.
type stepPhases struct {
	start, genPeak, learnStart, learnFirst, learnPeak, end int64
}

// meterSteps runs steps generation batches of tr (whose model runs on m)
// and measures each.
func meterSteps(t *testing.T, tr *Trainer, m *phaseMeter, steps int, rows func(int) []env.Row) []stepPhases {
	t.Helper()
	dec := tr.eng.decoder
	tr.eng.decoder = func(s sampling, stop []int32) turnDecoder { return meteredDecoder{dec(s, stop), m, nil} }
	var out []stepPhases
	for g := range steps {
		m.begin(phaseGenerate)
		_, err := tr.Step(context.Background(), rows(g))
		require.NoError(t, err, "step %d", g)
		out = append(out, stepPhases{start: m.start[phaseGenerate], genPeak: m.peak[phaseGenerate],
			learnStart: m.start[phaseLearn], learnFirst: m.first[phaseLearn], learnPeak: m.peak[phaseLearn], end: m.Bytes})
	}
	return out
}

// TestStepMemoryIsLargestPhase: a GRPO step's backend memory is the larger
// of its phases, not their sum. Every step starts and ends at the same
// live bytes (the floor: weights, adapters, their
// gradients, AdamW's moments), so learning's scratch (activations, logits
// chunk, Bᵀ copies) is given back before the next generation; and
// learning's first allocation finds the floor again, so the KV cache live
// at the end of generation is given back before learning needs memory.
// The step's peak is then the floor plus the larger phase's need.
func TestStepMemoryIsLargestPhase(t *testing.T) {
	dir := backendCheckpoint(t)
	c := cpu.New(2)
	t.Cleanup(c.Close)
	meter := &phaseMeter{Counting: onCopying(c)}
	tr := backendTrainer(t, dir, meter, false, t.TempDir())
	ph := meterSteps(t, tr, meter, 3, backendRows)
	for s, p := range ph {
		t.Logf("step %d: start %d B, generation peak +%d, at its end +%d (KV), learning's first allocation at +%d, its peak +%d, end +%d",
			s, p.start, p.genPeak-p.start, p.learnStart-p.start, p.learnFirst-p.start, p.learnPeak-p.start, p.end-p.start)
	}
	floor := ph[0].start
	for s := range ph {
		p := ph[s]
		assert.Equal(t, floor, p.start, "step %d starts from the floor", s)
		assert.Equal(t, floor, p.end, "step %d gives learning's scratch back", s)
		require.Greater(t, p.learnStart, floor, "step %d: the KV cache is live when generation ends", s)
		assert.Equal(t, floor, p.learnFirst, "step %d: the KV cache is given back before learning allocates", s)
		require.Greater(t, p.genPeak, floor)
		require.Greater(t, p.learnPeak, floor)
	}
}
