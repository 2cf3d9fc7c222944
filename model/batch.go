package model

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/x/kernels"
)

// Request asks for tokens to be generated at the end of a Sequence. The
// sequence's pending tokens (prompt, tool response) are fed first.
type Request struct {
	Seq          *Sequence
	MaxNewTokens int                    // generate at most this many tokens
	Stop         []int32                // a sampled id in Stop ends the request (it is kept in the output)
	Sampling     kernels.SamplingParams // Temperature 0 = greedy
}

// Completion is what one Request generated.
type Completion struct {
	Tokens []int32 // generated ids, the stop token included
	// LogProbs [len(Tokens)] are each token's log-prob under the
	// distribution it was sampled from: temperature, then top-k, top-p and
	// min-p (0 under greedy).
	LogProbs []float32
	// FullLogProbs [len(Tokens)] are each token's log-prob under the
	// temperature-scaled unfiltered distribution, log_softmax(logits/T)
	// (T = 1 under greedy): what Trainable and Model.LogProbs compute at
	// the same temperature, so they serve as GRPO's old log-probs.
	// FullLogProbs − LogProbs is the log of the probability mass the
	// filters kept (0 without filters).
	FullLogProbs []float32
	Stopped      bool // ended on a Stop token (otherwise on MaxNewTokens or Err)
	// Err, if not nil, is why the request ended early: a bad token id, a
	// sequence over the context length (wrapping ErrContextLength), a full
	// KV pool (wrapping ErrKVPoolFull), non-finite logits, or ErrCanceled.
	// Tokens and the log-probs hold what was generated before it.
	Err error
}

// ErrCanceled is the Err of a request removed by Batch.Cancel or
// Batch.Remove.
var ErrCanceled = errors.New("model: request canceled")

// ErrContextLength is wrapped by the error of a sequence that would grow
// past Config.MaxPositions.
var ErrContextLength = errors.New("longer than the context length")

// Finished is a request that completed during a Batch step.
type Finished struct {
	ID int // what Batch.Add returned
	Completion
}

// BatchOptions configure a Batch (and Generate).
type BatchOptions struct {
	// MaxBatch is the most sequences run together; 0 means 64. A finished
	// sequence frees its slot for the next queued request.
	MaxBatch int
	// PrefillTokens bounds the pending (prompt) tokens fed in one step
	// across all sequences, so a long prompt is prefilled in chunks while
	// other sequences keep decoding; 0 means 512.
	PrefillTokens int
	// NoAdapters generates with the base model, ignoring LoRA adapters.
	NoAdapters bool
	// BatchInvariant makes a sequence's results (its logits, sampled
	// tokens and log-probs) independent of the other sequences sharing its
	// steps, bit for bit: the backend runs its batch-invariant MatMul
	// during each step when it has one (kernels/cpu's SetBatchInvariant),
	// and a prompt is cut into chunks at multiples of PrefillTokens
	// positions only (see chunkLen), so a chunk may wait a step for
	// budget. Without it, which sequences share a step (in an agent loop,
	// which ones are waiting on a tool) shows in the last bits.
	BatchInvariant bool
	// NoGraphs runs every step op by op even on a backend that can record
	// a decode step and replay it (kernels.StepGrapher, the CUDA device):
	// the results are the same bits either way (see graphStep); this is
	// for comparisons.
	NoGraphs bool
}

type slot struct {
	id   int
	req  Request
	comp Completion
	feed int   // tokens fed this step
	err  error // set when the request fails; it leaves at the end of the step
}

