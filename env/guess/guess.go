// Package guess is guess-the-number, a game a tiny model can learn
// quickly: find a hidden integer in 1..Max from "higher"/"lower" hints,
// rewarded more for fewer guesses. It comes as the game ([Game]), a
// tool-style env.Env ([Env]), an openenv.Environment for serving it
// ([NewEnvironmentFactory]), and a typed client with a tool-style env
// over it ([Dial], [NewRemoteFactory]).
package guess

import (
	"errors"
	"fmt"
	"math/bits"
)

// Defaults.
const (
	DefaultMax = 20
)

// Hints.
const (
	Higher  = "higher"
	Lower   = "lower"
	Correct = "correct"
)

// ErrGameOver is returned for a guess after the end.
var ErrGameOver = errors.New("guess: the game is over")

// Rules are a game's size.
type Rules struct {
	Max        int // the number is in 1..Max (DefaultMax when 0)
	MaxGuesses int // guesses allowed (when 0: enough for a binary search plus 2)
}

// withDefaults fills zero fields.
func (r Rules) withDefaults() Rules {
	if r.Max <= 0 {
		r.Max = DefaultMax
	}
	if r.MaxGuesses <= 0 {
		r.MaxGuesses = bits.Len(uint(r.Max)) + 2
	}
	return r
}

// Game is one game. The zero value is not ready: call Reset.
type Game struct {
	Rules   Rules
	Target  int
	Guesses []int
	Found   bool
}

// Reset starts a game with the number target (1..rules.Max).
func (g *Game) Reset(rules Rules, target int) error {
	rules = rules.withDefaults()
	if target < 1 || target > rules.Max {
		return fmt.Errorf("guess: target %d is outside 1..%d", target, rules.Max)
	}
	*g = Game{Rules: rules, Target: target}
	return nil
}

// Done reports whether the number was found or the guesses ran out.
func (g *Game) Done() bool { return g.Found || len(g.Guesses) >= g.Rules.MaxGuesses }

// Remaining is the number of guesses left.
func (g *Game) Remaining() int { return max(g.Rules.MaxGuesses-len(g.Guesses), 0) }

// Guess plays n and returns the hint. A guess outside 1..Max is an error
// and does not count; so is a guess after the end.
func (g *Game) Guess(n int) (string, error) {
	if g.Done() {
		return "", ErrGameOver
	}
	if n < 1 || n > g.Rules.Max {
		return "", fmt.Errorf("guess: %d is outside 1..%d", n, g.Rules.Max)
	}
	g.Guesses = append(g.Guesses, n)
	switch {
	case n < g.Target:
		return Higher, nil
	case n > g.Target:
		return Lower, nil
	}
	g.Found = true
	return Correct, nil
}

// Reward is 0 unless the number was found; then 1 for a first-guess find,
// decreasing by 1/MaxGuesses per extra guess.
func (g *Game) Reward() float64 {
	if !g.Found {
		return 0
	}
	return 1 - float64(len(g.Guesses)-1)/float64(g.Rules.MaxGuesses)
}

// Intro describes the game for a language model.
func (g *Game) Intro() string {
	return fmt.Sprintf("I am thinking of a whole number from 1 to %d. Find it with as few guesses as you can: "+
		"call the guess tool with a number and I will say whether mine is higher or lower. You have %d guesses.",
		g.Rules.Max, g.Rules.MaxGuesses)
}

// Message words a hint for a language model.
func (g *Game) Message(n int, hint string) string {
	switch hint {
	case Correct:
		return fmt.Sprintf("Correct! The number is %d. You found it in %d guess(es).", n, len(g.Guesses))
	case Higher:
		return g.more(fmt.Sprintf("My number is higher than %d.", n))
	}
	return g.more(fmt.Sprintf("My number is lower than %d.", n))
}

func (g *Game) more(s string) string {
	if g.Done() {
		return s + fmt.Sprintf(" You are out of guesses; the number was %d.", g.Target)
	}
	return s + fmt.Sprintf(" %d guess(es) left.", g.Remaining())
}
