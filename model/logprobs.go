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
	r.NoAdapters = opts.NoAdapters
	g := &gatherer{r: r, out: out, rows: opts.ChunkRows, entropy: opts.Entropy, invT: 1 / opts.Temperature}
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
		hidden, err := r.TryForward(caches, feeds)
		if err != nil {
			return nil, fmt.Errorf("model: logprobs: %w", err)
		}
		row := 0
		for i, a := range active {
			toks := seqs[a.seq].Tokens
			for j := range counts[i] {
				p := a.fed + j // hidden row predicts token p+1
				if t, sc := p+1, seqs[a.seq]; t >= sc.first() && t < len(toks) && (sc.Mask == nil || sc.Mask[t-sc.first()]) {
					g.add(hidden, row, a.seq, t, toks[t])
				}
				row++
			}
			active[i].fed += counts[i]
		}
		g.flush()
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
// lm_head + LogSoftmaxGather on them a chunk at a time.
type gatherer struct {
	r       *Runner
	out     []TokenLogProbs
	rows    int
	entropy bool
	invT    float32 // 1 / temperature

	h       []float32 // [rows, C]
	targets []int32   // [rows]
	where   [][2]int  // [rows] (sequence, token index)
	logp    []float32 // [rows]
	ent     []float32 // [rows]
}

func (g *gatherer) add(hidden []float32, row, seq, t int, target int32) {
	c := g.r.m.Config.HiddenSize
	n := len(g.targets)
	if len(g.h) < g.rows*c {
		g.h = make([]float32, g.rows*c)
	}
	g.r.m.Backend.Copy(kernels.HostF32(g.h[n*c:(n+1)*c]), kernels.HostF32(hidden[row*c:(row+1)*c]))
	g.targets = append(g.targets, target)
	g.where = append(g.where, [2]int{seq, t})
	if len(g.targets) == g.rows {
		g.flush()
	}
}

func (g *gatherer) flush() {
	n := len(g.targets)
	if n == 0 {
		return
	}
	v := g.r.m.Config.VocabSize
	logits := g.r.Logits(g.h, n)
	if g.invT != 1 {
		g.r.m.Backend.Scale(kernels.HostF32(logits[:n*v]), g.invT)
	}
	g.logp = grow(g.logp, n)
	var ent []float32
	if g.entropy {
		g.ent = grow(g.ent, n)
		ent = g.ent
	}
	g.r.m.Backend.LogSoftmaxGather(kernels.HostF32(g.logp), kernels.HostF32(ent), kernels.HostF32(logits), kernels.HostI32(g.targets), n, v)
	for i, w := range g.where {
		g.out[w[0]].LogProbs[w[1]] = g.logp[i]
		if g.entropy {
			g.out[w[0]].Entropy[w[1]] = g.ent[i]
		}
	}
	g.targets, g.where = g.targets[:0], g.where[:0]
}
