package tokenizer

import (
	"bytes"
	"container/heap"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"golang.org/x/text/unicode/norm"
)

// AddedToken is a token matched verbatim in text before pre-tokenization.
type AddedToken struct {
	// Content is the token's exact text, e.g. "<|im_end|>".
	Content string
	// Special tokens are dropped by Decode with skipSpecial.
	Special bool
}

// Qwen3AddedTokens returns Qwen3's 26 added tokens in id order, with its
// special flags (<think>, <tool_call>, <tool_response> and the FIM tokens
// are not special).
func Qwen3AddedTokens() []AddedToken {
	var out []AddedToken
	for _, s := range []string{"<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>",
		"<|object_ref_end|>", "<|box_start|>", "<|box_end|>", "<|quad_start|>", "<|quad_end|>",
		"<|vision_start|>", "<|vision_end|>", "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>"} {
		out = append(out, AddedToken{Content: s, Special: true})
	}
	for _, s := range []string{"<tool_call>", "</tool_call>", "<|fim_prefix|>", "<|fim_middle|>",
		"<|fim_suffix|>", "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>", "<tool_response>",
		"</tool_response>", "<think>", "</think>"} {
		out = append(out, AddedToken{Content: s})
	}
	return out
}

// TrainOptions configures TrainBPE.
type TrainOptions struct {
	// VocabSize is the total number of ids, added tokens included. Training
	// stops earlier when no pair occurs MinFrequency times.
	VocabSize int
	// MinFrequency is the least count of a pair worth merging (default 2).
	MinFrequency int
	// AddedTokens get the ids after the learned vocabulary, in order.
	AddedTokens []AddedToken
}

// TrainBPE learns a byte-level BPE from corpus with the same normalizer,
// pre-tokenizer (Qwen's split regex) and layout as Qwen3's tokenizer.json,
// and returns that file. Ids 0–255 are the byte symbols in rune order, then
// merges in the order learned, then the added tokens. The most frequent
// pair is merged first; ties go to the pair of smaller ids, so training is
// deterministic. Added tokens occurring in corpus are not trained on.
func TrainBPE(corpus []string, opts TrainOptions) ([]byte, error) {
	minFreq := opts.MinFrequency
	if minFreq <= 0 {
		minFreq = 2
	}
	if opts.VocabSize < 256+len(opts.AddedTokens) {
		return nil, fmt.Errorf("train bpe: vocab size %d is below 256 bytes + %d added tokens", opts.VocabSize, len(opts.AddedTokens))
	}
	bl := newByteLevel()
	var tokens []string // id → token string
	for b := range 256 {
		tokens = append(tokens, bl.symbol[b])
	}
	sort.Slice(tokens, func(i, j int) bool { return []rune(tokens[i])[0] < []rune(tokens[j])[0] })
	vocab := make(map[string]int32, opts.VocabSize)
	for id, s := range tokens {
		vocab[s] = int32(id)
	}
	var byteID [256]int32
	for b := range 256 {
		byteID[b] = vocab[bl.symbol[b]]
	}

	// Count words.
	counts := map[string]int64{}
	for _, doc := range corpus {
		for _, seg := range splitAdded(doc, opts.AddedTokens) {
			seg = norm.NFC.String(seg)
			for len(seg) > 0 {
				n := patternQwen.next(seg)
				counts[seg[:n]]++
				seg = seg[n:]
			}
		}
	}
	uniq := make([]string, 0, len(counts))
	for w := range counts {
		uniq = append(uniq, w)
	}
	sort.Strings(uniq)
	words := make([][]int32, len(uniq))
	freq := make([]int64, len(uniq))
	pairs := map[uint64]int64{}
	where := map[uint64][]int32{}
	for i, w := range uniq {
		freq[i] = counts[w]
		for j := 0; j < len(w); j++ {
			words[i] = append(words[i], byteID[w[j]])
		}
		for j := 0; j+1 < len(words[i]); j++ {
			k := pairKey(words[i][j], words[i][j+1])
			pairs[k] += freq[i]
			where[k] = append(where[k], int32(i))
		}
	}
	q := &pairQueue{}
	for k, c := range pairs {
		*q = append(*q, pairEntry{count: c, key: k})
	}
	heap.Init(q)

	var merges [][2]string
	seen := make([]int, len(words)) // last merge that rewrote word i (+1)
	for len(vocab)+len(opts.AddedTokens) < opts.VocabSize && q.Len() > 0 {
		e := heap.Pop(q).(pairEntry)
		if pairs[e.key] != e.count {
			continue // stale entry
		}
		if e.count < int64(minFreq) {
			break
		}
		a, b := int32(e.key>>32), int32(uint32(e.key))
		s := tokens[a] + tokens[b]
		id, ok := vocab[s]
		if !ok {
			id = int32(len(tokens))
			tokens = append(tokens, s)
			vocab[s] = id
		}
		merges = append(merges, [2]string{tokens[a], tokens[b]})
		changed := map[uint64]bool{}
		add := func(k uint64, d int64, wi int32) {
			pairs[k] += d
			changed[k] = true
			if d > 0 {
				where[k] = append(where[k], wi)
			}
		}
		for _, wi := range where[e.key] {
			if seen[wi] == len(merges) {
				continue
			}
			seen[wi] = len(merges)
			w, f := words[wi], freq[wi]
			out := w[:0:0]
			for j := 0; j < len(w); j++ {
				if j+1 < len(w) && w[j] == a && w[j+1] == b {
					if len(out) > 0 {
						add(pairKey(out[len(out)-1], a), -f, wi)
						add(pairKey(out[len(out)-1], id), f, wi)
					}
					if j+2 < len(w) {
						add(pairKey(b, w[j+2]), -f, wi)
						add(pairKey(id, w[j+2]), f, wi)
					}
					out = append(out, id)
					j++
					continue
				}
				out = append(out, w[j])
			}
			words[wi] = out
		}
		delete(pairs, e.key)
		delete(where, e.key)
		keys := make([]uint64, 0, len(changed))
		for k := range changed {
			keys = append(keys, k)
		}
		sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
		for _, k := range keys {
			if c := pairs[k]; c > 0 {
				heap.Push(q, pairEntry{count: c, key: k})
			} else {
				delete(pairs, k)
			}
		}
	}
	return marshalTokenizerJSON(tokens, merges, opts.AddedTokens)
}

