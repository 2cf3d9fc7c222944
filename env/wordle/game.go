// Package wordle is TextArena's Wordle-v0 as OpenEnv's textarena_env
// serves it: guess a secret five-letter word in six tries, with G/Y/X
// feedback per letter. The game text, invalid-move rules and rewards match
// the recorded Python server byte for byte; the word lists are this
// project's own.
//
// It comes as the game ([Game]), a tool-style env.Env for in-process
// training ([Env]), an openenv.Environment with the TextArena wire format
// ([NewEnvironmentFactory]), and a typed client with a tool-style env over
// it ([Dial], [NewRemoteFactory]).
package wordle

import (
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"
)

// Game rules.
const (
	WordLength = 5
	MaxGuesses = 6
	EnvID      = "Wordle-v0"
)

// Intro is the game's first message.
const Intro = "You are Playing Wordle.\nA secret 5-letter word has been chosen. You have 6 attempts to guess it.\n" +
	"For each guess, wrap your word in square brackets (e.g., '[apple]').\n" +
	"Feedback for each letter will be given as follows:\n" +
	"  - G (green): correct letter in the correct position\n" +
	"  - Y (yellow): letter exists in the word but in the wrong position\n" +
	"  - X (wrong): letter is not in the word\n" +
	"Enter your guess to begin.\n"

// Feedback marks.
const (
	Green  = 'G'
	Yellow = 'Y'
	Wrong  = 'X'
)

// guessRE is TextArena's \[(\w+)\] with Python's Unicode \w.
var guessRE = regexp.MustCompile(`\[([\p{L}\p{N}_]+)\]`)

// Guess is one accepted guess and its feedback.
type Guess struct {
	Word     string
	Feedback string // five of G, Y, X
}

// Game is one game of Wordle. Step plays a move as TextArena does; the
// zero value is not ready: call Reset.
type Game struct {
	dict    *Dictionary
	secret  string
	guesses []Guess
	msgs    []string // every game message, the intro first
	turn    int
	errors  int // invalid moves in a row
	done    bool
	won     bool
	reward  float64
	reason  string
	invalid bool // the game ended by invalid moves
}

// Reset starts a game with secret (which need not be in the dictionary,
// but must be five lower-case letters: Reset panics otherwise, a
// programmer error).
func (g *Game) Reset(dict *Dictionary, secret string) {
	if utf8.RuneCountInString(secret) != WordLength || strings.ToLower(secret) != secret {
		panic(fmt.Sprintf("wordle: secret %q is not five lower-case letters", secret))
	}
	*g = Game{dict: dict, secret: secret, msgs: []string{Intro}}
}

// Secret is the secret word.
func (g *Game) Secret() string { return g.secret }

// Guesses returns the accepted guesses in order.
func (g *Game) Guesses() []Guess { return append([]Guess(nil), g.guesses...) }

// Turn counts accepted guesses (and a game-ending invalid move).
func (g *Game) Turn() int { return g.turn }

// Done reports whether the game is over.
func (g *Game) Done() bool { return g.done }

// Won reports whether the secret was guessed.
func (g *Game) Won() bool { return g.won }

// Reward is 0 until the end; then 1 for a win, else the completion of the
// last accepted guess.
func (g *Game) Reward() float64 { return g.reward }

// Completion scores the last accepted guess: (greens + yellows/2) / 5.
func (g *Game) Completion() float64 {
	if len(g.guesses) == 0 {
		return 0
	}
	fb := g.guesses[len(g.guesses)-1].Feedback
	greens, yellows := strings.Count(fb, "G"), strings.Count(fb, "Y")
	return (float64(greens) + float64(yellows)*0.5) / WordLength
}

// Transcript is the whole game text as OpenEnv's observation carries it:
// each message prefixed with "\n[GAME] ".
func (g *Game) Transcript() string {
	var b strings.Builder
	for _, m := range g.msgs {
		b.WriteString("\n[GAME] ")
		b.WriteString(m)
	}
	return b.String()
}

// Messages returns every game message (the intro first, player moves
// included).
func (g *Game) Messages() []string { return append([]string(nil), g.msgs...) }

// Step plays one move (the player's raw text) and returns the game
// messages it added after the echoed move. A move after the end is still
// played, as upstream does, but the result sticks.
func (g *Game) Step(action string) []string {
	if !strings.ContainsAny(action, "[]") {
		action = "[" + action + "]"
	}
	start := len(g.msgs) + 1
	g.msgs = append(g.msgs, action)
	g.play(action)
	return append([]string(nil), g.msgs[start:]...)
}

