package openenv

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"github.com/x/env"
)

// Client defaults, matching the Python client's.
const (
	// DefaultDialTimeout bounds connecting (the Python client's
	// connect_timeout_s).
	DefaultDialTimeout = 10 * time.Second
	// DefaultMessageTimeout bounds a call whose ctx has no deadline
	// (message_timeout_s).
	DefaultMessageTimeout = 60 * time.Second
	// DefaultMaxMessageSize is the largest reply accepted
	// (max_message_size_mb=100).
	DefaultMaxMessageSize = 100 << 20
)

// ErrSessionLost is matched (errors.Is) by every error that means the
// server-side session, and with it the episode, is gone: the connection
// dropped, a reply timed out, or the server ended the session. The client
// has closed the socket; it never opens a new session behind the caller's
// back. The next Reset connects again.
var ErrSessionLost = errors.New("openenv: session lost")

// ErrClosed is returned by calls on a Client after Close.
var ErrClosed = errors.New("openenv: client closed")

// SessionLostError says which call lost the session and why. It matches
// ErrSessionLost and unwraps to the cause (a *ServerError, a
// context error, a network error).
type SessionLostError struct {
	Op  string // "reset", "step" or "state"
	Err error  // the cause; may be nil
}

// Error describes the loss and what to do about it.
func (e *SessionLostError) Error() string {
	msg := "openenv " + e.Op + ": session lost, the episode is gone (call Reset to start a new session)"
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Unwrap returns ErrSessionLost and the cause.
func (e *SessionLostError) Unwrap() []error {
	if e.Err == nil {
		return []error{ErrSessionLost}
	}
	return []error{ErrSessionLost, e.Err}
}

// HandshakeError is a refused WebSocket upgrade, e.g. 401 for a bad token
// or 404 for a server without /ws.
type HandshakeError struct {
	URL        string
	StatusCode int
	Body       string
}

// Error names the URL and HTTP status.
func (e *HandshakeError) Error() string {
	return fmt.Sprintf("openenv dial %s: HTTP %d %s: %s", e.URL, e.StatusCode, http.StatusText(e.StatusCode), e.Body)
}

// Is matches env.ErrUnavailable for the statuses of a server that is
// shutting down or not up behind its proxy yet (502, 503, 504): trying
// later may succeed. 401, 404 and the rest are final.
func (e *HandshakeError) Is(target error) bool {
	switch e.StatusCode {
	case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return target == env.ErrUnavailable
	}
	return false
}

// clientConfig holds a Client's settings; see the Option functions.
type clientConfig struct {
	dialTimeout    time.Duration
	messageTimeout time.Duration
	pingInterval   time.Duration
	pingTimeout    time.Duration
	maxMessageSize int64
	header         http.Header
	dialAttempts   int
	dialBackoff    time.Duration
}

// Option configures a Client.
type Option func(*clientConfig)

// WithBearerToken sends "Authorization: Bearer <token>" when connecting
// (private HF Spaces, servers started with RequireBearerToken).
func WithBearerToken(token string) Option {
	return func(c *clientConfig) { c.header.Set("Authorization", "Bearer "+token) }
}

// WithHeader adds a header to the WebSocket handshake.
func WithHeader(key, value string) Option {
	return func(c *clientConfig) { c.header.Add(key, value) }
}

// WithDialTimeout bounds connecting (DefaultDialTimeout); a shorter ctx
// deadline wins.
func WithDialTimeout(d time.Duration) Option {
	return func(c *clientConfig) { c.dialTimeout = d }
}

// WithMessageTimeout bounds each call whose ctx has no deadline
// (DefaultMessageTimeout). Raise it for envs with long steps.
func WithMessageTimeout(d time.Duration) Option {
	return func(c *clientConfig) { c.messageTimeout = d }
}

// WithKeepalive makes the client ping the server every interval and drop
// the connection (ErrSessionLost on the next call) when nothing arrives
// for interval+timeout. interval <= 0 (the default) sends no pings; the
// server's pings are answered either way.
func WithKeepalive(interval, timeout time.Duration) Option {
	return func(c *clientConfig) { c.pingInterval, c.pingTimeout = interval, timeout }
}

// WithDialRetry makes connecting (Dial, and Reset after a lost session)
// try up to attempts times, sleeping backoff after the first failure and
// doubling it after each (capped at 30 s), within ctx. A refusal with an
// HTTP status (401, 404, 503) is final and not retried.
func WithDialRetry(attempts int, backoff time.Duration) Option {
	return func(c *clientConfig) { c.dialAttempts, c.dialBackoff = attempts, backoff }
}

// WithMaxMessageSize sets the largest reply accepted
// (DefaultMaxMessageSize, 100 MiB as the Python client).
func WithMaxMessageSize(n int64) Option {
	return func(c *clientConfig) { c.maxMessageSize = n }
}

// Client is one OpenEnv session over a WebSocket, against any OpenEnv
// server. Calls are serialised: one request is in flight at a time. A
// background goroutine reads the socket for its whole life, so server
// pings are answered while the caller is busy elsewhere (e.g. generating).
// Actions and reset options are anything encoding/json turns into a JSON
// object (a struct, a map[string]any, a json.RawMessage).
type Client struct {
	url string
	cfg clientConfig

	// writeBuffers lends a write buffer per frame, so an idle connection
	// holds none.
	writeBuffers *sync.Pool

	mu     sync.Mutex // one request at a time; guards cn and closed
	cn     *conn      // nil when no session is open
	closed bool
}

// WebSocketURL turns a server address into its /ws endpoint the way the
// Python client does: http→ws, https→wss, a bare host:port gets ws://, a
// trailing slash is dropped and /ws appended unless already there.
func WebSocketURL(base string) (string, error) {
	s := strings.TrimSpace(base)
	if s == "" {
		return "", errors.New("openenv: empty server URL")
	}
	if !strings.Contains(s, "://") {
		s = "ws://" + s
	}
	u, err := url.Parse(s)
	if err != nil {
		return "", fmt.Errorf("openenv: server URL %q: %w", base, err)
	}
	switch strings.ToLower(u.Scheme) {
	case "http", "ws":
		u.Scheme = "ws"
	case "https", "wss":
		u.Scheme = "wss"
	default:
		return "", fmt.Errorf("openenv: server URL %q: scheme %q is not http, https, ws or wss", base, u.Scheme)
	}
	if u.Host == "" {
		return "", fmt.Errorf("openenv: server URL %q has no host", base)
	}
	u.Path = strings.TrimRight(u.Path, "/")
	if !strings.HasSuffix(u.Path, "/ws") {
		u.Path += "/ws"
	}
	u.RawPath = ""
	u.Fragment = ""
	return u.String(), nil
}

// Dial connects to the OpenEnv server at url (see WebSocketURL) and opens a
// session. A server at capacity accepts the connection and refuses the
// session with a frame; that CAPACITY_REACHED error is returned by the
// first call (typically Reset), as in the Python client.
func Dial(ctx context.Context, url string, opts ...Option) (*Client, error) {
	wsURL, err := WebSocketURL(url)
	if err != nil {
		return nil, err
	}
	cfg := clientConfig{
		dialTimeout:    DefaultDialTimeout,
		messageTimeout: DefaultMessageTimeout,
		maxMessageSize: DefaultMaxMessageSize,
		header:         http.Header{},
	}
	for _, o := range opts {
		o(&cfg)
	}
	c := &Client{url: wsURL, cfg: cfg, writeBuffers: &sync.Pool{}}
	cn, err := c.connect(ctx)
	if err != nil {
		return nil, err
	}
	c.cn = cn
	return c, nil
}

// URL returns the WebSocket URL the client connects to.
func (c *Client) URL() string { return c.url }

// Reset starts a new episode; opts (nil for none) becomes the reset
// frame's data: seed, episode_id and env-specific keys. If the previous
// session was lost, Reset first connects a new one.
func (c *Client) Reset(ctx context.Context, opts any) (Result, error) {
	var req []byte
	if opts == nil {
		req = []byte(`{"type":"reset"}`)
	} else {
		data, err := encodeObject("reset options", opts)
		if err != nil {
			return Result{}, err
		}
		req = rawFrame("reset", data)
	}
	return c.resultCall(ctx, "reset", req)
}

// Step applies action, which must encode to a JSON object (the env's
// action fields). An invalid action returns a *ServerError with
// CodeValidationError and the session goes on.
func (c *Client) Step(ctx context.Context, action any) (Result, error) {
	data, err := encodeObject("action", action)
	if err != nil {
		return Result{}, err
	}
	return c.resultCall(ctx, "step", rawFrame("step", data))
}

// State returns the session's state object ({"episode_id":…,
// "step_count":…} plus env-specific fields).
func (c *Client) State(ctx context.Context) (json.RawMessage, error) {
	return c.call(ctx, "state", []byte(`{"type":"state"}`), "state")
}

// MCP sends a JSON-RPC 2.0 request (an object: jsonrpc, id, method,
// params) in an {"type":"mcp"} frame and returns the JSON-RPC response.
// A JSON-RPC error is part of the response, not a Go error.
func (c *Client) MCP(ctx context.Context, request any) (json.RawMessage, error) {
	data, err := encodeObject("MCP request", request)
	if err != nil {
		return nil, err
	}
	return c.call(ctx, "mcp", rawFrame("mcp", data), "mcp")
}

// Close ends the session politely ({"type":"close"}, then a close frame)
// and releases the socket and goroutines. Later calls return ErrClosed.
// A call in flight finishes first (it is bounded by its own deadline).
func (c *Client) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	if c.cn == nil {
		return nil
	}
	cn := c.cn
	c.cn = nil
	select {
	case <-cn.dead:
	default:
		deadline := time.Now().Add(time.Second)
		_ = cn.ws.SetWriteDeadline(deadline)
		if cn.ws.WriteMessage(websocket.TextMessage, []byte(`{"type":"close"}`)) == nil {
			_ = cn.ws.WriteControl(websocket.CloseMessage,
				websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), deadline)
			t := time.NewTimer(time.Second)
			select { // let the server finish the closing handshake
			case <-cn.dead:
			case <-t.C:
			}
			t.Stop()
		}
	}
	cn.close()
	return nil
}

