package model

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/x/kernels"
)

// Sequence is one token sequence: its tokens, its KV cache, and its own
// seeded random stream, so that sampling with a seed gives the same tokens
// whatever else is in the batch. Tokens[:Cache.Len] are in the cache; the
// rest are pending and are fed before the next token is sampled.
type Sequence struct {
	Tokens []int32
	Cache  KVCache
	rng    *rand.Rand
}

// NewSequence starts a sequence with the given prompt (copied) and sampling
// seed.
func NewSequence(seed uint64, prompt ...int32) *Sequence {
	return &Sequence{
		Tokens: append([]int32(nil), prompt...),
		rng:    rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15)),
	}
}

// Append adds tokens (a tool response, the next user turn) to the end of
// the sequence; they are fed on the next Generate without recomputing the
// cached prefix.
func (s *Sequence) Append(tokens ...int32) { s.Tokens = append(s.Tokens, tokens...) }

// Pending returns the tokens not yet in the cache.
func (s *Sequence) Pending() []int32 { return s.Tokens[s.Cache.Len:] }

// uniform draws the next number of the sequence's stream, in [0, 1).
func (s *Sequence) uniform() float64 {
	if s.rng == nil {
		s.rng = rand.New(rand.NewPCG(0, 0x9e3779b97f4a7c15))
	}
	return s.rng.Float64()
}

// CheckSampling returns an error naming the first sampling parameter out of
// range.
func CheckSampling(p kernels.SamplingParams) error {
	switch {
	case p.Temperature < 0 || math.IsNaN(float64(p.Temperature)) || math.IsInf(float64(p.Temperature), 0):
		return fmt.Errorf("model: sampling temperature %g: must be finite and ≥ 0", p.Temperature)
	case p.TopK < 0:
		return fmt.Errorf("model: sampling top_k %d: must be ≥ 0", p.TopK)
	case p.TopP < 0 || p.TopP > 1 || math.IsNaN(float64(p.TopP)):
		return fmt.Errorf("model: sampling top_p %g: must be in [0, 1]", p.TopP)
	case p.MinP < 0 || p.MinP > 1 || math.IsNaN(float64(p.MinP)):
		return fmt.Errorf("model: sampling min_p %g: must be in [0, 1]", p.MinP)
	}
	return nil
}

// Fork returns a copy of s, its tokens and its KV cache, with its own
// random stream seeded by seed. The copy shares the cache's blocks (copy on
// write: whichever sequence appends first copies the shared partly filled
// last block), so G completions of one prompt share one prefill and its
// memory: Prefill the prompt once, Fork it G times, Generate on the forks,
// and Release each (and the root) when done.
func (s *Sequence) Fork(seed uint64) *Sequence {
	f := NewSequence(seed, s.Tokens...)
	f.Cache = s.Cache.fork()
	return f
}

// sampler holds a Batch's per-row sampling buffers, reused across steps.
type sampler struct {
	slots  []int // [rows] index into Batch.active
	params []kernels.SamplingParams
	u      []float64
	ids    []int32   // [rows] the sampled ids, downloaded
	lps    []float32 // [2·rows] their log-probs, then full log-probs, downloaded
	idsB   kernels.Buffer
	lpsB   kernels.Buffer
}

// sampleChunk is the most rows of [rows, V] logits that exist at once.
const sampleChunk = 64

// sample draws the next token of every active sequence with a selected
// hidden row (b.rows[i] ≥ 0, nsel of them in hsel, backend memory):
// lm_head on chunks of rows, then one batched SampleRows per chunk. Per
// chunk the host reads only the sampled ids and their log-probs, with one
// DownloadAll (one wait on a device). A row with no finite logit (SampleRows
// gives it kernels.NoToken) ends its request with an error, not the batch.
func (b *Batch) sample(hsel kernels.Buffer, nsel int) error {
	C, V := b.m.Config.HiddenSize, b.m.Config.VocabSize
	be := b.m.Backend
	sm := &b.smp
	for c0 := 0; c0 < nsel; c0 += sampleChunk {
		c1 := min(c0+sampleChunk, nsel)
		n := c1 - c0
		logits, err := b.r.logits(hsel.Slice(c0*C, c1*C), n)
		if err != nil {
			return err
		}
		sm.slots, sm.params, sm.u = sm.slots[:0], sm.params[:0], sm.u[:0]
		for i := range b.active {
			if k := b.rows[i]; k >= c0 && k < c1 {
				// b.rows numbers the selected rows in active order, so
				// slots are in row order.
				sm.slots = append(sm.slots, i)
				s := &b.active[i]
				sm.params = append(sm.params, s.req.Sampling)
				sm.u = append(sm.u, s.req.Seq.uniform())
			}
		}
		ids, err := fit(be, &sm.idsB, kernels.I32, n)
		if err != nil {
			return err
		}
		lps, err := fit(be, &sm.lpsB, kernels.F32, 2*n)
		if err != nil {
			return err
		}
		be.SampleRows(ids, lps.Slice(0, n), lps.Slice(n, 2*n), logits.Slice(0, n*V), sm.params, sm.u, n, V)
		sm.ids, sm.lps = grow(sm.ids, n), grow(sm.lps, 2*n)
		if err := kernels.DownloadAll(be, kernels.Transfer{Dst: kernels.HostI32(sm.ids), Src: ids},
			kernels.Transfer{Dst: kernels.HostF32(sm.lps), Src: lps}); err != nil {
			return fmt.Errorf("downloading sampled ids and log-probs: %w", err)
		}
		for j, i := range sm.slots {
			s := &b.active[i]
			id := sm.ids[j]
			if id == kernels.NoToken {
				s.err = fmt.Errorf("model: request %d: no finite logit (non-finite weights?)", s.id)
				continue
			}
			s.req.Seq.Tokens = append(s.req.Seq.Tokens, id)
			s.comp.Tokens = append(s.comp.Tokens, id)
			s.comp.LogProbs = append(s.comp.LogProbs, sm.lps[j])
			s.comp.FullLogProbs = append(s.comp.FullLogProbs, sm.lps[n+j])
			if slices.Contains(s.req.Stop, id) {
				s.comp.Stopped = true
			}
		}
	}
	return nil
}
