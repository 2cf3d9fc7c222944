package openenv

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/env"
)

// checkGoroutines fails the test if goroutines started during it are still
// running once its cleanups have run (servers shut down, clients closed).
func checkGoroutines(t *testing.T) {
	t.Helper()
	before := runtime.NumGoroutine()
	t.Cleanup(func() {
		deadline := time.Now().Add(3 * time.Second)
		for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		if n := runtime.NumGoroutine(); n > before {
			buf := make([]byte, 1<<16)
			buf = buf[:runtime.Stack(buf, true)]
			t.Errorf("goroutine leak: %d before, %d after\n%s", before, n, buf)
		}
	})
}

// startServer serves f on a loopback httptest server; cleanup shuts both
// down (registered after checkGoroutines, so it runs first).
func startServer(t *testing.T, f EnvironmentFactory, opts ...ServerOption) (*Server, *httptest.Server) {
	t.Helper()
	srv := NewServer(f, opts...)
	hs := httptest.NewServer(srv)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		assert.NoError(t, srv.Shutdown(ctx))
		hs.Close()
	})
	return srv, hs
}

// dial connects a client and closes it at cleanup.
func dial(t *testing.T, url string, opts ...Option) *Client {
	t.Helper()
	c, err := Dial(t.Context(), url, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func ctxTimeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}

func TestWebSocketURL(t *testing.T) {
	tests := []struct{ in, want, err string }{
		{in: "http://localhost:8000", want: "ws://localhost:8000/ws"},
		{in: "https://org-space.hf.space", want: "wss://org-space.hf.space/ws"},
		{in: "https://org-space.hf.space/", want: "wss://org-space.hf.space/ws"},
		{in: "localhost:8001", want: "ws://localhost:8001/ws"},
		{in: "127.0.0.1:8001/", want: "ws://127.0.0.1:8001/ws"},
		{in: "ws://h:1/ws", want: "ws://h:1/ws"},
		{in: "wss://h/prefix/ws/", want: "wss://h/prefix/ws"},
		{in: "http://h/api", want: "ws://h/api/ws"},
		{in: " http://h:9 ", want: "ws://h:9/ws"},
		{in: "", err: "empty server URL"},
		{in: "ftp://h", err: `scheme "ftp"`},
		{in: "http://", err: "has no host"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := WebSocketURL(tt.in)
			if tt.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestClientEpisodeAndTypedErrors(t *testing.T) {
	checkGoroutines(t)
	f := &echoFactory{}
	_, hs := startServer(t, f)
	c := dial(t, hs.URL+"/") // http:// URL with a trailing slash
	ctx := ctxTimeout(t, 5*time.Second)

	res, err := c.Reset(ctx, map[string]any{"seed": 42, "episode_id": "ep-1"})
	require.NoError(t, err)
	require.NotNil(t, res.Reward)
	assert.Equal(t, 0.0, *res.Reward)
	assert.JSONEq(t, `{"echoed_message":"Echo environment ready!","message_length":0}`, string(res.Observation))

	res, err = c.Step(ctx, echoAction{Message: "Hello, <World>!"}) // no HTML escaping on the wire
	require.NoError(t, err)
	var obs map[string]any
	require.NoError(t, res.DecodeObservation(&obs))
	assert.Equal(t, "Hello, <World>!", obs["echoed_message"])
	assert.InDelta(t, 1.5, *res.Reward, 1e-12, "15 runes × 0.1")
	assert.False(t, res.Done)

	st, err := c.State(ctx)
	require.NoError(t, err)
	assert.JSONEq(t, `{"episode_id":"ep-1","step_count":1}`, string(st))

	tests := []struct {
		name   string
		action any
		code   ErrorCode
		check  func(t *testing.T, se *ServerError)
	}{
		{"too short", map[string]any{"message": ""}, CodeValidationError, func(t *testing.T, se *ServerError) {
			require.Len(t, se.Errors, 1)
			assert.Equal(t, "string_too_short", se.Errors[0].Type)
			assert.Equal(t, []any{"message"}, se.Errors[0].Loc)
		}},
		{"extra key", json.RawMessage(`{"message":"x","bogus":1}`), CodeValidationError, func(t *testing.T, se *ServerError) {
			require.Len(t, se.Errors, 1)
			assert.Equal(t, "extra_forbidden", se.Errors[0].Type)
		}},
		{"env error", echoAction{Message: "boom"}, CodeExecutionError, func(t *testing.T, se *ServerError) {
			assert.Equal(t, "the env exploded", se.Message)
		}},
		{"env panic", echoAction{Message: "panic"}, CodeExecutionError, func(t *testing.T, se *ServerError) {
			assert.Contains(t, se.Message, "environment panicked: env panic")
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := c.Step(ctx, tt.action)
			require.Error(t, err)
			assert.ErrorIs(t, err, tt.code)
			assert.NotErrorIs(t, err, ErrSessionLost, "the session survives")
			var se *ServerError
			require.ErrorAs(t, err, &se)
			tt.check(t, se)
		})
	}
	_, err = c.Reset(ctx, map[string]any{"fail": true})
	assert.ErrorIs(t, err, CodeExecutionError)

	// A call whose ctx is already done sends nothing and keeps the session.
	done, cancel := context.WithCancel(ctx)
	cancel()
	_, err = c.Step(done, echoAction{Message: "never sent"})
	assert.ErrorIs(t, err, context.Canceled)
	assert.NotErrorIs(t, err, ErrSessionLost)

	// Client-side checks happen before anything is sent.
	_, err = c.Step(ctx, []int{1})
	assert.ErrorContains(t, err, "action must be a JSON object")

	// The session is intact after all of that.
	res, err = c.Step(ctx, echoAction{Message: "still here"})
	require.NoError(t, err)
	assert.InDelta(t, 1.0, *res.Reward, 1e-12)
	require.NoError(t, c.Close())
	_, err = c.Step(ctx, echoAction{Message: "x"})
	assert.ErrorIs(t, err, ErrClosed)
	assert.Eventually(t, func() bool { return f.closed.Load() == 1 }, 5*time.Second, time.Millisecond, "server closes the env")
}

func TestCapacityRefusalAndHealth(t *testing.T) {
	checkGoroutines(t)
	srv, hs := startServer(t, &echoFactory{}, WithMaxSessions(1))
	ctx := ctxTimeout(t, 5*time.Second)
	a := dial(t, hs.URL)
	_, err := a.Reset(ctx, nil)
	require.NoError(t, err)

	resp, err := http.Get(hs.URL + "/health")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.JSONEq(t, `{"status":"healthy","active_sessions":1,"max_sessions":1}`, string(body))

	b := dial(t, hs.URL) // the upgrade succeeds; the refusal is a frame
	_, err = b.Reset(ctx, nil)
	require.Error(t, err)
	assert.ErrorIs(t, err, CodeCapacityReached)
	assert.ErrorIs(t, err, env.ErrUnavailable, "a slot may free up")
	var se *ServerError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, "Server at capacity: 1/1 sessions active. Cannot accept new connections.", se.Message)
	assert.Equal(t, 1, se.ActiveSessions)
	assert.Equal(t, 1, se.MaxSessions)

	require.NoError(t, a.Close())
	require.Eventually(t, func() bool { return srv.ActiveSessions() == 0 }, 5*time.Second, time.Millisecond)
	_, err = b.Reset(ctx, nil) // Reset opens a new session once a slot is free
	require.NoError(t, err)
}

func TestWaitForSlot(t *testing.T) {
	checkGoroutines(t)
	ctx := ctxTimeout(t, 5*time.Second)
	t.Run("slot frees in time", func(t *testing.T) {
		_, hs := startServer(t, &echoFactory{}, WithMaxSessions(1), WithSlotWait(2*time.Second))
		a := dial(t, hs.URL)
		_, err := a.Reset(ctx, nil)
		require.NoError(t, err)
		b := dial(t, hs.URL)
		done := make(chan error, 1)
		go func() { _, err := b.Reset(ctx, nil); done <- err }()
		time.Sleep(50 * time.Millisecond)
		select {
		case err := <-done:
			t.Fatalf("b was served while a held the only slot: %v", err)
		default:
		}
		require.NoError(t, a.Close())
		require.NoError(t, <-done)
	})
	t.Run("wait times out", func(t *testing.T) {
		_, hs := startServer(t, &echoFactory{}, WithMaxSessions(1), WithSlotWait(50*time.Millisecond))
		a := dial(t, hs.URL)
		_, err := a.Reset(ctx, nil)
		require.NoError(t, err)
		b := dial(t, hs.URL)
		start := time.Now()
		_, err = b.Reset(ctx, nil)
		assert.ErrorIs(t, err, CodeCapacityReached)
		assert.GreaterOrEqual(t, time.Since(start), 40*time.Millisecond)
	})
}

func TestFactoryError(t *testing.T) {
	checkGoroutines(t)
	_, hs := startServer(t, &echoFactory{fail: true}, WithName("echo"))
	c := dial(t, hs.URL)
	_, err := c.Reset(ctxTimeout(t, 5*time.Second), nil)
	assert.ErrorIs(t, err, CodeFactoryError)
	var se *ServerError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, "echo", se.FactoryName)
	assert.Equal(t, "Environment factory 'echo' failed to create instance: no more envs", se.Message)
}

func TestReplyTimeoutLosesSessionAndResetReconnects(t *testing.T) {
	checkGoroutines(t)
	f := &echoFactory{delay: 300 * time.Millisecond}
	_, hs := startServer(t, f)
	c := dial(t, hs.URL)
	_, err := c.Reset(ctxTimeout(t, 5*time.Second), nil)
	require.NoError(t, err)

	_, err = c.Step(ctxTimeout(t, 30*time.Millisecond), echoAction{Message: "slow"})
	require.Error(t, err)
	assert.ErrorIs(t, err, ErrSessionLost)
	assert.ErrorIs(t, err, context.DeadlineExceeded)

	// No silent new session: step and state report the loss...
	_, err = c.Step(ctxTimeout(t, 5*time.Second), echoAction{Message: "x"})
	assert.ErrorIs(t, err, ErrSessionLost)
	_, err = c.State(ctxTimeout(t, 5*time.Second))
	assert.ErrorIs(t, err, ErrSessionLost)
	// ...until Reset opens one (and the late reply is never read).
	res, err := c.Reset(ctxTimeout(t, 5*time.Second), nil)
	require.NoError(t, err)
	assert.Contains(t, string(res.Observation), "ready")
	f.mu.Lock()
	assert.Equal(t, 2, f.made)
	f.mu.Unlock()
	assert.Eventually(t, func() bool { return f.closed.Load() == 1 }, 5*time.Second, time.Millisecond, "the abandoned session's env is closed")

	// WithMessageTimeout applies when ctx has no deadline.
	c2 := dial(t, hs.URL, WithMessageTimeout(20*time.Millisecond))
	_, err = c2.Reset(ctxTimeout(t, 5*time.Second), nil) // a ctx deadline wins over the message timeout
	require.NoError(t, err)
	_, err = c2.Step(context.Background(), echoAction{Message: "slow"})
	assert.ErrorIs(t, err, ErrSessionLost)
}

func TestServerDropMidEpisode(t *testing.T) {
	checkGoroutines(t)
	srv := NewServer(&echoFactory{})
	hs := httptest.NewUnstartedServer(srv)
	tl := &trackingListener{Listener: hs.Listener}
	hs.Listener = tl
	hs.Start()
	t.Cleanup(func() { assert.NoError(t, srv.Shutdown(context.Background())); hs.Close() })
	c := dial(t, hs.URL)
	ctx := ctxTimeout(t, 5*time.Second)
	_, err := c.Reset(ctx, nil)
	require.NoError(t, err)
	_, err = c.Step(ctx, echoAction{Message: "before drop"})
	require.NoError(t, err)

	tl.killAll() // the server side of every socket dies at once (no close frame)

	_, err = c.Step(ctx, echoAction{Message: "after drop"})
	require.Error(t, err)
	assert.ErrorIs(t, err, ErrSessionLost)
	var sl *SessionLostError
	require.ErrorAs(t, err, &sl)
	assert.Equal(t, "step", sl.Op)

	res, err := c.Reset(ctx, nil)
	require.NoError(t, err, "Reset reconnects")
	st, err := c.State(ctx)
	require.NoError(t, err)
	assert.JSONEq(t, `{"episode_id":"ep-1","step_count":0}`, string(st), "a fresh env")
	assert.NotEmpty(t, res.Observation)
}

func TestServerDownThenBack(t *testing.T) {
	checkGoroutines(t)
	srv := NewServer(&echoFactory{})
	hs := httptest.NewServer(srv)
	addr := hs.Listener.Addr().String()
	c, err := Dial(t.Context(), addr) // bare host:port
	require.NoError(t, err)
	defer c.Close()
	ctx := ctxTimeout(t, 5*time.Second)
	_, err = c.Reset(ctx, nil)
	require.NoError(t, err)

	require.NoError(t, srv.Shutdown(ctx))
	hs.Close()
	_, err = c.Step(ctx, echoAction{Message: "x"})
	assert.ErrorIs(t, err, ErrSessionLost)
	_, err = c.Reset(ctx, nil)
	require.Error(t, err, "nothing listens")
	assert.Contains(t, err.Error(), "openenv dial")
	assert.ErrorIs(t, err, env.ErrUnavailable, "a refused connection may be tried again later")
	assert.NotErrorIs(t, err, ErrSessionLost)
}

func TestSlowReaderDoesNotBlockOthers(t *testing.T) {
	checkGoroutines(t)
	srv, hs := startServer(t, &echoFactory{obsBytes: 256 << 10}, WithWriteTimeout(100*time.Millisecond))
	wsURL, err := WebSocketURL(hs.URL)
	require.NoError(t, err)
	stuck, _, err := websocket.DefaultDialer.Dial(wsURL, nil)
	require.NoError(t, err)
	defer stuck.Close()
	// Flood requests, never read: the replies fill both socket buffers and
	// the server's write blocks.
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range 200 {
			_ = stuck.SetWriteDeadline(time.Now().Add(2 * time.Second))
			if stuck.WriteMessage(websocket.TextMessage, []byte(`{"type":"step","data":{"message":"flood"}}`)) != nil {
				return
			}
		}
	}()
	c := dial(t, hs.URL)
	ctx := ctxTimeout(t, 10*time.Second)
	for range 10 {
		_, err := c.Reset(ctx, nil)
		require.NoError(t, err)
		_, err = c.Step(ctx, echoAction{Message: "hi"})
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool { return srv.ActiveSessions() == 1 }, 5*time.Second, 5*time.Millisecond,
		"the stuck session is dropped after the write timeout")
	stuck.Close()
	wg.Wait()
}

func TestOversizeFrameClosesWith1009(t *testing.T) {
	checkGoroutines(t)
	_, hs := startServer(t, &echoFactory{}, WithReadLimit(1024))
	c := dial(t, hs.URL)
	ctx := ctxTimeout(t, 5*time.Second)
	_, err := c.Reset(ctx, nil)
	require.NoError(t, err)
	_, err = c.Step(ctx, echoAction{Message: strings.Repeat("a", 2048)})
	require.Error(t, err)
	assert.ErrorIs(t, err, ErrSessionLost)
	var ce *websocket.CloseError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, websocket.CloseMessageTooBig, ce.Code)
}

