// Command envserver serves a built-in environment over the OpenEnv
// protocol, for any OpenEnv client (Python's EnvClient, TRL, or the Go
// client in package openenv):
//
//	go run ./env/cmd/envserver -env wordle -port 8001
//
// -env is echo, wordle, catch or guess. By default each speaks its
// classic OpenEnv actions (as the Python servers do); -tools serves its
// tool-style form with MCP-style list_tools/call_tool actions instead.
//
// It listens on host:port with WS /ws, GET /health, /metadata, /schema,
// /state, /openapi.json and POST /reset, /step, /mcp (see package openenv
// for where these differ from the Python server). The session limit defaults to
// $MAX_CONCURRENT_ENVS (else 1024); the bearer token to $OPENENV_TOKEN.
// SIGINT or SIGTERM ends every session (closing its env) and exits.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/x/env/internal/builtin"
	"github.com/x/env/openenv"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	code := exitCode(run(ctx, os.Args[1:], os.Getenv, os.Stderr, nil), os.Stderr)
	stop()
	os.Exit(code)
}

// exitCode reports err on stderr and returns the process's exit status:
// 0 for nil and for -help (flag has printed the usage), 1 otherwise.
func exitCode(err error, stderr io.Writer) int {
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	}
	fmt.Fprintln(stderr, "envserver:", err)
	return 1
}

// config is the command line.
type config struct {
	env         string
	host        string
	port        int
	maxSessions int
	slotWait    time.Duration
	idleTimeout time.Duration
	ping        time.Duration
	token       string
	seed        uint64
	tools       bool
}

// parseFlags reads the command line; getenv supplies the defaults taken
// from the environment.
func parseFlags(args []string, getenv func(string) string, stderr io.Writer) (config, error) {
	var c config
	maxDefault := openenv.DefaultMaxSessions
	if v := getenv("MAX_CONCURRENT_ENVS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return c, fmt.Errorf("MAX_CONCURRENT_ENVS=%q: want a positive integer", v)
		}
		maxDefault = n
	}
	fs := flag.NewFlagSet("envserver", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.env, "env", "echo", "environment to serve: "+strings.Join(builtin.Names(), ", "))
	fs.StringVar(&c.host, "host", "127.0.0.1", "address to listen on (0.0.0.0 for all interfaces)")
	fs.IntVar(&c.port, "port", 8000, "port to listen on (0 picks a free one)")
	fs.IntVar(&c.maxSessions, "max-sessions", maxDefault, "concurrent WebSocket sessions (taken from $MAX_CONCURRENT_ENVS when set)")
	fs.DurationVar(&c.slotWait, "slot-wait", 0, "how long a connection may wait for a free session slot before CAPACITY_REACHED")
	fs.DurationVar(&c.idleTimeout, "idle-timeout", openenv.DefaultIdleTimeout, "close sessions idle this long (0 disables)")
	fs.DurationVar(&c.ping, "ping", openenv.DefaultPingInterval, "keepalive ping interval; a peer silent for twice this is dropped (0 disables)")
	fs.StringVar(&c.token, "token", "", "require this bearer token on all but /health ($OPENENV_TOKEN when not given; never printed)")
	fs.Uint64Var(&c.seed, "seed", 0, "seed for the environments' randomness (episode ids, secret words)")
	fs.BoolVar(&c.tools, "tools", false, "serve the tool-style env with MCP-style list_tools/call_tool actions instead of its classic OpenEnv actions")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	tokenSet := false
	fs.Visit(func(f *flag.Flag) { tokenSet = tokenSet || f.Name == "token" })
	if !tokenSet {
		c.token = getenv("OPENENV_TOKEN")
	}
	if _, err := builtin.Factory(c.env, c.seed, c.tools); err != nil {
		return c, err
	}
	if c.port < 0 || c.port > 65535 {
		return c, fmt.Errorf("-port %d: out of range", c.port)
	}
	if c.maxSessions < 1 {
		return c, fmt.Errorf("-max-sessions %d: want at least 1", c.maxSessions)
	}
	return c, nil
}

// run serves until ctx ends, then shuts down gracefully. ready, when not
// nil, receives the listening address.
func run(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer, ready func(addr string)) error {
	cfg, err := parseFlags(args, getenv, stderr)
	if err != nil {
		return err
	}
	factory, err := builtin.Factory(cfg.env, cfg.seed, cfg.tools)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	srv := openenv.NewServer(factory,
		openenv.WithName(cfg.env),
		openenv.WithMaxSessions(cfg.maxSessions),
		openenv.WithSlotWait(cfg.slotWait),
		openenv.WithIdleTimeout(cfg.idleTimeout),
		openenv.WithPing(cfg.ping, cfg.ping),
		openenv.RequireBearerToken(cfg.token),
		openenv.WithLogger(log),
	)
	ln, err := net.Listen("tcp", net.JoinHostPort(cfg.host, strconv.Itoa(cfg.port)))
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	log.Info("serving", "env", cfg.env, "addr", "http://"+ln.Addr().String(), "max_sessions", cfg.maxSessions)
	if ready != nil {
		ready(ln.Addr().String())
	}

	select {
	case err := <-served:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	log.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	errWS := srv.Shutdown(sctx)
	errHTTP := hs.Shutdown(sctx)
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", err)
	}
	return errors.Join(errWS, errHTTP)
}
