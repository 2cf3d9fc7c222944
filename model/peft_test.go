package model

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/kernels"
	"github.com/x/kernels/ref"
)

// TestLoadPEFTAdapterMatchesReference loads the PEFT adapter Python wrote
// and checks the logits with it against the float64 reference (1e-4
// absolute: float32 forward), and that it parsed r=4, alpha=8.
func TestLoadPEFTAdapterMatchesReference(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "tiny_tied_f32.json"))
	require.NoError(t, err)
	var doc struct {
		LoRA struct {
			InputIDs []int32     `json:"input_ids"`
			Logits   trJSONArray `json:"logits"`
		} `json:"lora"`
	}
	require.NoError(t, json.Unmarshal(data, &doc))
	m := trLoadTiny(t, ref.Backend{}, false)
	cfg, err := LoadAdapter(filepath.Join("testdata", "tiny_tied_f32_lora"), m)
	require.NoError(t, err)
	assert.Equal(t, 4, cfg.R)
	assert.Equal(t, 8.0, cfg.Alpha)
	assert.Equal(t, float32(2), cfg.Scaling())
	assert.ElementsMatch(t, LoRATargets(), cfg.Targets)
	got, err := m.Logits(doc.LoRA.InputIDs, Options{})
	require.NoError(t, err)
	require.Len(t, got, len(doc.LoRA.Logits))
	for i, w := range doc.LoRA.Logits {
		if !assert.InDelta(t, w, got[i], 1e-4, "logit %d", i) {
			break
		}
	}
}

// TestAdapterRoundTrip: a trained-looking adapter saved in PEFT format and
// loaded into a fresh copy of the base gives bit-identical logits, for
// several configurations (subset of targets, layers, rsLoRA).
func TestAdapterRoundTrip(t *testing.T) {
	for _, cfg := range []LoRAConfig{
		{R: 3, Alpha: 6},
		{R: 2, Alpha: 4, RSLoRA: true, Targets: []string{"k_proj", "o_proj", "up_proj"}},
		{R: 1, Alpha: 1, Layers: []int{1}, Targets: []string{"gate_proj"}},
	} {
		dir := t.TempDir()
		base := t.TempDir()
		require.NoError(t, WriteRandom(base, trMicroConfig(false), kernels.F32, 3, RandomOptions{Std: 0.3}))
		m, err := Load(base, ref.Backend{})
		require.NoError(t, err)
		require.NoError(t, AttachLoRA(m, cfg, 5))
		trRandomizeB(m, rand.New(rand.NewPCG(1, 2)))
		ids := []int32{1, 5, 9, 2, 40, 7, 3}
		want, err := m.Logits(ids, Options{})
		require.NoError(t, err)
		require.NoError(t, SaveAdapter(dir, m, cfg, "tiny"))
		require.NoError(t, m.Close())

		m2, err := Load(base, ref.Backend{})
		require.NoError(t, err)
		got, err := LoadAdapter(dir, m2)
		require.NoError(t, err)
		assert.Equal(t, cfg.R, got.R)
		assert.Equal(t, cfg.RSLoRA, got.RSLoRA)
		assert.Equal(t, cfg.Scaling(), got.Scaling())
		logits, err := m2.Logits(ids, Options{})
		require.NoError(t, err)
		assert.Equal(t, want, logits, "%+v", cfg)
		require.NoError(t, m2.Close())
	}
}

// TestAdapterConfigRejects: what the model does not implement is an error
// naming the field.
func TestAdapterConfigRejects(t *testing.T) {
	base := `"peft_type":"LORA","r":4,"lora_alpha":8,"target_modules":["q_proj"]`
	for _, tc := range []struct {
		json, want string
	}{
		{`{` + base + `,"use_dora":true}`, "DoRA"},
		{`{` + base + `,"fan_in_fan_out":true}`, "fan_in_fan_out"},
		{`{` + base + `,"rank_pattern":{"q_proj":8}}`, "rank_pattern"},
		{`{` + base + `,"alpha_pattern":{"q_proj":8}}`, "alpha_pattern"},
		{`{` + base + `,"bias":"lora_only"}`, "bias"},
		{`{` + base + `,"modules_to_save":["lm_head"]}`, "modules_to_save"},
		{`{"peft_type":"IA3","r":4,"lora_alpha":8,"target_modules":["q_proj"]}`, "peft_type"},
		{`{"peft_type":"LORA","r":0,"lora_alpha":8,"target_modules":["q_proj"]}`, "rank"},
		{`{"peft_type":"LORA","r":4,"lora_alpha":8,"target_modules":["lm_head"]}`, "lm_head"},
		{`{"peft_type":"LORA","r":4,"lora_alpha":8}`, "target_modules"},
		{`{"peft_type":"LORA","r":4,"lora_alpha":8,"target_modules":"(("}`, "regex"},
		{`{"peft_type":"LORA",`, "adapter_config.json"},
	} {
		_, err := parseAdapterConfig([]byte(tc.json), 2)
		if assert.Error(t, err, tc.json) {
			assert.Contains(t, err.Error(), tc.want)
		}
	}
}

