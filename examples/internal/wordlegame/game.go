// Package wordlegame is the Wordle of the examples, in the recipe's form:
// a tool-style env whose refusals ("Game over.", a word that is not
// allowed, a repeated word) are tool errors the model reads and that are
// counted; the recipe's three reward terms; and an expert solver whose
// games, with a short reasoning before each guess, are the SFT data. Games
// are played in process (package wordle's Game) or on an OpenEnv Wordle
// server, with identical results.
package wordlegame

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/x/env"
	"github.com/x/env/wordle"
)

// ErrGameOver is the guess tool's answer once the game has ended, as the
// recipe words it.
//
//lint:ignore ST1005 the model reads this text, worded as the recipe words it
var ErrGameOver = errors.New("Game over.")

// board is where one game is played: in process (localBoard) or on an
// OpenEnv server (remoteBoard). A board plays TextArena's rules: a move is
// accepted (and scored) or invalid; a second invalid move in a row, a win
// or the sixth accepted guess ends the game.
type board interface {
	// start begins a game with secret ("" lets the board choose).
	start(ctx context.Context, secret string) error
	// play makes one move.
	play(ctx context.Context, word string) (move, error)
	// close releases what the board holds.
	close() error
}

// move is what a board reports for one guess.
type move struct {
	accepted *wordle.Guess // the guess and its feedback; nil for an invalid move
	reason   string        // why an invalid move was refused
	done     bool          // the game is over
	won      bool
	secret   string // known once the game is over
}

// Game is one game as the reward functions see it.
type Game struct {
	Secret  string         // "" until known (a remote server reveals it at the end)
	Guesses []wordle.Guess // the accepted guesses with their feedback, in order
	Invalid int            // invalid moves, including guesses after the game ended
	// Attempts are the words of every guess call made before the game
	// ended, accepted or refused, lower-cased, in order (the repetition
	// reward reads them). Calls after the end are not attempts: TRL's
	// episode ends with the game, and counting them paid a policy for
	// calling guess again after its win (DESIGN.md, issue 21).
	Attempts []string
	Done     bool
	Won      bool
}

// Wordle is the tool-style Wordle env of this example: one tool, guess,
// whose refusals ("Game over.", a word that is not allowed, a repeated
// word) are tool errors, counted in Game.Invalid. Its prompt lists the
// words the secret is drawn from. Like every env.Env it serves one
// rollout at a time.
type Wordle struct {
	board board
	words []string // the secrets the prompt lists
	// Game is the current game, for reward functions.
	Game Game
}

// GuessArgs are the guess tool's arguments.
type GuessArgs struct {
	Word string `json:"word" desc:"a five-letter word from the list"`
}

// newWordle returns an env playing on b; words are listed in the prompt.
func newWordle(b board, words []string) *Wordle {
	return &Wordle{board: b, words: words}
}

// NewLocal returns an env playing in process, with the built-in
// dictionary deciding which guesses are words; the prompt lists words.
func NewLocal(words []string) *Wordle {
	return newWordle(&localBoard{dict: wordle.DefaultDictionary()}, words)
}

// LocalFactory makes NewLocal envs.
func LocalFactory(words []string) env.Factory {
	return env.FactoryFunc(func(ctx context.Context) (env.Env, error) { return NewLocal(words), nil })
}

// ToolDescriptions describes the guess tool.
func (w *Wordle) ToolDescriptions() map[string]string {
	return map[string]string{"Guess": "Guess the secret word; returns the feedback: G, Y or X per letter."}
}

// Reset starts a game with the row's "secret_word" (the board draws one
// when the row has none).
func (w *Wordle) Reset(ctx context.Context, row env.Row) (string, error) {
	secret, _, err := row.String("secret_word")
	if err != nil {
		return "", err
	}
	if err := w.board.start(ctx, secret); err != nil {
		return "", fmt.Errorf("start a game: %w", err)
	}
	w.Game = Game{Secret: secret}
	return intro(w.words), nil
}

// Close releases the board (a remote board's session).
func (w *Wordle) Close() error { return w.board.close() }

// intro is the first user message: the rules and the word list.
func intro(words []string) string {
	return "Play Wordle. The secret is one of: " + strings.Join(words, ", ") + ".\n" +
		"Call guess with one word per turn; you have 6 guesses. Feedback per letter: " +
		"G right place, Y elsewhere in the word, X not in the word."
}

// Guess is the tool: one move.
func (w *Wordle) Guess(ctx context.Context, a GuessArgs) (string, error) {
	if w.Game.Done {
		w.Game.Invalid++
		return "", ErrGameOver
	}
	w.Game.Attempts = append(w.Game.Attempts, strings.ToLower(a.Word))
	if strings.ContainsAny(a.Word, "[] \n") {
		w.Game.Invalid++
		return "", fmt.Errorf("%q is not a word: send one word, no spaces or brackets", a.Word)
	}
	m, err := w.board.play(ctx, strings.ToLower(a.Word))
	if err != nil {
		return "", err
	}
	w.Game.Done, w.Game.Won = m.done, m.won
	if m.secret != "" {
		w.Game.Secret = m.secret
	}
	if m.accepted == nil {
		w.Game.Invalid++
		if m.done {
			return "", fmt.Errorf("%s Two invalid guesses in a row: game over", m.reason)
		}
		return "", errors.New(m.reason)
	}
	w.Game.Guesses = append(w.Game.Guesses, *m.accepted)
	left := wordle.MaxGuesses - len(w.Game.Guesses)
	fb := strings.ToUpper(m.accepted.Word) + " " + m.accepted.Feedback
	switch {
	case m.won:
		return fmt.Sprintf("%s Solved in %d.", fb, len(w.Game.Guesses)), nil
	case m.done:
		return fb + " No guesses left: game over.", nil
	}
	return fmt.Sprintf("%s %d left.", fb, left), nil
}

// localBoard plays games in process with package wordle's Game.
type localBoard struct {
	dict *wordle.Dictionary
	game wordle.Game
}

func (b *localBoard) start(ctx context.Context, secret string) error {
	if secret == "" {
		return errors.New(`the row has no "secret_word"`)
	}
	if len(secret) != wordle.WordLength || strings.Trim(secret, "abcdefghijklmnopqrstuvwxyz") != "" {
		return fmt.Errorf("secret_word %q is not five letters a-z", secret)
	}
	b.game.Reset(b.dict, secret)
	return nil
}

func (b *localBoard) close() error { return nil }

func (b *localBoard) play(ctx context.Context, word string) (move, error) {
	n := len(b.game.Guesses())
	msgs := b.game.Step("[" + word + "]")
	m := move{done: b.game.Done(), won: b.game.Won()}
	if m.done {
		m.secret = b.game.Secret()
	}
	if gs := b.game.Guesses(); len(gs) > n {
		m.accepted = &gs[len(gs)-1]
	} else {
		m.reason = invalidReason(msgs)
	}
	return m, nil
}

// invalidReason finds TextArena's reason in the messages of an invalid
// move: "You attempted an invalid move. Reason: R Please resubmit ..." for
// the first, "Invalid Move: R" for the one that ends the game.
func invalidReason(msgs []string) string {
	for _, m := range msgs {
		if _, r, ok := strings.Cut(m, "Reason: "); ok {
			r, _, _ = strings.Cut(r, " Please resubmit")
			return r
		}
		if r, ok := strings.CutPrefix(m, "Invalid Move: "); ok {
			return r
		}
	}
	return "Invalid guess."
}