// resultCall sends a reset or step frame and decodes the observation.
func (c *Client) resultCall(ctx context.Context, op string, req []byte) (Result, error) {
	data, err := c.call(ctx, op, req, "observation")
	if err != nil {
		return Result{}, err
	}
	res, err := parseObservationData(data)
	if err != nil {
		return Result{}, fmt.Errorf("openenv %s: %w", op, err)
	}
	return res, nil
}

// call does one request/reply exchange and returns the data of the reply,
// which must be a want frame. Error frames become *ServerError; losses and
// protocol breaks *SessionLostError.
func (c *Client) call(ctx context.Context, op string, req []byte, want string) (json.RawMessage, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, ErrClosed
	}
	if err := ctx.Err(); err != nil { // not sent: the session is untouched
		return nil, fmt.Errorf("openenv %s: %w", op, err)
	}
	if err := c.prepareLocked(ctx, op); err != nil {
		return nil, err
	}
	cn := c.cn
	cn.used = true

	deadline, hasDeadline := ctx.Deadline()
	if !hasDeadline {
		deadline = time.Now().Add(c.cfg.messageTimeout)
	}
	_ = cn.ws.SetWriteDeadline(deadline)
	if err := cn.ws.WriteMessage(websocket.TextMessage, req); err != nil {
		// A refused session may have been closed before our write; its
		// error frame, once the reader is done, is the answer.
		t := time.NewTimer(100 * time.Millisecond)
		select {
		case <-cn.dead:
		case <-t.C:
		}
		t.Stop()
		if raw, ok := cn.queued(); ok {
			return c.finishLocked(op, raw, want)
		}
		c.dropLocked()
		return nil, &SessionLostError{Op: op, Err: fmt.Errorf("send: %w", err)}
	}
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case raw := <-cn.frames:
		return c.finishLocked(op, raw, want)
	case <-cn.dead:
		if raw, ok := cn.queued(); ok {
			return c.finishLocked(op, raw, want)
		}
		c.dropLocked()
		return nil, &SessionLostError{Op: op, Err: cn.err}
	case <-ctx.Done():
		c.dropLocked()
		return nil, &SessionLostError{Op: op, Err: fmt.Errorf("no reply: %w", ctx.Err())}
	case <-t.C:
		c.dropLocked()
		cause := fmt.Errorf("no reply within the message timeout (%s): %w", c.cfg.messageTimeout, context.DeadlineExceeded)
		if hasDeadline {
			cause = fmt.Errorf("no reply before the ctx deadline: %w", context.DeadlineExceeded)
		}
		return nil, &SessionLostError{Op: op, Err: cause}
	}
}

