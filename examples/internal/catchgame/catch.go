// Package catchgame is the Catch of the examples: OpenSpiel's Catch (a
// ball falls down a 10×5 grid, one row per move; catch it with the paddle
// on the bottom row) shown to the model as a text grid, with two tools,
// move (left or right) and stay; a reward of 1 for a catch; and a scripted
// player whose games are SFT data.
package catchgame

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync/atomic"

	"github.com/x/env"
	"github.com/x/env/catch"
	"github.com/x/grpo"
	"github.com/x/grpo/warmstart"
	"github.com/x/tokenizer"
)

// Intro opens an episode; the grid follows.
const Intro = "Catch the falling ball. o is the ball, = is your paddle on the bottom row. " +
	"Each turn call move (left or right) or stay; the ball falls one row.\n"

// ErrGameOver is the tools' answer once the ball has landed.
//
//lint:ignore ST1005 the model reads this text, worded as the recipe words it
var ErrGameOver = errors.New("Game over.")

// Catch is one game: a tool-style env.Env used by one rollout at a time.
type Catch struct {
	rng *rand.Rand
	// Game is the current position, for reward functions.
	Game catch.Game
	// Invalid counts tool calls after the game ended.
	Invalid int
}

// MoveArgs are the move tool's arguments.
type MoveArgs struct {
	Direction string `json:"direction" desc:"which way to move the paddle" enum:"left,right"`
}

// NewFactory returns a factory of Catch envs; env i draws its balls from
// a stream seeded by (seed, i).
func NewFactory(seed uint64) env.Factory {
	var n atomic.Uint64
	return env.FactoryFunc(func(ctx context.Context) (env.Env, error) {
		return New(rand.New(rand.NewPCG(seed, n.Add(1)-1))), nil
	})
}

// New returns a game drawing ball columns from rng.
func New(rng *rand.Rand) *Catch { return &Catch{rng: rng} }

// ToolDescriptions describes the tools.
func (c *Catch) ToolDescriptions() map[string]string {
	return map[string]string{
		"Move": "Move the paddle one column; the ball falls one row.",
		"Stay": "Keep the paddle where it is; the ball falls one row.",
	}
}

// Reset starts a game; the row may fix "ball_column" (0-4).
func (c *Catch) Reset(ctx context.Context, row env.Row) (string, error) {
	col, ok, err := row.Int("ball_column")
	switch {
	case err != nil:
		return "", err
	case ok && (col < 0 || col >= catch.Columns):
		return "", fmt.Errorf("ball_column %d is outside 0..%d", col, catch.Columns-1)
	case ok:
		c.Game.Reset(int(col))
	default:
		c.Game.ResetRandom(c.rng)
	}
	c.Invalid = 0
	return Intro + Grid(&c.Game), nil
}

// Move is a tool: the paddle moves one column.
func (c *Catch) Move(ctx context.Context, a MoveArgs) (string, error) {
	if a.Direction == "left" {
		return c.play(catch.Left)
	}
	return c.play(catch.Right)
}

// Stay is a tool: the paddle stays.
func (c *Catch) Stay(ctx context.Context) (string, error) { return c.play(catch.Stay) }

func (c *Catch) play(action int) (string, error) {
	if c.Game.Done() {
		c.Invalid++
		return "", ErrGameOver
	}
	if _, err := c.Game.Apply(action); err != nil {
		return "", err
	}
	switch {
	case !c.Game.Done():
		return Grid(&c.Game), nil
	case Caught(&c.Game):
		return Grid(&c.Game) + "\nCaught!", nil
	}
	return Grid(&c.Game) + "\nMissed.", nil
}

// Grid draws the position: one line per row, . empty, o the ball, = the
// paddle (x where the ball lands beside it).
func Grid(g *catch.Game) string {
	var b strings.Builder
	for r := range catch.Rows {
		line := []byte(strings.Repeat(".", catch.Columns))
		if r == catch.Rows-1 {
			line[g.PaddleCol] = '='
		}
		if r == g.BallRow {
			if line[g.BallCol] == '=' {
				line[g.BallCol] = 'o'
			} else if r == catch.Rows-1 {
				line[g.BallCol] = 'x'
			} else {
				line[g.BallCol] = 'o'
			}
		}
		b.Write(line)
		if r < catch.Rows-1 {
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// Caught reports whether the game ended with the ball on the paddle.
func Caught(g *catch.Game) bool { return g.Done() && g.Outcome() > 0 }

// Reward is 1 for a catch and 0 otherwise, less 0.1 per call after the
// end. In a multi-env run it scores only the rollouts of the env named
// envName and returns grpo.ErrNoScore for the others ("" scores all).
func Reward(envName string) grpo.RewardFunc {
	return func(ctx context.Context, r *grpo.Rollout) (float64, error) {
		if envName != "" && r.EnvName != envName {
			return 0, grpo.ErrNoScore
		}
		if r.Err != nil {
			return 0, fmt.Errorf("rollout failed: %w", r.Err)
		}
		c, ok := r.Env.(*Catch)
		if !ok {
			return 0, fmt.Errorf("rollout env is %T, not the examples' Catch", r.Env)
		}
		score := -0.1 * float64(c.Invalid)
		if Caught(&c.Game) {
			score++
		}
		return score, nil
	}
}

// Expert is the scripted player as a grpo.Script: move toward the
// ball's column with a short reasoning, or, once the ball has landed, a
// closing turn.
func Expert(ctx context.Context, r *grpo.Rollout) (tokenizer.Message, error) {
	c, ok := r.Env.(*Catch)
	if !ok {
		return tokenizer.Message{}, fmt.Errorf("the scripted player plays the examples' Catch, not %T", r.Env)
	}
	if c.Game.Done() {
		if Caught(&c.Game) {
			return grpo.TextTurn("Caught it."), nil
		}
		return grpo.TextTurn("Missed."), nil
	}
	call := tokenizer.ToolCall{Name: "stay", Arguments: []byte(`{}`)}
	reasoning := "The ball is above the paddle: stay."
	switch d := c.Game.BallCol - c.Game.PaddleCol; {
	case d < 0:
		call = tokenizer.ToolCall{Name: "move", Arguments: []byte(`{"direction": "left"}`)}
		reasoning = "The ball is to the left: move left."
	case d > 0:
		call = tokenizer.ToolCall{Name: "move", Arguments: []byte(`{"direction": "right"}`)}
		reasoning = "The ball is to the right: move right."
	}
	return tokenizer.Message{Role: "assistant", Content: reasoning, ToolCalls: []tokenizer.ToolCall{call}}, nil
}

// Conversations plays the scripted player once from each ball column
// through grpo.PlayScript under o (the GRPO run's config) and returns the
// games as SFT conversations.
func Conversations(ctx context.Context, o grpo.PlayOptions) ([]grpo.Conversation, error) {
	convs, err := warmstart.Conversations(ctx, NewFactory(0), Rows(catch.Columns), Expert, o)
	if err != nil {
		return nil, fmt.Errorf("scripted games: %w", err)
	}
	return convs, nil
}

// Rows makes n dataset rows cycling through the ball columns.
func Rows(n int) []env.Row {
	rows := make([]env.Row, n)
	for i := range rows {
		rows[i] = env.Row{"ball_column": int64(i % catch.Columns)}
	}
	return rows
}