func TestClientMaxMessageSize(t *testing.T) {
	checkGoroutines(t)
	_, hs := startServer(t, &echoFactory{obsBytes: 4096})
	c := dial(t, hs.URL, WithMaxMessageSize(1024))
	ctx := ctxTimeout(t, 5*time.Second)
	_, err := c.Reset(ctx, nil)
	require.NoError(t, err)
	_, err = c.Step(ctx, echoAction{Message: "flood"}) // a 4 KiB reply
	assert.ErrorIs(t, err, ErrSessionLost)
	assert.ErrorIs(t, err, websocket.ErrReadLimit)
}

func TestBearerToken(t *testing.T) {
	checkGoroutines(t)
	_, hs := startServer(t, &echoFactory{}, RequireBearerToken("s3cret"))
	ctx := ctxTimeout(t, 5*time.Second)
	for _, tok := range []string{"", "wrong"} {
		var opts []Option
		if tok != "" {
			opts = append(opts, WithBearerToken(tok))
		}
		_, err := Dial(ctx, hs.URL, opts...)
		var he *HandshakeError
		require.ErrorAs(t, err, &he, "token %q", tok)
		assert.Equal(t, http.StatusUnauthorized, he.StatusCode)
		assert.NotErrorIs(t, err, env.ErrUnavailable, "a refused token is final")
	}
	c := dial(t, hs.URL, WithBearerToken("s3cret"))
	_, err := c.Reset(ctx, nil)
	require.NoError(t, err)

	for path, want := range map[string]int{"/health": 200, "/metadata": 401, "/schema": 401, "/state": 401} {
		resp, err := http.Get(hs.URL + path)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, want, resp.StatusCode, path)
	}
	req, _ := http.NewRequest("GET", hs.URL+"/metadata", nil)
	req.Header.Set("Authorization", "Bearer s3cret")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, 200, resp.StatusCode)
}

