package model

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"
)

// loraTargets are the projection names LoRA can adapt, in PEFT's spelling
// and the order the model applies them.
var loraTargets = [...]string{"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}

// LoRATargets returns the names of the seven projections of a Qwen3 layer
// that LoRA can adapt ("q_proj" … "down_proj").
func LoRATargets() []string { return slices.Clone(loraTargets[:]) }

// LoRAConfig says which projections get adapters and their shape.
type LoRAConfig struct {
	R      int     // rank, > 0
	Alpha  float64 // lora_alpha; scaling is Alpha/R (Alpha/√R with RSLoRA)
	RSLoRA bool    // rank-stabilised scaling
	// Targets are projection names from LoRATargets; empty means all seven.
	Targets []string
	// Layers limits adapters to these decoder layers (PEFT's
	// layers_to_transform); nil means every layer.
	Layers []int
}

// Scaling is the factor applied to B·A: Alpha/R, or Alpha/√R with RSLoRA.
func (c LoRAConfig) Scaling() float32 {
	if c.RSLoRA {
		return float32(c.Alpha / math.Sqrt(float64(c.R)))
	}
	return float32(c.Alpha / float64(c.R))
}

// Validate reports what is wrong with c, if anything.
func (c LoRAConfig) Validate() error {
	if c.R <= 0 {
		return fmt.Errorf("lora: rank %d must be > 0", c.R)
	}
	if !(c.Alpha > 0) || math.IsInf(c.Alpha, 0) {
		return fmt.Errorf("lora: alpha %v must be finite and > 0", c.Alpha)
	}
	for _, t := range c.Targets {
		if !slices.Contains(loraTargets[:], t) {
			return fmt.Errorf("lora: unknown target module %q (want one of %s)", t, strings.Join(loraTargets[:], ", "))
		}
	}
	for _, l := range c.Layers {
		if l < 0 {
			return fmt.Errorf("lora: negative layer index %d", l)
		}
	}
	return nil
}

func (c LoRAConfig) targets(layer int, name string) bool {
	if c.Layers != nil && !slices.Contains(c.Layers, layer) {
		return false
	}
	return len(c.Targets) == 0 || slices.Contains(c.Targets, name)
}

// adapterConfigFile is adapter_config.json as PEFT writes it (LoRA only).
// Fields the model must act on are typed; target_modules and
// layers_to_transform may be a list or a scalar, so they stay raw.
type adapterConfigFile struct {
	PeftType          string          `json:"peft_type"`
	TaskType          string          `json:"task_type"`
	R                 int             `json:"r"`
	LoraAlpha         float64         `json:"lora_alpha"`
	TargetModules     json.RawMessage `json:"target_modules"`
	UseRSLoRA         bool            `json:"use_rslora"`
	UseDoRA           bool            `json:"use_dora"`
	Bias              string          `json:"bias"`
	FanInFanOut       bool            `json:"fan_in_fan_out"`
	RankPattern       json.RawMessage `json:"rank_pattern"`
	AlphaPattern      json.RawMessage `json:"alpha_pattern"`
	LayersToTransform json.RawMessage `json:"layers_to_transform"`
	ModulesToSave     json.RawMessage `json:"modules_to_save"`
	LoraDropout       float64         `json:"lora_dropout"`
}

// parseAdapterConfig decodes and validates adapter_config.json for a model
// of numLayers decoder layers. It rejects what this model does not
// implement with an error naming the field.
func parseAdapterConfig(data []byte, numLayers int) (LoRAConfig, error) {
	var f adapterConfigFile
	if err := json.Unmarshal(data, &f); err != nil {
		return LoRAConfig{}, fmt.Errorf("adapter_config.json: %w", err)
	}
	if f.PeftType != "LORA" {
		return LoRAConfig{}, fmt.Errorf("adapter_config.json: peft_type %q is not supported (only LORA)", f.PeftType)
	}
	if f.UseDoRA {
		return LoRAConfig{}, fmt.Errorf("adapter_config.json: use_dora: DoRA adapters are not supported")
	}
	if f.FanInFanOut {
		return LoRAConfig{}, fmt.Errorf("adapter_config.json: fan_in_fan_out: true is not supported (Qwen3 uses nn.Linear)")
	}
	if f.Bias != "" && f.Bias != "none" {
		return LoRAConfig{}, fmt.Errorf("adapter_config.json: bias %q: LoRA biases are not supported (want \"none\")", f.Bias)
	}
	if !emptyJSON(f.RankPattern) {
		return LoRAConfig{}, fmt.Errorf("adapter_config.json: rank_pattern %s: per-module ranks are not supported", f.RankPattern)
	}
	if !emptyJSON(f.AlphaPattern) {
		return LoRAConfig{}, fmt.Errorf("adapter_config.json: alpha_pattern %s: per-module alphas are not supported", f.AlphaPattern)
	}
	if !emptyJSON(f.ModulesToSave) {
		return LoRAConfig{}, fmt.Errorf("adapter_config.json: modules_to_save %s: fully trained extra modules are not supported", f.ModulesToSave)
	}
	c := LoRAConfig{R: f.R, Alpha: f.LoraAlpha, RSLoRA: f.UseRSLoRA}
	var err error
	var layers []int
	if !emptyJSON(f.LayersToTransform) {
		var one int
		if err := json.Unmarshal(f.LayersToTransform, &one); err == nil {
			layers = []int{one}
		} else if err := json.Unmarshal(f.LayersToTransform, &layers); err != nil {
			return LoRAConfig{}, fmt.Errorf("adapter_config.json: layers_to_transform %s: want an int or a list of ints", f.LayersToTransform)
		}
	}
	if c.Targets, c.Layers, err = parseTargetModules(f.TargetModules, layers, numLayers); err != nil {
		return LoRAConfig{}, err
	}
	if err := c.Validate(); err != nil {
		return LoRAConfig{}, fmt.Errorf("adapter_config.json: %w", err)
	}
	return c, nil
}

// parseTargetModules resolves target_modules (and layers_to_transform) for
// a model of numLayers decoder layers the way PEFT does, by matching every
// projection's module path, "model.layers.N.self_attn.q_proj":
//   - a list: an entry selects a module whose path it equals or ends with
//     after a dot ("q_proj", "self_attn.q_proj", "layers.3.mlp.down_proj");
//     entries that select nothing are ignored, as in PEFT;
//   - the string "all-linear": every projection;
//   - any other string: a regular expression matched against the whole path
//     (or, as a convenience, the bare projection name).
//
// layers, if not nil, is layers_to_transform, which narrows the selection.
// The result must be the same projections on a set of layers (what
// LoRAConfig expresses); a selection of lm_head or the embedding, or of
// different projections on different layers, is an error.
func parseTargetModules(raw json.RawMessage, layers []int, numLayers int) ([]string, []int, error) {
	if emptyJSON(raw) {
		return nil, nil, fmt.Errorf("adapter_config.json: target_modules is missing")
	}
	var match func(path, name string) bool
	var list []string
	if err := json.Unmarshal(raw, &list); err == nil {
		if len(list) == 0 {
			return nil, nil, fmt.Errorf("adapter_config.json: target_modules is empty")
		}
		match = func(path, _ string) bool {
			for _, e := range list {
				if path == e || strings.HasSuffix(path, "."+e) {
					return true
				}
			}
			return false
		}
	} else {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, nil, fmt.Errorf("adapter_config.json: target_modules %s: want a list of names or a string", raw)
		}
		if s == "all-linear" {
			match = func(path, name string) bool { return name != "" }
		} else {
			re, err := regexp.Compile(`^(?:` + s + `)$`)
			if err != nil {
				return nil, nil, fmt.Errorf("adapter_config.json: target_modules regex %q: %w", s, err)
			}
			match = func(path, name string) bool { return re.MatchString(path) || (name != "" && re.MatchString(name)) }
		}
	}
	for _, other := range []string{"lm_head", "model.embed_tokens"} {
		if match(other, "") {
			return nil, nil, fmt.Errorf("adapter_config.json: target_modules %s selects %s, which this model cannot adapt (only %s)", raw, other, strings.Join(loraTargets[:], ", "))
		}
	}
	for _, l := range layers {
		if l < 0 || l >= numLayers {
			return nil, nil, fmt.Errorf("adapter_config.json: layers_to_transform %d: the model has %d layers", l, numLayers)
		}
	}

	// selected[l] lists the projections chosen on layer l.
	selected := make([][]string, numLayers)
	var targets []string
	var chosen []int
	for l := range numLayers {
		if layers != nil && !slices.Contains(layers, l) {
			continue
		}
		for _, t := range loraTargets {
			if match(fmt.Sprintf("model.layers.%d.%s", l, modulePath(t)), t) {
				selected[l] = append(selected[l], t)
				if !slices.Contains(targets, t) {
					targets = append(targets, t)
				}
			}
		}
		if len(selected[l]) > 0 {
			chosen = append(chosen, l)
		}
	}
	if len(targets) == 0 {
		return nil, nil, fmt.Errorf("adapter_config.json: target_modules %s selects no projection (want among %s)", raw, strings.Join(loraTargets[:], ", "))
	}
	slices.SortFunc(targets, func(a, b string) int { return slices.Index(loraTargets[:], a) - slices.Index(loraTargets[:], b) })
	for _, l := range chosen {
		if len(selected[l]) != len(targets) {
			return nil, nil, fmt.Errorf("adapter_config.json: target_modules %s selects %v on layer %d but %v on others; only the same projections on a set of layers is supported", raw, selected[l], l, targets)
		}
	}
	if len(chosen) == numLayers {
		chosen = nil // every layer
	}
	return targets, chosen, nil
}