// Batch is continuous batched generation: requests join with Add whenever
// a slot is free, each Step feeds every running sequence (pending tokens in
// chunks, or its last sampled token) in one forward and samples the next
// token of each that is up to date, and a finished request leaves at once.
// A Batch is used by one goroutine at a time; its scratch buffers are
// reused, so steady-state decoding does not allocate per token. A request
// that fails (see Completion.Err) leaves the batch alone; the others go on.
// Sequences hold their KV blocks after their request finishes (a next turn
// reuses them): call Sequence.Release when done with one.
type Batch struct {
	m      *Model
	opts   BatchOptions
	r      *Runner
	queue  []slot
	active []slot
	nextID int

	caches []*KVCache
	feeds  [][]int32
	rows   []int          // per active slot: hidden row to sample from, −1 if none
	hsel   kernels.Buffer // [sampled rows, C] their hidden states (backend memory)
	hidx   []int32        // the forward's row of each sampled row
	hidxB  kernels.Buffer // I32 hidx in backend memory
	smp    sampler

	graphs  kernels.StepGraphs // recorded decode steps (nil: the backend has none, or NoGraphs)
	pad     KVCache            // the padding rows' cache (see graphStep)
	padFeed [1]int32           // what a padding row feeds: token 0
	rec     stepRecord         // what a recorded step queues (see graphStep)
}

// NewBatch returns an empty Batch for m.
func (m *Model) NewBatch(opts BatchOptions) *Batch {
	if opts.MaxBatch <= 0 {
		opts.MaxBatch = 64
	}
	if opts.PrefillTokens <= 0 {
		opts.PrefillTokens = 512
	}
	r := m.NewRunner()
	r.NoAdapters = opts.NoAdapters
	b := &Batch{m: m, opts: opts, r: r}
	b.rec.b = b
	b.rec.run = b.rec.record
	if !opts.NoGraphs {
		b.graphs = kernels.NewStepGraphs(m.Backend)
	}
	return b
}

// Add queues req and returns its id, the number of Add calls before it
// (refused ones included). The request's sequence must not be in
// the batch already and must hold at least one token; its pending tokens
// must be in the vocabulary.
func (b *Batch) Add(req Request) (int, error) {
	id := b.nextID // taken even when req is refused: Generate's request i is id i
	b.nextID++
	switch {
	case req.Seq == nil:
		return 0, errors.New("model: request without a sequence")
	case len(req.Seq.Tokens) == 0:
		return 0, errors.New("model: request sequence has no tokens")
	case req.Seq.Cache.Len > len(req.Seq.Tokens):
		return 0, fmt.Errorf("model: request sequence caches %d positions but has %d tokens", req.Seq.Cache.Len, len(req.Seq.Tokens))
	case req.MaxNewTokens < 0:
		return 0, fmt.Errorf("model: request max new tokens %d < 0", req.MaxNewTokens)
	}
	if err := CheckSampling(req.Sampling); err != nil {
		return 0, err
	}
	if err := b.m.CheckTokens(req.Seq.Pending()); err != nil {
		return 0, err
	}
	if err := b.m.CheckTokens(req.Stop); err != nil {
		return 0, fmt.Errorf("stop ids: %w", err)
	}
	for _, q := range [][]slot{b.queue, b.active} {
		for _, s := range q {
			if s.req.Seq == req.Seq {
				return 0, fmt.Errorf("model: sequence already in the batch (request %d)", s.id)
			}
		}
	}
	if len(req.Seq.Pending()) == 0 {
		// Fully cached: re-feed the last token to get the next distribution.
		req.Seq.Cache.Truncate(len(req.Seq.Tokens) - 1)
	}
	b.queue = append(b.queue, slot{id: id, req: req, comp: Completion{
		Tokens:       make([]int32, 0, min(req.MaxNewTokens, 4096)),
		LogProbs:     make([]float32, 0, min(req.MaxNewTokens, 4096)),
		FullLogProbs: make([]float32, 0, min(req.MaxNewTokens, 4096)),
	}})
	return id, nil
}

// Len is the number of requests queued or running.
func (b *Batch) Len() int { return len(b.queue) + len(b.active) }

