package model

import (
	"context"
	"fmt"
	"math"

	"github.com/x/kernels"
)

// Scored is one token sequence to score by teacher forcing: tokens
// Tokens[t], t ≥ Start, each by its log-prob after Tokens[:t].
//
// Its mask follows TrainSeq's convention: Mask counts from Start.
type Scored struct {
	Tokens []int32
	// Start is the first scored token; 0 means 1 (every token that has a
	// context).
	Start int
	// Mask, if not nil, has len(Tokens)−Start entries (Start taken as 1
	// when 0); Mask[j] selects token Start+j. Unselected tokens read 0 and
	// cost no lm_head work.
	Mask []bool
}

// first is the first scored token index.
func (s Scored) first() int { return max(s.Start, 1) }

// TokenLogProbs are the per-token results for one Scored sequence.
type TokenLogProbs struct {
	// LogProbs[t] = log p(Tokens[t] | Tokens[:t]) for scored t, 0 elsewhere;
	// [len(Tokens)], indexed by token (not from Start).
	LogProbs []float32
	// Entropy[t] is the entropy of the distribution over Tokens[t]'s
	// position; [len(Tokens)], nil unless LogProbsOptions.Entropy.
	Entropy []float32
}

// LogProbsOptions configure LogProbs.
type LogProbsOptions struct {
	NoAdapters bool // score with the base model (e.g. the KL reference)
	Entropy    bool // also compute per-token entropies
	// StepTokens bounds the tokens fed in one forward across sequences
	// (long sequences are fed in chunks); 0 means 1024.
	StepTokens int
	// ChunkRows bounds the lm_head rows computed at once, so a [T, V]
	// buffer for the whole batch never exists; 0 means 64.
	ChunkRows int
	// Temperature divides the logits before the log-softmax; 0 means 1.
	// It is TrainOptions.Temperature's setting, applied the same way
	// (logits scaled by 1/T), so both score the distribution that sampling
	// at T reports in Completion.FullLogProbs.
	Temperature float32
}

// LogProbs computes teacher-forced per-token log-probs (and entropies) of
// each sequence under the model. Sequences are fed together in steps of at
// most opts.StepTokens tokens; a sequence's KV cache lives only while it is
// being fed. A sequence longer than Config.MaxPositions, or a KV pool too
// small for the step (KVOptions.MaxBytes, wrapping ErrKVPoolFull), is an
// error.
func (m *Model) LogProbs(ctx context.Context, seqs []Scored, opts LogProbsOptions) ([]TokenLogProbs, error) {
	if opts.StepTokens <= 0 {
		opts.StepTokens = 1024
	}
	if opts.ChunkRows <= 0 {
		opts.ChunkRows = 64
	}
	if opts.Temperature < 0 || math.IsNaN(float64(opts.Temperature)) || math.IsInf(float64(opts.Temperature), 0) {
		return nil, fmt.Errorf("model: logprobs temperature %v: must be finite and ≥ 0", opts.Temperature)
	}
	if opts.Temperature == 0 {
		opts.Temperature = 1
	}
	out := make([]TokenLogProbs, len(seqs))
	for i, s := range seqs {
		if err := m.CheckTokens(s.Tokens); err != nil {
			return nil, fmt.Errorf("model: logprobs sequence %d: %w", i, err)
		}
		if s.Start < 0 || (len(s.Tokens) > 0 && s.first() > len(s.Tokens)) {
			return nil, fmt.Errorf("model: logprobs sequence %d: start %d outside [0, %d]", i, s.Start, len(s.Tokens))
		}
		if s.Mask != nil && len(s.Mask) != len(s.Tokens)-s.first() {
			return nil, fmt.Errorf("model: logprobs sequence %d: mask of %d entries, want len(Tokens) − Start = %d", i, len(s.Mask), len(s.Tokens)-s.first())
		}
		out[i].LogProbs = make([]float32, len(s.Tokens))
		if opts.Entropy {
			out[i].Entropy = make([]float32, len(s.Tokens))
		}
	}
	r := m.NewRunner()
	defer r.Release()
	r.NoAdapters = opts.NoAdapters
	g := &gatherer{r: r, out: out, rows: opts.ChunkRows, entropy: opts.Entropy, invT: 1 / opts.Temperature}
	defer g.release()
	type running struct {
		seq   int
		fed   int
		cache *KVCache
	}
	var (
		active []running
		free   []*KVCache
		next   int
		caches []*KVCache
		feeds  [][]int32
	)
	defer func() { // on an early return, the running caches' blocks go back
		for _, a := range active {
			a.cache.Release()
		}
	}()
	for next < len(seqs) || len(active) > 0 {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("model: logprobs: %w", err)
		}
		// Admit sequences while the step has room.
		budget := opts.StepTokens
		for _, a := range active {
			budget -= len(seqs[a.seq].Tokens) - a.fed
		}
		for next < len(seqs) && (budget > 0 || len(active) == 0) {
			if len(seqs[next].Tokens) == 0 {
				next++
				continue
			}
			var c *KVCache
			if n := len(free); n > 0 {
				c, free = free[n-1], free[:n-1]
				c.Reset()
			} else {
				c = new(KVCache)
			}
			active = append(active, running{seq: next, cache: c})
			budget -= len(seqs[next].Tokens)
			next++
		}
		if len(active) == 0 {
			break
		}
		budget = opts.StepTokens
		caches, feeds = caches[:0], feeds[:0]
		counts := make([]int, len(active))
		for i, a := range active {
			n := min(len(seqs[a.seq].Tokens)-a.fed, budget)
			if i == 0 {
				n = max(n, 1)
			}
			budget -= n
			counts[i] = n
			if n > 0 {
				caches = append(caches, a.cache)
				feeds = append(feeds, seqs[a.seq].Tokens[a.fed:a.fed+n])
			}
		}
		hidden, err := r.tryForward(caches, feeds)
		if err != nil {
			return nil, fmt.Errorf("model: logprobs: %w", err)
		}
		g.hidden = hidden
		row := 0
		for i, a := range active {
			toks := seqs[a.seq].Tokens
			for j := range counts[i] {
				p := a.fed + j // hidden row predicts token p+1
				if t, sc := p+1, seqs[a.seq]; t >= sc.first() && t < len(toks) && (sc.Mask == nil || sc.Mask[t-sc.first()]) {
					if err := g.add(row, a.seq, t, toks[t]); err != nil {
						return nil, fmt.Errorf("model: logprobs: %w", err)
					}
				}
				row++
			}
			active[i].fed += counts[i]
		}
		if err := g.flush(); err != nil {
			return nil, fmt.Errorf("model: logprobs: %w", err)
		}
		kept := active[:0]
		for _, a := range active {
			if a.fed == len(seqs[a.seq].Tokens) {
				a.cache.Reset() // its blocks go back to the pool now
				free = append(free, a.cache)
				continue
			}
			kept = append(kept, a)
		}
		active = kept
	}
	return out, nil
}

