package main

import (
	"fmt"
	"io"

	"github.com/x/examples/internal/wordlegame"
)

// score sums an evaluation's games: one greedy game per word (the table's
// wins) and, when asked, sampled games at GRPO's temperature and top-k
// (the policy GRPO trains).
type score struct {
	Games   int
	Wins    int
	Guesses int // accepted guesses of the won greedy games
	Invalid int // failed tool calls (refused guesses, malformed calls, ...) over the greedy games
	Calls   int // tool calls over the greedy games
	Reward  float64

	SampledGames, SampledWins int
}

// add counts one finished greedy game, its tool calls and its reward (the
// run's reward set's total).
func (s *score) add(g *wordlegame.Game, calls, failures int, reward float64) {
	s.Games++
	if g.Won {
		s.Wins++
		s.Guesses += len(g.Guesses)
	}
	s.Calls += calls
	s.Invalid += failures
	s.Reward += reward
}

// addSampled counts one finished sampled game.
func (s *score) addSampled(g *wordlegame.Game) {
	s.SampledGames++
	if g.Won {
		s.SampledWins++
	}
}

// guessesPerWin is "-" before any win.
func (s score) guessesPerWin() string {
	if s.Wins == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", float64(s.Guesses)/float64(s.Wins))
}

// meanReward is the mean total reward per greedy game.
func (s score) meanReward() float64 {
	if s.Games == 0 {
		return 0
	}
	return s.Reward / float64(s.Games)
}

// callsPerGame is the greedy games' mean number of tool calls.
func (s score) callsPerGame() float64 {
	if s.Games == 0 {
		return 0
	}
	return float64(s.Calls) / float64(s.Games)
}

// sampledRate is the share of sampled games won, in percent.
func (s score) sampledRate() float64 {
	if s.SampledGames == 0 {
		return 0
	}
	return 100 * float64(s.SampledWins) / float64(s.SampledGames)
}

// sampled is the sampled wins as "w/n (p%)", or "-" without sampled games.
func (s score) sampled() string {
	if s.SampledGames == 0 {
		return "-"
	}
	return fmt.Sprintf("%d/%d (%.0f%%)", s.SampledWins, s.SampledGames, s.sampledRate())
}

// String is the row in words.
func (s score) String() string {
	return fmt.Sprintf("won %d/%d greedy, %s sampled, %s guesses per win, %.2f tool calls and %d invalid guesses per game, mean reward %.3f",
		s.Wins, s.Games, s.sampled(), s.guessesPerWin(), s.callsPerGame(), s.Invalid, s.meanReward())
}

// namedScore is one row of the table.
type namedScore struct {
	Name string
	score
}

// writeTable prints the evaluation table as Markdown.
func writeTable(out io.Writer, rows []namedScore) {
	fmt.Fprintln(out, "| model | wins (greedy) | wins (sampled) | guesses per win | tool calls per game | invalid guesses | mean reward |")
	fmt.Fprintln(out, "| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
	for _, r := range rows {
		fmt.Fprintf(out, "| %s | %d/%d | %s | %s | %.2f | %d | %.3f |\n",
			r.Name, r.Wins, r.Games, r.sampled(), r.guessesPerWin(), r.callsPerGame(), r.Invalid, r.meanReward())
	}
}

// verdict says by how much GRPO changed the wins over the SFT model's.
func verdict(sft, grpo score) string {
	out := fmt.Sprintf("GRPO vs the SFT model: greedy wins %+d of %d", grpo.Wins-sft.Wins, grpo.Games)
	if grpo.SampledGames > 0 {
		out += fmt.Sprintf(", sampled wins %+.0f points (%s -> %s)", grpo.sampledRate()-sft.sampledRate(), sft.sampled(), grpo.sampled())
	}
	return out + fmt.Sprintf(", tool calls per game %.2f -> %.2f", sft.callsPerGame(), grpo.callsPerGame())
}
