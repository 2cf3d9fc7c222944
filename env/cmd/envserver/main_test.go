package main

import (
	"context"
	"fmt"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/env/internal/builtin"
	"github.com/x/env/openenv"
)

func TestParseFlags(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want func(t *testing.T, c config)
		err  string
	}{
		{name: "defaults", want: func(t *testing.T, c config) {
			assert.Equal(t, config{env: "echo", host: "127.0.0.1", port: 8000, maxSessions: openenv.DefaultMaxSessions,
				idleTimeout: openenv.DefaultIdleTimeout, ping: openenv.DefaultPingInterval}, c)
		}},
		{name: "tools", args: []string{"-env", "wordle", "-tools"}, want: func(t *testing.T, c config) {
			assert.Equal(t, "wordle", c.env)
			assert.True(t, c.tools)
		}},
		{name: "MAX_CONCURRENT_ENVS", env: map[string]string{"MAX_CONCURRENT_ENVS": "8", "OPENENV_TOKEN": "t"}, want: func(t *testing.T, c config) {
			assert.Equal(t, 8, c.maxSessions)
			assert.Equal(t, "t", c.token)
		}},
		{name: "flags win", args: []string{"-max-sessions", "3", "-port", "9001", "-seed", "7", "-idle-timeout", "0"},
			env: map[string]string{"MAX_CONCURRENT_ENVS": "8"}, want: func(t *testing.T, c config) {
				assert.Equal(t, 3, c.maxSessions)
				assert.Equal(t, 9001, c.port)
				assert.Equal(t, uint64(7), c.seed)
				assert.Zero(t, c.idleTimeout)
			}},
		{name: "-token beats OPENENV_TOKEN", args: []string{"-token", "flag"}, env: map[string]string{"OPENENV_TOKEN": "env"},
			want: func(t *testing.T, c config) { assert.Equal(t, "flag", c.token) }},
		{name: "bad MAX_CONCURRENT_ENVS", env: map[string]string{"MAX_CONCURRENT_ENVS": "lots"}, err: `MAX_CONCURRENT_ENVS="lots"`},
		{name: "unknown env", args: []string{"-env", "chess"}, err: `-env "chess": unknown environment`},
		{name: "bad port", args: []string{"-port", "70000"}, err: "-port 70000"},
		{name: "bad sessions", args: []string{"-max-sessions", "0"}, err: "-max-sessions 0"},
		{name: "stray argument", args: []string{"wordle"}, err: "unexpected arguments"},
		{name: "unknown flag", args: []string{"-nope"}, err: "flag provided but not defined"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := parseFlags(tt.args, func(k string) string { return tt.env[k] }, io.Discard)
			if tt.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.err)
				return
			}
			require.NoError(t, err)
			tt.want(t, c)
		})
	}
}

func TestRunServesUntilCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	addrs := make(chan string, 1)
	done := make(chan error, 1)
	getenv := func(k string) string {
		if k == "OPENENV_TOKEN" {
			return "tok"
		}
		return ""
	}
	go func() {
		done <- run(ctx, []string{"-port", "0", "-env", "echo"}, getenv, io.Discard, func(a string) { addrs <- a })
	}()
	var addr string
	select {
	case addr = <-addrs:
	case err := <-done:
		t.Fatalf("run ended early: %v", err)
	}
	cctx, ccancel := context.WithTimeout(t.Context(), 5*time.Second) // outlives the server
	defer ccancel()
	c, err := openenv.Dial(cctx, addr, openenv.WithBearerToken("tok"))
	require.NoError(t, err)
	defer c.Close()
	res, err := c.Reset(cctx, nil)
	require.NoError(t, err)
	assert.Contains(t, string(res.Observation), "Echo environment ready!")
	res, err = c.Step(cctx, map[string]string{"message": "hi"})
	require.NoError(t, err)
	assert.JSONEq(t, `{"echoed_message":"hi","message_length":2}`, string(res.Observation))

	cancel() // what SIGTERM does
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("run did not return after cancel")
	}
	_, err = c.Step(cctx, map[string]string{"message": "after shutdown"})
	assert.ErrorIs(t, err, openenv.ErrSessionLost)
}

// TestEveryEnvServes plays one reset (and, for the tool form, list_tools)
// of every built-in env in both forms through a real server.
func TestEveryEnvServes(t *testing.T) {
	for _, name := range builtin.Names() {
		for _, asTools := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/tools=%v", name, asTools), func(t *testing.T) {
				f, err := builtin.Factory(name, 1, asTools)
				require.NoError(t, err)
				srv := openenv.NewServer(f, openenv.WithName(name))
				hs := httptest.NewServer(srv)
				defer hs.Close()
				defer func() { assert.NoError(t, srv.Shutdown(context.Background())) }()
				ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
				defer cancel()
				c, err := openenv.Dial(ctx, hs.URL)
				require.NoError(t, err)
				defer c.Close()
				res, err := c.Reset(ctx, nil)
				require.NoError(t, err)
				assert.NotEmpty(t, res.Observation)
				if !asTools {
					return
				}
				res, err = c.Step(ctx, map[string]string{"type": "list_tools"})
				require.NoError(t, err)
				var list struct {
					Tools []struct {
						Name string `json:"name"`
					} `json:"tools"`
				}
				require.NoError(t, res.DecodeObservation(&list))
				assert.NotEmpty(t, list.Tools)
			})
		}
	}
}

// TestHelp: -help prints the usage once, each default once, no token, and
// exits 0 without flag's "help requested" error.
func TestHelp(t *testing.T) {
	for _, arg := range []string{"-help", "-h", "--help"} {
		t.Run(arg, func(t *testing.T) {
			var out strings.Builder
			getenv := func(k string) string {
				return map[string]string{"OPENENV_TOKEN": "s3cret", "MAX_CONCURRENT_ENVS": "64"}[k]
			}
			err := run(t.Context(), []string{arg}, getenv, &out, nil)
			var status strings.Builder
			assert.Equal(t, 0, exitCode(err, &status))
			assert.Empty(t, status.String())
			usage := out.String()
			assert.Contains(t, usage, "Usage of envserver")
			assert.NotContains(t, usage, "help requested")
			assert.NotContains(t, usage, "s3cret", "the token must not be printed")
			for _, line := range strings.Split(usage, "\n") {
				assert.LessOrEqual(t, strings.Count(line, "default"), 1, "a default said twice: %q", line)
			}
			assert.Contains(t, usage, "(default 64)", "-max-sessions shows $MAX_CONCURRENT_ENVS")
		})
	}
	var status strings.Builder
	assert.Equal(t, 1, exitCode(fmt.Errorf("listen: boom"), &status))
	assert.Equal(t, "envserver: listen: boom\n", status.String())
}
