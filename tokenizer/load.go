package tokenizer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"sort"
	"strings"
)

// fileJSON is the part of a Hugging Face tokenizer.json this package reads.
type fileJSON struct {
	AddedTokens   []addedTokenJSON `json:"added_tokens"`
	Normalizer    json.RawMessage  `json:"normalizer"`
	PreTokenizer  json.RawMessage  `json:"pre_tokenizer"`
	PostProcessor json.RawMessage  `json:"post_processor"`
	Decoder       json.RawMessage  `json:"decoder"`
	Model         *modelJSON       `json:"model"`
}

type addedTokenJSON struct {
	ID         *int64 `json:"id"`
	Content    string `json:"content"`
	SingleWord bool   `json:"single_word"`
	LStrip     bool   `json:"lstrip"`
	RStrip     bool   `json:"rstrip"`
	Normalized bool   `json:"normalized"`
	Special    bool   `json:"special"`
}

type modelJSON struct {
	Type                    string           `json:"type"`
	Vocab                   map[string]int64 `json:"vocab"`
	Merges                  json.RawMessage  `json:"merges"`
	Dropout                 *float64         `json:"dropout"`
	ContinuingSubwordPrefix *string          `json:"continuing_subword_prefix"`
	EndOfWordSuffix         *string          `json:"end_of_word_suffix"`
	ByteFallback            bool             `json:"byte_fallback"`
	IgnoreMerges            bool             `json:"ignore_merges"`
}

type typed struct {
	Type string `json:"type"`
}

type splitJSON struct {
	Type    string `json:"type"`
	Pattern struct {
		Regex  *string `json:"Regex"`
		String *string `json:"String"`
	} `json:"pattern"`
	Behavior string `json:"behavior"`
	Invert   bool   `json:"invert"`
}

type byteLevelJSON struct {
	Type           string `json:"type"`
	AddPrefixSpace bool   `json:"add_prefix_space"`
	UseRegex       *bool  `json:"use_regex"`
}

type sequenceJSON struct {
	Type          string            `json:"type"`
	PreTokenizers []json.RawMessage `json:"pretokenizers"`
	Normalizers   []json.RawMessage `json:"normalizers"`
}

// maxID bounds token ids: they must fit int32 and index in-memory tables.
const maxID = 1 << 24

// idSlack is how far ids may run past the number of tokens: real files have
// a few reserved gaps, a hostile one must not make us allocate gigabytes.
const idSlack = 1 << 16

// Load reads a Hugging Face tokenizer.json of the byte-level BPE family.
func Load(path string) (*Tokenizer, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("load tokenizer: %w", err)
	}
	t, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("load tokenizer %s: %w", path, err)
	}
	return t, nil
}

// Parse builds a Tokenizer from the contents of a tokenizer.json. Anything it
// does not implement exactly (another model type, normalizer or pre-tokenizer,
// single_word added tokens) is an error rather than an approximation. Added
// tokens are always matched on the raw text; Hugging Face matches those
// marked "normalized": true after NFC, which differs only for tokens that
// NFC changes (none in the Qwen files). The post_processor is ignored:
// Encode never adds special tokens.
func Parse(data []byte) (*Tokenizer, error) {
	var f fileJSON
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("parse tokenizer.json: %w", err)
	}
	t := &Tokenizer{bl: newByteLevel(), cache: newWordCache()}
	var err error
	if t.nfc, err = parseNormalizer(f.Normalizer); err != nil {
		return nil, err
	}
	if t.splits, err = parsePreTokenizer(f.PreTokenizer); err != nil {
		return nil, err
	}
	if err := parseDecoder(f.Decoder); err != nil {
		return nil, err
	}
	if f.Model == nil {
		return nil, errors.New("tokenizer.json: no model")
	}
	if err := t.parseModel(f.Model, len(f.AddedTokens)); err != nil {
		return nil, err
	}
	if err := t.parseAdded(f.AddedTokens); err != nil {
		return nil, err
	}
	t.finish()
	return t, nil
}

func isNull(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) == 0 || string(raw) == "null"
}

// parseNormalizer accepts none, NFC, or a Sequence of those.
func parseNormalizer(raw json.RawMessage) (nfc bool, err error) {
	if isNull(raw) {
		return false, nil
	}
	var s sequenceJSON
	if err := json.Unmarshal(raw, &s); err != nil {
		return false, fmt.Errorf("normalizer: %w", err)
	}
	switch s.Type {
	case "NFC":
		return true, nil
	case "Sequence":
		for i, sub := range s.Normalizers {
			n, err := parseNormalizer(sub)
			if err != nil {
				return false, fmt.Errorf("normalizer sequence [%d]: %w", i, err)
			}
			nfc = nfc || n
		}
		return nfc, nil
	}
	return false, fmt.Errorf("normalizer: unsupported type %q (only NFC)", s.Type)
}

