package model

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
)

// Adapter folder file names, as PEFT's save_pretrained writes them.
const (
	AdapterConfigFile  = "adapter_config.json"
	AdapterWeightsFile = "adapter_model.safetensors"
)

// SaveAdapter writes the adapters attached to m into dir (created if
// needed) as a PEFT LoRA folder: adapter_config.json describing cfg and
// adapter_model.safetensors (F32) with PEFT's tensor names, which Python
// PEFT and vLLM load. Every projection cfg targets must carry an adapter of
// rank cfg.R, and no other may carry one. baseModel, if not empty, is
// recorded as base_model_name_or_path. Trained adapters are first brought
// back from the backend (Model.DownloadParams).
func SaveAdapter(dir string, m *Model, cfg LoRAConfig, baseModel string) error {
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("save adapter: %w", err)
	}
	if err := m.DownloadParams(); err != nil { // A and B as training left them
		return fmt.Errorf("save adapter: %w", err)
	}
	var tensors []Tensor
	for li := range m.Layers {
		for j, nl := range m.Layers[li].Linears() {
			a, want := nl.Linear.LoRA, cfg.targets(li, loraTargets[j])
			switch {
			case a == nil && !want:
				continue
			case a == nil:
				return fmt.Errorf("save adapter: layer %d %s: config targets it but it has no adapter", li, nl.Name)
			case !want:
				return fmt.Errorf("save adapter: layer %d %s: has an adapter the config does not target", li, nl.Name)
			case a.R != cfg.R:
				return fmt.Errorf("save adapter: layer %d %s: rank %d, config says %d", li, nl.Name, a.R, cfg.R)
			}
			tensors = append(tensors,
				F32Tensor(peftName(li, loraTargets[j], "A"), a.A, a.R, nl.Linear.In()),
				F32Tensor(peftName(li, loraTargets[j], "B"), a.B, nl.Linear.Out(), a.R))
		}
	}
	if len(tensors) == 0 {
		return errors.New("save adapter: the model carries no adapters")
	}
	js, err := marshalAdapterConfig(cfg, baseModel)
	if err != nil {
		return fmt.Errorf("save adapter: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("save adapter: %w", err)
	}
	if err := WriteSafetensors(filepath.Join(dir, AdapterWeightsFile), tensors, nil); err != nil {
		return fmt.Errorf("save adapter: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, AdapterConfigFile), append(js, '\n'), 0o644); err != nil {
		return fmt.Errorf("save adapter: %w", err)
	}
	return nil
}

// peftTensorName matches a LoRA tensor name as PEFT saves it, with or
// without the adapter name ("default") that some writers keep.
var peftTensorName = regexp.MustCompile(`^base_model\.model\.model\.layers\.(\d+)\.(self_attn|mlp)\.(\w+)\.lora_([AB])(?:\.default)?\.weight$`)

// LoadAdapter reads a PEFT LoRA folder (adapter_config.json and
// adapter_model.safetensors, F32, BF16 or F16) and attaches its adapters
// to m, replacing any it had. Configurations the model does not implement
// (DoRA, fan_in_fan_out, rank_pattern/alpha_pattern, LoRA biases,
// modules_to_save) and tensors that are missing, unexpected or misshapen
// are errors naming the field or tensor; m is left unchanged on error. As
// with AttachLoRA, a Trainable of m's previous adapters must not be used
// afterwards.
func LoadAdapter(dir string, m *Model) (LoRAConfig, error) {
	data, err := os.ReadFile(filepath.Join(dir, AdapterConfigFile))
	if err != nil {
		return LoRAConfig{}, fmt.Errorf("load adapter: %w", err)
	}
	cfg, err := parseAdapterConfig(data, len(m.Layers))
	if err != nil {
		return LoRAConfig{}, fmt.Errorf("load adapter %s: %w", dir, err)
	}
	f, err := OpenSafetensors(filepath.Join(dir, AdapterWeightsFile))
	if err != nil {
		return LoRAConfig{}, fmt.Errorf("load adapter: %w", err)
	}
	defer f.Close()
	adapters, err := readAdapters(f, m, cfg)
	if err != nil {
		return LoRAConfig{}, fmt.Errorf("load adapter %s: %w", dir, err)
	}
	for li := range m.Layers {
		for j, nl := range m.Layers[li].Linears() {
			m.forgetLinear(nl.Linear, false)
			nl.Linear.LoRA = adapters[li][j]
		}
	}
	return cfg, nil
}

// readAdapters reads and checks every tensor of f against m and cfg.
func readAdapters(f *SafetensorsFile, m *Model, cfg LoRAConfig) ([][7]*LoRA, error) {
	out := make([][7]*LoRA, len(m.Layers))
	for _, t := range f.Header.Tensors {
		p := peftTensorName.FindStringSubmatch(t.Name)
		if p == nil {
			return nil, fmt.Errorf("tensor %s: not a LoRA weight of a Qwen3 projection (DoRA magnitudes, biases and modules_to_save are not supported)", t.Name)
		}
		li, err := strconv.Atoi(p[1])
		if err != nil || li >= len(m.Layers) {
			return nil, fmt.Errorf("tensor %s: layer %s outside the model's %d layers", t.Name, p[1], len(m.Layers))
		}
		j := targetIndex(p[3])
		if j < 0 || modulePath(p[3]) != p[2]+"."+p[3] {
			return nil, fmt.Errorf("tensor %s: %s.%s is not a Qwen3 projection", t.Name, p[2], p[3])
		}
		if !cfg.targets(li, p[3]) {
			return nil, fmt.Errorf("tensor %s: projection not in the config's target_modules/layers_to_transform", t.Name)
		}
		if out[li][j] == nil {
			out[li][j] = &LoRA{R: cfg.R, Scaling: cfg.Scaling()}
		}
		lin := m.Layers[li].Linears()[j].Linear
		a := out[li][j]
		if (p[4] == "A" && a.A != nil) || (p[4] == "B" && a.B != nil) {
			return nil, fmt.Errorf("tensor %s: a second lora_%s weight for layer %d %s", t.Name, p[4], li, p[3])
		}
		if p[4] == "A" {
			a.A, err = f.Float32s(t.Name, cfg.R, lin.In())
		} else {
			a.B, err = f.Float32s(t.Name, lin.Out(), cfg.R)
		}
		if err != nil {
			return nil, err
		}
	}
	for li := range m.Layers {
		for j := range loraTargets {
			if !cfg.targets(li, loraTargets[j]) {
				continue
			}
			a := out[li][j]
			if a == nil || a.A == nil || a.B == nil {
				return nil, fmt.Errorf("layer %d %s: lora_A or lora_B weight missing", li, loraTargets[j])
			}
		}
	}
	return out, nil
}

func targetIndex(name string) int {
	for j, t := range loraTargets {
		if t == name {
			return j
		}
	}
	return -1
}