// prepareLocked makes sure a usable session exists before a request:
// Reset (re)connects when there is none; step and state report the loss.
func (c *Client) prepareLocked(ctx context.Context, op string) error {
	if cn := c.cn; cn != nil {
		var cause error
		if cn.used {
			// Anything waiting now was not asked for: the server ended the
			// session (idle reaper, shutdown) or broke the protocol.
			if raw, ok := cn.queued(); ok {
				cause = unsolicitedError(raw)
			}
		}
		// A frame waiting on an unused connection is the server's refusal
		// (CAPACITY_REACHED, FACTORY_ERROR): it answers this request.
		if cause == nil && (cn.used || len(cn.frames) == 0) {
			select {
			case <-cn.dead:
				cause = cn.err
				if cause == nil {
					cause = errors.New("connection closed")
				}
			default:
			}
		}
		if cause != nil {
			c.dropLocked()
			if op != "reset" {
				return &SessionLostError{Op: op, Err: cause}
			}
		}
	}
	if c.cn == nil {
		if op != "reset" {
			return &SessionLostError{Op: op, Err: errors.New("no open session")}
		}
		cn, err := c.connect(ctx)
		if err != nil {
			return err
		}
		c.cn = cn
	}
	return nil
}

// unsolicitedError describes a frame that arrived with no request.
func unsolicitedError(raw []byte) error {
	var f frame
	if json.Unmarshal(raw, &f) == nil && f.Type == "error" {
		return parseServerError(f.Data)
	}
	return fmt.Errorf("unsolicited %.100q frame from server", raw)
}

