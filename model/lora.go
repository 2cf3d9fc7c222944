package model

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// AttachLoRA gives the projections cfg targets fresh adapters initialised
// as PEFT does by default: A kaiming-uniform with a = √5 (uniform in
// ±1/√In), B zeros, so the model's output is unchanged. The draws come from
// one PCG stream seeded by seed, layer by layer in q, k, v, o, gate, up,
// down order. Projections cfg does not target lose any adapter they had.
// Replacing adapters frees the old ones' backend copies, which are a
// Trainable's parameters when it trains them: do not use such a Trainable
// afterwards (save its adapters first, SaveAdapter).
func AttachLoRA(m *Model, cfg LoRAConfig, seed uint64) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	for _, l := range cfg.Layers {
		if l >= len(m.Layers) {
			return fmt.Errorf("lora: layer %d out of range (model has %d)", l, len(m.Layers))
		}
	}
	rng := rand.New(rand.NewPCG(seed, 0x4c6f5241))
	scaling := cfg.Scaling()
	for li := range m.Layers {
		for j, nl := range m.Layers[li].Linears() {
			lin := nl.Linear
			m.forgetLinear(lin, false)
			if !cfg.targets(li, loraTargets[j]) {
				lin.LoRA = nil
				continue
			}
			a := make([]float32, cfg.R*lin.In())
			bound := 1 / math.Sqrt(float64(lin.In()))
			for i := range a {
				a[i] = float32((2*rng.Float64() - 1) * bound)
			}
			lin.LoRA = &LoRA{A: a, B: make([]float32, lin.Out()*cfg.R), R: cfg.R, Scaling: scaling}
		}
	}
	return nil
}

// DetachLoRA removes every adapter from m, freeing their backend copies:
// a Trainable that trained them must not be used afterwards.
func DetachLoRA(m *Model) {
	for li := range m.Layers {
		for _, nl := range m.Layers[li].Linears() {
			m.forgetLinear(nl.Linear, false)
			nl.Linear.LoRA = nil
		}
	}
}

// peftName is the tensor name PEFT saves for a LoRA matrix ("A" or "B") on
// projection target of layer li.
func peftName(li int, target, which string) string {
	return fmt.Sprintf("base_model.model.model.layers.%d.%s.lora_%s.weight", li, modulePath(target), which)
}