func TestIdleReaperClosesEnvAndSocket(t *testing.T) {
	checkGoroutines(t)
	f := &echoFactory{}
	srv, hs := startServer(t, f, WithIdleTimeout(100*time.Millisecond))
	ctx := ctxTimeout(t, 5*time.Second)

	// A raw socket sees the error frame, then close 1000.
	wsURL, _ := WebSocketURL(hs.URL)
	raw, _, err := websocket.DefaultDialer.Dial(wsURL, nil)
	require.NoError(t, err)
	defer raw.Close()
	_ = raw.SetReadDeadline(time.Now().Add(3 * time.Second))
	_, msg, err := raw.ReadMessage()
	require.NoError(t, err)
	assert.Contains(t, string(msg), `"code":"SESSION_ERROR"`)
	assert.Contains(t, string(msg), "idle")
	_, _, err = raw.ReadMessage()
	var ce *websocket.CloseError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, websocket.CloseNormalClosure, ce.Code)

	// A client mid-episode gets ErrSessionLost carrying the server's reason.
	c := dial(t, hs.URL)
	_, err = c.Reset(ctx, nil)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return f.closed.Load() == 2 }, 5*time.Second, time.Millisecond, "both envs closed by the reaper")
	assert.Equal(t, 0, srv.ActiveSessions(), "slots freed, no over-admission")
	_, err = c.Step(ctx, echoAction{Message: "late"})
	assert.ErrorIs(t, err, ErrSessionLost)
	assert.ErrorIs(t, err, CodeSessionError)
	_, err = c.Reset(ctx, nil)
	assert.NoError(t, err, "Reset opens a new session")

}