// finishLocked decodes a reply frame, which must be a want frame or an
// error frame.
func (c *Client) finishLocked(op string, raw []byte, want string) (json.RawMessage, error) {
	typ, data, err := parseFrame(raw)
	if err != nil || typ == "" {
		c.dropLocked()
		return nil, &SessionLostError{Op: op, Err: fmt.Errorf("malformed frame from server: %.100q", raw)}
	}
	switch typ {
	case want:
		return data, nil
	case "error":
	default: // the reply stream can no longer be trusted
		c.dropLocked()
		return nil, &SessionLostError{Op: op, Err: fmt.Errorf("server answered a %s request with a %q frame", op, typ)}
	}
	se := parseServerError(data)
	if !se.Code.closesSession() {
		return nil, se
	}
	c.dropLocked() // the server closes the socket after these codes
	if op == "reset" {
		return nil, se
	}
	return nil, &SessionLostError{Op: op, Err: se}
}

// dropLocked closes the current connection, if any.
func (c *Client) dropLocked() {
	if c.cn != nil {
		c.cn.close()
		c.cn = nil
	}
}

// encodeObject encodes v, which must be a JSON object.
func encodeObject(what string, v any) ([]byte, error) {
	var b []byte
	switch t := v.(type) {
	case json.RawMessage:
		b = t
	case []byte:
		b = t
	default:
		var err error
		if b, err = marshalCompact(v); err != nil {
			return nil, fmt.Errorf("openenv: encode %s: %w", what, err)
		}
		if b[0] != '{' {
			return nil, fmt.Errorf("openenv: %s must be a JSON object, got %s", what, jsonKind(b))
		}
		return b, nil // compact already
	}
	if !json.Valid(b) {
		return nil, fmt.Errorf("openenv: %s is not valid JSON", what)
	}
	if t := b[skipSpace(b, 0):]; t[0] != '{' {
		return nil, fmt.Errorf("openenv: %s must be a JSON object, got %s", what, jsonKind(t))
	}
	if bytes.ContainsAny(b, " \t\r\n") {
		return compactOrSame(b), nil
	}
	return b, nil
}

// DecodeObservation unmarshals the observation object into v (a struct
// with the env's fields, or a map[string]any).
func (r Result) DecodeObservation(v any) error {
	if err := json.Unmarshal(r.Observation, v); err != nil {
		return fmt.Errorf("openenv: decode observation: %w", err)
	}
	return nil
}

// conn is one WebSocket and the goroutines that serve it.
type conn struct {
	ws     *websocket.Conn
	frames chan []byte   // replies, in order
	dead   chan struct{} // closed when the reader has exited
	err    error         // why the reader exited; read only after dead
	stop   chan struct{} // tells the pinger to exit
	wg     sync.WaitGroup
	once   sync.Once
	used   bool // a request has been sent (owned by Client.mu)
}

// frameBacklog bounds replies nobody has read yet: one request is in
// flight, so more than a few waiting frames means a broken server.
const frameBacklog = 8