// parsePreTokenizer accepts the byte-level family's shapes: ByteLevel (with
// or without GPT-2's regex), a Split with Qwen's or GPT-2's regex, and a
// Sequence of those. It returns the split stages in order.
func parsePreTokenizer(raw json.RawMessage) ([]splitPattern, error) {
	if isNull(raw) {
		return nil, errors.New("pre_tokenizer: missing (a byte-level BPE needs ByteLevel)")
	}
	var stages []splitPattern
	sawByteLevel := false
	var walk func(raw json.RawMessage, depth int) error
	walk = func(raw json.RawMessage, depth int) error {
		if depth > 4 {
			return errors.New("pre_tokenizer: sequence nested too deeply")
		}
		var t typed
		if err := json.Unmarshal(raw, &t); err != nil {
			return fmt.Errorf("pre_tokenizer: %w", err)
		}
		switch t.Type {
		case "Sequence":
			var s sequenceJSON
			if err := json.Unmarshal(raw, &s); err != nil {
				return fmt.Errorf("pre_tokenizer: %w", err)
			}
			for i, sub := range s.PreTokenizers {
				if err := walk(sub, depth+1); err != nil {
					return fmt.Errorf("sequence [%d]: %w", i, err)
				}
			}
		case "Split":
			var s splitJSON
			if err := json.Unmarshal(raw, &s); err != nil {
				return fmt.Errorf("pre_tokenizer Split: %w", err)
			}
			if s.Pattern.Regex == nil {
				return errors.New("pre_tokenizer Split: only Regex patterns are supported")
			}
			if s.Behavior != "Isolated" || s.Invert {
				return fmt.Errorf("pre_tokenizer Split: unsupported behavior %q (invert %v)", s.Behavior, s.Invert)
			}
			switch *s.Pattern.Regex {
			case qwenRegex:
				stages = append(stages, patternQwen)
			case gpt2Regex:
				stages = append(stages, patternGPT2)
			default:
				return fmt.Errorf("pre_tokenizer Split: unsupported regex %q", *s.Pattern.Regex)
			}
		case "ByteLevel":
			var b byteLevelJSON
			if err := json.Unmarshal(raw, &b); err != nil {
				return fmt.Errorf("pre_tokenizer ByteLevel: %w", err)
			}
			if b.AddPrefixSpace {
				return errors.New("pre_tokenizer ByteLevel: add_prefix_space is not supported")
			}
			if b.UseRegex == nil || *b.UseRegex {
				stages = append(stages, patternGPT2)
			}
			sawByteLevel = true
		default:
			return fmt.Errorf("pre_tokenizer: unsupported type %q", t.Type)
		}
		return nil
	}
	if err := walk(raw, 0); err != nil {
		return nil, err
	}
	if !sawByteLevel {
		return nil, errors.New("pre_tokenizer: no ByteLevel step (not a byte-level BPE)")
	}
	return stages, nil
}

func parseDecoder(raw json.RawMessage) error {
	if isNull(raw) {
		return errors.New("decoder: missing (need ByteLevel)")
	}
	var t typed
	if err := json.Unmarshal(raw, &t); err != nil {
		return fmt.Errorf("decoder: %w", err)
	}
	if t.Type != "ByteLevel" {
		return fmt.Errorf("decoder: unsupported type %q (need ByteLevel)", t.Type)
	}
	return nil
}

