package wordle

import (
	_ "embed"
	"slices"
	"strings"
	"sync"
)

// The word lists are this project's own: a few hundred common words as
// secrets and a larger list of allowed guesses (every secret is allowed).
var (
	//go:embed words/secrets.txt
	secretsText string
	//go:embed words/allowed.txt
	allowedText string
)

// Dictionary is a word list: the secrets a game draws from and the words
// a guess may be. It is immutable and safe for concurrent use.
type Dictionary struct {
	secrets []string
	allowed map[string]struct{}
}

// defaultDictionary parses the built-in lists once.
var defaultDictionary = sync.OnceValue(func() *Dictionary {
	return NewDictionary(parseWords(secretsText), parseWords(allowedText))
})

// DefaultDictionary returns the built-in dictionary (shared, immutable).
func DefaultDictionary() *Dictionary { return defaultDictionary() }

// NewDictionary makes a dictionary; the secrets are allowed guesses too.
// Words are lower-cased; duplicates are dropped.
func NewDictionary(secrets, allowed []string) *Dictionary {
	d := &Dictionary{allowed: map[string]struct{}{}}
	for _, w := range secrets {
		w = strings.ToLower(w)
		if _, dup := d.allowed[w]; dup {
			continue
		}
		d.allowed[w] = struct{}{}
		d.secrets = append(d.secrets, w)
	}
	for _, w := range allowed {
		d.allowed[strings.ToLower(w)] = struct{}{}
	}
	return d
}

// Secrets returns the secret words in order.
func (d *Dictionary) Secrets() []string { return slices.Clone(d.secrets) }

// Allowed reports whether word is an accepted guess.
func (d *Dictionary) Allowed(word string) bool {
	_, ok := d.allowed[word]
	return ok
}

// Size is the number of allowed words.
func (d *Dictionary) Size() int { return len(d.allowed) }

// parseWords splits a word file: '#' lines are comments.
func parseWords(text string) []string {
	var out []string
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "#") {
			continue
		}
		out = append(out, strings.Fields(line)...)
	}
	return out
}
