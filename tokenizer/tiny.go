package tokenizer

import (
	_ "embed"
	"fmt"
)

//go:generate go run ./cmd/trainbpe -out tiny/tokenizer.json

// TinyVocabSize is the tiny tokenizer's number of ids, added tokens included.
const TinyVocabSize = 4096

//go:embed tiny/tokenizer.json
var tinyJSON string

// Tiny returns the project's own small tokenizer: a byte-level BPE of
// TinyVocabSize ids with Qwen3's pre-tokenizer and its 26 added tokens (same
// strings and special flags, different ids), trained by TrainTiny on
// generated chat, tool-call, game and prose text. It is embedded, so it
// needs no files; each call returns a new Tokenizer.
func Tiny() *Tokenizer {
	t, err := Parse([]byte(tinyJSON))
	if err != nil {
		// The embedded file is checked by the package's tests.
		panic(fmt.Sprintf("tokenizer: embedded tiny/tokenizer.json is invalid: %v", err))
	}
	return t
}

// TinyJSON returns the tiny tokenizer's tokenizer.json (Hugging Face
// loadable), e.g. to save beside a checkpoint.
func TinyJSON() []byte { return []byte(tinyJSON) }

// TrainTiny trains the tiny tokenizer from scratch; its output is the
// committed tiny/tokenizer.json byte for byte.
func TrainTiny() ([]byte, error) {
	return TrainBPE(tinyCorpus(), TrainOptions{VocabSize: TinyVocabSize, AddedTokens: Qwen3AddedTokens()})
}
