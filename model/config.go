package model

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"reflect"
)

// Config is the part of a Hugging Face Qwen3 config.json the model uses,
// with the defaults of transformers' Qwen3Config applied (head_dim 128,
// num_key_value_heads = num_attention_heads, rms_norm_eps 1e-6, rope_theta
// 10000, untied embeddings).
type Config struct {
	VocabSize         int     // V
	HiddenSize        int     // C
	IntermediateSize  int     // F
	NumLayers         int     // L
	NumHeads          int     // H
	NumKVHeads        int     // KVH
	HeadDim           int     // D; need not be C/H
	RMSNormEps        float32 // eps of every RMSNorm
	RopeTheta         float64 // RoPE base
	TieWordEmbeddings bool    // lm_head shares embed_tokens.weight
	BOSTokenID        int32   // -1 when absent
	EOSTokenIDs       []int32 // eos_token_id, one or several
	TorchDType        string  // torch_dtype / dtype as written ("bfloat16", "float32", ...)
	// MaxPositions is max_position_embeddings, the longest sequence
	// (prompt and generated tokens) generation accepts; 0: not limited.
	MaxPositions int
}

// Special token ids of the named shapes (NamedConfig). Qwen3's tokenizer
// and the project's tiny tokenizer (tokenizer.Tiny) end with the same 26
// added tokens in the same order (<|endoftext|>, <|im_start|>, <|im_end|>,
// ...); the first sits at 151643 in Qwen3's vocabulary and at 4096 − 26 in
// the tiny one. A chat turn ends with <|im_end|>, which is therefore the
// end-of-sequence id generation stops on. model does not import the
// tokenizer package; its tests check these ids against it.
const (
	qwen3FirstAdded = 151643
	tinyFirstAdded  = 4096 - 26
	imEndOffset     = 2 // <|im_end|> among the added tokens
)

// rawConfig mirrors config.json; pointers tell absent from zero.
type rawConfig struct {
	ModelType         string          `json:"model_type"`
	Architectures     []string        `json:"architectures"`
	VocabSize         *int            `json:"vocab_size"`
	HiddenSize        *int            `json:"hidden_size"`
	IntermediateSize  *int            `json:"intermediate_size"`
	NumLayers         *int            `json:"num_hidden_layers"`
	NumHeads          *int            `json:"num_attention_heads"`
	NumKVHeads        *int            `json:"num_key_value_heads"`
	HeadDim           *int            `json:"head_dim"`
	RMSNormEps        *float64        `json:"rms_norm_eps"`
	RopeTheta         *float64        `json:"rope_theta"`
	RopeScaling       json.RawMessage `json:"rope_scaling"`
	RopeParameters    json.RawMessage `json:"rope_parameters"`
	TieWordEmbeddings *bool           `json:"tie_word_embeddings"`
	HiddenAct         *string         `json:"hidden_act"`
	AttentionBias     *bool           `json:"attention_bias"`
	UseSlidingWindow  *bool           `json:"use_sliding_window"`
	BOSTokenID        json.RawMessage `json:"bos_token_id"`
	EOSTokenID        json.RawMessage `json:"eos_token_id"`
	TorchDType        string          `json:"torch_dtype"`
	DType             string          `json:"dtype"`
	MaxPositions      *int            `json:"max_position_embeddings"`
}

// ropeParams is rope_scaling or rope_parameters.
type ropeParams struct {
	RopeType  *string  `json:"rope_type"`
	Type      *string  `json:"type"`
	RopeTheta *float64 `json:"rope_theta"`
}

// LoadConfig reads and parses a config.json file.
func LoadConfig(path string) (Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("model: read config: %w", err)
	}
	cfg, err := ParseConfig(data)
	if err != nil {
		return Config{}, fmt.Errorf("%s: %w", path, err)
	}
	return cfg, nil
}

