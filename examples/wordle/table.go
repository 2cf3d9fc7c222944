package main

import (
	"fmt"
	"io"

	"github.com/x/examples/internal/wordlegame"
)

// score sums an evaluation's games: the recipe's table row.
type score struct {
	Games   int
	Wins    int
	Guesses int // accepted guesses of the won games
	Invalid int // failed tool calls (refused guesses, malformed calls, ...) over all games
	Reward  float64
}

// add counts one finished game and its failed tool calls.
func (s *score) add(g *wordlegame.Game, failures int) {
	s.Games++
	if g.Won {
		s.Wins++
		s.Guesses += len(g.Guesses)
	}
	s.Invalid += failures
	s.Reward += wordlegame.WinReward(g) + wordlegame.GreensReward(g) + wordlegame.InvalidPenalty(failures)
}

// guessesPerWin is "-" before any win.
func (s score) guessesPerWin() string {
	if s.Wins == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", float64(s.Guesses)/float64(s.Wins))
}

// meanReward is the mean total reward per game.
func (s score) meanReward() float64 {
	if s.Games == 0 {
		return 0
	}
	return s.Reward / float64(s.Games)
}

// String is the row in words.
func (s score) String() string {
	return fmt.Sprintf("won %d/%d, %s guesses per win, %d invalid guesses, mean reward %.3f",
		s.Wins, s.Games, s.guessesPerWin(), s.Invalid, s.meanReward())
}

// namedScore is one row of the table.
type namedScore struct {
	Name string
	score
}

// writeTable prints the recipe's evaluation table as Markdown.
func writeTable(out io.Writer, rows []namedScore) {
	fmt.Fprintln(out, "| model | wins | guesses per win | invalid guesses | mean reward |")
	fmt.Fprintln(out, "| --- | ---: | ---: | ---: | ---: |")
	for _, r := range rows {
		fmt.Fprintf(out, "| %s | %d/%d | %s | %d | %.3f |\n",
			r.Name, r.Wins, r.Games, r.guessesPerWin(), r.Invalid, r.meanReward())
	}
}