func TestActivityKeepsSessionFromReaper(t *testing.T) {
	checkGoroutines(t)
	_, hs := startServer(t, &echoFactory{}, WithIdleTimeout(400*time.Millisecond))
	ctx := ctxTimeout(t, 5*time.Second)
	c := dial(t, hs.URL)
	_, err := c.Reset(ctx, nil)
	require.NoError(t, err)
	for range 25 { // 1 s of steps, 40 ms apart: 2.5× the idle timeout
		time.Sleep(40 * time.Millisecond)
		_, err = c.Step(ctx, echoAction{Message: "busy"})
		require.NoError(t, err)
	}
}

func TestKeepaliveAnsweredByReaderGoroutine(t *testing.T) {
	checkGoroutines(t)
	srv, hs := startServer(t, &echoFactory{}, WithPing(100*time.Millisecond, 200*time.Millisecond), WithIdleTimeout(0))
	ctx := ctxTimeout(t, 5*time.Second)
	c := dial(t, hs.URL)
	_, err := c.Reset(ctx, nil)
	require.NoError(t, err)

	// Control: a socket nobody reads cannot answer pings and is dropped.
	wsURL, _ := WebSocketURL(hs.URL)
	deaf, _, err := websocket.DefaultDialer.Dial(wsURL, nil)
	require.NoError(t, err)
	defer deaf.Close()
	require.Eventually(t, func() bool { return srv.ActiveSessions() == 1 }, 5*time.Second, time.Millisecond)

	time.Sleep(time.Second) // idle for 5× the server's ping timeout
	_, err = c.Step(ctx, echoAction{Message: "still connected"})
	require.NoError(t, err)
}

