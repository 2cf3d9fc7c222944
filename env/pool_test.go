package env_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/env"
	"github.com/x/env/envtest"
	"github.com/x/tools"
)

func scripted(i int) env.Env {
	return &envtest.Scripted{Observation: "ready", Replies: []string{"one", "two"}, Score: float64(i)}
}

func TestPoolConstructOnceResetOften(t *testing.T) {
	ctx := context.Background()
	f := &envtest.Factory{Make: scripted}
	p, err := env.NewPool(ctx, f)
	require.NoError(t, err)
	require.Len(t, f.Made(), 1, "NewPool probes one instance")

	for range 5 {
		in, obs, err := p.Start(ctx, env.Row{"prompt": "x"})
		require.NoError(t, err)
		assert.Equal(t, "ready", obs)
		assert.Equal(t, []string{"act"}, in.Tools.Names())
		in.Release()
	}
	assert.Len(t, f.Made(), 1, "sequential episodes reuse the probe")
	assert.Len(t, f.Made()[0].(*envtest.Scripted).Resets, 5)

	// Three at once need three envs; after release they are all reused.
	var held []*env.Instance
	for range 3 {
		in, err := p.Acquire(ctx)
		require.NoError(t, err)
		held = append(held, in)
	}
	assert.Len(t, f.Made(), 3)
	assert.Equal(t, 3, p.Size())
	for _, in := range held {
		in.Release()
	}
	for range 3 {
		in, err := p.Acquire(ctx)
		require.NoError(t, err)
		defer in.Release()
	}
	assert.Len(t, f.Made(), 3, "no new env once enough exist")
}

func TestPoolConcurrentAcquire(t *testing.T) {
	ctx := context.Background()
	f := &envtest.Factory{Make: scripted}
	p, err := env.NewPool(ctx, f)
	require.NoError(t, err)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 20 {
				in, _, err := p.Start(ctx, env.Row{})
				if !assert.NoError(t, err) {
					return
				}
				_, err = in.Tools.Call(ctx, "act", []byte(`{"input":"go"}`))
				assert.NoError(t, err)
				in.Release()
			}
		})
	}
	wg.Wait()
	assert.LessOrEqual(t, len(f.Made()), 8, "never more envs than concurrent users")
	for _, e := range f.Made() {
		s := e.(*envtest.Scripted)
		assert.LessOrEqual(t, len(s.Inputs), 1, "each env served one rollout at a time")
	}
}

func TestPoolDiscardAndClose(t *testing.T) {
	ctx := context.Background()
	f := &envtest.Factory{Make: scripted}
	p, err := env.NewPool(ctx, f)
	require.NoError(t, err)
	a, err := p.Acquire(ctx)
	require.NoError(t, err)
	b, err := p.Acquire(ctx)
	require.NoError(t, err)

	require.NoError(t, a.Discard())
	assert.True(t, a.Env.(*envtest.Scripted).Closed, "a discarded env is closed")
	assert.Equal(t, 1, p.Size())

	require.NoError(t, p.Close())
	assert.True(t, b.Env.(*envtest.Scripted).Closed, "Close closes envs in use too")
	b.Release() // after Close: nothing to do, no panic
	_, err = p.Acquire(ctx)
	assert.ErrorIs(t, err, env.ErrPoolClosed)
	require.NoError(t, p.Close(), "Close is idempotent")
}

func TestPoolResetFailureDiscards(t *testing.T) {
	ctx := context.Background()
	boom := errors.New("server gone")
	f := &envtest.Factory{Make: func(i int) env.Env {
		s := &envtest.Scripted{}
		if i == 1 {
			s.ResetErr = boom
		}
		return s
	}}
	p, err := env.NewPool(ctx, f)
	require.NoError(t, err)
	first, err := p.Acquire(ctx) // the probe (i=0) is taken, so Start makes i=1
	require.NoError(t, err)
	_, _, err = p.Start(ctx, env.Row{})
	require.ErrorIs(t, err, boom)
	assert.Contains(t, err.Error(), "reset")
	assert.True(t, f.Made()[1].(*envtest.Scripted).Closed)
	assert.Equal(t, 1, p.Size(), "the failed env left the pool")
	first.Release()
}

