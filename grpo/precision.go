package grpo

import (
	"context"
	"fmt"

	"github.com/x/kernels"
	"github.com/x/model"
)

// Rollout matmul precisions, the values of Config.RolloutMatMulPrecision.
const (
	RolloutExact = "exact" // kernels.MatMulExact: generation as training computes
	RolloutBF16  = "bf16"  // kernels.MatMulBF16: activations rounded to bf16 for bf16 weights
)

// rolloutPrecision is the precision RolloutMatMulPrecision asks for ("" is
// exact).
func (c Config) rolloutPrecision() (kernels.MatMulPrecision, error) {
	if c.RolloutMatMulPrecision == "" {
		return kernels.MatMulExact, nil
	}
	return kernels.ParseMatMulPrecision(c.RolloutMatMulPrecision)
}

// rolloutPrecisioner returns the backend that generation switches to
// precision p, or nil when p is exact (generation then leaves the backend
// alone, and any backend will do). A backend that cannot switch (it lacks
// kernels.MatMulPrecisionSetter, or refuses p) is an error naming its
// type; the probe puts the backend's precision back.
func rolloutPrecisioner(b kernels.Backend, p kernels.MatMulPrecision) (kernels.MatMulPrecisionSetter, error) {
	if p == kernels.MatMulExact {
		return nil, nil
	}
	refuse := func(why string) error {
		return &ConfigError{Field: "RolloutMatMulPrecision", TRLName: "rollout_matmul_precision",
			Problem: fmt.Sprintf("%q: the model's backend %T %s; use %q", p, b, why, RolloutExact)}
	}
	s, ok := b.(kernels.MatMulPrecisionSetter)
	if !ok {
		return nil, refuse("does not implement kernels.MatMulPrecisionSetter (kernels/cpu's Backend does)")
	}
	prev := s.MatMulPrecision()
	if err := s.SetMatMulPrecision(p); err != nil {
		return nil, refuse(fmt.Sprintf("refuses it (%v)", err))
	}
	if err := s.SetMatMulPrecision(prev); err != nil {
		return nil, fmt.Errorf("grpo: restore the backend's matmul precision %s: %w", prev, err)
	}
	return s, nil
}

// generating runs f, a prefill or a decode step of the generation ctx
// belongs to, with the model to itself (the policy's lock, as a
// generation call), its forwards reading the adapters that generation
// samples with (withAdapters; the live ones if none), at the rollout
// precision, and then puts the backend's previous precision back, also
// when f fails or panics, so that training passes never run at the
// rollout's. The precision is the backend's setting, not the call's:
// generation and training must not overlap on one backend, which the lock
// ensures (tool rounds, which run concurrently with decoding, do not touch
// it).
func (p *policy) generating(ctx context.Context, f func() error) error {
	return p.use(true, adaptersOf(ctx), func() error {
		if p.prec == nil {
			return f()
		}
		prev := p.prec.MatMulPrecision()
		if err := p.prec.SetMatMulPrecision(p.rollout); err != nil {
			return fmt.Errorf("grpo: rollout matmul precision: %w", err)
		}
		defer func() { _ = p.prec.SetMatMulPrecision(prev) }() // prev was the backend's own: valid
		return f()
	})
}

// inexactRollouts reports whether generation runs at another precision
// than training, so that its sampling log-probs are not the training
// forward's.
func (p *policy) inexactRollouts() bool { return p.prec != nil }

// hasBF16Weights reports whether any weight a MatMul reads is bf16 (the
// ones a bf16 rollout precision changes): a projection or lm_head.
func hasBF16Weights(m *model.Model) bool {
	if m.LMHead.DType == kernels.BF16 {
		return true
	}
	for li := range m.Layers {
		for _, nl := range m.Layers[li].Linears() {
			if nl.Linear.W.DType == kernels.BF16 {
				return true
			}
		}
	}
	return false
}