// gatherer collects hidden rows whose next token is scored and runs
// GatherRows, lm_head and LogSoftmaxGather on them a chunk at a time, in
// the backend's memory. Per chunk, what crosses is one Upload (the rows'
// indices and their targets) and one Download (their log-probs, and
// entropies when asked).
type gatherer struct {
	r       *Runner
	out     []TokenLogProbs
	rows    int
	entropy bool
	invT    float32 // 1 / temperature

	hidden  kernels.Buffer // this step's hidden states [N, C] (the Runner's)
	idx     []int32        // [rows] the chunk's rows of hidden
	targets []int32        // [rows]
	where   [][2]int       // [rows] (sequence, token index)
	up      []int32        // [2·rows] idx, then targets (host side of it)
	res     []float32      // [2·rows] log-probs, then entropies (downloaded)

	h, it, lp kernels.Buffer // backend: rows [rows, C], I32 [2·rows], F32 [2·rows]
}

// release returns g's backend buffers (Backend.Free).
func (g *gatherer) release() {
	free(g.r.m.Backend, &g.h, &g.it, &g.lp)
}

// add queues hidden row row, which predicts token t of sequence seq
// (target), and flushes a full chunk.
func (g *gatherer) add(row, seq, t int, target int32) error {
	g.idx = append(g.idx, int32(row))
	g.targets = append(g.targets, target)
	g.where = append(g.where, [2]int{seq, t})
	if len(g.targets) == g.rows {
		return g.flush()
	}
	return nil
}

// flush scores the queued rows. It must run before the Runner's next
// forward (g.hidden is valid until then).
func (g *gatherer) flush() error {
	n := len(g.targets)
	if n == 0 {
		return nil
	}
	be, c, v := g.r.m.Backend, g.r.m.Config.HiddenSize, g.r.m.Config.VocabSize
	h, err := fit(be, &g.h, kernels.F32, n*c)
	if err != nil {
		return err
	}
	it, err := fit(be, &g.it, kernels.I32, 2*n)
	if err != nil {
		return err
	}
	lp, err := fit(be, &g.lp, kernels.F32, 2*n)
	if err != nil {
		return err
	}
	g.up = append(append(g.up[:0], g.idx...), g.targets...)
	if err := be.Upload(it, kernels.HostI32(g.up)); err != nil {
		return fmt.Errorf("uploading scored rows: %w", err)
	}
	be.GatherRows(h, g.hidden, it.Slice(0, n), c)
	logits, err := g.r.logits(h, n)
	if err != nil {
		return err
	}
	if g.invT != 1 {
		be.Scale(logits, g.invT)
	}
	var ent kernels.Buffer
	res := lp.Slice(0, n)
	if g.entropy {
		ent, res = lp.Slice(n, 2*n), lp
	}
	be.LogSoftmaxGather(lp.Slice(0, n), ent, logits, it.Slice(n, 2*n), n, v)
	g.res = grow(g.res, res.Len())
	if err := be.Download(kernels.HostF32(g.res), res); err != nil {
		return fmt.Errorf("downloading log-probs: %w", err)
	}
	for i, w := range g.where {
		g.out[w[0]].LogProbs[w[1]] = g.res[i]
		if g.entropy {
			g.out[w[0]].Entropy[w[1]] = g.res[n+i]
		}
	}
	g.idx, g.targets, g.where = g.idx[:0], g.targets[:0], g.where[:0]
	return nil
}
