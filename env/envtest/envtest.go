// Package envtest provides fakes and helpers for testing code that uses
// environments without a network or a model: a scripted environment, a
// factory that counts what it makes, and Play, which runs an episode of
// tool calls against any env.Env and reports each response.
//
// Play tests an environment. To test a reward function, use
// grpo.PlayScript instead: it plays the episode through the trainer's own
// rollout loop and returns the grpo.Rollout the function sees in training
// (the conversation, ToolCalls and ToolFailures counted as the trainer
// counts them), which Play's Episode is not.
package envtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/x/env"
)

// ErrScriptEnded is returned by Scripted.Act once every reply is used.
var ErrScriptEnded = errors.New("envtest: script ended")

// Scripted is an environment that follows a script: Reset returns
// Observation, each call of its one tool, act, returns the next of
// Replies, and Reward returns Score. It records what it was given. Like
// any env.Env it is used by one rollout at a time; read the records after
// the episode.
type Scripted struct {
	Observation string   // returned by Reset
	Replies     []string // returned by successive act calls
	Score       float64  // returned by Reward
	ResetErr    error    // when set, Reset fails with it
	RewardErr   error    // when set, Reward fails with it

	Resets []env.Row // every row Reset was given
	Inputs []string  // the inputs of this episode's act calls
	Closed bool      // Close was called
}

// ActArgs are the arguments of the act tool.
type ActArgs struct {
	Input string `json:"input" desc:"what the agent does"`
}

// ToolDescriptions describes the act tool.
func (s *Scripted) ToolDescriptions() map[string]string {
	return map[string]string{"Act": "Take an action; the environment replies."}
}

// Reset records row, rewinds the script and returns Observation.
func (s *Scripted) Reset(ctx context.Context, row env.Row) (string, error) {
	s.Resets = append(s.Resets, row)
	s.Inputs = nil
	if s.ResetErr != nil {
		return "", s.ResetErr
	}
	return s.Observation, nil
}

// Act is the tool: it records the input and returns the next reply.
func (s *Scripted) Act(ctx context.Context, a ActArgs) (string, error) {
	if len(s.Inputs) >= len(s.Replies) {
		return "", ErrScriptEnded
	}
	s.Inputs = append(s.Inputs, a.Input)
	return s.Replies[len(s.Inputs)-1], nil
}

// Reward returns Score (or RewardErr).
func (s *Scripted) Reward(ctx context.Context) (float64, error) {
	if s.RewardErr != nil {
		return 0, s.RewardErr
	}
	return s.Score, nil
}

// Close records that it was called.
func (s *Scripted) Close() error {
	s.Closed = true
	return nil
}

// Factory is an env.Factory over a function, counting what it makes. It
// is safe for concurrent use.
type Factory struct {
	// Make builds the i-th environment (from 0).
	Make func(i int) env.Env
	// Err, when set, makes New fail with it.
	Err error

	mu   sync.Mutex
	envs []env.Env
}

// New makes the next environment.
func (f *Factory) New(ctx context.Context) (env.Env, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if f.Err != nil {
		return nil, f.Err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	e := f.Make(len(f.envs))
	f.envs = append(f.envs, e)
	return e, nil
}

// Made returns every environment made so far, in order.
func (f *Factory) Made() []env.Env {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]env.Env(nil), f.envs...)
}

// Call is one tool call of an episode: a tool name and its JSON arguments.
type Call struct {
	Tool string
	Args string
}

// Step is one call and the environment's response.
type Step struct {
	Call     Call
	Response string // what the model sees, {"error": …} on failure
	Err      error  // non-nil when the call failed (a *tools.CallError)
}

// Episode is what Play saw.
type Episode struct {
	Observation string // Reset's return
	Steps       []Step
	Reward      float64 // the env's own reward, when it is an env.Rewarder
	HasReward   bool
}

// Play runs one episode without a model: Reset with row, then each call in
// order through the env's tools, as the trainer would, then the env's own
// reward. Failed tool calls are recorded in the steps, not returned; the
// error is for a failing Reset, tool discovery or Reward. The env is left
// in its final state.
func Play(ctx context.Context, e env.Env, row env.Row, calls ...Call) (Episode, error) {
	var ep Episode
	var err error
	if ep.Observation, err = e.Reset(ctx, row); err != nil {
		return ep, fmt.Errorf("envtest: reset: %w", err)
	}
	// After Reset: an env.DynamicTools env lists its tools then.
	set, err := env.Tools(e)
	if err != nil {
		return ep, err
	}
	for _, c := range calls {
		resp, err := set.Call(ctx, c.Tool, json.RawMessage(c.Args))
		ep.Steps = append(ep.Steps, Step{Call: c, Response: resp, Err: err})
	}
	if r, ok := e.(env.Rewarder); ok {
		if ep.Reward, err = r.Reward(ctx); err != nil {
			return ep, fmt.Errorf("envtest: reward: %w", err)
		}
		ep.HasReward = true
	}
	return ep, nil
}