func TestClientKeepaliveDetectsSilentServer(t *testing.T) {
	checkGoroutines(t)
	release := make(chan struct{})
	var wg sync.WaitGroup
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		wg.Add(1)
		defer wg.Done()
		ws, err := (&websocket.Upgrader{}).Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer ws.Close()
		<-release // never reads, so never answers pings: a half-open peer
	}))
	defer func() { close(release); wg.Wait(); hs.Close() }()
	c := dial(t, hs.URL, WithKeepalive(10*time.Millisecond, 20*time.Millisecond))
	time.Sleep(100 * time.Millisecond)
	start := time.Now()
	_, err := c.Step(ctxTimeout(t, 5*time.Second), echoAction{Message: "x"})
	assert.ErrorIs(t, err, ErrSessionLost)
	assert.Less(t, time.Since(start), 3*time.Second, "known dead long before the 5 s ctx deadline")
}

func TestShutdownEndsEverySession(t *testing.T) {
	checkGoroutines(t)
	f := &echoFactory{}
	srv := NewServer(f)
	hs := httptest.NewServer(srv)
	defer hs.Close()
	ctx := ctxTimeout(t, 5*time.Second)
	clients := make([]*Client, 5)
	for i := range clients {
		c, err := Dial(ctx, hs.URL)
		require.NoError(t, err)
		defer c.Close()
		_, err = c.Reset(ctx, nil)
		require.NoError(t, err)
		clients[i] = c
	}
	require.NoError(t, srv.Shutdown(ctx))
	assert.Equal(t, int64(5), f.closed.Load(), "every env closed")
	assert.Equal(t, 0, srv.ActiveSessions())
	for _, c := range clients {
		_, err := c.Step(ctx, echoAction{Message: "x"})
		assert.ErrorIs(t, err, ErrSessionLost)
	}
	_, err := Dial(ctx, hs.URL)
	var he *HandshakeError
	require.ErrorAs(t, err, &he)
	assert.Equal(t, http.StatusServiceUnavailable, he.StatusCode)
	assert.ErrorIs(t, err, env.ErrUnavailable, "a server shutting down may be back later")
	resp, err := http.Get(hs.URL + "/health")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	assert.Contains(t, string(body), `"status":"unhealthy"`)
}