func (t *Tokenizer) parseModel(m *modelJSON, nAdded int) error {
	if m.Type != "BPE" {
		return fmt.Errorf("model: unsupported type %q (need BPE)", m.Type)
	}
	if m.Dropout != nil && *m.Dropout != 0 {
		return fmt.Errorf("model: dropout %v is not supported", *m.Dropout)
	}
	if m.ContinuingSubwordPrefix != nil && *m.ContinuingSubwordPrefix != "" ||
		m.EndOfWordSuffix != nil && *m.EndOfWordSuffix != "" {
		return errors.New("model: continuing_subword_prefix/end_of_word_suffix are not supported")
	}
	if m.ByteFallback {
		return errors.New("model: byte_fallback is not supported")
	}
	if len(m.Vocab) == 0 {
		return errors.New("model: empty vocab")
	}
	t.ignoreMerges = m.IgnoreMerges
	t.vocab = make(map[string]int32, len(m.Vocab))
	maxSeen := int64(-1)
	for tok, id := range m.Vocab {
		if id < 0 || id >= maxID {
			return fmt.Errorf("model: vocab token %q has id %d out of range [0, %d)", tok, id, maxID)
		}
		t.vocab[tok] = int32(id)
		maxSeen = max(maxSeen, id)
	}
	limit := int64(2*(len(m.Vocab)+nAdded) + idSlack)
	if maxSeen >= limit {
		return fmt.Errorf("model: vocab id %d is far beyond the %d tokens", maxSeen, len(m.Vocab))
	}
	t.tokens = make([]string, maxSeen+1)
	t.used = make([]bool, maxSeen+1)
	for tok, id := range t.vocab {
		if t.used[id] {
			return fmt.Errorf("model: id %d is used by both %q and %q", id, t.tokens[id], tok)
		}
		t.tokens[id], t.used[id] = tok, true
	}
	for b := range 256 {
		id, ok := t.vocab[t.bl.symbol[b]]
		if !ok {
			return fmt.Errorf("model: vocab lacks the byte-level symbol %q for byte 0x%02x", t.bl.symbol[b], b)
		}
		t.byteIDs[b] = id
	}
	merges, err := parseMerges(m.Merges)
	if err != nil {
		return err
	}
	if len(merges) >= math.MaxInt32 {
		return errors.New("model: too many merges")
	}
	t.merges = make(map[uint64]merge, len(merges))
	for rank, p := range merges {
		a, okA := t.vocab[p[0]]
		b, okB := t.vocab[p[1]]
		c, okC := t.vocab[p[0]+p[1]]
		if !okA || !okB || !okC {
			return fmt.Errorf("model: merge %d (%q %q) uses a token that is not in the vocab", rank, p[0], p[1])
		}
		key := pairKey(a, b)
		if _, dup := t.merges[key]; !dup { // the first (lowest) rank wins, as in HF
			t.merges[key] = merge{rank: int32(rank), id: c}
		}
	}
	return nil
}

// parseMerges accepts both merge encodings: "a b" strings and [a, b] pairs.
func parseMerges(raw json.RawMessage) ([][2]string, error) {
	if isNull(raw) {
		return nil, nil
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, fmt.Errorf("model merges: %w", err)
	}
	out := make([][2]string, len(items))
	for i, it := range items {
		var s string
		if err := json.Unmarshal(it, &s); err == nil {
			a, b, ok := strings.Cut(s, " ")
			if !ok || strings.Contains(b, " ") {
				return nil, fmt.Errorf("model merges [%d]: %q is not two space-separated tokens", i, s)
			}
			out[i] = [2]string{a, b}
			continue
		}
		var p []string
		if err := json.Unmarshal(it, &p); err != nil || len(p) != 2 {
			return nil, fmt.Errorf("model merges [%d]: want \"a b\" or [a, b], got %.40s", i, it)
		}
		out[i] = [2]string{p[0], p[1]}
	}
	return out, nil
}

func (t *Tokenizer) parseAdded(list []addedTokenJSON) error {
	for i, a := range list {
		if a.ID == nil {
			return fmt.Errorf("added_tokens [%d] %q: no id", i, a.Content)
		}
		id := *a.ID
		if limit := int64(len(t.tokens) + len(list) + idSlack); id < 0 || id >= limit {
			return fmt.Errorf("added_tokens [%d] %q: id %d out of range [0, %d)", i, a.Content, id, limit)
		}
		if a.Content == "" {
			return fmt.Errorf("added_tokens [%d]: empty content", i)
		}
		if a.SingleWord {
			return fmt.Errorf("added_tokens [%d] %q: single_word is not supported", i, a.Content)
		}
		if int(id) >= len(t.tokens) {
			t.tokens = append(t.tokens, make([]string, int(id)+1-len(t.tokens))...)
			t.used = append(t.used, make([]bool, int(id)+1-len(t.used))...)
		}
		if t.used[id] && t.tokens[id] != a.Content {
			return fmt.Errorf("added_tokens [%d] %q: id %d already belongs to %q", i, a.Content, id, t.tokens[id])
		}
		t.tokens[id], t.used[id] = a.Content, true
		t.added = append(t.added, addedToken{
			content: a.Content, id: int32(id), special: a.Special, lstrip: a.LStrip, rstrip: a.RStrip,
		})
	}
	// Longest first, so the first candidate that matches at a position is the
	// leftmost-longest match.
	sort.SliceStable(t.added, func(i, j int) bool { return len(t.added[i].content) > len(t.added[j].content) })
	return nil
}
