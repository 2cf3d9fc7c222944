package catch

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"

	"github.com/x/env"
	"github.com/x/env/internal/pyjson"
)

// Intro opens every episode's observation.
const Intro = "You are playing Catch. A ball falls down a 10-row, 5-column grid, one row per move, " +
	"and you move a paddle along the bottom row to catch it. Call move with left, stay or right once per row " +
	"until the ball reaches the bottom.\n"

// MoveArgs are the arguments of the move tool.
type MoveArgs struct {
	Direction string `json:"direction" desc:"where to move the paddle" enum:"left,stay,right"`
}

// direction maps a move's direction to its action id (the tool's enum
// has already rejected anything else).
func direction(d string) int {
	switch d {
	case "left":
		return Left
	case "right":
		return Right
	}
	return Stay
}

// Env is the in-process, tool-style catch environment: one tool, move.
// Its reward is TRL's for Catch: 1 for a catch, 0 for a miss or an
// unfinished game.
type Env struct {
	rng *rand.Rand
	// Game is the current game, for reward functions to inspect.
	Game Game
}

// NewFactory returns a factory of Envs; environment i draws its balls from
// a stream seeded by (opts.Seed, i).
func NewFactory(opts Options) env.Factory {
	var n atomic.Uint64
	return env.FactoryFunc(func(ctx context.Context) (env.Env, error) {
		return NewEnv(pyjson.Seeds(opts.Seed, n.Add(1)-1)), nil
	})
}

// NewEnv returns an Env drawing ball columns from rng.
// A nil rng means a stream seeded with 0.
func NewEnv(rng *rand.Rand) *Env {
	if rng == nil {
		rng = pyjson.Seeds(0, 0)
	}
	return &Env{rng: rng}
}

// ToolDescriptions describes the move tool.
func (e *Env) ToolDescriptions() map[string]string {
	return map[string]string{"Move": "Move the paddle one column left, keep it in place, or move it one column right; the ball falls one row."}
}

// Reset starts a game. The row may set "seed" (reseeds the ball's column)
// or "ball_column" (0-4, fixes it).
func (e *Env) Reset(ctx context.Context, row env.Row) (string, error) {
	if seed, ok, err := row.Int("seed"); err != nil {
		return "", err
	} else if ok {
		e.rng = pyjson.Seeds(uint64(seed), 0)
	}
	col, ok, err := row.Int("ball_column")
	switch {
	case err != nil:
		return "", err
	case ok && (col < 0 || col >= Columns):
		return "", fmt.Errorf("catch: ball_column %d is outside 0..%d", col, Columns-1)
	case ok:
		e.Game.Reset(int(col))
	default:
		e.Game.ResetRandom(e.rng)
	}
	return Intro + e.Game.Text(), nil
}

// Move is the tool: one move of the paddle.
func (e *Env) Move(ctx context.Context, a MoveArgs) (string, error) {
	if _, err := e.Game.Apply(direction(a.Direction)); err != nil {
		return "", err
	}
	return moveText(&e.Game), nil
}

// Reward is 1 if the ball was caught, else 0.
func (e *Env) Reward(ctx context.Context) (float64, error) {
	if e.Game.Done() && e.Game.Outcome() > 0 {
		return 1, nil
	}
	return 0, nil
}

// moveText is the tool response after a move.
func moveText(g *Game) string {
	switch {
	case !g.Done():
		return g.Text()
	case g.Outcome() > 0:
		return "You caught the ball! The game is over."
	}
	return fmt.Sprintf("You missed the ball: it landed in column %d, your paddle is in column %d. The game is over.", g.BallCol+1, g.PaddleCol+1)
}

// gameOf reconstructs the position from an observation's info state.
func gameOf(obs Observation) (Game, error) {
	if len(obs.InfoState) != Rows*Columns {
		return Game{}, fmt.Errorf("catch: info_state has %d values, want %d", len(obs.InfoState), Rows*Columns)
	}
	g := Game{BallRow: -1, PaddleCol: -1}
	for i, v := range obs.InfoState {
		if v != 1 {
			continue
		}
		r, c := i/Columns, i%Columns
		if r == Rows-1 {
			g.PaddleCol = c
		} else {
			g.BallRow, g.BallCol = r, c
		}
	}
	if g.PaddleCol < 0 {
		return Game{}, errors.New("catch: info_state has no paddle")
	}
	if g.BallRow < 0 { // the ball reached the paddle's row: it was caught
		g.BallRow, g.BallCol = Rows-1, g.PaddleCol
	}
	g.Steps = g.BallRow
	return g, nil
}