// TestConcurrentCallsAreSerialised checks that a Client shared by
// goroutines keeps requests and replies paired.
func TestConcurrentCallsAreSerialised(t *testing.T) {
	checkGoroutines(t)
	_, hs := startServer(t, &echoFactory{})
	c := dial(t, hs.URL)
	ctx := ctxTimeout(t, 5*time.Second)
	_, err := c.Reset(ctx, nil)
	require.NoError(t, err)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			msg := strings.Repeat("m", i+1)
			for range 20 {
				res, err := c.Step(ctx, echoAction{Message: msg})
				if err != nil {
					errs <- err
					return
				}
				var o struct {
					Echoed string `json:"echoed_message"`
				}
				if err := res.DecodeObservation(&o); err != nil || o.Echoed != msg {
					errs <- errors.New("reply paired with the wrong request: " + o.Echoed)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// trackingListener remembers accepted connections so a test can kill
// them abruptly (httptest forgets hijacked ones).
type trackingListener struct {
	net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func (l *trackingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.mu.Lock()
		l.conns = append(l.conns, c)
		l.mu.Unlock()
	}
	return c, err
}

func (l *trackingListener) killAll() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range l.conns {
		_ = c.Close()
	}
	l.conns = nil
}

func TestDialRetryWaitsForServer(t *testing.T) {
	checkGoroutines(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close()) // nothing listens until the server starts

	_, err = Dial(t.Context(), addr)
	require.Error(t, err, "no retry by default")

	srv := NewServer(&echoFactory{})
	hs := &http.Server{Handler: srv}
	served := make(chan struct{})
	go func() {
		defer close(served)
		time.Sleep(100 * time.Millisecond)
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Errorf("listen again: %v", err)
			return
		}
		_ = hs.Serve(ln)
	}()
	defer func() {
		assert.NoError(t, srv.Shutdown(context.Background()))
		assert.NoError(t, hs.Shutdown(context.Background()))
		<-served
	}()
	c, err := Dial(ctxTimeout(t, 5*time.Second), addr, WithDialRetry(20, 20*time.Millisecond))
	require.NoError(t, err)
	defer c.Close()
	_, err = c.Reset(ctxTimeout(t, 5*time.Second), nil)
	require.NoError(t, err)
}

// TestProtocolBreaksLoseTheSession: a reply of the wrong type or a frame
// that is not JSON means the reply stream cannot be trusted.
func TestProtocolBreaksLoseTheSession(t *testing.T) {
	checkGoroutines(t)
	tests := []struct{ name, reply, want string }{
		{"wrong type", `{"type":"state","data":{}}`, `answered a step request with a "state" frame`},
		{"not JSON", `<html>`, "malformed frame from server"},
		{"bad observation", `{"type":"observation","data":{"observation":[1],"reward":null,"done":false}}`, "not an object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var wg sync.WaitGroup
			hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				wg.Add(1)
				defer wg.Done()
				ws, err := (&websocket.Upgrader{}).Upgrade(w, r, nil)
				if err != nil {
					return
				}
				defer ws.Close()
				for {
					if _, _, err := ws.ReadMessage(); err != nil {
						return
					}
					if ws.WriteMessage(websocket.TextMessage, []byte(tt.reply)) != nil {
						return
					}
				}
			}))
			c, err := Dial(t.Context(), hs.URL)
			require.NoError(t, err)
			defer func() { _ = c.Close(); hs.Close(); wg.Wait() }()
			_, err = c.Step(ctxTimeout(t, 5*time.Second), echoAction{Message: "x"})
			require.Error(t, err)
			assert.ErrorContains(t, err, tt.want)
			if tt.name != "bad observation" { // a decodable frame keeps the stream in step
				assert.ErrorIs(t, err, ErrSessionLost)
			}
		})
	}
}