// ParseConfig parses the bytes of a Qwen3 config.json, applies the
// Qwen3Config defaults and validates the result. Unsupported features
// (sliding-window attention, RoPE scaling, attention biases, activations
// other than silu, other model types) are errors naming the field.
func ParseConfig(data []byte) (Config, error) {
	var r rawConfig
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&r); err != nil {
		return Config{}, fmt.Errorf("model: parse config.json: %w", jsonProblem(err))
	}
	if r.ModelType != "" && r.ModelType != "qwen3" {
		return Config{}, fmt.Errorf("model: config model_type %q: only \"qwen3\" is supported", r.ModelType)
	}
	var errs []error
	need := func(name string, p *int) int {
		if p == nil {
			errs = append(errs, fmt.Errorf("config %s is missing", name))
			return 0
		}
		return *p
	}
	c := Config{
		VocabSize:        need("vocab_size", r.VocabSize),
		HiddenSize:       need("hidden_size", r.HiddenSize),
		IntermediateSize: need("intermediate_size", r.IntermediateSize),
		NumLayers:        need("num_hidden_layers", r.NumLayers),
		NumHeads:         need("num_attention_heads", r.NumHeads),
		HeadDim:          128,
		RMSNormEps:       1e-6,
		RopeTheta:        10000,
		BOSTokenID:       -1,
		TorchDType:       r.TorchDType,
	}
	if c.TorchDType == "" {
		c.TorchDType = r.DType
	}
	if r.MaxPositions != nil {
		c.MaxPositions = *r.MaxPositions
	}
	c.NumKVHeads = c.NumHeads
	if r.NumKVHeads != nil {
		c.NumKVHeads = *r.NumKVHeads
	}
	if r.HeadDim != nil {
		c.HeadDim = *r.HeadDim
	}
	if r.RMSNormEps != nil {
		c.RMSNormEps = float32(*r.RMSNormEps)
	}
	if r.TieWordEmbeddings != nil {
		c.TieWordEmbeddings = *r.TieWordEmbeddings
	}
	if r.RopeTheta != nil {
		c.RopeTheta = *r.RopeTheta
	}
	for _, f := range []struct {
		name string
		raw  json.RawMessage
	}{{"rope_scaling", r.RopeScaling}, {"rope_parameters", r.RopeParameters}} {
		theta, err := parseRope(f.name, f.raw)
		if err != nil {
			errs = append(errs, err)
		} else if theta != 0 {
			c.RopeTheta = theta
		}
	}
	if r.HiddenAct != nil && *r.HiddenAct != "silu" {
		errs = append(errs, fmt.Errorf("config hidden_act %q: only \"silu\" is supported", *r.HiddenAct))
	}
	if r.AttentionBias != nil && *r.AttentionBias {
		errs = append(errs, errors.New("config attention_bias true: not supported"))
	}
	if r.UseSlidingWindow != nil && *r.UseSlidingWindow {
		errs = append(errs, errors.New("config use_sliding_window true: sliding-window attention is not supported"))
	}
	if ids, err := parseTokenIDs(r.BOSTokenID); err != nil {
		errs = append(errs, fmt.Errorf("config bos_token_id: %w", err))
	} else if len(ids) > 0 {
		c.BOSTokenID = ids[0]
	}
	if ids, err := parseTokenIDs(r.EOSTokenID); err != nil {
		errs = append(errs, fmt.Errorf("config eos_token_id: %w", err))
	} else {
		c.EOSTokenIDs = ids
	}
	if len(errs) == 0 {
		if err := c.Validate(); err != nil {
			return Config{}, err
		}
		return c, nil
	}
	return Config{}, fmt.Errorf("model: %w", errors.Join(errs...))
}

// parseRope accepts null, or a rope_type/type of "default" and returns the
// rope_theta the object carries (0 when none).
func parseRope(field string, raw json.RawMessage) (float64, error) {
	if len(raw) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return 0, nil
	}
	var p ropeParams
	if err := json.Unmarshal(raw, &p); err != nil {
		return 0, fmt.Errorf("config %s: %w", field, err)
	}
	typ := "default"
	if p.RopeType != nil {
		typ = *p.RopeType
	} else if p.Type != nil {
		typ = *p.Type
	}
	if typ != "default" {
		return 0, fmt.Errorf("config %s: rope_type %q is not supported (only \"default\")", field, typ)
	}
	if p.RopeTheta != nil {
		return *p.RopeTheta, nil
	}
	return 0, nil
}

// parseTokenIDs reads null, an integer or a list of integers.
func parseTokenIDs(raw json.RawMessage) ([]int32, error) {
	if len(raw) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return nil, nil
	}
	var one int64
	if err := json.Unmarshal(raw, &one); err == nil {
		if one < 0 || one > math.MaxInt32 {
			return nil, fmt.Errorf("token id %d out of range", one)
		}
		return []int32{int32(one)}, nil
	}
	var many []int64
	if err := json.Unmarshal(raw, &many); err != nil {
		return nil, fmt.Errorf("want a whole number or a list of whole numbers, have %s", raw)
	}
	ids := make([]int32, len(many))
	for i, v := range many {
		if v < 0 || v > math.MaxInt32 {
			return nil, fmt.Errorf("token id %d out of range", v)
		}
		ids[i] = int32(v)
	}
	return ids, nil
}

// maxDim bounds every size so that products of sizes cannot overflow int.
const maxDim = 1 << 24

