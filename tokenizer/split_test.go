package tokenizer

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func pieces(p splitPattern, s string) []string {
	var out []string
	for len(s) > 0 {
		n := p.next(s)
		out = append(out, s[:n])
		s = s[n:]
	}
	return out
}

func TestSplitQwen(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
		why  string
	}{
		{"a  b", []string{"a", " ", " b"}, "(?!\\S) gives the run's last space to the word"},
		{"a  ", []string{"a", "  "}, "at the end the whole run stays"},
		{"\u00a0\u00a0!", []string{"\u00a0", "\u00a0", "!"}, "NBSP is \\s but not the optional U+0020"},
		{"(x", []string{"(x"}, "one optional non-letter before letters"},
		{"\ttab", []string{"\ttab"}, "a tab is a valid prefix too"},
		{"):\n", []string{"):\n"}, "punctuation takes trailing newlines"},
		{"IT'S", []string{"IT", "'S"}, "contractions are case-insensitive"},
		{"we'll've", []string{"we", "'ll", "'ve"}, "two-letter contractions"},
		{"'hello", []string{"'hello"}, "not a contraction: the apostrophe prefixes the word"},
		{"12345", []string{"1", "2", "3", "4", "5"}, "digits one at a time"},
		{"a \n \n  b", []string{"a", " \n \n", " ", " b"}, "\\s*[\\r\\n]+ ends at the last newline"},
		{"x\r\n\r\ny", []string{"x", "\r\n\r\n", "y"}, "CRLF runs"},
		{"你好，世界", []string{"你好", "，世界"}, "CJK letters; a full-width comma prefixes"},
		{"e\u0301", []string{"e", "\u0301"}, "a combining mark is not \\p{L}"},
		{"   ", []string{"   "}, "white space only"},
		{"!!! ?", []string{"!!!", " ?"}, "one optional space before punctuation"},
		{"\u3000x", []string{"\u3000x"}, "ideographic space prefixes a word"},
		{"\xffa", []string{"\xffa"}, "an invalid byte counts as other"},
	} {
		assert.Equal(t, tc.want, pieces(patternQwen, tc.in), "%q: %s", tc.in, tc.why)
	}
}

func TestSplitGPT2(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"Hello world", []string{"Hello", " world"}},
		{"a  b", []string{"a", " ", " b"}},
		{"12345 678", []string{"12345", " 678"}},
		{"IT'S it's", []string{"IT", "'", "S", " it", "'s"}},
		{"(x", []string{"(", "x"}},
		{"x \n\ny", []string{"x", " \n", "\n", "y"}},
	} {
		assert.Equal(t, tc.want, pieces(patternGPT2, tc.in), "%q", tc.in)
	}
}
