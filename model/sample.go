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
	slots []int     // [rows] index into Batch.active of each sampled row, in row order (padding rows last: not listed)
	args  []int32   // the rows' kernels.SampleArgs words: params [rows·SampleParamWords], then u [rows·SampleUniformWords]
	ids   []int32   // [sampled rows] the sampled ids, downloaded
	lps   []float32 // [2·rows] the log-probs, then full log-probs, downloaded
	idsB  kernels.Buffer
	lpsB  kernels.Buffer // [2·rows]: log-probs [rows], then full log-probs [rows]
}

// sampleChunk is the most rows of [rows, V] logits that exist at once.
const sampleChunk = 64

// pack writes the sampling arguments of rows rows into sm.args: the
// sampled rows' (sm.slots, each drawing its sequence's next uniform), then
// greedy ones for the padding rows after them. The Runner uploads them
// ahead of the step's ids (Runner.pre), so they cross in the step's one
// Upload and a recorded step reads them from the same Buffer.
func (b *Batch) pack(rows int) {
	sm := &b.smp
	const pw, uw = kernels.SampleParamWords, kernels.SampleUniformWords
	sm.args = grow(sm.args, rows*(pw+uw))
	clear(sm.args)
	for j, i := range sm.slots {
		s := &b.active[i]
		kernels.PutSampleParams(sm.args[j*pw:], s.req.Sampling)
		kernels.PutUniform(sm.args[rows*pw+j*uw:], s.req.Seq.uniform())
	}
}

// sampleArgs is the Buffer view of what pack wrote, after the upload.
func (b *Batch) sampleArgs(rows int) kernels.SampleArgs {
	const pw, uw = kernels.SampleParamWords, kernels.SampleUniformWords
	a := b.r.preBuf
	return kernels.SampleArgs{Params: a.Slice(0, rows*pw), U: a.Slice(rows*pw, rows*(pw+uw))}
}

// fitSample sizes the buffers of sampling rows rows (the sampled ids and
// log-probs, one chunk of logits), so that queueing the sampling allocates
// nothing (a recorded step must not).
func (b *Batch) fitSample(rows int) error {
	be, sm := b.m.Backend, &b.smp
	if _, err := fit(be, &sm.idsB, kernels.I32, rows); err != nil {
		return err
	}
	if _, err := fit(be, &sm.lpsB, kernels.F32, 2*rows); err != nil {
		return err
	}
	_, err := fit(be, &b.r.lg, kernels.F32, min(rows, sampleChunk)*b.m.Config.VocabSize)
	return err
}

// sample queues the draw of the next token of rows hidden rows (hsel
// [rows, C], backend memory; fitSample sized the buffers): lm_head on
// chunks of rows, then one batched SampleRows per chunk, each into its
// rows of sm.idsB and sm.lpsB. Nothing is read back here (see collect).
func (b *Batch) sample(hsel kernels.Buffer, rows int) error {
	C, V := b.m.Config.HiddenSize, b.m.Config.VocabSize
	be, sm := b.m.Backend, &b.smp
	args := b.sampleArgs(rows)
	ids, lps := sm.idsB.Slice(0, rows), sm.lpsB.Slice(0, 2*rows)
	for c0 := 0; c0 < rows; c0 += sampleChunk {
		c1 := min(c0+sampleChunk, rows)
		n := c1 - c0
		logits, err := b.r.logits(hsel.Slice(c0*C, c1*C), n)
		if err != nil {
			return err
		}
		be.SampleRows(ids.Slice(c0, c1), lps.Slice(c0, c1), lps.Slice(rows+c0, rows+c1), logits.Slice(0, n*V), args.Rows(c0, c1), n, V)
	}
	return nil
}

// collect reads the first nsel of rows sampled rows back (their ids, and
// every row's log-probs: one transfer, the padding rows' included), with
// one DownloadAll (one wait on a device, whatever the batch), and appends each
// token and its log-probs to its sequence. A row with no finite logit
// (SampleRows gives it kernels.NoToken) ends its request with an error,
// not the batch.
func (b *Batch) collect(nsel, rows int) error {
	sm := &b.smp
	if nsel == 0 {
		return nil
	}
	sm.ids, sm.lps = grow(sm.ids, nsel), grow(sm.lps, 2*rows)
	if err := kernels.DownloadAll(b.m.Backend, kernels.Transfer{Dst: kernels.HostI32(sm.ids), Src: sm.idsB.Slice(0, nsel)},
		kernels.Transfer{Dst: kernels.HostF32(sm.lps), Src: sm.lpsB.Slice(0, 2*rows)}); err != nil {
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
		s.comp.FullLogProbs = append(s.comp.FullLogProbs, sm.lps[rows+j])
		if slices.Contains(s.req.Stop, id) {
			s.comp.Stopped = true
		}
	}
	return nil
}
