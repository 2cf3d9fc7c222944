package model

import (
	"fmt"
	"math"
	"math/rand/v2"

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
