package model

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// llama.cpp's token types (gguf-py TokenType).
const (
	GGUFTokenNormal      int32 = 1
	GGUFTokenUnknown     int32 = 2
	GGUFTokenControl     int32 = 3
	GGUFTokenUserDefined int32 = 4
	GGUFTokenUnused      int32 = 5
	GGUFTokenByte        int32 = 6
)

// GGUFVocab is the tokenizer metadata of a GGUF export, as llama.cpp's
// converter writes it for a byte-level BPE ("gpt2") tokenizer such as
// Qwen3's: tokenizer.ggml.model, .pre, .tokens, .token_type, .merges, the
// special token ids and add_*_token flags, and tokenizer.chat_template.
type GGUFVocab struct {
	Model  string   // tokenizer.ggml.model: "gpt2"
	Pre    string   // tokenizer.ggml.pre: the pre-tokenizer, "qwen2" for Qwen3
	Tokens []string // by id, one per row of the embedding ("[PAD<id>]" for ids the tokenizer lacks)
	Types  []int32  // GGUFToken* by id
	Merges []string // "left right", in rank order
	// SpecialIDs maps bos, eos, unk, sep, pad, cls and mask to token ids
	// (only those the tokenizer defines).
	SpecialIDs map[string]uint32
	// AddSpecial maps the same names to tokenizer_config.json's
	// add_<name>_token flags (only those set there).
	AddSpecial   map[string]bool
	ChatTemplate string // "" when absent
}

// ggufSpecialKeys are the special-token names of GGUFVocab.SpecialIDs in
// the converter's order, with their GGUF key stems (sic: "seperator").
var ggufSpecialKeys = [...][2]string{
	{"bos", "bos"}, {"eos", "eos"}, {"unk", "unknown"}, {"sep", "seperator"},
	{"pad", "padding"}, {"cls", "cls"}, {"mask", "mask"},
}

// metadata is the vocabulary's GGUF metadata entries.
func (v *GGUFVocab) metadata() []ggufKV {
	kvs := []ggufKV{
		{"tokenizer.ggml.model", v.Model},
		{"tokenizer.ggml.pre", v.Pre},
		{"tokenizer.ggml.tokens", v.Tokens},
		{"tokenizer.ggml.token_type", v.Types},
		{"tokenizer.ggml.merges", v.Merges},
	}
	for _, k := range ggufSpecialKeys {
		if id, ok := v.SpecialIDs[k[0]]; ok {
			kvs = append(kvs, ggufKV{"tokenizer.ggml." + k[1] + "_token_id", id})
		}
	}
	for _, k := range ggufSpecialKeys {
		if add, ok := v.AddSpecial[k[0]]; ok {
			kvs = append(kvs, ggufKV{"tokenizer.ggml.add_" + k[0] + "_token", add})
		}
	}
	if v.ChatTemplate != "" {
		kvs = append(kvs, ggufKV{"tokenizer.chat_template", v.ChatTemplate})
	}
	return kvs
}

// check reports what makes v unusable for a model of vocabSize tokens.
func (v *GGUFVocab) check(vocabSize int) error {
	switch {
	case v.Model == "" || v.Pre == "":
		return errors.New("vocabulary: tokenizer model and pre-tokenizer names are required")
	case len(v.Tokens) != vocabSize:
		return fmt.Errorf("vocabulary: %d tokens for a model of %d", len(v.Tokens), vocabSize)
	case len(v.Types) != len(v.Tokens):
		return fmt.Errorf("vocabulary: %d token types for %d tokens", len(v.Types), len(v.Tokens))
	}
	for name, id := range v.SpecialIDs {
		if int(id) >= vocabSize {
			return fmt.Errorf("vocabulary: %s token id %d outside the vocabulary of %d", name, id, vocabSize)
		}
	}
	return nil
}

// hfTokenizerFile is the part of a Hugging Face tokenizer.json the export
// reads.
type hfTokenizerFile struct {
	AddedTokens []struct {
		ID         int    `json:"id"`
		Content    string `json:"content"`
		Special    bool   `json:"special"`
		Normalized bool   `json:"normalized"`
	} `json:"added_tokens"`
	Model struct {
		Type   string          `json:"type"`
		Vocab  map[string]int  `json:"vocab"`
		Merges json.RawMessage `json:"merges"`
	} `json:"model"`
}