// Step runs one forward over the running sequences and returns the
// requests that finished in it, including those that failed (Finished.Err:
// a bad token id, the context length, a full KV pool, non-finite logits),
// which leave the batch without stopping the others. It returns an error
// for ctx, before doing anything, if ctx is done, and when the backend
// fails (allocation, a transfer, a device fault: the batch is then
// unusable).
//
// What crosses between host and backend in one step: one Upload of the
// sampled rows' parameters and uniforms, the fed token ids and their
// positions (and the layout and block tables when they changed); one
// Upload of the sampled rows' indices unless they are the forward's rows
// in order (a pure decode step); the sampled ids and their two log-probs,
// downloaded together (kernels.DownloadAll: one wait on a device, whatever
// the batch; see collect). On a backend that records steps, a pure decode
// step is replayed from a recording (see graphStep).
func (b *Batch) Step(ctx context.Context) ([]Finished, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var done []Finished
	admitted := false
	// Admit queued requests; those asking for nothing finish at once.
	for len(b.queue) > 0 && len(b.active) < b.opts.MaxBatch {
		s := b.queue[0]
		b.queue[0] = slot{} // the batch must not keep a finished sequence reachable
		b.queue = b.queue[1:]
		if s.req.MaxNewTokens == 0 {
			done = append(done, Finished{ID: s.id, Completion: s.comp})
			continue
		}
		// The sequence's tokens grow by up to MaxNewTokens (at most 4096
		// at once, as the completion's): room now, not a reallocation
		// every few steps.
		s.req.Seq.Tokens = slices.Grow(s.req.Seq.Tokens, min(s.req.MaxNewTokens, 4096))
		b.active = append(b.active, s)
		admitted = true
	}
	if len(b.active) == 0 {
		return done, nil
	}
	if admitted && b.graphs != nil {
		b.reserveKV()
	}
	defer b.m.batchInvariant(b.opts.BatchInvariant)()
	// Decoding sequences (one pending token) always run; prompts share
	// the prefill budget, the first of them getting at least one token
	// (see chunkLen).
	budget, first := b.opts.PrefillTokens, true
	b.caches, b.feeds = b.caches[:0], b.feeds[:0]
	pool := b.m.kvPool()
	for i := range b.active {
		s := &b.active[i]
		if c := &s.req.Seq.Cache; c.stale(pool) {
			c.Release() // blocks of a replaced pool: the tokens are fed again into this one
		}
		p := s.req.Seq.Pending()
		n := len(p)
		if n > 1 {
			n = chunkLen(s.req.Seq.Cache.Len, n, budget, b.opts.PrefillTokens, first, b.opts.BatchInvariant)
			first = false
			budget = max(budget-n, 0)
		}
		s.feed = n
		if n > 0 {
			c := &s.req.Seq.Cache
			err := b.m.checkFeed(c, p[:n])
			if mp := b.m.Config.MaxPositions; err == nil && n == len(p) && mp > 0 && len(s.req.Seq.Tokens) >= mp {
				// The token sampled after this feed would sit past the context.
				err = fmt.Errorf("model: a token at position %d would make the sequence %w %d (max_position_embeddings)", len(s.req.Seq.Tokens), ErrContextLength, mp)
			}
			if err == nil {
				err = c.reserve(b.m.Backend, pool, c.Len+n)
			}
			if err != nil {
				s.err, s.feed = fmt.Errorf("model: request %d: %w", s.id, err), 0
				continue
			}
			b.caches = append(b.caches, c)
			b.feeds = append(b.feeds, p[:n])
		}
	}
	// Sample for every sequence whose pending tokens are all fed now.
	b.rows, b.hidx, b.smp.slots = b.rows[:0], b.hidx[:0], b.smp.slots[:0]
	row, nsel := 0, 0
	for i := range b.active {
		s := &b.active[i]
		row += s.feed
		if s.feed > 0 && s.feed == len(s.req.Seq.Pending()) {
			b.rows = append(b.rows, nsel)
			b.hidx = append(b.hidx, int32(row-1))
			b.smp.slots = append(b.smp.slots, i)
			nsel++
		} else {
			b.rows = append(b.rows, -1)
		}
	}
	err := b.step(row, nsel)
	clear(b.caches) // the batch must not keep a finished sequence reachable
	clear(b.feeds)
	if err != nil {
		return nil, fmt.Errorf("model: batch step: %w", err)
	}
	// Retire finished requests, freeing their slots.
	kept := b.active[:0]
	for _, s := range b.active {
		if s.err != nil {
			s.comp.Err = s.err
		}
		if s.err != nil || s.comp.Stopped || len(s.comp.Tokens) >= s.req.MaxNewTokens {
			done = append(done, Finished{ID: s.id, Completion: s.comp})
			continue
		}
		kept = append(kept, s)
	}
	clear(b.active[len(kept):])
	b.active = kept
	return done, nil
}

