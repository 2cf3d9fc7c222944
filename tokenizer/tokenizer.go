package tokenizer

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// Tokenizer is a loaded byte-level BPE tokenizer. It is immutable after
// Load/Parse apart from an internal word cache, and safe for concurrent use.
type Tokenizer struct {
	bl           *byteLevel
	nfc          bool
	splits       []splitPattern // pre-tokenizer stages, applied in order
	vocab        map[string]int32
	tokens       []string // id → token string ("" when unused)
	used         []bool   // id → whether the id exists
	special      []bool   // id → added token with special: true
	pieces       [][]byte // id → decoded bytes
	byteIDs      [256]int32
	merges       map[uint64]merge
	ignoreMerges bool
	added        []addedToken // longest content first
	addedFirst   [256]bool    // first bytes of added tokens
	cache        *wordCache
}

// merge is the result of merging one pair: its rank (lower merges first) and
// the id of the merged token.
type merge struct {
	rank int32
	id   int32
}

type addedToken struct {
	content        string
	id             int32
	special        bool
	lstrip, rstrip bool
}

func pairKey(a, b int32) uint64 { return uint64(uint32(a))<<32 | uint64(uint32(b)) }

// finish builds the derived tables once parsing succeeded.
func (t *Tokenizer) finish() {
	n := len(t.tokens)
	t.special = make([]bool, n)
	t.pieces = make([][]byte, n)
	for id, tok := range t.tokens {
		if t.used[id] {
			t.pieces[id] = t.bl.decode(tok)
		}
	}
	for _, a := range t.added {
		t.special[a.id] = a.special
		t.pieces[a.id] = t.bl.decode(a.content)
		t.addedFirst[a.content[0]] = true
	}
}

// VocabSize is one more than the largest token id (151,669 for Qwen3; the
// model's embedding table may be larger).
func (t *Tokenizer) VocabSize() int { return len(t.tokens) }

// TokenID returns the id of a vocabulary or added token given by its string
// (in byte-level form for vocabulary tokens, e.g. "Ġthe").
func (t *Tokenizer) TokenID(s string) (int32, bool) {
	for _, a := range t.added {
		if a.content == s {
			return a.id, true
		}
	}
	id, ok := t.vocab[s]
	return id, ok
}

// Token returns the string of a token id, or "" and false for an unknown id.
func (t *Tokenizer) Token(id int32) (string, bool) {
	if id < 0 || int(id) >= len(t.tokens) || !t.used[id] {
		return "", false
	}
	return t.tokens[id], true
}

// IsSpecial reports whether id is an added token marked special (the ones
// Decode drops when skipSpecial is set).
func (t *Tokenizer) IsSpecial(id int32) bool {
	return id >= 0 && int(id) < len(t.special) && t.special[id]
}

// EOS is the id that ends an assistant turn: <|im_end|>, or <|endoftext|>
// for tokenizers without ChatML tokens, or -1 when there is neither.
func (t *Tokenizer) EOS() int32 {
	if id, ok := t.TokenID("<|im_end|>"); ok {
		return id
	}
	return t.Pad()
}

// Pad is the padding id, <|endoftext|>, or -1 when there is none.
func (t *Tokenizer) Pad() int32 {
	if id, ok := t.TokenID("<|endoftext|>"); ok {
		return id
	}
	return -1
}

// Encode tokenizes text without adding any special tokens (Qwen adds no BOS
// or EOS). Added tokens such as <|im_end|> are recognised in text. Invalid
// UTF-8 bytes are encoded as their byte tokens.
func (t *Tokenizer) Encode(text string) []int32 {
	return t.AppendEncode(make([]int32, 0, len(text)/3+1), text)
}

// AppendEncode appends the tokens of text to dst and returns the result.
func (t *Tokenizer) AppendEncode(dst []int32, text string) []int32 {
	var sc scratch
	from := 0 // text[:from] is encoded
	for i := 0; i < len(text); i++ {
		if !t.addedFirst[text[i]] {
			continue
		}
		a, ok := t.addedAt(text, i)
		if !ok {
			continue
		}
		start, end := i, i+len(a.content)
		if a.lstrip {
			start = from + len(strings.TrimRightFunc(text[from:start], unicode.IsSpace))
		}
		if a.rstrip {
			end = len(text) - len(strings.TrimLeftFunc(text[end:], unicode.IsSpace))
		}
		dst = t.encodeSegment(dst, text[from:start], &sc)
		dst = append(dst, a.id)
		from = end
		i = end - 1
	}
	return t.encodeSegment(dst, text[from:], &sc)
}

// addedAt returns the longest added token that starts at text[i:].
func (t *Tokenizer) addedAt(text string, i int) (addedToken, bool) {
	for _, a := range t.added {
		if strings.HasPrefix(text[i:], a.content) {
			return a, true
		}
	}
	return addedToken{}, false
}

// encodeSegment encodes text that contains no added token.
func (t *Tokenizer) encodeSegment(dst []int32, s string, sc *scratch) []int32 {
	if len(s) == 0 {
		return dst
	}
	if t.nfc && norm.NFC.QuickSpanString(s) < len(s) {
		s = norm.NFC.String(s)
	}
	return t.encodeSplit(dst, s, 0, sc)
}

func (t *Tokenizer) encodeSplit(dst []int32, s string, stage int, sc *scratch) []int32 {
	if stage == len(t.splits) {
		return t.encodeWord(dst, s, sc)
	}
	p := t.splits[stage]
	for len(s) > 0 {
		n := p.next(s)
		dst = t.encodeSplit(dst, s[:n], stage+1, sc)
		s = s[n:]
	}
	return dst
}

// maxCachedWord bounds the words kept in the cache (longer ones are rare and
// would let one input grow the cache without bound).
const maxCachedWord = 128

func (t *Tokenizer) encodeWord(dst []int32, w string, sc *scratch) []int32 {
	if len(w) == 1 {
		return append(dst, t.byteIDs[w[0]])
	}
	if len(w) <= maxCachedWord {
		if ids, ok := t.cache.get(w); ok {
			return append(dst, ids...)
		}
	}
	start := len(dst)
	if id, ok := t.wholeWord(w); ok {
		dst = append(dst, id)
	} else {
		dst = t.bpe(dst, w, sc)
	}
	if len(w) <= maxCachedWord {
		t.cache.put(strings.Clone(w), append([]int32(nil), dst[start:]...))
	}
	return dst
}

// wholeWord implements ignore_merges: a word that is itself in the vocab is
// one token.
func (t *Tokenizer) wholeWord(w string) (int32, bool) {
	if !t.ignoreMerges {
		return 0, false
	}
	id, ok := t.vocab[t.bl.encode(w)]
	return id, ok
}

// Decode turns ids back into text. With skipSpecial, added tokens marked
// special (e.g. <|im_end|>, <|endoftext|>) are dropped; <think>, <tool_call>
// and the other non-special added tokens are kept. Unknown ids are skipped.
// Bytes that do not form valid UTF-8 (a sequence cut between tokens) become
// U+FFFD, one per maximal invalid subpart, as in Hugging Face.
func (t *Tokenizer) Decode(ids []int32, skipSpecial bool) string {
	buf := make([]byte, 0, 4*len(ids))
	for _, id := range ids {
		if id < 0 || int(id) >= len(t.pieces) || skipSpecial && t.special[id] {
			continue
		}
		buf = append(buf, t.pieces[id]...)
	}
	if utf8.Valid(buf) {
		return string(buf)
	}
	return string(appendLossyUTF8(make([]byte, 0, len(buf)+8), buf))
}
