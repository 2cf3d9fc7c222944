package wordle

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"sync/atomic"

	"github.com/x/env"
	"github.com/x/env/internal/pyjson"
)

// ToolIntro is the observation that opens an episode of the tool-style
// envs: the rules, worded for the guess tool.
const ToolIntro = "You are playing Wordle. A secret 5-letter English word has been chosen; you have 6 attempts to guess it.\n" +
	"Call the guess tool with one word per attempt. Feedback for each letter will be given as follows:\n" +
	"  - G (green): correct letter in the correct position\n" +
	"  - Y (yellow): letter exists in the word but in the wrong position\n" +
	"  - X (wrong): letter is not in the word\n" +
	"Two invalid guesses in a row end the game."

// GuessArgs are the arguments of the guess tool.
type GuessArgs struct {
	Word string `json:"word" desc:"a five-letter English word"`
}

// ErrGameOver is the guess tool's error once the game has ended.
var ErrGameOver = errors.New("wordle: the game is over")

// Env is the in-process, tool-style Wordle: one tool, guess. Its reward
// is the game's (1 for a win; otherwise, at the end, the completion of
// the last guess; 0 while unfinished).
type Env struct {
	dict *Dictionary
	rng  *rand.Rand
	// Game is the current game, for reward functions to inspect.
	Game Game
}

// NewFactory returns a factory of Envs; environment i draws secrets from a
// stream seeded by (opts.Seed, i).
func NewFactory(opts Options) env.Factory {
	var n atomic.Uint64
	return env.FactoryFunc(func(ctx context.Context) (env.Env, error) {
		return NewEnv(opts.dict(), pyjson.Seeds(opts.Seed, n.Add(1)-1)), nil
	})
}

// NewEnv returns an Env drawing secrets from dict with rng.
// A nil dict means DefaultDictionary(); a nil rng, a stream seeded with 0.
func NewEnv(dict *Dictionary, rng *rand.Rand) *Env {
	if dict == nil {
		dict = DefaultDictionary()
	}
	if rng == nil {
		rng = pyjson.Seeds(0, 0)
	}
	return &Env{dict: dict, rng: rng}
}

// ToolDescriptions describes the guess tool.
func (e *Env) ToolDescriptions() map[string]string {
	return map[string]string{"Guess": "Guess the secret word; returns the G/Y/X feedback for each letter."}
}

// Reset starts a game. The row may give "secret_word" (the secret) or
// "seed" (draws it reproducibly); otherwise the env's stream draws it.
func (e *Env) Reset(ctx context.Context, row env.Row) (string, error) {
	secret, err := secretFromRow(row)
	if err != nil {
		return "", err
	}
	if secret == "" {
		seed, ok, err := row.Int("seed")
		switch {
		case err != nil:
			return "", err
		case ok:
			secret = SecretForSeed(e.dict, seed)
		default:
			secret = e.dict.secrets[e.rng.IntN(len(e.dict.secrets))]
		}
	}
	e.Game.Reset(e.dict, secret)
	return ToolIntro, nil
}

// Guess is the tool: one move of the game.
func (e *Env) Guess(ctx context.Context, a GuessArgs) (string, error) {
	if e.Game.Done() {
		return "", ErrGameOver
	}
	msgs := e.Game.Step(a.Word)
	return toolResponse(msgs, e.Game.Done(), e.Game.Won(), e.Game.invalid), nil
}

// Reward is the game's reward.
func (e *Env) Reward(ctx context.Context) (float64, error) { return e.Game.Reward(), nil }

// secretFromRow reads a "secret_word" column ("" when absent).
func secretFromRow(row env.Row) (string, error) {
	w, ok, err := row.String("secret_word")
	if err != nil || !ok {
		return "", err
	}
	return checkSecret(w)
}

// toolResponse words the game messages of one move for the guess tool.
func toolResponse(msgs []string, done, won, invalidEnd bool) string {
	text := strings.Join(msgs, "\n")
	switch {
	case !done:
		return text
	case won:
		return "Correct! You guessed the word. The game is over."
	case invalidEnd:
		return "That was a second invalid guess in a row, so the game is over."
	}
	return text + "\nThe game is over: you have used all 6 attempts."
}
