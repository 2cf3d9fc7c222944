package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/env/echo"
	"github.com/x/env/openenv"
)

// TestMain lets the test binary be the server child, as envload is.
func TestMain(m *testing.M) {
	if os.Getenv(childEnvVar) == "1" {
		if err := serveChild(os.Args[1:], os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "server child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestParseFlags(t *testing.T) {
	tests := []struct {
		name string
		args []string
		err  string
		want func(t *testing.T, c config)
	}{
		{name: "defaults", want: func(t *testing.T, c config) {
			assert.Equal(t, config{env: "echo", sessions: 64, duration: 10 * time.Second, seed: 1, idleWait: time.Second, parallel: 64}, c)
		}},
		{name: "ipv4 loopback", args: []string{"-addr", "127.0.0.1:8000", "-pid", "42"}, want: func(t *testing.T, c config) {
			assert.Equal(t, "127.0.0.1:8000", c.addr)
			assert.Equal(t, 42, c.pid)
		}},
		{name: "ipv6 loopback", args: []string{"-addr", "[::1]:8000"}, want: func(t *testing.T, c config) {
			assert.Equal(t, "[::1]:8000", c.addr)
		}},
		{name: "other host", args: []string{"-addr", "10.0.0.1:8000"}, err: "only 127.0.0.1 or [::1]"},
		{name: "hostname", args: []string{"-addr", "localhost:8000"}, err: "only 127.0.0.1 or [::1]"},
		{name: "other loopback address", args: []string{"-addr", "127.0.0.2:8000"}, err: "only 127.0.0.1 or [::1]"},
		{name: "any address", args: []string{"-addr", "0.0.0.0:8000"}, err: "only 127.0.0.1 or [::1]"},
		{name: "no port", args: []string{"-addr", "127.0.0.1"}, err: "want 127.0.0.1:PORT"},
		{name: "bad port", args: []string{"-addr", "127.0.0.1:0"}, err: "is not 1 to 65535"},
		{name: "pid without addr", args: []string{"-pid", "1"}, err: "-pid needs -addr"},
		{name: "unknown env", args: []string{"-env", "chess"}, err: `-env "chess"`},
		{name: "too many sessions", args: []string{"-sessions", "100000"}, err: "-sessions 100000"},
		{name: "no sessions", args: []string{"-sessions", "0"}, err: "-sessions 0"},
		{name: "too long", args: []string{"-duration", "1h"}, err: "-duration 1h0m0s"},
		{name: "negative steps", args: []string{"-steps", "-1"}, err: "-steps -1"},
		{name: "long think", args: []string{"-think", "1m"}, err: "-think 1m0s"},
		{name: "stray argument", args: []string{"echo"}, err: "unexpected arguments"},
		{name: "profile of a running server", args: []string{"-addr", "127.0.0.1:8000", "-cpuprofile", "x"}, err: "not with -addr"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := parseFlags(tt.args, io.Discard)
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

func TestPercentiles(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		out := make([]time.Duration, len(v))
		for i, x := range v {
			out[i] = time.Duration(x) * time.Millisecond
		}
		return out
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = 100 - i // 100 … 1, unsorted
	}
	tests := []struct {
		name string
		lat  []time.Duration
		want latencyStats
	}{
		{name: "empty", lat: nil, want: latencyStats{}},
		{name: "one", lat: ms(7), want: latencyStats{p50: 7 * time.Millisecond, p99: 7 * time.Millisecond, max: 7 * time.Millisecond}},
		{name: "1 to 100", lat: ms(hundred...), want: latencyStats{p50: 50 * time.Millisecond, p99: 99 * time.Millisecond, max: 100 * time.Millisecond}},
		{name: "one outlier in 1000", lat: append(ms(make([]int, 999)...), time.Second),
			want: latencyStats{p50: 0, p99: 0, max: time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, percentiles(tt.lat))
		})
	}
}

func TestProcParsers(t *testing.T) {
	// A command name with spaces and a ')' must not shift the fields.
	stat := "1234 (my (odd) cmd) S 1 1234 1234 0 -1 4194560 500 0 0 0 250 75 0 0 20 0 5 0 100 0 0"
	cpu, err := parseStatCPU([]byte(stat))
	require.NoError(t, err)
	assert.Equal(t, 3250*time.Millisecond, cpu, "(250+75) ticks of 10 ms")
	_, err = parseStatCPU([]byte("1234 (cmd) S 1"))
	assert.ErrorContains(t, err, "want at least 13")
	_, err = parseStatCPU([]byte("garbage"))
	assert.ErrorContains(t, err, "no command name")

	rss, err := parseVmRSS([]byte("Name:\tx\nVmPeak:\t  9000 kB\nVmRSS:\t  1536 kB\nThreads: 3\n"))
	require.NoError(t, err)
	assert.Equal(t, int64(1536<<10), rss)
	_, err = parseVmRSS([]byte("Name:\tx\n"))
	assert.ErrorContains(t, err, "no VmRSS")
	_, err = parseVmRSS([]byte("VmRSS: lots\n"))
	assert.ErrorContains(t, err, "VmRSS")

	// This process, for real.
	self := os.Getpid()
	rss, err = procRSS(self)
	require.NoError(t, err)
	assert.Positive(t, rss)
	_, err = procCPU(self)
	require.NoError(t, err)
	_, err = loadAverage()
	require.NoError(t, err)
}

// TestRunAgainstChild runs a short load of every env through a server
// child (this test binary, see TestMain) and checks the report adds up.
func TestRunAgainstChild(t *testing.T) {
	for _, env := range []string{"echo", "wordle", "catch", "guess"} {
		t.Run(env, func(t *testing.T) {
			cfg, err := parseFlags([]string{"-env", env, "-sessions", "16", "-duration", "300ms", "-idle-wait", "0"}, io.Discard)
			require.NoError(t, err)
			res, err := run(t.Context(), cfg)
			require.NoError(t, err)
			assert.Equal(t, 16, res.opened)
			assert.Zero(t, res.failed)
			assert.Zero(t, res.lost, "%v", res.lostErr)
			assert.Positive(t, res.steps)
			assert.LessOrEqual(t, res.lat.p50, res.lat.p99)
			assert.LessOrEqual(t, res.lat.p99, res.lat.max)
			assert.Positive(t, res.serverPID)
			assert.Positive(t, res.rssBase)
			assert.Equal(t, 16, res.idle.goroutines-res.before.goroutines, "one server goroutine per idle session")
			if env != "echo" {
				assert.Positive(t, res.resets, "episodes end and are reset")
			}
			var out strings.Builder
			res.write(&out)
			for _, want := range []string{"16 opened, 0 failed, 0 lost", "steps/s", "p99", "per request", "load generator CPU", "KiB/session after GC"} {
				assert.Contains(t, out.String(), want)
			}
		})
	}
}

// TestStepBoundAndLoss: -steps bounds each session, and a session whose
// server goes away counts as lost, with the exit status 1.
func TestStepBoundAndLoss(t *testing.T) {
	cfg, err := parseFlags([]string{"-sessions", "4", "-steps", "25", "-duration", "1m", "-idle-wait", "0"}, io.Discard)
	require.NoError(t, err)
	start := time.Now()
	res, err := run(t.Context(), cfg)
	require.NoError(t, err)
	assert.Equal(t, 100, res.steps)
	assert.Less(t, time.Since(start), 30*time.Second, "-steps ends the run before -duration")

	prof := filepath.Join(t.TempDir(), "server.prof")
	cfg, err = parseFlags([]string{"-sessions", "2", "-steps", "50", "-idle-wait", "0", "-cpuprofile", prof}, io.Discard)
	require.NoError(t, err)
	_, err = run(t.Context(), cfg)
	require.NoError(t, err)
	st, err := os.Stat(prof)
	require.NoError(t, err, "the server child wrote its CPU profile")
	assert.Positive(t, st.Size())

	var stdout, stderr strings.Builder
	status := mainStatus(t.Context(), []string{"-addr", "127.0.0.1:1", "-sessions", "2", "-duration", "100ms"}, &stdout, &stderr)
	assert.Equal(t, 1, status)
	assert.Contains(t, stderr.String(), "no session opened")
	assert.Equal(t, 2, mainStatus(t.Context(), []string{"-addr", "192.0.2.1:80"}, &stdout, &stderr))
	assert.Equal(t, 0, mainStatus(t.Context(), []string{"-help"}, &stdout, &stderr))
}

// TestInterruptEndsLoad: a cancelled context (SIGINT, SIGTERM) ends the
// load within a round trip, not at -duration, also against a server that
// envload did not start (whose sessions nothing else would end).
func TestInterruptEndsLoad(t *testing.T) {
	srv := openenv.NewServer(echo.NewEnvironmentFactory(echo.Options{}))
	hs := httptest.NewServer(srv)
	defer hs.Close()
	defer func() { _ = srv.Shutdown(context.Background()) }()
	addr := strings.TrimPrefix(hs.URL, "http://")
	cfg, err := parseFlags([]string{"-addr", addr, "-sessions", "4", "-duration", "1m", "-idle-wait", "0", "-think", "10ms"}, io.Discard)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	start := time.Now()
	_, err = run(ctx, cfg)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.ErrorContains(t, err, "load interrupted")
	assert.Less(t, time.Since(start), 15*time.Second, "the load must stop when its context ends, not at -duration")
}

// TestOpenSessionsBounded: a server that upgrades but never answers the
// first reset holds each session for roundTripTimeout; the opening phase
// as a whole must still end when its context does (run gives it
// maxOpenTime), the sessions not opened counting as failed.
func TestOpenSessionsBounded(t *testing.T) {
	upgrader := websocket.Upgrader{}
	var mu sync.Mutex
	var held []*websocket.Conn
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := upgrader.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		mu.Lock()
		held = append(held, ws) // never read, never answered
		mu.Unlock()
	}))
	defer hs.Close()
	defer func() {
		mu.Lock()
		defer mu.Unlock()
		for _, ws := range held {
			_ = ws.Close()
		}
	}()
	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	open, errs := openSessions(ctx, "ws"+strings.TrimPrefix(hs.URL, "http")+"/ws", 3, 1)
	assert.Empty(t, open)
	assert.Len(t, errs, 3)
	assert.Less(t, time.Since(start), 10*time.Second, "opening must end with its context, not after a round-trip timeout per session")
}

// TestRaiseFileLimitError: past the hard limit the error says what to do
// and carries no "<nil>" cause.
func TestRaiseFileLimitError(t *testing.T) {
	var lim syscall.Rlimit
	require.NoError(t, syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim))
	if lim.Max == math.MaxUint64 {
		t.Skip("no hard limit on open files")
	}
	err := raiseFileLimit(lim.Max + 1)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "raise ulimit -Hn")
	assert.NotContains(t, err.Error(), "<nil>")
}
