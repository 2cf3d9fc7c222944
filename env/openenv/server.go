package openenv

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
)

// Server defaults.
const (
	// DefaultMaxSessions is the session limit: generous, since a GRPO
	// batch opens one session per generation (upstream defaults to 1).
	DefaultMaxSessions = 1024
	// DefaultPingInterval and DefaultPingTimeout are uvicorn's keepalive.
	DefaultPingInterval = 20 * time.Second
	// DefaultPingTimeout: see DefaultPingInterval.
	DefaultPingTimeout = 20 * time.Second
	// DefaultIdleTimeout reaps sessions with no request for this long.
	DefaultIdleTimeout = 30 * time.Minute
	// DefaultWriteTimeout bounds every write to a client.
	DefaultWriteTimeout = 10 * time.Second
	// DefaultReadLimit is the largest frame accepted (uvicorn's 16 MiB).
	DefaultReadLimit = 16 << 20
	// RefusalWait is how long a connection refused with CAPACITY_REACHED
	// or FACTORY_ERROR is given to send its first frame, which the error
	// frame then answers.
	RefusalWait = time.Second
	// readBufferSize is each session's read buffer: requests are small
	// JSON frames, and bigger ones are read through it in pieces.
	readBufferSize = 1024
)

// serverConfig holds a Server's settings; see the ServerOption functions.
type serverConfig struct {
	maxSessions  int
	slotWait     time.Duration
	pingInterval time.Duration
	pingTimeout  time.Duration
	idleTimeout  time.Duration
	writeTimeout time.Duration
	readLimit    int64
	// refuseWait bounds how long a refused connection's first frame is
	// awaited (see refuse).
	refuseWait time.Duration
	token      string
	name       string
	logger     *slog.Logger
}

// ServerOption configures a Server.
type ServerOption func(*serverConfig)

// WithMaxSessions sets how many WebSocket sessions may be open at once
// (DefaultMaxSessions; n < 1 means 1).
func WithMaxSessions(n int) ServerOption {
	return func(c *serverConfig) { c.maxSessions = max(n, 1) }
}

// WithSlotWait makes a connection that finds every slot taken wait up to d
// for one to free before it is refused with CAPACITY_REACHED (default 0:
// refuse at once, as upstream does). A refusal answers the client's first
// frame when one comes within RefusalWait.
func WithSlotWait(d time.Duration) ServerOption {
	return func(c *serverConfig) { c.slotWait = d }
}

// WithPing sets the server's keepalive: a ping every interval, and a
// session whose peer sends nothing (not even a pong) for interval+timeout
// is closed, freeing its slot. interval <= 0 disables pings and the read
// deadline (for tunnels that drop control frames).
func WithPing(interval, timeout time.Duration) ServerOption {
	return func(c *serverConfig) { c.pingInterval, c.pingTimeout = interval, timeout }
}

// WithIdleTimeout closes sessions with no request for d (DefaultIdleTimeout;
// 0 disables): the client gets a SESSION_ERROR frame and a close frame,
// the env is closed and the slot freed. A request still running is never
// reaped.
func WithIdleTimeout(d time.Duration) ServerOption {
	return func(c *serverConfig) { c.idleTimeout = d }
}

// WithWriteTimeout bounds every write to a client (DefaultWriteTimeout); a
// client that stops reading loses its session after d instead of holding a
// goroutine and a slot forever.
func WithWriteTimeout(d time.Duration) ServerOption {
	return func(c *serverConfig) { c.writeTimeout = d }
}

// WithReadLimit sets the largest frame accepted (DefaultReadLimit, 16 MiB
// as uvicorn); a bigger one closes the session with code 1009.
func WithReadLimit(n int64) ServerOption {
	return func(c *serverConfig) { c.readLimit = n }
}

// RequireBearerToken makes every endpoint but /health demand the header
// "Authorization: Bearer <token>" (401 otherwise). An empty token turns
// auth off.
func RequireBearerToken(token string) ServerOption {
	return func(c *serverConfig) { c.token = token }
}

// WithName names the environment in /metadata (when the factory is not a
// Describer) and in FACTORY_ERROR frames (default "Environment").
func WithName(name string) ServerOption {
	return func(c *serverConfig) { c.name = name }
}

// WithLogger sets where the server logs session failures (default: discard).
func WithLogger(l *slog.Logger) ServerOption {
	return func(c *serverConfig) { c.logger = l }
}