// TestAdapterConfigTargetForms: PEFT's forms of target_modules, matched as
// PEFT matches them against every module path of a 2-layer model, with and
// without layers_to_transform.
func TestAdapterConfigTargetForms(t *testing.T) {
	for _, tc := range []struct {
		targets    string
		layers     string // layers_to_transform, "" for none
		want       []string
		wantLayers []int // nil: every layer
		err        string
	}{
		{targets: `"all-linear"`, want: LoRATargets()},
		{targets: `".*(q_proj|v_proj)"`, layers: `1`, want: []string{"q_proj", "v_proj"}, wantLayers: []int{1}},
		{targets: `"down_proj"`, want: []string{"down_proj"}},
		{targets: `["v_proj","q_proj","q_proj"]`, want: []string{"q_proj", "v_proj"}},
		{targets: `["self_attn.q_proj","mlp.down_proj"]`, want: []string{"q_proj", "down_proj"}},
		{targets: `["model.layers.1.self_attn.q_proj"]`, want: []string{"q_proj"}, wantLayers: []int{1}},
		{targets: `["layers.0.mlp.up_proj","c_attn"]`, want: []string{"up_proj"}, wantLayers: []int{0}},
		{targets: `".*\\.layers\\.1\\.self_attn\\.q_proj"`, want: []string{"q_proj"}, wantLayers: []int{1}},
		{targets: `".*\\.layers\\.1\\.self_attn\\.q_proj"`, layers: `[0]`, err: "selects no projection"},
		{targets: `["model.layers.0.self_attn.q_proj","model.layers.1.self_attn.v_proj"]`, err: "same projections"},
		{targets: `["q_proj","lm_head"]`, err: "lm_head"},
		{targets: `".*"`, err: "cannot adapt"},
		{targets: `["c_attn"]`, err: "selects no projection"},
		{targets: `["q_proj"]`, layers: `[2]`, err: "has 2 layers"},
	} {
		js := `{"peft_type":"LORA","r":2,"lora_alpha":4,"target_modules":` + tc.targets
		if tc.layers != "" {
			js += `,"layers_to_transform":` + tc.layers
		}
		c, err := parseAdapterConfig([]byte(js+`}`), 2)
		if tc.err != "" {
			assert.ErrorContains(t, err, tc.err, js)
			continue
		}
		require.NoError(t, err, js)
		assert.Equal(t, tc.want, c.Targets, js)
		assert.Equal(t, tc.wantLayers, c.Layers, js)
	}
}

// TestLoadAdapterRejectsBadTensors: missing, misshapen and foreign tensors
// are errors and leave the model's adapters unchanged.
func TestLoadAdapterRejectsBadTensors(t *testing.T) {
	m := trLoadTiny(t, ref.Backend{}, false)
	cfgJSON, err := os.ReadFile(filepath.Join("testdata", "tiny_tied_f32_lora", AdapterConfigFile))
	require.NoError(t, err)
	a := make([]float32, 4*64)
	for _, tc := range []struct {
		name    string
		tensors []Tensor
		want    string
	}{
		{"missing", []Tensor{F32Tensor(peftName(0, "q_proj", "A"), a, 4, 64)}, "missing"},
		{"shape", []Tensor{F32Tensor(peftName(0, "q_proj", "A"), a, 2, 128)}, "shape"},
		{"foreign", []Tensor{F32Tensor("base_model.model.lm_head.weight", a, 4, 64)}, "not a LoRA weight"},
		{"layer", []Tensor{F32Tensor(peftName(9, "q_proj", "A"), a, 4, 64)}, "outside"},
	} {
		dir := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(dir, AdapterConfigFile), cfgJSON, 0o644))
		require.NoError(t, WriteSafetensors(filepath.Join(dir, AdapterWeightsFile), tc.tensors, nil))
		_, err := LoadAdapter(dir, m)
		if assert.Error(t, err, tc.name) {
			assert.Contains(t, err.Error(), tc.want, tc.name)
		}
		assert.Nil(t, m.Layers[0].Attn.Q.LoRA, tc.name)
	}
}

// TestZeroBAdapterIsNoOp: fresh PEFT-initialised adapters (B = 0) leave
// the log-probs bit-identical, and A follows kaiming-uniform bounds.
func TestZeroBAdapterIsNoOp(t *testing.T) {
	m := trRandomModel(t, trMicroConfig(true), kernels.F32, ref.Backend{}, 4)
	require.NoError(t, AttachLoRA(m, LoRAConfig{R: 4, Alpha: 8}, 9))
	a := m.Layers[1].MLP.Down.LoRA
	bound := float32(1 / 6.324555320336759) // 1/√40, down_proj's fan-in
	for _, v := range a.A {
		require.LessOrEqual(t, v, bound)
		require.GreaterOrEqual(t, v, -bound)
	}
	tr, err := NewTrainable(m, TrainOptions{})
	require.NoError(t, err)
	seqs := trRandomSeqs(rand.New(rand.NewPCG(1, 1)), m.Config.VocabSize, 9, 13)
	on, _, err := tr.LogProbs(context.Background(), seqs, true)
	require.NoError(t, err)
	off, _, err := tr.LogProbs(context.Background(), seqs, false)
	require.NoError(t, err)
	assert.Equal(t, off, on)
}

// FuzzAdapterConfig: adapter_config.json from outside never panics, and
// whatever it accepts is a valid LoRAConfig that survives a write/read.
func FuzzAdapterConfig(f *testing.F) {
	seed, err := os.ReadFile(filepath.Join("testdata", "tiny_tied_f32_lora", AdapterConfigFile))
	require.NoError(f, err)
	f.Add(seed)
	f.Add([]byte(`{"peft_type":"LORA","r":2,"lora_alpha":4,"target_modules":"all-linear","layers_to_transform":[0,1]}`))
	f.Add([]byte(`{"peft_type":"LORA","r":2,"lora_alpha":4,"target_modules":".*proj","use_rslora":true}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := parseAdapterConfig(data, 4)
		if err != nil {
			return
		}
		require.NoError(t, c.Validate())
		js, err := marshalAdapterConfig(c, "")
		require.NoError(t, err)
		c2, err := parseAdapterConfig(js, 4)
		require.NoError(t, err)
		require.Equal(t, c.R, c2.R)
		require.Equal(t, c.Scaling(), c2.Scaling())
	})
}
