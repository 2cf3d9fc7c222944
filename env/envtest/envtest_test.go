package envtest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/env"
	"github.com/x/env/envtest"
	"github.com/x/tools"
)

// solvedReward is a user's reward function: 1 when the last reply of the
// episode says the puzzle is solved, else 0.
func solvedReward(e *envtest.Scripted) float64 {
	if n := len(e.Inputs); n > 0 && strings.Contains(e.Replies[n-1], "solved") {
		return 1
	}
	return 0
}

// Test a reward function against an environment in a given final state,
// with no model and no network.
func Example() {
	ctx := context.Background()
	e := &envtest.Scripted{
		Observation: "Solve the puzzle.",
		Replies:     []string{"not yet", "solved!"},
		Score:       1,
	}
	ep, err := envtest.Play(ctx, e, env.Row{"prompt": "go"},
		envtest.Call{Tool: "act", Args: `{"input":"try A"}`},
		envtest.Call{Tool: "act", Args: `{"input":"try B"}`},
		envtest.Call{Tool: "act", Args: `{"inptu":"typo"}`},
	)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(ep.Observation)
	for _, s := range ep.Steps {
		fmt.Printf("%s %s -> %s\n", s.Call.Tool, s.Call.Args, s.Response)
	}
	fmt.Println("env reward:", ep.Reward, "user reward:", solvedReward(e))
	// Output:
	// Solve the puzzle.
	// act {"input":"try A"} -> not yet
	// act {"input":"try B"} -> solved!
	// act {"inptu":"typo"} -> {"error": "act got an unexpected argument \"inptu\"; expected \"input\""}
	// env reward: 1 user reward: 1
}

func TestScripted(t *testing.T) {
	ctx := context.Background()
	s := &envtest.Scripted{Observation: "hi", Replies: []string{"a"}, Score: 2}
	ep, err := envtest.Play(ctx, s, env.Row{"k": 1},
		envtest.Call{Tool: "act", Args: `{"input":"x"}`},
		envtest.Call{Tool: "act", Args: `{"input":"y"}`},
		envtest.Call{Tool: "nope", Args: `{}`},
	)
	require.NoError(t, err)
	require.Len(t, ep.Steps, 3)
	assert.Equal(t, "a", ep.Steps[0].Response)
	assert.NoError(t, ep.Steps[0].Err)
	assert.ErrorIs(t, ep.Steps[1].Err, envtest.ErrScriptEnded)
	var ce *tools.CallError
	require.ErrorAs(t, ep.Steps[2].Err, &ce)
	assert.Equal(t, tools.NotFound, ce.Kind)
	assert.True(t, ep.HasReward)
	assert.Equal(t, 2.0, ep.Reward)
	assert.Equal(t, []string{"x"}, s.Inputs)
	assert.Equal(t, []env.Row{{"k": 1}}, s.Resets)

	// A second episode rewinds the script.
	_, err = envtest.Play(ctx, s, nil, envtest.Call{Tool: "act", Args: `{"input":"z"}`})
	require.NoError(t, err)
	assert.Equal(t, []string{"z"}, s.Inputs)
	assert.Len(t, s.Resets, 2)

	s.ResetErr = errors.New("no")
	_, err = envtest.Play(ctx, s, nil)
	assert.ErrorContains(t, err, "reset: no")
	s.ResetErr, s.RewardErr = nil, errors.New("unscorable")
	_, err = envtest.Play(ctx, s, nil)
	assert.ErrorContains(t, err, "reward: unscorable")

	require.NoError(t, s.Close())
	assert.True(t, s.Closed)
}

func TestFactory(t *testing.T) {
	ctx := context.Background()
	f := &envtest.Factory{Make: func(i int) env.Env { return &envtest.Scripted{Score: float64(i)} }}
	for range 3 {
		_, err := f.New(ctx)
		require.NoError(t, err)
	}
	made := f.Made()
	require.Len(t, made, 3)
	assert.Equal(t, 2.0, made[2].(*envtest.Scripted).Score)

	canceled, cancel := context.WithCancel(ctx)
	cancel()
	_, err := f.New(canceled)
	assert.ErrorIs(t, err, context.Canceled)
	f.Err = errors.New("down")
	_, err = f.New(ctx)
	assert.EqualError(t, err, "down")
}

