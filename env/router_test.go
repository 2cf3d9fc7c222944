package env_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/env"
	"github.com/x/env/envtest"
)

// other is a second env type with its own tool.
type other struct{}

type PingArgs struct {
	Host string `json:"host" desc:"who to ping"`
}

func (o *other) Reset(ctx context.Context, row env.Row) (string, error) { return "other ready", nil }
func (o *other) ToolDescriptions() map[string]string {
	return map[string]string{"Ping": "Ping a host."}
}
func (o *other) Ping(ctx context.Context, a PingArgs) (string, error) { return "pong " + a.Host, nil }

func TestRouter(t *testing.T) {
	ctx := context.Background()
	scriptedF := &envtest.Factory{Make: scripted}
	r, err := env.NewRouter(ctx, map[string]env.Factory{
		"script": scriptedF,
		"other":  env.FactoryFunc(func(ctx context.Context) (env.Env, error) { return &other{}, nil }),
	})
	require.NoError(t, err)
	defer r.Close()
	assert.Equal(t, []string{"other", "script"}, r.Names())

	in, obs, err := r.Start(ctx, env.Row{"environment": "other", "prompt": "p"})
	require.NoError(t, err)
	assert.Equal(t, "other ready", obs)
	assert.Equal(t, "other", in.Name)
	assert.Equal(t, []string{"ping"}, in.Tools.Names(), "only the routed env's tools")
	in.Release()

	row := env.Row{"environment": "script", "prompt": "p"}
	in, obs, err = r.Start(ctx, row)
	require.NoError(t, err)
	assert.Equal(t, "ready", obs)
	assert.Equal(t, []string{"act"}, in.Tools.Names())
	got := in.Env.(*envtest.Scripted).Resets
	assert.Equal(t, []env.Row{{"prompt": "p"}}, got, "Reset gets the row without its environment column")
	assert.Equal(t, "script", row["environment"], "the caller's row is not modified")
	in.Release()

	tests := []struct {
		name string
		row  env.Row
		want string
	}{
		{"unknown", env.Row{"environment": "chess"}, `row has environment="chess", which is not among the environments; expected one of [other, script]`},
		{"missing", env.Row{"prompt": "p"}, `row has no "environment" column; expected one of [other, script]`},
		{"not a string", env.Row{"environment": 3}, `row has environment=3 (int), not a string; expected one of [other, script]`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := r.Start(ctx, tc.row)
			assert.EqualError(t, err, "env: "+tc.want)
		})
	}
	p, ok := r.Pool("script")
	require.True(t, ok)
	assert.Equal(t, 1, p.Size())
}

func TestRouterSingleAndErrors(t *testing.T) {
	ctx := context.Background()
	r, err := env.NewRouter(ctx, map[string]env.Factory{"only": &envtest.Factory{Make: scripted}})
	require.NoError(t, err)
	in, _, err := r.Start(ctx, env.Row{"prompt": "p"})
	require.NoError(t, err, "a single env takes rows without the column")
	in.Release()
	require.NoError(t, r.Close())

	_, err = env.NewRouter(ctx, nil)
	assert.ErrorContains(t, err, "no factories")
	good := &envtest.Factory{Make: scripted}
	_, err = env.NewRouter(ctx, map[string]env.Factory{"a": good, "b": &envtest.Factory{Make: func(int) env.Env { return &helperEnv{} }}})
	assert.ErrorContains(t, err, `env "b": tools: method *env_test.helperEnv.Secret`)
	assert.True(t, good.Made()[0].(*envtest.Scripted).Closed, "pools built before the failure are closed")
}