// Server serves an EnvironmentFactory over the OpenEnv protocol: WS /ws
// (one session per socket, one Environment per session), GET /health,
// /metadata, /schema, /state and stateless POST /reset and /step. It is an
// http.Handler; mount it at the root of an http.Server. Call Shutdown to
// end every session: http.Server.Shutdown does not wait for WebSockets.
type Server struct {
	factory  EnvironmentFactory
	cfg      serverConfig
	upgrader websocket.Upgrader
	mux      *http.ServeMux
	slots    chan struct{} // one token per open session

	mu       sync.Mutex
	sessions map[*session]struct{}
	closing  bool
	// base is the parent of every session's context; Shutdown cancels it,
	// ending env calls, factory calls and slot waits.
	base context.Context
	stop context.CancelFunc
	wg   sync.WaitGroup
}

// NewServer returns a Server making one Environment per session with f.
func NewServer(f EnvironmentFactory, opts ...ServerOption) *Server {
	cfg := serverConfig{
		maxSessions:  DefaultMaxSessions,
		pingInterval: DefaultPingInterval,
		pingTimeout:  DefaultPingTimeout,
		idleTimeout:  DefaultIdleTimeout,
		writeTimeout: DefaultWriteTimeout,
		readLimit:    DefaultReadLimit,
		refuseWait:   RefusalWait,
		name:         "Environment",
	}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.logger == nil {
		cfg.logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	base, stop := context.WithCancel(context.Background())
	s := &Server{
		factory:  f,
		cfg:      cfg,
		slots:    make(chan struct{}, cfg.maxSessions),
		sessions: map[*session]struct{}{},
		base:     base,
		stop:     stop,
		upgrader: websocket.Upgrader{
			HandshakeTimeout: 10 * time.Second,
			// A small read buffer of its own (not net/http's 4 KiB one,
			// which would keep the whole HTTP connection state alive).
			ReadBufferSize:  readBufferSize,
			WriteBufferSize: 4096,
			// Idle sessions hold no write buffer: it returns to the pool
			// after each frame.
			WriteBufferPool: &sync.Pool{},
			// Clients are programs, not browsers; the token (if any) is the
			// access control.
			CheckOrigin: func(*http.Request) bool { return true },
		},
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", s.handleHealth)
	mux.Handle("GET /metadata", s.auth(s.handleMetadata))
	mux.Handle("GET /schema", s.auth(s.handleSchema))
	mux.Handle("GET /state", s.auth(s.handleState))
	mux.Handle("POST /reset", s.auth(s.handleReset))
	mux.Handle("POST /step", s.auth(s.handleStep))
	mux.Handle("POST /mcp", s.auth(s.handleMCP))
	mux.Handle("GET /openapi.json", s.auth(s.handleOpenAPI))
	mux.Handle("GET /ws", s.auth(s.handleWS))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/health", "/metadata", "/schema", "/state", "/reset", "/step", "/mcp", "/openapi.json":
			writeJSON(w, http.StatusMethodNotAllowed, map[string]string{"detail": "Method Not Allowed"})
		default:
			writeJSON(w, http.StatusNotFound, map[string]string{"detail": "Not Found"})
		}
	})
	s.mux = mux
	return s
}

// ServeHTTP routes a request to the endpoint it names.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// ActiveSessions reports how many WebSocket sessions hold a slot.
func (s *Server) ActiveSessions() int { return len(s.slots) }