// TestShutdownUnblocksWaitersAndSteps: a connection waiting for a slot is
// told the server is going away, and a long env call sees its ctx end.
func TestShutdownUnblocksWaitersAndSteps(t *testing.T) {
	checkGoroutines(t)
	f := &echoFactory{delay: time.Minute}
	srv := NewServer(f, WithMaxSessions(1), WithSlotWait(time.Minute))
	hs := httptest.NewServer(srv)
	defer hs.Close()
	ctx := ctxTimeout(t, 10*time.Second)
	a := dial(t, hs.URL)
	_, err := a.Reset(ctx, nil)
	require.NoError(t, err)
	stepErr := make(chan error, 1)
	go func() { _, err := a.Step(ctx, echoAction{Message: "long"}); stepErr <- err }()

	b := dial(t, hs.URL)
	resetErr := make(chan error, 1)
	go func() { _, err := b.Reset(ctx, nil); resetErr <- err }()
	time.Sleep(50 * time.Millisecond) // b is waiting for a's slot, a's step is running

	start := time.Now()
	require.NoError(t, srv.Shutdown(ctx))
	assert.Less(t, time.Since(start), 5*time.Second, "nothing waits out its minute")
	err = <-resetErr
	assert.ErrorIs(t, err, CodeSessionError)
	assert.ErrorContains(t, err, "shutting down")
	assert.ErrorIs(t, <-stepErr, ErrSessionLost)
	assert.Equal(t, int64(1), f.closed.Load())
}
