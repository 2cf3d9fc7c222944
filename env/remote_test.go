package env_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/env"
	"github.com/x/env/guess"
	"github.com/x/env/openenv"
)

// TestPoolRemoteMCPEnv trains-style use of a remote MCP-style env: a
// tool-style env served with openenv.FromFactory, played through a Pool
// of openenv.RemoteEnvs, whose tools are listed at each reset.
func TestPoolRemoteMCPEnv(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	srv := httptest.NewServer(openenv.NewServer(openenv.FromFactory(guess.NewFactory(guess.Options{Seed: 1}), "guess")))
	defer srv.Close()
	p, err := env.NewPool(ctx, openenv.RemoteFactory(srv.URL))
	require.NoError(t, err)
	defer func() { assert.NoError(t, p.Close()) }()

	in, obs, err := p.Start(ctx, env.Row{"target": 3})
	require.NoError(t, err)
	assert.Contains(t, obs, "from 1 to 20")
	assert.Equal(t, []string{"guess"}, in.Tools.Names())
	resp, err := in.Tools.Call(ctx, "guess", json.RawMessage(`{"number":3}`))
	require.NoError(t, err)
	assert.Contains(t, resp, "Correct!")
	in.Release()
}