func (g *Game) play(action string) {
	m := guessRE.FindStringSubmatch(action)
	if m == nil {
		g.invalidMove("You tried submitting a word in the wrong format. Please make sure to use squared brackets.")
		return
	}
	word := strings.ToLower(m[1])
	if utf8.RuneCountInString(word) != WordLength {
		g.invalidMove(fmt.Sprintf("Your word must be exactly %d letters.", WordLength))
		return
	}
	for _, gu := range g.guesses {
		if gu.Word == word {
			g.invalidMove(fmt.Sprintf("You have already guessed '%s' before. Please try a different word.", word))
			return
		}
	}
	if !g.dict.Allowed(word) {
		g.invalidMove(fmt.Sprintf("'%s' is not an English word.", word))
		return
	}
	fb := Score(g.secret, word)
	g.guesses = append(g.guesses, Guess{Word: word, Feedback: fb})
	if fb == strings.Repeat("G", WordLength) {
		g.end(true, 1, "Congratulations! You guessed the word correctly!")
	} else {
		g.msgs = append(g.msgs, fmt.Sprintf("You submitted [%s].\nFeedback:\n%s\nYou have %d guesses left.",
			word, g.playerView(), MaxGuesses-g.turn-1))
	}
	if len(g.guesses) >= MaxGuesses && !g.done {
		pct := g.Completion()
		g.end(false, pct, fmt.Sprintf("The turn limit has been reached. You didn't guess the word, but your best guess matched %d%% of the letters in the correct positions.\nThe secret word was: **%s**.",
			pyRound(pct*100), g.secret))
	}
	g.errors = 0
	g.turn++
}

// invalidMove is TextArena's single-player rule: one invalid move in a row
// is forgiven with a message, the second ends the game.
func (g *Game) invalidMove(reason string) {
	if g.errors < 1 {
		g.errors++
		g.msgs = append(g.msgs, "You attempted an invalid move. Reason: "+reason+
			" Please resubmit a valid move and remember to follow the game rules to avoid penalties.")
		return
	}
	g.errors = 0
	g.invalid = true
	g.end(false, g.Completion(), "Invalid Move: "+reason)
	g.turn++
}

// end finishes the game once; later outcomes do not change it.
func (g *Game) end(won bool, reward float64, reason string) {
	if g.done {
		return
	}
	g.done, g.won, g.reward, g.reason = true, won, reward, reason
}

// playerView is the last guess spelled out with its feedback.
func (g *Game) playerView() string {
	if len(g.guesses) == 0 {
		return "No guesses yet."
	}
	last := g.guesses[len(g.guesses)-1]
	return spaced(strings.ToUpper(last.Word)) + "\n" + spaced(last.Feedback)
}

// renderedBoard is TextArena's board of every guess.
func (g *Game) renderedBoard() string {
	if len(g.guesses) == 0 {
		return "No guesses yet."
	}
	rows := make([]string, len(g.guesses))
	for i, gu := range g.guesses {
		rows[i] = "| Letter  | " + spaced(strings.ToUpper(gu.Word)) + " |\n|---------|" +
			strings.Repeat("--", WordLength) + "--\n| Status  | " + spaced(gu.Feedback) + " |\n"
	}
	return strings.Join(rows, "\n")
}

// Score is Wordle's feedback for guess against secret (equal lengths):
// greens first, then yellows left to right, each secret letter used once.
func Score(secret, guess string) string {
	s, gs := []rune(secret), []rune(guess)
	fb := make([]byte, len(gs))
	used := make([]bool, len(s))
	for i := range gs {
		if i < len(s) && gs[i] == s[i] {
			fb[i], used[i] = Green, true
		}
	}
	for i := range gs {
		if fb[i] != 0 {
			continue
		}
		fb[i] = Wrong
		for j := range s {
			if !used[j] && s[j] == gs[i] {
				fb[i], used[j] = Yellow, true
				break
			}
		}
	}
	return string(fb)
}

// spaced puts a space between letters.
func spaced(s string) string {
	return strings.Join(strings.Split(s, ""), " ")
}

// pyRound is Python's round() to an int: halves go to the even neighbour.
func pyRound(x float64) int {
	f := float64(int(x))
	d := x - f
	switch {
	case d > 0.5, d == 0.5 && int(f)%2 != 0:
		return int(f) + 1
	}
	return int(f)
}
