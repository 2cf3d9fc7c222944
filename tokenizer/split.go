package tokenizer

import (
	"unicode"
	"unicode/utf8"
)

// splitPattern is one of the pre-tokenizer regexes this package implements by
// hand. Go's regexp (RE2) cannot express them: they need the look-ahead
// `(?!\S)` and a Unicode `\s` (White_Space), so each is a scanner that returns
// the length of the regex's leftmost-first match at the start of its input.
type splitPattern int

const (
	// patternQwen is Qwen2/2.5/3's Split regex:
	//   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
	patternQwen splitPattern = iota + 1
	// patternGPT2 is GPT-2's ByteLevel regex (use_regex: true):
	//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
	patternGPT2
)

const (
	qwenRegex = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	gpt2Regex = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`
)

// runeClass is what the split regexes distinguish about a rune.
type runeClass uint8

const (
	classOther  runeClass = iota // none of the below: [^\s\p{L}\p{N}]
	classLetter                  // \p{L}
	classNumber                  // \p{N}
	classSpace                   // \s, Unicode White_Space
)

// asciiClasses is the runeClass of each ASCII rune (letters 1, digits 2,
// \t-\r and space 3, the rest 0), as a string so it is immutable.
const asciiClasses = "\x00\x00\x00\x00\x00\x00\x00\x00\x00\x03\x03\x03\x03\x03\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x03\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x02\x02\x02\x02\x02\x02\x02\x02\x02\x00\x00\x00\x00\x00\x00\x00\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x00\x00\x00\x00\x00\x00\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x00\x00\x00\x00\x00"

func classOf(r rune) runeClass {
	if r < utf8.RuneSelf {
		return runeClass(asciiClasses[r])
	}
	switch {
	case unicode.IsLetter(r):
		return classLetter
	case unicode.IsNumber(r):
		return classNumber
	case unicode.Is(unicode.White_Space, r):
		return classSpace
	}
	return classOther
}

// runeAt decodes the rune at s[i:]; invalid bytes decode as U+FFFD of width 1
// and count as classOther.
func runeAt(s string, i int) (rune, int) {
	if c := s[i]; c < utf8.RuneSelf {
		return rune(c), 1
	}
	return utf8.DecodeRuneInString(s[i:])
}

// classAt is the class and width of the rune at s[i:].
func classAt(s string, i int) (runeClass, int) {
	r, w := runeAt(s, i)
	return classOf(r), w
}

// runEnd returns the end of the run of class c starting at i.
func runEnd(s string, i int, c runeClass) int {
	for i < len(s) {
		if b := s[i]; b < utf8.RuneSelf {
			if runeClass(asciiClasses[b]) != c {
				break
			}
			i++
			continue
		}
		rc, w := classAt(s, i)
		if rc != c {
			break
		}
		i += w
	}
	return i
}

// next returns the length of the pattern's match at the start of s (len(s) > 0).
// Every rune matches some alternative, so the result is always > 0.
func (p splitPattern) next(s string) int {
	if p == patternGPT2 {
		return nextGPT2(s)
	}
	return nextQwen(s)
}

func nextQwen(s string) int {
	r0, w0 := runeAt(s, 0)
	// (?i:'s|'t|'re|'ve|'m|'ll|'d)
	if r0 == '\'' {
		if n := contraction(s[1:], true); n > 0 {
			return 1 + n
		}
	}
	c0 := classOf(r0)
	// [^\r\n\p{L}\p{N}]?\p{L}+
	if c0 == classLetter {
		return runEnd(s, w0, classLetter)
	}
	if c0 != classNumber && r0 != '\r' && r0 != '\n' && w0 < len(s) {
		if c1, w1 := classAt(s, w0); c1 == classLetter {
			return runEnd(s, w0+w1, classLetter)
		}
	}
	// \p{N}
	if c0 == classNumber {
		return w0
	}
	// ` ?[^\s\p{L}\p{N}]+[\r\n]*`
	start := -1
	if c0 == classOther {
		start = 0
	} else if r0 == ' ' && w0 < len(s) {
		if c1, _ := classAt(s, w0); c1 == classOther {
			start = w0
		}
	}
	if start >= 0 {
		i := runEnd(s, start, classOther)
		for i < len(s) && (s[i] == '\r' || s[i] == '\n') {
			i++
		}
		return i
	}
	// r0 is white space: \s*[\r\n]+ | \s+(?!\S) | \s+
	return whitespaceMatch(s, true)
}

func nextGPT2(s string) int {
	r0, w0 := runeAt(s, 0)
	if r0 == '\'' {
		if n := contraction(s[1:], false); n > 0 {
			return 1 + n
		}
	}
	// ` ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+`
	i, c := 0, classOf(r0)
	if r0 == ' ' && w0 < len(s) {
		i = w0
		c, _ = classAt(s, i)
	}
	if c != classSpace {
		_, w := classAt(s, i)
		return runEnd(s, i+w, c)
	}
	return whitespaceMatch(s, false)
}

// whitespaceMatch matches `\s*[\r\n]+` (when newlines is set), then
// `\s+(?!\S)`, then `\s+` at the start of s, which begins with white space.
func whitespaceMatch(s string, newlines bool) int {
	end, lastNL, lastStart := 0, -1, 0
	for end < len(s) {
		r, w := runeAt(s, end)
		if classOf(r) != classSpace {
			break
		}
		if r == '\r' || r == '\n' {
			lastNL = end + 1
		}
		lastStart = end
		end += w
	}
	if newlines && lastNL > 0 {
		return lastNL
	}
	if end == len(s) || lastStart == 0 {
		return end
	}
	// (?!\S) fails after the whole run; backing off one rune satisfies it.
	return lastStart
}

// contraction matches 's|'t|'re|'ve|'m|'ll|'d after the apostrophe and
// returns its length, or 0. With fold, letters match case-insensitively under
// Unicode simple case folding (so 'ſ' matches 's').
func contraction(s string, fold bool) int {
	if len(s) == 0 {
		return 0
	}
	at := func(i int, want byte) (int, bool) {
		if i >= len(s) {
			return 0, false
		}
		c := s[i]
		if c == want || fold && c == want-'a'+'A' {
			return 1, true
		}
		if fold && want == 's' && len(s) >= i+2 && s[i:i+2] == "ſ" {
			return 2, true
		}
		return 0, false
	}
	for _, one := range []byte{'s', 't', 'm', 'd'} {
		if n, ok := at(0, one); ok {
			return n
		}
	}
	for _, two := range [][2]byte{{'r', 'e'}, {'v', 'e'}, {'l', 'l'}} {
		if n, ok := at(0, two[0]); ok {
			if m, ok := at(n, two[1]); ok {
				return n + m
			}
		}
	}
	return 0
}
