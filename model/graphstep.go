package model

import (
	"fmt"

	"github.com/x/kernels"
)

// A decode step as one recording. On a backend that records steps
// (kernels.StepGrapher: CUDA graphs), a step in which every running
// sequence feeds one token and samples the next is run through the
// Batch's StepGraphs: its rows are padded to a bucket (the next power of
// two), every host value that shapes its ops goes into the key
// (stepKey), and what changes from step to step (ids, positions, the
// sampling parameters and uniforms, and the layout and block tables when
// they change) is uploaded into the same Buffers before the replay. So
// such a step costs the host one Upload, one graph launch and one
// DownloadAll, whatever the batch. Padding rows feed token 0 at position
// 0 through one cache of their own (Batch.pad), whose block no real row
// reads; their samples are not read back. Every op of the forward is
// row-wise or batch-invariant on such a backend, so a real row's results
// are the bits it gets unpadded and op by op (TestModelHostGraphs).

// stepKey is what shapes a recorded decode step's ops besides its
// Buffers, which the backend tracks itself (a freed one makes the
// recording stale): the padded rows, the block tables' width (the
// attention bound MaxLen) and what decides which matmuls run and how.
type stepKey struct {
	rows, width        int
	noAdapters         bool
	snapshot           *AdapterSnapshot
	lora, rank         int
	precision          kernels.MatMulPrecision
	invariant, hasPrec bool
}

// bucket is the padded row count of a decode step of n rows.
func bucket(n int) int {
	b := 1
	for b < n {
		b <<= 1
	}
	return b
}

// step runs the forward over b.caches and b.feeds (fed tokens in all)
// and draws the next token of the nsel sampled rows (b.smp.slots), with
// one wait for the backend. A pure decode step goes through the
// recordings when there are any (graphStep).
func (b *Batch) step(fed, nsel int) error {
	if b.graphs != nil && nsel > 0 && fed == nsel && nsel == len(b.caches) {
		ok, err := b.graphStep(nsel)
		if ok || err != nil {
			return err
		}
	}
	b.pack(nsel)
	b.r.pre = b.smp.args
	n, err := b.r.prepare(b.caches, b.feeds)
	if err == nil {
		err = b.fitSample(nsel)
	}
	if err != nil {
		return err
	}
	hidden := b.r.out.Slice(0, 0)
	if n > 0 {
		hidden = b.r.run(n)
	}
	advance(b.caches, b.feeds)
	hsel, err := b.gather(hidden, nsel)
	if err == nil && nsel > 0 {
		err = b.sample(hsel, nsel)
	}
	if err == nil {
		err = b.m.Backend.Err()
	}
	if err != nil {
		return err
	}
	return b.collect(nsel, nsel)
}

// graphStep runs a pure decode step of nsel rows padded to its bucket
// through b.graphs. It returns false, having done nothing, when the
// padding rows cannot get their block (a full bounded pool): the caller
// runs the step op by op.
func (b *Batch) graphStep(nsel int) (bool, error) {
	rows := bucket(nsel)
	pool := b.m.kvPool()
	if b.pad.stale(pool) {
		b.pad.Release()
	}
	b.pad.Len = 0
	if rows > nsel && b.pad.reserve(b.m.Backend, pool, 1) != nil {
		return false, nil
	}
	real := len(b.caches)
	for range rows - nsel {
		b.caches = append(b.caches, &b.pad)
		b.feeds = append(b.feeds, b.padFeed[:])
	}
	b.pack(rows)
	b.r.pre = b.smp.args
	n, err := b.r.prepare(b.caches, b.feeds)
	if err == nil {
		err = b.fitSample(rows)
	}
	if err != nil {
		return true, err
	}
	record := func() error {
		return b.sample(b.r.run(n), rows)
	}
	if err := b.graphs.Run(b.stepKey(rows), record); err != nil {
		return true, err
	}
	advance(b.caches[:real], b.feeds[:real])
	clear(b.caches[real:])
	b.caches, b.feeds = b.caches[:real], b.feeds[:real]
	if err := b.m.Backend.Err(); err != nil {
		return true, err
	}
	return true, b.collect(nsel, rows)
}

// stepKey is the key of a decode step of rows padded rows, after the
// Runner's upload.
func (b *Batch) stepKey(rows int) stepKey {
	m := b.m
	k := stepKey{rows: rows, width: b.r.tw, noAdapters: b.r.NoAdapters, snapshot: m.adapters}
	for li := range m.Layers {
		for _, nl := range m.Layers[li].Linears() {
			if a := nl.Linear.LoRA; a != nil {
				k.lora++
				k.rank = max(k.rank, a.R)
			}
		}
	}
	if p, ok := m.Backend.(kernels.MatMulPrecisionSetter); ok {
		k.precision, k.hasPrec = p.MatMulPrecision(), true
	}
	if s, ok := m.Backend.(kernels.BatchInvariantSetter); ok {
		k.invariant = s.BatchInvariant()
	}
	return k
}

// String names the key in errors.
func (k stepKey) String() string {
	return fmt.Sprintf("decode step of %d rows, tables %d wide", k.rows, k.width)
}