// splitAdded returns the parts of s between occurrences of added tokens.
func splitAdded(s string, added []AddedToken) []string {
	var out []string
	from := 0
	for i := 0; i < len(s); i++ {
		for _, a := range added {
			if a.Content != "" && strings.HasPrefix(s[i:], a.Content) {
				out = append(out, s[from:i])
				i += len(a.Content) - 1
				from = i + 1
				break
			}
		}
	}
	return append(out, s[from:])
}

type pairEntry struct {
	count int64
	key   uint64
}

// pairQueue pops the most frequent pair, the smallest key among equals.
type pairQueue []pairEntry

func (q pairQueue) Len() int { return len(q) }
func (q pairQueue) Less(i, j int) bool {
	return q[i].count > q[j].count || q[i].count == q[j].count && q[i].key < q[j].key
}
func (q pairQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *pairQueue) Push(x any)   { *q = append(*q, x.(pairEntry)) }
func (q *pairQueue) Pop() any {
	old := *q
	x := old[len(old)-1]
	*q = old[:len(old)-1]
	return x
}

// marshalTokenizerJSON writes a tokenizer.json shaped like Qwen3's.
func marshalTokenizerJSON(tokens []string, merges [][2]string, added []AddedToken) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	str := func(s string) {
		_ = enc.Encode(s)       // a string always encodes
		b.Truncate(b.Len() - 1) // Encode's newline
	}
	b.WriteString("{\n  \"version\": \"1.0\",\n  \"truncation\": null,\n  \"padding\": null,\n  \"added_tokens\": [")
	for i, a := range added {
		if a.Content == "" {
			return nil, errors.New("marshal tokenizer: empty added token")
		}
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "\n    {\"id\": %d, \"content\": ", len(tokens)+i)
		str(a.Content)
		fmt.Fprintf(&b, ", \"single_word\": false, \"lstrip\": false, \"rstrip\": false, \"normalized\": false, \"special\": %v}", a.Special)
	}
	b.WriteString("\n  ],\n  \"normalizer\": {\"type\": \"NFC\"},\n  \"pre_tokenizer\": {\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Split\", \"pattern\": {\"Regex\": ")
	str(qwenRegex)
	b.WriteString("}, \"behavior\": \"Isolated\", \"invert\": false}, {\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"trim_offsets\": false, \"use_regex\": false}]},\n")
	b.WriteString("  \"post_processor\": {\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"trim_offsets\": false, \"use_regex\": false},\n")
	b.WriteString("  \"decoder\": {\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"trim_offsets\": false, \"use_regex\": false},\n")
	b.WriteString("  \"model\": {\n    \"type\": \"BPE\",\n    \"dropout\": null,\n    \"unk_token\": null,\n    \"continuing_subword_prefix\": \"\",\n    \"end_of_word_suffix\": \"\",\n    \"fuse_unk\": false,\n    \"byte_fallback\": false,\n    \"ignore_merges\": false,\n    \"vocab\": {")
	for id, s := range tokens {
		if id > 0 {
			b.WriteByte(',')
		}
		b.WriteString("\n      ")
		str(s)
		fmt.Fprintf(&b, ": %d", id)
	}
	b.WriteString("\n    },\n    \"merges\": [")
	for i, m := range merges {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("\n      [")
		str(m[0])
		b.WriteString(", ")
		str(m[1])
		b.WriteByte(']')
	}
	b.WriteString("\n    ]\n  }\n}\n")
	return b.Bytes(), nil
}
