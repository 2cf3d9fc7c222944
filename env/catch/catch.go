// Package catch is OpenSpiel's Catch as OpenEnv serves it: a ball falls
// down a 10×5 grid, one row per step, and the agent moves a paddle on the
// bottom row left (0), nowhere (1) or right (2) to catch it. The 9th step
// ends the game: +1 if the paddle is under the ball, else -1.
//
// It comes as the game ([Game]), a tool-style env.Env for in-process
// training ([Env]), an openenv.Environment with the wire format of
// OpenEnv's openspiel_env ([NewEnvironmentFactory]), and a typed client
// with a tool-style env over it ([Dial], [NewRemoteFactory]).
package catch

import (
	"fmt"
	"math/rand/v2"
	"strings"
)

// Grid size and the paddle's start column, as in OpenSpiel.
const (
	Rows        = 10
	Columns     = 5
	PaddleStart = 2
)

// Actions.
const (
	Left  = 0
	Stay  = 1
	Right = 2
)

// Phase is the game phase as OpenEnv names it.
type Phase string

// Phases.
const (
	Initial  Phase = "initial"
	Playing  Phase = "playing"
	Terminal Phase = "terminal"
)

// Game is one game of Catch. The zero value is not ready: call Reset.
type Game struct {
	BallRow, BallCol, PaddleCol int
	Steps                       int // moves made this game
}

// Reset starts a game with the ball in column ballCol of row 0.
func (g *Game) Reset(ballCol int) {
	*g = Game{BallCol: ballCol, PaddleCol: PaddleStart}
}

// ResetRandom starts a game with the ball in a column drawn from r (the
// chance node).
func (g *Game) ResetRandom(r *rand.Rand) { g.Reset(r.IntN(Columns)) }

// Done reports whether the ball reached the bottom row.
func (g *Game) Done() bool { return g.BallRow == Rows-1 }

// Phase is initial before the first move, terminal after the last.
func (g *Game) Phase() Phase {
	switch {
	case g.Done():
		return Terminal
	case g.Steps == 0:
		return Initial
	}
	return Playing
}

// Apply makes one move: the ball falls a row and the paddle moves by
// action-1, clamped to the grid. It returns the reward: 0 mid-game, +1 or
// -1 on the final move. A move after the end or an action outside 0..2 is
// an error.
func (g *Game) Apply(action int) (float64, error) {
	if g.Done() {
		return 0, fmt.Errorf("catch: the game is over")
	}
	if action < Left || action > Right {
		return 0, fmt.Errorf("catch: action %d is not legal; legal actions are 0 (left), 1 (stay), 2 (right)", action)
	}
	g.BallRow++
	g.PaddleCol = min(max(g.PaddleCol+action-1, 0), Columns-1)
	g.Steps++
	if !g.Done() {
		return 0, nil
	}
	return g.Outcome(), nil
}

// Outcome is +1 when the paddle is under the ball, else -1 (meaningful
// once Done).
func (g *Game) Outcome() float64 {
	if g.PaddleCol == g.BallCol {
		return 1
	}
	return -1
}

// InfoState is the observation tensor: 50 values, row-major, 1 at the
// ball and at the paddle.
func (g *Game) InfoState() []float64 {
	s := make([]float64, Rows*Columns)
	s[g.BallRow*Columns+g.BallCol] = 1
	s[(Rows-1)*Columns+g.PaddleCol] = 1
	return s
}

// LegalActions are [0 1 2] until the end, then none.
func (g *Game) LegalActions() []int {
	if g.Done() {
		return []int{}
	}
	return []int{Left, Stay, Right}
}

// Text describes the position for a language model.
func (g *Game) Text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Ball: row %d/%d, column %d/%d\n", g.BallRow+1, Rows, g.BallCol+1, Columns)
	fmt.Fprintf(&b, "Paddle: column %d/%d\n", g.PaddleCol+1, Columns)
	switch d := g.BallCol - g.PaddleCol; {
	case d < 0:
		fmt.Fprintf(&b, "The ball is %d column(s) to the LEFT of the paddle.", -d)
	case d > 0:
		fmt.Fprintf(&b, "The ball is %d column(s) to the RIGHT of the paddle.", d)
	default:
		b.WriteString("The ball is directly above the paddle.")
	}
	if rows := Rows - 1 - g.BallRow; rows > 0 {
		fmt.Fprintf(&b, "\n%d move(s) left.", rows)
	}
	return b.String()
}
