package main

import (
	"context"
	"fmt"

	"github.com/x/env"
	"github.com/x/env/guess"
	"github.com/x/model"
	"github.com/x/tokenizer"
	"github.com/x/tools"
)

// maxNewTokens bounds one assistant turn; a well-formed guess is about 20
// tokens of the tiny tokenizer.
const maxNewTokens = 48

// game is one rollout: its environment, the environment's tools, and the
// token sequence (with its KV cache) the model extends turn by turn.
type game struct {
	env   *guess.Env
	tools *tools.Set
	seq   *model.Sequence
	done  bool
	turns int // assistant turns generated
	calls int // turns that parsed as tool calls
}

// evalStats summarises an evaluation.
type evalStats struct {
	Games, Wins  int
	Reward       float64 // mean over games
	Guesses      int     // total guesses that counted
	Turns, Calls int
}

func (s evalStats) String() string {
	return fmt.Sprintf("won %d/%d games, mean reward %.3f, %.1f guesses per game, %.0f%% of %d turns were well-formed tool calls",
		s.Wins, s.Games, s.Reward, float64(s.Guesses)/float64(s.Games), 100*float64(s.Calls)/float64(max(s.Turns, 1)), s.Turns)
}

// evaluate plays n games greedily, all at once: each turn generates the next
// assistant message of every unfinished game in one batch, parses its tool
// calls, runs them, and appends the tool-response tokens to the game's
// sequence so that the next turn reuses the cached prefix.
func (p *player) evaluate(ctx context.Context, n int, seed uint64) (evalStats, error) {
	games := make([]*game, n)
	for i := range games {
		e := guess.NewEnv(p.rules, nil)
		set, err := tools.Discover(e)
		if err != nil {
			return evalStats{}, fmt.Errorf("tools of the guess env: %w", err)
		}
		intro, err := e.Reset(ctx, env.Row{"seed": int64(seed) + int64(i)})
		if err != nil {
			return evalStats{}, fmt.Errorf("reset game %d: %w", i, err)
		}
		ids, err := p.promptIDs(intro)
		if err != nil {
			return evalStats{}, fmt.Errorf("render game %d: %w", i, err)
		}
		games[i] = &game{env: e, tools: set, seq: model.NewSequence(seed+uint64(i), ids...)}
	}

	for {
		var active []*game
		var reqs []model.Request
		for _, g := range games {
			if !g.done {
				active = append(active, g)
				reqs = append(reqs, model.Request{Seq: g.seq, MaxNewTokens: maxNewTokens, Stop: p.stop})
			}
		}
		if len(reqs) == 0 {
			break
		}
		comps, err := p.model.Generate(ctx, reqs, model.BatchOptions{MaxBatch: len(reqs)})
		if err != nil {
			return evalStats{}, err
		}
		for i, g := range active {
			if err := p.turn(ctx, g, comps[i]); err != nil {
				return evalStats{}, err
			}
		}
	}

	s := evalStats{Games: n}
	for _, g := range games {
		r, err := g.env.Reward(ctx)
		if err != nil {
			return evalStats{}, err
		}
		s.Reward += r / float64(n)
		if g.env.Game.Found {
			s.Wins++
		}
		s.Guesses += len(g.env.Game.Guesses)
		s.Turns += g.turns
		s.Calls += g.calls
	}
	return s, nil
}

// turn handles one generated assistant turn of g: a turn that is not a
// well-formed tool call, or that ends the game, finishes the rollout;
// otherwise the tool responses are appended for the next turn.
func (p *player) turn(ctx context.Context, g *game, c model.Completion) error {
	g.turns++
	if !c.Stopped {
		g.done = true // ran out of tokens mid-turn
		return nil
	}
	msg, ok := p.chat.ParseAssistant(c.Tokens)
	if !ok || len(msg.ToolCalls) == 0 {
		g.done = true
		return nil
	}
	g.calls++
	replies := make([]tokenizer.Message, 0, len(msg.ToolCalls))
	for _, call := range msg.ToolCalls {
		// A failed call (bad arguments, a guess out of range) answers with
		// {"error": ...}; the model sees it and may try again.
		resp, _ := g.tools.Call(ctx, call.Name, call.Arguments)
		replies = append(replies, tokenizer.Message{Role: "tool", Name: call.Name, Content: resp})
	}
	if g.env.Game.Done() || g.turns >= g.env.Game.Rules.MaxGuesses+2 {
		g.done = true
		return nil
	}
	suffix, err := p.chat.ToolSuffixIDs(replies, p.opts)
	if err != nil {
		return fmt.Errorf("render tool responses: %w", err)
	}
	g.seq.Append(suffix...)
	return nil
}