// gather returns the hidden rows to sample from, b.hidx's rows of hidden
// [N, C]: hidden itself when they are all its rows in order (a decode step
// where every sequence feeds one token), else a GatherRows into b.hsel
// after one Upload of the row indices.
func (b *Batch) gather(hidden kernels.Buffer, nsel int) (kernels.Buffer, error) {
	C, be := b.m.Config.HiddenSize, b.m.Backend
	if nsel == 0 {
		return hidden.Slice(0, 0), nil
	}
	identity := nsel*C == hidden.Len()
	for i, r := range b.hidx {
		identity = identity && r == int32(i)
	}
	if identity {
		return hidden, nil
	}
	hsel, err := fit(be, &b.hsel, kernels.F32, nsel*C)
	if err != nil {
		return kernels.Buffer{}, err
	}
	idx, err := fit(be, &b.hidxB, kernels.I32, nsel)
	if err != nil {
		return kernels.Buffer{}, err
	}
	if err := be.Upload(idx, kernels.HostI32(b.hidx)); err != nil {
		return kernels.Buffer{}, fmt.Errorf("uploading sampled rows: %w", err)
	}
	be.GatherRows(hsel, hidden, idx, C)
	return hsel, nil
}

// Generate runs every request to completion with continuous batching (at
// most opts.MaxBatch at once) and returns their completions in request
// order. Each request's Seq is extended in place (its Tokens end with the
// completion, its cache holds all but the last sampled token), so a next
// turn is Seq.Append(toolResponse...) and another Generate, which does not
// recompute the prefix. Pass m.Config.EOSTokenIDs in Stop to stop at EOS.
//
// A request that fails (a bad token id, a sequence over the context
// length, a full KV pool) does not stop the others: its Completion.Err
// says why, and Generate returns every completion together with an error
// joining the failed requests' errors. If ctx is done it returns ctx's
// error and no completions.
func (m *Model) Generate(ctx context.Context, reqs []Request, opts BatchOptions) ([]Completion, error) {
	b := m.NewBatch(opts)
	defer b.Release()
	out := make([]Completion, len(reqs))
	index := make(map[int]int, len(reqs)) // batch id -> request index
	for i, r := range reqs {
		id, err := b.Add(r)
		if err != nil {
			out[i].Err = err
			continue
		}
		index[id] = i
	}
	for b.Len() > 0 {
		done, err := b.Step(ctx)
		if err != nil {
			return nil, fmt.Errorf("model: generate: %w", err)
		}
		for _, f := range done {
			out[index[f.ID]] = f.Completion
		}
	}
	var errs []error
	for i, c := range out {
		if c.Err != nil {
			errs = append(errs, fmt.Errorf("model: generate request %d: %w", i, c.Err))
		}
	}
	return out, errors.Join(errs...)
}

// Remove takes request id out of the batch, queued or running, and returns
// what it generated so far with Err set to ErrCanceled. Its sequence keeps
// its tokens and KV blocks (a later request may continue it). It returns
// false if id is not in the batch.
func (b *Batch) Remove(id int) (Finished, bool) {
	for _, q := range []*[]slot{&b.queue, &b.active} {
		for i, s := range *q {
			if s.id != id {
				continue
			}
			*q = slices.Delete(*q, i, i+1) // zeroes the vacated slot
			s.comp.Err = ErrCanceled
			return Finished{ID: s.id, Completion: s.comp}, true
		}
	}
	return Finished{}, false
}

