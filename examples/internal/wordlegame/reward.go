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

// TRL's Wordle recipe scores the game's last guess with four terms
// (examples/scripts/openenv/wordle.py: reward_correct, reward_greens,
// reward_yellows, reward_repetition). Scoring the last guess rather than
// the best one pays a game for ending closer to the secret, and the
// repetition term pays a second, new guess: together they make playing on
// worth more than stopping after the opening guess, which the recipe's
// three terms above do not (DESIGN.md, "Why policies collapsed to doing
// less").

// CorrectReward is 1 for a win, 0 otherwise (TRL's reward_correct).
func CorrectReward(g *Game) float64 {
	if g.Won {
		return 1
	}
	return 0
}

// LastGreensReward is the greens of the last accepted guess over five
// (TRL's reward_greens): 0 before any guess, 1 for a win.
func LastGreensReward(g *Game) float64 {
	return lastCount(g, wordle.Green) / wordle.WordLength
}

// LastYellowsReward is the yellows of the last accepted guess over five
// (TRL's reward_yellows).
func LastYellowsReward(g *Game) float64 {
	return lastCount(g, wordle.Yellow) / wordle.WordLength
}

func lastCount(g *Game, mark rune) float64 {
	if len(g.Guesses) == 0 {
		return 0
	}
	return float64(strings.Count(g.Guesses[len(g.Guesses)-1].Feedback, string(mark)))
}

// RepetitionReward scores the last guess call as TRL's reward_repetition
// does: with d distinct words tried before it, of which it repeats one
// tried p times, (d − p)/d; 0 when it was the first call (or there was
// none). A new word after the first scores 1, a repeat less.
func RepetitionReward(g *Game) float64 {
	n := len(g.Attempts)
	if n < 2 {
		return 0
	}
	last := g.Attempts[n-1]
	seen := map[string]int{}
	for _, w := range g.Attempts[:n-1] {
		seen[w]++
	}
	d := len(seen)
	return float64(d-seen[last]) / float64(d)
}
