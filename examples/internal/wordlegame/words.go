package wordlegame

import (
	"fmt"
	"slices"
	"strings"

	"github.com/x/env/wordle"
)

// DefaultWordList is sixteen of the built-in list's secrets (the
// multi-env example's; the Wordle demo plays its first ten), chosen so that letters repeat across them (the
// feedback of one guess rarely settles the word alone: a game needs 2 to
// 4 guesses, and a player must read the feedback) while a 1.3 M-parameter
// model can still learn the whole decision tree in minutes. Every one is
// a secret of wordle.DefaultDictionary, so a remote server of ours (which
// checks secret_word) and the in-process env play the same games.
const DefaultWordList = "brave brick bride chair charm chart crane crash " +
	"grace grade grain grand plain plane plant plate"

// ParseWords reads a comma- or space-separated word list: five letters
// a-z each, lower-cased, no repeats.
func ParseWords(list string) ([]string, error) {
	fields := strings.FieldsFunc(list, func(r rune) bool { return r == ',' || r == ' ' || r == '\n' })
	if len(fields) == 0 {
		return nil, fmt.Errorf("word list %q is empty", list)
	}
	words := make([]string, 0, len(fields))
	for _, f := range fields {
		w := strings.ToLower(f)
		if len(w) != wordle.WordLength || strings.Trim(w, "abcdefghijklmnopqrstuvwxyz") != "" {
			return nil, fmt.Errorf("word %q is not five letters a-z", f)
		}
		if slices.Contains(words, w) {
			return nil, fmt.Errorf("word %q is listed twice", w)
		}
		words = append(words, w)
	}
	return words, nil
}

// CheckAllowed reports the first word the dictionary does not accept as a
// guess: the solver guesses only listed words, so each must be playable.
func CheckAllowed(dict *wordle.Dictionary, words []string) error {
	for _, w := range words {
		if !dict.Allowed(w) {
			return fmt.Errorf("word %q is not in the game's dictionary, so it could never be guessed", w)
		}
	}
	return nil
}
