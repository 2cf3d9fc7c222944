package wordle_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/env/openenv"
	"github.com/x/env/wordle"
)

// TestHTTPRoutesHideTheSecret serves Wordle over HTTP and checks what a
// client without a session can read: GET /state is what OpenEnv's Python
// server returns for a fresh TextArena env (the base State fields only,
// episode_id null before a reset), no route's body holds the secret of the
// env it was made from, and every $ref of /schema and /openapi.json
// resolves in its document.
func TestHTTPRoutesHideTheSecret(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// The server's n-th fresh env draws the secret that env n of a twin
	// factory draws: the one every route below is answered from is env 0.
	twin, err := wordle.NewEnvironmentFactory(wordle.Options{Seed: 5}).NewEnvironment(ctx)
	require.NoError(t, err)
	st, err := twin.State(ctx)
	require.NoError(t, err)
	var full wordle.State
	require.NoError(t, json.Unmarshal(st, &full))
	secret := gjsonSecret(t, full.RawState)
	require.Len(t, secret, 5)

	srv := httptest.NewServer(openenv.NewServer(wordle.NewEnvironmentFactory(wordle.Options{Seed: 5})))
	defer srv.Close()
	get := func(path string) []byte {
		resp, err := http.Get(srv.URL + path)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s: %s", path, b)
		return b
	}

	state := get("/state")
	assert.Equal(t, `{"episode_id":null,"step_count":0}`, string(state), "upstream's reply for a fresh TextArena env")
	for _, path := range []string{"/state", "/metadata", "/schema", "/openapi.json"} {
		assert.NotContains(t, strings.ToLower(string(get(path))), `"`+secret+`"`, path)
	}

	var schemas map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(get("/schema"), &schemas))
	for _, name := range []string{"action", "observation", "state"} {
		var doc any
		require.NoError(t, json.Unmarshal(schemas[name], &doc))
		checkRefs(t, "/schema "+name, doc, doc)
	}
	var api any
	require.NoError(t, json.Unmarshal(get("/openapi.json"), &api))
	checkRefs(t, "/openapi.json", api, api)
	obs := api.(map[string]any)["components"].(map[string]any)["schemas"].(map[string]any)
	assert.Contains(t, obs, "TextArenaMessage", "the observation's definitions, hoisted as FastAPI does")

	// Over the session that owns it, the state is TextArena's, as upstream:
	// before a reset its episode_id is null too.
	c, err := openenv.Dial(ctx, srv.URL)
	require.NoError(t, err)
	defer c.Close()
	st, err = c.State(ctx)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(st, &full))
	assert.Nil(t, full.EpisodeID, "no episode before the first reset")
	_, err = c.Reset(ctx, nil)
	require.NoError(t, err)
	st, err = c.State(ctx)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(st, &full))
	assert.NotNil(t, full.EpisodeID, "a reset starts an episode")
}

// checkRefs fails for every "$ref" in v that is not a JSON pointer into
// root naming an existing value.
func checkRefs(t *testing.T, where string, root, v any) {
	t.Helper()
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if ref, ok := e.(string); ok && k == "$ref" {
				assert.True(t, resolves(root, ref), "%s: $ref %s resolves to nothing", where, ref)
				continue
			}
			checkRefs(t, where, root, e)
		}
	case []any:
		for _, e := range x {
			checkRefs(t, where, root, e)
		}
	}
}

// resolves reports whether ref ("#/a/b") names a value in root.
func resolves(root any, ref string) bool {
	p, ok := strings.CutPrefix(ref, "#")
	if !ok {
		return false
	}
	cur := root
	for _, tok := range strings.Split(strings.TrimPrefix(p, "/"), "/") {
		if p == "" {
			break
		}
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch x := cur.(type) {
		case map[string]any:
			if cur, ok = x[tok]; !ok {
				return false
			}
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(x) {
				return false
			}
			cur = x[i]
		default:
			return false
		}
	}
	return true
}