// Release returns the batch's scratch memory to the backend (Backend.Free;
// the CPU backends leave it to the garbage collector, so there it may be
// skipped). Requests still in the batch stay as they are; a later Step
// allocates again.
func (b *Batch) Release() {
	if b.graphs != nil {
		// Closing frees what the recordings hold; a device that fails to
		// destroy a graph reports it at its next op.
		_ = b.graphs.Close()
	}
	b.pad.Release()
	b.r.Release()
	free(b.m.Backend, &b.hsel, &b.hidxB, &b.smp.idsB, &b.smp.lpsB)
}

// Cancel is Remove that also returns the sequence's KV blocks to the pool
// (Sequence.Release): the request is abandoned.
func (b *Batch) Cancel(id int) (Finished, bool) {
	for _, q := range [][]slot{b.queue, b.active} {
		for _, s := range q {
			if s.id == id {
				f, _ := b.Remove(id)
				s.req.Seq.Release()
				return f, true
			}
		}
	}
	return Finished{}, false
}

// Prefill feeds every sequence's pending tokens into its cache, at most
// opts.PrefillTokens per forward (0 means 512; with opts.BatchInvariant,
// chunks cut as a Batch cuts them), without sampling.
func (m *Model) Prefill(ctx context.Context, seqs []*Sequence, opts BatchOptions) error {
	if opts.PrefillTokens <= 0 {
		opts.PrefillTokens = 512
	}
	for i, s := range seqs {
		if s == nil || s.Cache.Len > len(s.Tokens) {
			return fmt.Errorf("model: prefill sequence %d: nil or inconsistent", i)
		}
		if j := slices.Index(seqs[:i], s); j >= 0 {
			return fmt.Errorf("model: prefill sequence %d: the same sequence as %d", i, j)
		}
		if err := m.CheckTokens(s.Pending()); err != nil {
			return fmt.Errorf("model: prefill sequence %d: %w", i, err)
		}
	}
	r := m.NewRunner()
	defer r.Release()
	r.NoAdapters = opts.NoAdapters
	defer m.batchInvariant(opts.BatchInvariant)()
	var caches []*KVCache
	var feeds [][]int32
	for {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("model: prefill: %w", err)
		}
		caches, feeds = caches[:0], feeds[:0]
		budget, first := opts.PrefillTokens, true
		for _, s := range seqs {
			p := len(s.Pending())
			if p == 0 {
				continue
			}
			if n := chunkLen(s.Cache.Len, p, budget, opts.PrefillTokens, first, opts.BatchInvariant); n > 0 {
				caches = append(caches, &s.Cache)
				feeds = append(feeds, s.Pending()[:n])
				budget = max(budget-n, 0)
			}
			first = false
		}
		if len(caches) == 0 {
			return nil
		}
		if _, err := r.TryForward(caches, feeds); err != nil {
			return fmt.Errorf("model: prefill: %w", err)
		}
	}
}

// reserveKV grows the KV pool, when the active sequences are admitted, to
// hold every block they can still take (prompt and MaxNewTokens, within
// the context), so the pool does not move during their decode steps: a
// move makes the recorded steps stale, and each key is then run directly
// and recorded again (two steps without a replay) every time the pool
// grows by a rung of its ladder, dozens of times in a long generation.
// Sequences that stop early give their blocks back as before. It is best
// effort: a pool at its limit, or an allocation that fails, leaves the
// decode steps to grow it on demand, where a real shortage is reported.
func (b *Batch) reserveKV() {
	pool := b.m.kvPool()
	need := 0
	for i := range b.active {
		s := &b.active[i]
		n := len(s.req.Seq.Tokens) + s.req.MaxNewTokens - len(s.comp.Tokens)
		if mp := b.m.Config.MaxPositions; mp > 0 {
			n = min(n, mp)
		}
		need += max((n+pool.bs-1)/pool.bs-s.req.Seq.Cache.heldIn(pool), 0)
	}
	_ = pool.reserveFree(b.m.Backend, need) // best effort (see above)
}
