package grpo

import (
	"fmt"

	"github.com/x/kernels"
	"github.com/x/kernels/cpu"
	"github.com/x/model"
)

// Rollout matmul precisions, the values of Config.RolloutMatMulPrecision.
const (
	RolloutExact = "exact" // cpu.MatMulExact: generation as training computes
	RolloutBF16  = "bf16"  // cpu.MatMulBF16: activations rounded to bf16 for bf16 weights
)

// rolloutPrecision is the precision RolloutMatMulPrecision asks for ("" is
// exact).
func (c Config) rolloutPrecision() (cpu.MatMulPrecision, error) {
	if c.RolloutMatMulPrecision == "" {
		return cpu.MatMulExact, nil
	}
	return cpu.ParseMatMulPrecision(c.RolloutMatMulPrecision)
}

// matMulPrecisioner is a backend whose MatMul precision can be set
// (kernels/cpu's Backend).
type matMulPrecisioner interface {
	SetMatMulPrecision(cpu.MatMulPrecision) error
	MatMulPrecision() cpu.MatMulPrecision
}

// rolloutPrecisioner returns the backend that generation switches to
// precision p, or nil when p is exact (generation then leaves the backend
// alone, and any backend will do). A backend that cannot switch is an
// error naming its type.
func rolloutPrecisioner(b kernels.Backend, p cpu.MatMulPrecision) (matMulPrecisioner, error) {
	if p == cpu.MatMulExact {
		return nil, nil
	}
	s, ok := b.(matMulPrecisioner)
	if !ok {
		return nil, &ConfigError{Field: "RolloutMatMulPrecision", TRLName: "rollout_matmul_precision",
			Problem: fmt.Sprintf("%q: the model's backend %T has no SetMatMulPrecision/MatMulPrecision (kernels/cpu's Backend has); use %q", p, b, RolloutExact)}
	}
	return s, nil
}

// generating runs f, a prefill or a decode step, with the model to itself
// (the policy's lock, as a generation call), its forwards reading the
// adapters generation
// samples with (p.gen), at the rollout precision, and then puts the
// backend's previous precision back, also when f fails or panics, so that
// training passes never run at the rollout's. The precision is the
// backend's setting, not the call's: generation and training must not
// overlap on one backend, which the lock ensures (tool rounds, which run
// concurrently with decoding, do not touch it).
func (p *policy) generating(f func() error) error {
	return p.use(true, p.gen, func() error {
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
