package tokenizer

import (
	"unicode/utf8"

	"github.com/sugarme/tokenizer/pretokenizer"
)

// byteLevel is GPT-2's reversible byte-to-unicode mapping: every byte becomes
// one printable rune, so a byte string becomes a string of vocabulary symbols.
// The table comes from sugarme/tokenizer, whose mapping is correct.
type byteLevel struct {
	toRune [256]rune     // byte → symbol rune
	toByte map[rune]byte // symbol rune → byte
	symbol [256]string   // byte → symbol as a string (vocabulary key)
}

func newByteLevel() *byteLevel {
	bl := &byteLevel{toByte: make(map[rune]byte, 256)}
	for b, s := range pretokenizer.GenerateBytesChar() {
		r, _ := utf8.DecodeRuneInString(s)
		bl.toRune[b] = r
		bl.toByte[r] = b
		bl.symbol[b] = s
	}
	return bl
}

// encode maps raw bytes to their symbol string.
func (bl *byteLevel) encode(s string) string {
	out := make([]rune, 0, len(s))
	for i := 0; i < len(s); i++ {
		out = append(out, bl.toRune[s[i]])
	}
	return string(out)
}

// decode maps a token's symbol string back to bytes. Like Hugging Face's
// ByteLevel decoder, a token with any rune outside the table (an added token
// such as " foo") is taken as its raw UTF-8 bytes.
func (bl *byteLevel) decode(tok string) []byte {
	out := make([]byte, 0, len(tok))
	for _, r := range tok {
		b, ok := bl.toByte[r]
		if !ok {
			return []byte(tok)
		}
		out = append(out, b)
	}
	return out
}

// appendLossyUTF8 appends b to dst as valid UTF-8, replacing each maximal
// invalid subpart with U+FFFD, as Rust's String::from_utf8_lossy (which Hugging
// Face's decoder uses) does. Go's utf8 package would emit one U+FFFD per byte
// of a truncated sequence instead.
func appendLossyUTF8(dst, b []byte) []byte {
	for len(b) > 0 {
		if b[0] < utf8.RuneSelf {
			dst = append(dst, b[0])
			b = b[1:]
			continue
		}
		r, n := utf8.DecodeRune(b)
		if r != utf8.RuneError || n > 1 {
			dst = append(dst, b[:n]...)
			b = b[n:]
			continue
		}
		dst = append(dst, "\uFFFD"...)
		b = b[invalidPrefixLen(b):]
	}
	return dst
}

// invalidPrefixLen is the length of the maximal prefix of b that starts a
// well-formed UTF-8 sequence (at least 1): the bytes one U+FFFD replaces.
func invalidPrefixLen(b []byte) int {
	lo, hi := byte(0x80), byte(0xBF)
	var need int
	switch c := b[0]; {
	case c >= 0xC2 && c <= 0xDF:
		need = 1
	case c == 0xE0:
		need, lo = 2, 0xA0
	case c >= 0xE1 && c <= 0xEC, c == 0xEE, c == 0xEF:
		need = 2
	case c == 0xED:
		need, hi = 2, 0x9F
	case c == 0xF0:
		need, lo = 3, 0x90
	case c >= 0xF1 && c <= 0xF3:
		need = 3
	case c == 0xF4:
		need, hi = 3, 0x8F
	default:
		return 1
	}
	n := 1
	for k := 0; k < need && n < len(b); k++ {
		c := b[n]
		if c < lo || c > hi {
			break
		}
		lo, hi = 0x80, 0xBF
		n++
	}
	return n
}
