package wordlegame

import (
	"strings"

	"github.com/x/env/wordle"
)

// The recipe's three reward terms, each a function of the finished game;
// a rollout's reward is their sum.

// WinReward pays a win 1 plus a bonus for speed: 1 + 0.5·(1 − guesses/6),
// so 1.42 for a win in one guess down to 1.0 in six; a loss pays 0.
func WinReward(g *Game) float64 {
	if !g.Won {
		return 0
	}
	return 1 + 0.5*(1-float64(len(g.Guesses))/wordle.MaxGuesses)
}

// GreensReward pays a game that was not won 0.1 per green of its best
// guess (0 to 0.4), so that getting closer is worth something; a win
// pays 0 here (WinReward pays it).
func GreensReward(g *Game) float64 {
	if g.Won {
		return 0
	}
	best := 0
	for _, gu := range g.Guesses {
		best = max(best, strings.Count(gu.Feedback, string(wordle.Green)))
	}
	return 0.1 * float64(best)
}

// InvalidPenalty costs 0.1 per failed tool call: a word the game refused,
// a repeated word, a guess after the game ended (the env counts these in
// Game.Invalid), and calls that never reached the game: a malformed call,
// an unknown tool, bad arguments. The trainer counts all of them in
// Rollout.ToolFailures.
func InvalidPenalty(failures int) float64 {
	return -0.1 * float64(failures)
}