func emptyJSON(raw json.RawMessage) bool {
	t := string(bytes.TrimSpace(raw))
	return t == "" || t == "null" || t == "{}" || t == "[]"
}

// modulePath is the projection's path inside a decoder layer.
func modulePath(target string) string {
	switch target {
	case "gate_proj", "up_proj", "down_proj":
		return "mlp." + target
	}
	return "self_attn." + target
}

// marshalAdapterConfig writes adapter_config.json for c with every field
// PEFT 0.x expects, so PEFT and vLLM load the folder.
func marshalAdapterConfig(c LoRAConfig, baseModel string) ([]byte, error) {
	targets := c.Targets
	if len(targets) == 0 {
		targets = LoRATargets()
	}
	var layers any
	if c.Layers != nil {
		layers = c.Layers
	}
	var base any
	if baseModel != "" {
		base = baseModel
	}
	m := map[string]any{
		"alpha_pattern":           map[string]any{},
		"auto_mapping":            nil,
		"base_model_name_or_path": base,
		"bias":                    "none",
		"fan_in_fan_out":          false,
		"inference_mode":          true,
		"init_lora_weights":       true,
		"layers_pattern":          nil,
		"layers_to_transform":     layers,
		"lora_alpha":              c.Alpha,
		"lora_dropout":            0.0,
		"modules_to_save":         nil,
		"peft_type":               "LORA",
		"r":                       c.R,
		"rank_pattern":            map[string]any{},
		"revision":                nil,
		"target_modules":          targets,
		"task_type":               "CAUSAL_LM",
		"use_dora":                false,
		"use_rslora":              c.RSLoRA,
	}
	return json.MarshalIndent(m, "", "  ")
}