// Validate reports every size that is out of range or inconsistent, each
// naming its config.json field.
func (c Config) Validate() error {
	var errs []error
	pos := func(name string, v int) {
		if v <= 0 || v > maxDim {
			errs = append(errs, fmt.Errorf("config %s = %d: must be in [1, %d]", name, v, maxDim))
		}
	}
	pos("vocab_size", c.VocabSize)
	pos("hidden_size", c.HiddenSize)
	pos("intermediate_size", c.IntermediateSize)
	pos("num_hidden_layers", c.NumLayers)
	pos("num_attention_heads", c.NumHeads)
	pos("num_key_value_heads", c.NumKVHeads)
	pos("head_dim", c.HeadDim)
	if c.MaxPositions < 0 {
		errs = append(errs, fmt.Errorf("config max_position_embeddings = %d: must be ≥ 0", c.MaxPositions))
	}
	if c.HeadDim%2 != 0 {
		errs = append(errs, fmt.Errorf("config head_dim = %d: RoPE needs an even head_dim", c.HeadDim))
	}
	if c.NumKVHeads > 0 && c.NumHeads%c.NumKVHeads != 0 {
		errs = append(errs, fmt.Errorf("config num_attention_heads = %d is not a multiple of num_key_value_heads = %d", c.NumHeads, c.NumKVHeads))
	}
	if !(c.RMSNormEps > 0) || math.IsInf(float64(c.RMSNormEps), 0) {
		errs = append(errs, fmt.Errorf("config rms_norm_eps = %g: must be positive and finite", c.RMSNormEps))
	}
	if !(c.RopeTheta > 1) || math.IsInf(c.RopeTheta, 0) {
		errs = append(errs, fmt.Errorf("config rope_theta = %g: must be > 1 and finite", c.RopeTheta))
	}
	for _, id := range c.EOSTokenIDs {
		if c.VocabSize > 0 && int(id) >= c.VocabSize {
			errs = append(errs, fmt.Errorf("config eos_token_id %d >= vocab_size %d", id, c.VocabSize))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("model: %w", errors.Join(errs...))
	}
	return nil
}

// QDim is the width of q_proj's output, H·D.
func (c Config) QDim() int { return c.NumHeads * c.HeadDim }

// KVDim is the width of k_proj's and v_proj's outputs, KVH·D.
func (c Config) KVDim() int { return c.NumKVHeads * c.HeadDim }

// MarshalJSON writes c as a Hugging Face Qwen3ForCausalLM config.json.
func (c Config) MarshalJSON() ([]byte, error) {
	dtype := c.TorchDType
	if dtype == "" {
		dtype = "float32"
	}
	var eos any
	switch len(c.EOSTokenIDs) {
	case 0:
		eos = nil
	case 1:
		eos = c.EOSTokenIDs[0]
	default:
		eos = c.EOSTokenIDs
	}
	maxPos := c.MaxPositions
	if maxPos <= 0 {
		maxPos = 40960
	}
	var bos any
	if c.BOSTokenID >= 0 {
		bos = c.BOSTokenID
	}
	return json.Marshal(map[string]any{
		"architectures":           []string{"Qwen3ForCausalLM"},
		"model_type":              "qwen3",
		"attention_bias":          false,
		"attention_dropout":       0.0,
		"bos_token_id":            bos,
		"eos_token_id":            eos,
		"head_dim":                c.HeadDim,
		"hidden_act":              "silu",
		"hidden_size":             c.HiddenSize,
		"initializer_range":       0.02,
		"intermediate_size":       c.IntermediateSize,
		"max_position_embeddings": maxPos,
		"max_window_layers":       c.NumLayers,
		"num_attention_heads":     c.NumHeads,
		"num_hidden_layers":       c.NumLayers,
		"num_key_value_heads":     c.NumKVHeads,
		"rms_norm_eps":            c.RMSNormEps,
		"rope_scaling":            nil,
		"rope_theta":              c.RopeTheta,
		"sliding_window":          nil,
		"tie_word_embeddings":     c.TieWordEmbeddings,
		"torch_dtype":             dtype,
		"use_cache":               true,
		"use_sliding_window":      false,
		"vocab_size":              c.VocabSize,
	})
}

// jsonProblem says what is wrong with a config.json in its own terms (the
// field as written and the JSON types), not in the Go types it decodes
// into.
func jsonProblem(err error) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return fmt.Errorf("not valid JSON at byte %d: %v", syn.Offset, syn)
	case errors.As(err, &typ) && typ.Field != "":
		return fmt.Errorf("field %s: want %s, have a JSON %s", typ.Field, jsonKind(typ.Type.Kind()), typ.Value)
	case errors.As(err, &typ):
		return fmt.Errorf("want a JSON object, have a JSON %s", typ.Value)
	case errors.Is(err, io.EOF):
		return errors.New("the file is empty")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return errors.New("the JSON ends early")
	}
	return err
}

// jsonKind names the JSON value a Go kind decodes from.
func jsonKind(k reflect.Kind) string {
	switch k {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Slice, reflect.Array:
		return "a list"
	}
	return "an object"
}