// auth wraps h with the bearer-token check.
func (s *Server) auth(h http.HandlerFunc) http.Handler {
	if s.cfg.token == "" {
		return h
	}
	want := []byte("Bearer " + s.cfg.token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := []byte(r.Header.Get("Authorization"))
		if subtle.ConstantTimeCompare(got, want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="openenv"`)
			writeJSON(w, http.StatusUnauthorized, map[string]string{"detail": "missing or invalid bearer token"})
			return
		}
		h(w, r)
	})
}

// handleWS upgrades a request to a WebSocket and starts its session on a
// goroutine of its own, so that net/http's connection goroutine returns
// and frees its request, response and 4 KiB read and write buffers: an
// idle session then holds one goroutine, one small read buffer and one
// timer (about 13 KiB of server memory; BENCHMARKS.md). A request that is not an
// upgrade gets 404, as upstream (where /ws is only a WebSocket route).
func (s *Server) handleWS(w http.ResponseWriter, r *http.Request) {
	if !websocket.IsWebSocketUpgrade(r) {
		writeJSON(w, http.StatusNotFound, map[string]string{"detail": "Not Found"})
		return
	}
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"detail": "server is shutting down"})
		return
	}
	s.wg.Add(1)
	s.mu.Unlock()

	ws, err := s.upgrader.Upgrade(w, r, nil)
	if err != nil {
		s.wg.Done()
		return // the upgrader has answered with an HTTP error
	}
	go func() {
		defer s.wg.Done()
		s.serveSession(ws)
	}()
}

// serveSession runs one upgraded connection to its end: a slot, an env,
// then frames until either side closes.
func (s *Server) serveSession(ws *websocket.Conn) {
	defer ws.Close()
	ws.SetReadLimit(s.cfg.readLimit)

	// Upstream accepts the upgrade first and refuses with a frame.
	if !s.acquireSlot() {
		if s.base.Err() != nil {
			s.refuse(ws, &ServerError{Code: CodeSessionError, Message: "server is shutting down"})
			return
		}
		n := len(s.slots)
		s.refuse(ws, &ServerError{Code: CodeCapacityReached,
			Message:        fmt.Sprintf("Server at capacity: %d/%d sessions active. Cannot accept new connections.", n, s.cfg.maxSessions),
			ActiveSessions: n, MaxSessions: s.cfg.maxSessions})
		return
	}
	defer func() { <-s.slots }()

	ctx, cancel := context.WithCancel(s.base)
	defer cancel()
	env, err := s.factory.NewEnvironment(ctx)
	if err != nil {
		s.cfg.logger.Warn("openenv: factory failed", "err", err)
		s.refuse(ws, &ServerError{Code: CodeFactoryError,
			Message:     fmt.Sprintf("Environment factory '%s' failed to create instance: %v", s.cfg.name, err),
			FactoryName: s.cfg.name})
		return
	}
	sess := &session{srv: s, ws: ws, env: env, cancel: cancel}
	sess.touch()
	if !s.register(sess) {
		closeEnv(env, s.cfg.logger)
		s.refuse(ws, &ServerError{Code: CodeSessionError, Message: "server is shutting down"})
		return
	}
	defer s.unregister(sess)
	defer closeEnv(env, s.cfg.logger)
	sess.run(ctx)
}

// acquireSlot takes a session slot, waiting up to the slot wait if set.
// It fails once Shutdown has begun.
func (s *Server) acquireSlot() bool {
	got := false
	select {
	case s.slots <- struct{}{}:
		got = true
	default:
		if s.cfg.slotWait <= 0 {
			return false
		}
		t := time.NewTimer(s.cfg.slotWait)
		defer t.Stop()
		select {
		case s.slots <- struct{}{}:
			got = true
		case <-t.C:
		case <-s.base.Done():
		}
	}
	if got && s.base.Err() != nil { // a slot freed by Shutdown itself
		<-s.slots
		return false
	}
	return got
}

// refuse answers the client's first frame with e and closes the connection
// with 1000. It waits up to refuseWait for that frame: a client that sends
// its first request right after the upgrade (OpenEnv's Python client does)
// then reads e as the reply to it, instead of finding the socket closed
// under its write (websockets' ConnectionClosedOK). A client that sends
// nothing within the wait gets e unsolicited, as from upstream.
func (s *Server) refuse(ws *websocket.Conn, e *ServerError) {
	answered := false
	if s.base.Err() == nil && s.cfg.refuseWait > 0 {
		_ = ws.SetReadDeadline(time.Now().Add(s.cfg.refuseWait))
		_, _, err := ws.NextReader()
		var ne net.Error
		switch {
		case err == nil:
			answered = true
		case errors.As(err, &ne) && ne.Timeout():
			// Nothing came: send e unsolicited.
		default:
			return // the peer closed, or sent a frame over the read limit
		}
	}
	deadline := time.Now().Add(s.cfg.writeTimeout)
	_ = ws.SetWriteDeadline(deadline)
	if err := ws.WriteMessage(websocket.TextMessage, errorFrame(e)); err != nil {
		return
	}
	_ = ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), deadline)
	if answered {
		awaitPeerClose(ws, time.Second)
		return
	}
	// After a read timeout gorilla reads no more frames; wait for the
	// peer's close on the socket itself.
	drain(ws.NetConn(), time.Second)
}

// awaitPeerClose reads (and drops) frames until the peer answers our close
// frame or d passes, so the closing handshake completes before the socket
// is torn down.
func awaitPeerClose(ws *websocket.Conn, d time.Duration) {
	_ = ws.SetReadDeadline(time.Now().Add(d))
	for {
		if _, _, err := ws.NextReader(); err != nil {
			return
		}
	}
}

// register adds sess to the live set unless the server is shutting down.
func (s *Server) register(sess *session) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return false
	}
	s.sessions[sess] = struct{}{}
	return true
}

// unregister removes sess from the live set.
func (s *Server) unregister(sess *session) {
	s.mu.Lock()
	delete(s.sessions, sess)
	s.mu.Unlock()
}

// Shutdown refuses new sessions, closes every open one (close code 1001,
// env closed) and waits until all session goroutines have returned or ctx
// ends. It does not stop the http.Server serving s; call its Shutdown too.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closing = true
	live := make([]*session, 0, len(s.sessions))
	for sess := range s.sessions {
		live = append(live, sess)
	}
	s.mu.Unlock()
	s.stop()
	for _, sess := range live {
		sess.terminate(websocket.CloseGoingAway, "server shutting down", nil)
	}
	finished := make(chan struct{})
	go func() { s.wg.Wait(); close(finished) }()
	select {
	case <-finished:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("openenv server shutdown: %w", ctx.Err())
	}
}

// closeEnv closes env if it holds resources.
func closeEnv(env Environment, log *slog.Logger) {
	if c, ok := env.(io.Closer); ok {
		if err := c.Close(); err != nil {
			log.Warn("openenv: closing environment", "err", err)
		}
	}
}

// session is one WebSocket connection and its Environment. Its keepalive
// and idle reaper are one timer (no goroutine of its own): an idle session
// is a goroutine blocked in a read and this struct.
type session struct {
	srv *Server
	ws  *websocket.Conn
	env Environment
	// cancel ends the context of env calls when the session is torn down.
	cancel context.CancelFunc

	writeMu    sync.Mutex // data frames from run and terminate
	lastActive atomic.Int64
	busy       atomic.Bool
	ended      atomic.Bool
	// timer runs tick; it is stored before it is first armed, so tick
	// always finds it.
	timer    atomic.Pointer[time.Timer]
	nextPing atomic.Int64 // unix ns of the next keepalive ping
}

// touch records activity now.
func (ss *session) touch() { ss.lastActive.Store(time.Now().UnixNano()) }

// run reads, handles and answers frames until the session ends. The
// keepalive timer lives exactly as long as run.
func (ss *session) run(ctx context.Context) {
	cfg := &ss.srv.cfg
	if cfg.pingInterval > 0 || cfg.idleTimeout > 0 {
		t := time.AfterFunc(time.Hour, ss.tick)
		t.Stop()
		ss.timer.Store(t)
		ss.nextPing.Store(time.Now().Add(cfg.pingInterval).UnixNano())
		t.Reset(ss.nextWake(time.Now()))
		defer t.Stop()
	}
	defer ss.ended.Store(true)

	if cfg.pingInterval > 0 {
		ss.ws.SetPongHandler(func(string) error {
			return ss.ws.SetReadDeadline(time.Now().Add(cfg.pingInterval + cfg.pingTimeout))
		})
	}
	for {
		if cfg.pingInterval > 0 {
			_ = ss.ws.SetReadDeadline(time.Now().Add(cfg.pingInterval + cfg.pingTimeout))
		}
		mt, msg, err := ss.ws.ReadMessage()
		if errors.Is(err, websocket.ErrReadLimit) {
			// gorilla has sent close 1009; swallow the rest of the oversize
			// frame so closing the socket does not reset the connection
			// before the client has read that close frame.
			drain(ss.ws.NetConn(), time.Second)
			return
		}
		if err != nil || ss.ended.Load() {
			return
		}
		if mt != websocket.TextMessage {
			ss.send(errorFrame(&ServerError{Code: CodeSessionError,
				Message: "binary frames are not supported: send JSON as text frames"}))
			ss.closeNormal()
			return
		}
		ss.busy.Store(true)
		ss.touch()
		rep := handleFrame(ctx, ss.env, msg)
		ss.touch()
		ss.busy.Store(false)
		if ctx.Err() != nil {
			return // torn down (Shutdown) while the env ran: no reply
		}
		if rep.frame != nil {
			if err := ss.send(rep.frame); err != nil {
				cfg.logger.Info("openenv: write failed, ending session", "err", err)
				return
			}
		}
		if rep.closeAfter {
			ss.closeNormal()
			return
		}
	}
}

// send writes one text frame within the write timeout.
func (ss *session) send(b []byte) error {
	ss.writeMu.Lock()
	defer ss.writeMu.Unlock()
	if ss.ended.Load() {
		return errors.New("session ended")
	}
	_ = ss.ws.SetWriteDeadline(time.Now().Add(ss.srv.cfg.writeTimeout))
	return ss.ws.WriteMessage(websocket.TextMessage, b)
}

// closeNormal ends the session from run with close code 1000.
func (ss *session) closeNormal() {
	_ = ss.ws.WriteControl(websocket.CloseMessage,
		websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(ss.srv.cfg.writeTimeout))
	awaitPeerClose(ss.ws, time.Second)
}

// terminate ends the session from outside run (reaper, Shutdown): an
// optional error frame, a close frame, then the socket is closed so that
// run's read fails and run cleans up.
func (ss *session) terminate(code int, reason string, e *ServerError) {
	if !ss.ended.CompareAndSwap(false, true) {
		return
	}
	ss.cancel()
	deadline := time.Now().Add(min(ss.srv.cfg.writeTimeout, time.Second))
	ss.writeMu.Lock()
	if e != nil {
		_ = ss.ws.SetWriteDeadline(deadline)
		_ = ss.ws.WriteMessage(websocket.TextMessage, errorFrame(e))
	}
	ss.writeMu.Unlock()
	_ = ss.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, reason), deadline)
	_ = ss.ws.NetConn().Close()
}

// nextWake is how long the timer sleeps from now: until the next ping or
// the moment the session would become idle, whichever is first.
func (ss *session) nextWake(now time.Time) time.Duration {
	cfg := &ss.srv.cfg
	wake := time.Duration(-1)
	if cfg.pingInterval > 0 {
		wake = max(time.Unix(0, ss.nextPing.Load()).Sub(now), 0)
	}
	if cfg.idleTimeout > 0 {
		d := time.Unix(0, ss.lastActive.Load()).Add(cfg.idleTimeout).Sub(now)
		if ss.busy.Load() || d <= 0 { // a running request is never reaped: look again later
			d = max(cfg.idleTimeout/4, time.Millisecond)
		}
		if wake < 0 || d < wake {
			wake = d
		}
	}
	return max(wake, time.Millisecond)
}

// tick runs on the session's timer: it reaps the session when idle, sends
// the keepalive ping when due, and re-arms the timer.
func (ss *session) tick() {
	if ss.ended.Load() {
		return
	}
	cfg := &ss.srv.cfg
	now := time.Now()
	if cfg.idleTimeout > 0 && !ss.busy.Load() {
		if idle := now.Sub(time.Unix(0, ss.lastActive.Load())); idle >= cfg.idleTimeout {
			ss.terminate(websocket.CloseNormalClosure, "idle timeout", &ServerError{Code: CodeSessionError,
				Message: fmt.Sprintf("Session idle for %s (limit %s): closed by the server", idle.Round(time.Millisecond), cfg.idleTimeout)})
			return
		}
	}
	if cfg.pingInterval > 0 && now.UnixNano() >= ss.nextPing.Load() {
		if err := ss.ws.WriteControl(websocket.PingMessage, nil, now.Add(cfg.writeTimeout)); err != nil {
			_ = ss.ws.NetConn().Close()
			return
		}
		ss.nextPing.Store(now.Add(cfg.pingInterval).UnixNano())
	}
	if ss.ended.Load() {
		return
	}
	ss.timer.Load().Reset(ss.nextWake(time.Now()))
}

// writeJSON writes v as a JSON response.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := marshalCompact(v)
	if err != nil {
		http.Error(w, "encode response: "+err.Error(), http.StatusInternalServerError)
		return
	}
	writeRawJSON(w, status, b)
}

// writeRawJSON writes already-encoded JSON.
func writeRawJSON(w http.ResponseWriter, status int, b []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// drain reads and drops whatever the peer still sends, for up to d.
func drain(c net.Conn, d time.Duration) {
	_ = c.SetReadDeadline(time.Now().Add(d))
	_, _ = io.Copy(io.Discard, c)
}