// ReadGGUFVocab builds the vocabulary llama.cpp's converter writes for a
// Qwen3 (byte-level BPE) tokenizer from the Hugging Face files in dir:
// tokenizer.json (required), tokenizer_config.json (special tokens,
// add_*_token flags, chat_template; optional) and config.json
// (bos_token_id and eos_token_id when tokenizer_config.json names no such
// token; optional). Tokens are padded to vocabSize, the model's embedding
// rows, with "[PAD<id>]" (type unused); added tokens are control tokens
// when marked special or shaped like one ("<|...|>"), else user-defined;
// the rest are normal. The pre-tokenizer is "qwen2", the one llama.cpp
// assigns to Qwen2/Qwen3's tokenizer.json.
func ReadGGUFVocab(dir string, vocabSize int) (*GGUFVocab, error) {
	raw, err := os.ReadFile(filepath.Join(dir, "tokenizer.json"))
	if err != nil {
		return nil, fmt.Errorf("gguf vocabulary: %w", err)
	}
	var tf hfTokenizerFile
	if err := json.Unmarshal(raw, &tf); err != nil {
		return nil, fmt.Errorf("gguf vocabulary: parse %s: %w", filepath.Join(dir, "tokenizer.json"), err)
	}
	if tf.Model.Type != "BPE" {
		return nil, fmt.Errorf("gguf vocabulary: tokenizer.json model type %q: only BPE (Qwen3's) is supported", tf.Model.Type)
	}
	v := &GGUFVocab{Model: "gpt2", Pre: "qwen2", Tokens: make([]string, vocabSize), Types: make([]int32, vocabSize),
		SpecialIDs: map[string]uint32{}, AddSpecial: map[string]bool{}}
	have := make([]bool, vocabSize)
	set := func(id int, text string, typ int32) error {
		if id < 0 || id >= vocabSize {
			return fmt.Errorf("gguf vocabulary: token %q has id %d outside the model's vocabulary of %d", text, id, vocabSize)
		}
		v.Tokens[id], v.Types[id], have[id] = text, typ, true
		return nil
	}
	for text, id := range tf.Model.Vocab {
		if err := set(id, text, GGUFTokenNormal); err != nil {
			return nil, err
		}
	}
	addedID := map[string]int{}
	for _, a := range tf.AddedTokens {
		typ := GGUFTokenUserDefined
		if a.Special || ggufLooksSpecial(a.Content) {
			typ = GGUFTokenControl
		}
		if err := set(a.ID, a.Content, typ); err != nil {
			return nil, err
		}
		if _, dup := addedID[a.Content]; !dup {
			addedID[a.Content] = a.ID
		}
	}
	for id, ok := range have {
		if !ok {
			v.Tokens[id], v.Types[id] = fmt.Sprintf("[PAD%d]", id), GGUFTokenUnused
		}
	}
	if v.Merges, err = parseMerges(tf.Model.Merges); err != nil {
		return nil, fmt.Errorf("gguf vocabulary: tokenizer.json merges: %w", err)
	}
	if err := v.readTokenizerConfig(filepath.Join(dir, "tokenizer_config.json"), addedID); err != nil {
		return nil, err
	}
	if err := v.readConfigIDs(filepath.Join(dir, "config.json")); err != nil {
		return nil, err
	}
	if err := v.check(vocabSize); err != nil {
		return nil, fmt.Errorf("gguf vocabulary: %w", err)
	}
	return v, nil
}

// ggufLooksSpecial is the converter's test for added tokens that ought to
// be control tokens though not marked special.
func ggufLooksSpecial(s string) bool {
	switch s {
	case "<pad>", "<mask>", "<2mass>", "[@BOS@]":
		return true
	}
	return strings.HasPrefix(s, "<|") && strings.HasSuffix(s, "|>") ||
		strings.HasPrefix(s, "<｜") && strings.HasSuffix(s, "｜>") ||
		strings.HasPrefix(s, "<unused") && strings.HasSuffix(s, ">")
}