// connect dials the server, retrying as configured.
func (c *Client) connect(ctx context.Context) (*conn, error) {
	backoff := c.cfg.dialBackoff
	for attempt := 1; ; attempt++ {
		cn, err := c.dialOnce(ctx)
		var he *HandshakeError
		if err == nil || attempt >= c.cfg.dialAttempts || errors.As(err, &he) {
			return cn, err
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("%w (gave up after %d attempts: %w)", err, attempt, ctx.Err())
		case <-t.C:
		}
		backoff = min(2*backoff, 30*time.Second)
	}
}

// dialOnce dials the server and starts the reader (and pinger).
func (c *Client) dialOnce(ctx context.Context) (*conn, error) {
	dctx, cancel := context.WithTimeout(ctx, c.cfg.dialTimeout)
	defer cancel()
	d := websocket.Dialer{
		Proxy:            http.ProxyFromEnvironment,
		HandshakeTimeout: c.cfg.dialTimeout,
		WriteBufferPool:  c.writeBuffers,
	}
	ws, resp, err := d.DialContext(dctx, c.url, c.cfg.header)
	if err != nil {
		if resp != nil {
			defer resp.Body.Close()
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
			return nil, &HandshakeError{URL: c.url, StatusCode: resp.StatusCode, Body: strings.TrimSpace(string(body))}
		}
		return nil, fmt.Errorf("openenv dial %s: %w: %w", c.url, env.ErrUnavailable, err)
	}
	if c.cfg.maxMessageSize > 0 {
		ws.SetReadLimit(c.cfg.maxMessageSize)
	}
	cn := &conn{ws: ws, frames: make(chan []byte, frameBacklog), dead: make(chan struct{}), stop: make(chan struct{})}
	cn.start(c.cfg)
	return cn, nil
}

// start launches the reader and, with keepalive on, the pinger.
func (cn *conn) start(cfg clientConfig) {
	extend := func() {}
	if cfg.pingInterval > 0 {
		extend = func() { _ = cn.ws.SetReadDeadline(time.Now().Add(cfg.pingInterval + cfg.pingTimeout)) }
		extend()
	}
	cn.ws.SetPingHandler(func(data string) error {
		extend()
		// A failed pong surfaces as a read error soon enough.
		_ = cn.ws.WriteControl(websocket.PongMessage, []byte(data), time.Now().Add(time.Second))
		return nil
	})
	cn.ws.SetPongHandler(func(string) error { extend(); return nil })
	cn.wg.Add(1)
	go func() {
		defer cn.wg.Done()
		cn.read(extend)
	}()
	if cfg.pingInterval > 0 {
		cn.wg.Add(1)
		go func() {
			defer cn.wg.Done()
			cn.ping(cfg.pingInterval, cfg.pingTimeout)
		}()
	}
}

// read is the connection's only reader, for its whole life.
func (cn *conn) read(extend func()) {
	defer close(cn.dead)
	for {
		mt, msg, err := cn.ws.ReadMessage()
		if err != nil {
			cn.err = fmt.Errorf("read: %w", err)
			_ = cn.ws.NetConn().Close()
			return
		}
		extend()
		if mt != websocket.TextMessage {
			cn.err = errors.New("server sent a binary frame")
			_ = cn.ws.NetConn().Close()
			return
		}
		select {
		case cn.frames <- msg:
		default:
			cn.err = fmt.Errorf("server sent more than %d frames nobody asked for", frameBacklog)
			_ = cn.ws.NetConn().Close()
			return
		}
	}
}

// ping sends keepalive pings until the connection ends.
func (cn *conn) ping(interval, timeout time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-cn.stop:
			return
		case <-cn.dead:
			return
		case <-t.C:
			if cn.ws.WriteControl(websocket.PingMessage, nil, time.Now().Add(timeout)) != nil {
				_ = cn.ws.NetConn().Close()
				return
			}
		}
	}
}

// queued returns a frame already received, if any.
func (cn *conn) queued() ([]byte, bool) {
	select {
	case raw := <-cn.frames:
		return raw, true
	default:
		return nil, false
	}
}

// close tears the connection down and waits for its goroutines.
func (cn *conn) close() {
	cn.once.Do(func() {
		close(cn.stop)
		_ = cn.ws.Close()
		cn.wg.Wait()
	})
}