func TestPoolErrors(t *testing.T) {
	ctx := context.Background()
	_, err := env.NewPool(ctx, nil)
	assert.ErrorContains(t, err, "nil factory")

	_, err = env.NewPool(ctx, &envtest.Factory{Err: errors.New("no server")})
	assert.ErrorContains(t, err, "new environment: no server")

	_, err = env.NewPool(ctx, env.FactoryFunc(func(ctx context.Context) (env.Env, error) { return nil, nil }))
	assert.ErrorContains(t, err, "factory returned nil")

	f := &envtest.Factory{Make: func(int) env.Env { return &helperEnv{} }}
	_, err = env.NewPool(ctx, f)
	assert.ErrorContains(t, err, "method *env_test.helperEnv.Secret", "a malformed tool fails at construction")
	assert.True(t, f.Made()[0].(*helperEnv).closed, "the rejected env is closed")

	p, err := env.NewPool(ctx, f, env.WithToolOptions(tools.Exclude("Secret")))
	require.NoError(t, err)
	require.NoError(t, p.Close())

	other, err := env.NewPool(ctx, &envtest.Factory{Make: scripted})
	require.NoError(t, err)
	in, err := other.Acquire(ctx)
	require.NoError(t, err)
	in.Release()
	assert.PanicsWithValue(t, "env: instance released twice", in.Release)
}

// helperEnv has an exported helper that is not a tool.
type helperEnv struct{ closed bool }

func (h *helperEnv) Reset(ctx context.Context, row env.Row) (string, error) { return "", nil }
func (h *helperEnv) Secret() string                                         { return "x" }
func (h *helperEnv) Close() error                                           { h.closed = true; return nil }

func TestInstanceReward(t *testing.T) {
	ctx := context.Background()
	p, err := env.NewPool(ctx, &envtest.Factory{Make: func(int) env.Env { return &envtest.Scripted{Score: 0.5} }})
	require.NoError(t, err)
	in, err := p.Acquire(ctx)
	require.NoError(t, err)
	r, ok, err := in.Reward(ctx)
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, 0.5, r)
	in.Env.(*envtest.Scripted).RewardErr = errors.New("bad state")
	_, _, err = in.Reward(ctx)
	assert.ErrorContains(t, err, "reward: bad state")
	in.Release()

	q, err := env.NewPool(ctx, &envtest.Factory{Make: func(int) env.Env { return &helperEnv{} }}, env.WithToolOptions(tools.Exclude("Secret")))
	require.NoError(t, err)
	in, err = q.Acquire(ctx)
	require.NoError(t, err)
	_, ok, err = in.Reward(ctx)
	assert.False(t, ok)
	assert.NoError(t, err)
}

// mcpStyle lists its tools at each reset, like a remote MCP-style env.
type mcpStyle struct {
	calls []string
	set   *tools.Set
	names []string // the tools the next reset lists
}

func (m *mcpStyle) Reset(ctx context.Context, row env.Row) (string, error) {
	m.calls = nil
	var ts []tools.Tool
	for _, name := range m.names {
		tl, err := tools.New(name, "Echo a message.",
			[]byte(`{"type":"object","properties":{"message":{"type":"string"}},"required":["message"]}`),
			func(ctx context.Context, args json.RawMessage) (string, error) {
				m.calls = append(m.calls, name+string(args))
				return string(args), nil
			})
		if err != nil {
			return "", err
		}
		ts = append(ts, tl)
	}
	set, err := tools.NewSet(ts...)
	m.set = set
	return "", err
}

func (m *mcpStyle) ToolSet() *tools.Set { return m.set }

func (m *mcpStyle) ToolDescriptions() map[string]string {
	return map[string]string{"Ping": "Ping."}
}

func (m *mcpStyle) Ping(ctx context.Context) (string, error) { return "pong", nil }

func TestPoolDynamicTools(t *testing.T) {
	ctx := context.Background()
	m := &mcpStyle{names: []string{"echo_message"}}
	p, err := env.NewPool(ctx, &envtest.Factory{Make: func(int) env.Env { return m }})
	require.NoError(t, err)
	in, err := p.Acquire(ctx)
	require.NoError(t, err)
	assert.Equal(t, []string{"ping"}, in.Tools.Names(), "before any reset: the methods only")
	in.Release()

	in, _, err = p.Start(ctx, env.Row{})
	require.NoError(t, err)
	assert.Equal(t, []string{"echo_message", "ping"}, in.Tools.Names(), "listed tools first, then methods")
	got, err := in.Tools.Call(ctx, "echo_message", json.RawMessage(`{"message":"hi"}`))
	require.NoError(t, err)
	assert.Equal(t, `{"message":"hi"}`, got)
	assert.Equal(t, []string{`echo_message{"message":"hi"}`}, m.calls)

	m.names = []string{"echo_with_length", "shout"}
	_, err = in.Reset(ctx, env.Row{})
	require.NoError(t, err)
	assert.Equal(t, []string{"echo_with_length", "shout", "ping"}, in.Tools.Names(), "each reset refreshes the tools")

	m.names = []string{"ping"}
	_, err = in.Reset(ctx, env.Row{})
	assert.ErrorContains(t, err, `two tools named "ping"`)
	in.Release()
}