// notAnEnvTool has a method of the wrong form, so Play cannot discover it.
type notAnEnvTool struct{ envtest.Scripted }

func (n *notAnEnvTool) Peek() string { return "" }

func TestPlayDiscoveryError(t *testing.T) {
	_, err := envtest.Play(context.Background(), &notAnEnvTool{}, nil)
	assert.ErrorContains(t, err, "Peek")
}

// dynEnv defines its tool at Reset, as a remote MCP-style env does, and has
// one tool method too.
type dynEnv struct{ set *tools.Set }

func (d *dynEnv) Reset(ctx context.Context, row env.Row) (string, error) {
	name, _, err := row.String("tool")
	if err != nil {
		return "", err
	}
	tool, err := tools.New(name, "Shout the text.", json.RawMessage(`{"type":"object","properties":{"text":{"type":"string","description":"what to shout"}},"required":["text"]}`),
		func(ctx context.Context, args json.RawMessage) (string, error) {
			return strings.ToUpper(string(args)), nil
		})
	if err != nil {
		return "", err
	}
	d.set, err = tools.NewSet(tool)
	return "ready", err
}

func (d *dynEnv) ToolSet() *tools.Set { return d.set }

func (d *dynEnv) Ping(ctx context.Context) (string, error) { return "pong", nil }

func (d *dynEnv) ToolDescriptions() map[string]string { return map[string]string{"Ping": "Ping."} }

func TestPlayDynamicTools(t *testing.T) {
	ep, err := envtest.Play(context.Background(), &dynEnv{}, env.Row{"tool": "shout"},
		envtest.Call{Tool: "shout", Args: `{"text":"hi"}`}, envtest.Call{Tool: "ping"})
	require.NoError(t, err)
	require.Len(t, ep.Steps, 2)
	assert.NoError(t, ep.Steps[0].Err)
	assert.Equal(t, `{"TEXT":"HI"}`, ep.Steps[0].Response, "the tool listed at Reset is offered")
	assert.Equal(t, "pong", ep.Steps[1].Response, "and the env's tool methods after it")
}

// TestSlow: Work takes its delay and counts, the reward is the count, a
// cancelled call fails, and the gauge sees concurrent calls.
func TestSlow(t *testing.T) {
	g := &envtest.Gauge{}
	f := envtest.SlowFactory(30*time.Millisecond, g)
	ctx := context.Background()
	var wg sync.WaitGroup
	eps := make([]envtest.Episode, 3)
	t0 := time.Now()
	for i := range eps {
		e, err := f.New(ctx)
		require.NoError(t, err)
		wg.Add(1)
		go func() {
			defer wg.Done()
			var err error
			eps[i], err = envtest.Play(ctx, e, env.Row{}, envtest.Call{Tool: "work", Args: `{"job": "a"}`}, envtest.Call{Tool: "work", Args: `{"job": "b"}`})
			assert.NoError(t, err)
		}()
	}
	wg.Wait()
	took := time.Since(t0)
	for _, ep := range eps {
		require.Len(t, ep.Steps, 2)
		assert.Equal(t, "2 jobs done", ep.Steps[1].Response)
		assert.Equal(t, 2.0, ep.Reward)
	}
	assert.GreaterOrEqual(t, took, 60*time.Millisecond, "two calls of 30 ms in a row")
	assert.Equal(t, 6, g.Calls())
	assert.Equal(t, 0, g.InFlight())
	assert.Greater(t, g.Peak(), 1, "three episodes ran their calls together")
	assert.GreaterOrEqual(t, g.Busy(), 60*time.Millisecond)

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	s := &envtest.Slow{Delay: time.Hour}
	_, err := s.Work(cancelled, envtest.WorkArgs{Job: "x"})
	assert.ErrorIs(t, err, context.Canceled)
}