// parseMerges reads BPE merges in either tokenizer.json form: strings
// "a b", or pairs ["a", "b"] (whose spaces become U+0120 'Ġ' when joined,
// as the converter does).
func parseMerges(raw json.RawMessage) ([]string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return []string{}, nil
	}
	var asStrings []string
	if err := json.Unmarshal(raw, &asStrings); err == nil {
		return asStrings, nil
	}
	var pairs [][]string
	if err := json.Unmarshal(raw, &pairs); err != nil {
		return nil, fmt.Errorf("neither strings nor pairs of strings: %w", err)
	}
	out := make([]string, len(pairs))
	for i, p := range pairs {
		if len(p) != 2 {
			return nil, fmt.Errorf("merge %d has %d parts, want 2", i, len(p))
		}
		out[i] = strings.ReplaceAll(p[0], " ", "\u0120") + " " + strings.ReplaceAll(p[1], " ", "\u0120")
	}
	return out, nil
}

// readTokenizerConfig takes special tokens (by content, looked up among
// the added tokens), add_*_token flags and the chat template from a
// tokenizer_config.json, if there is one.
func (v *GGUFVocab) readTokenizerConfig(path string, addedID map[string]int) error {
	raw, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("gguf vocabulary: %w", err)
	}
	var tc map[string]json.RawMessage
	if err := json.Unmarshal(raw, &tc); err != nil {
		return fmt.Errorf("gguf vocabulary: parse %s: %w", path, err)
	}
	for _, k := range ggufSpecialKeys {
		var add *bool // absent or null: not set (only a bool counts)
		if json.Unmarshal(tc["add_"+k[0]+"_token"], &add) == nil && add != nil {
			v.AddSpecial[k[0]] = *add
		}
		content, ok := specialContent(tc[k[0]+"_token"])
		if !ok {
			continue
		}
		if id, ok := addedID[content]; ok {
			v.SpecialIDs[k[0]] = uint32(id)
		}
	}
	var tmpl string
	if json.Unmarshal(tc["chat_template"], &tmpl) == nil {
		v.ChatTemplate = tmpl
	}
	return nil
}

// specialContent reads a tokenizer_config.json special-token entry: a
// string, or an object with a "content" string.
func specialContent(raw json.RawMessage) (string, bool) {
	var s string
	if json.Unmarshal(raw, &s) == nil && raw != nil && string(raw) != "null" {
		return s, true
	}
	var obj struct {
		Content *string `json:"content"`
	}
	if json.Unmarshal(raw, &obj) == nil && obj.Content != nil {
		return *obj.Content, true
	}
	return "", false
}

// readConfigIDs fills the special ids tokenizer_config.json did not name
// from config.json's <name>_token_id integers (a list is skipped, as the
// converter skips it), if there is a config.json.
func (v *GGUFVocab) readConfigIDs(path string) error {
	raw, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("gguf vocabulary: %w", err)
	}
	var cfg map[string]json.RawMessage
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return fmt.Errorf("gguf vocabulary: parse %s: %w", path, err)
	}
	for _, k := range ggufSpecialKeys {
		if _, done := v.SpecialIDs[k[0]]; done {
			continue
		}
		var id *int64 // absent, null or a list: skipped
		if err := json.Unmarshal(cfg[k[0]+"_token_id"], &id); err != nil || id == nil {
			continue
		}
		if *id < 0 || *id >= int64(len(v.Tokens)) {
			return fmt.Errorf("gguf vocabulary: %s: %s_token_id %d outside the vocabulary of %d", path, k[0], *id, len(v.Tokens))
		}
		v.SpecialIDs[k[0]] = uint32(*id)
	}
	return nil
}

// GGUFContextLength reads max_position_embeddings from the config.json in
// dir: the qwen3.context_length of an export (GGUFOptions.ContextLength);
// 0 when the key is absent.
func GGUFContextLength(dir string) (int, error) {
	path := filepath.Join(dir, "config.json")
	raw, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("gguf context length: %w", err)
	}
	var cfg struct {
		MaxPos *int `json:"max_position_embeddings"`
	}
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return 0, fmt.Errorf("gguf context length: parse %s: %w", path, err)
	}
	if cfg.MaxPos == nil {
		return 0, nil
	}
	if *cfg.MaxPos <= 0 {
		return 0, fmt.Errorf("gguf context length: %s: max_position_embeddings %d", path, *cfg.MaxPos)
	}
	return *cfg.MaxPos, nil
}
