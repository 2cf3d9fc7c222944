// Command envload is a load generator for OpenEnv servers: it opens many
// concurrent WebSocket sessions, speaks raw OpenEnv frames on each (reset,
// then step after step, resetting when an episode ends) for a bounded time
// and number of steps, and reports steps/s, p50/p99/max step latency,
// sessions opened/failed/lost, the server's CPU time per request and its
// resident memory per idle session (both from /proc), and its own CPU time
// per request. It stops by itself; SIGINT or SIGTERM stops it at once.
//
//	go run ./env/cmd/envload -env echo -sessions 1024 -duration 10s
//
// By default it starts the server itself, as a child process (this
// executable again, serving -env with the server's defaults, as
// envserver does), so that the server's /proc figures are its own; the
// child exits when envload does. -addr targets a server that is already
// running instead, and only on 127.0.0.1 or [::1]; -pid then names its
// process for the /proc figures.
//
// Memory per idle session is the server's VmRSS after opening and
// resetting every session, minus its VmRSS before, divided by the
// sessions; "after GC" has the child run a GC and return freed memory to
// the OS first (the memory the sessions hold), "as found" does not.
//
// -cpuprofile FILE writes the started server's CPU profile during the load.
// The exit status is 1 when any session failed to open or was lost.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"
)

func main() {
	if os.Getenv(childEnvVar) == "1" {
		if err := serveChild(os.Args[1:], os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "envload server child:", err)
			os.Exit(1)
		}
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	code := mainStatus(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// mainStatus runs the command line and returns the exit status.
func mainStatus(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "envload:", err)
		return 2
	}
	res, err := run(ctx, cfg)
	if err != nil {
		fmt.Fprintln(stderr, "envload:", err)
		return 1
	}
	res.write(stdout)
	if res.failed > 0 || res.lost > 0 {
		fmt.Fprintf(stderr, "envload: %d sessions failed to open, %d lost\n", res.failed, res.lost)
		return 1
	}
	return 0
}

// Bounds on the command line, so that no run is unbounded.
const (
	maxSessions    = 16384
	maxDuration    = 10 * time.Minute
	maxTotalSteps  = 5_000_000 // latencies kept: 40 MB
	maxThink       = 10 * time.Second
	maxIdleWait    = time.Minute
	maxDialWorkers = 1024
	// maxOpenTime bounds opening all the sessions (each dial and first
	// reset may take roundTripTimeout, so a server that stalls would
	// otherwise hold -sessions/-dial-parallel of them in turn: hours).
	// Sessions not open by then count as failed.
	maxOpenTime = 5 * time.Minute
)

// config is the command line.
type config struct {
	env      string
	sessions int
	duration time.Duration
	steps    int // per session; 0: until duration
	think    time.Duration
	addr     string // "" starts a server child
	pid      int
	seed     uint64
	idleWait time.Duration
	parallel int
	profile  string // CPU profile of the started server during the load
}

// parseFlags reads and checks the command line.
func parseFlags(args []string, stderr io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("envload", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.env, "env", "echo", "environment: catch, echo, guess or wordle")
	fs.IntVar(&c.sessions, "sessions", 64, "concurrent sessions (at most 16384)")
	fs.DurationVar(&c.duration, "duration", 10*time.Second, "how long the load runs (at most 10m)")
	fs.IntVar(&c.steps, "steps", 0, "steps per session at most (0: until -duration; 5,000,000 in all at most)")
	fs.DurationVar(&c.think, "think", 0, "pause between one reply and the next request of a session (0: closed loop)")
	fs.StringVar(&c.addr, "addr", "", "load a running server at 127.0.0.1:PORT or [::1]:PORT instead of starting one")
	fs.IntVar(&c.pid, "pid", 0, "with -addr: the server's process id, for its CPU time and memory")
	fs.Uint64Var(&c.seed, "seed", 1, "seed of the started server's environments")
	fs.DurationVar(&c.idleWait, "idle-wait", time.Second, "pause after opening the sessions before measuring idle memory")
	fs.IntVar(&c.parallel, "dial-parallel", 64, "sessions opened at once")
	fs.StringVar(&c.profile, "cpuprofile", "", "write the started server's CPU profile during the load to this file")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	if _, err := stepFrames(c.env); err != nil {
		return c, err
	}
	switch {
	case c.sessions < 1 || c.sessions > maxSessions:
		return c, fmt.Errorf("-sessions %d: want 1 to %d", c.sessions, maxSessions)
	case c.duration < 100*time.Millisecond || c.duration > maxDuration:
		return c, fmt.Errorf("-duration %s: want 100ms to %s", c.duration, maxDuration)
	case c.steps < 0 || c.steps > maxTotalSteps:
		return c, fmt.Errorf("-steps %d: want 0 to %d", c.steps, maxTotalSteps)
	case c.think < 0 || c.think > maxThink:
		return c, fmt.Errorf("-think %s: want 0 to %s", c.think, maxThink)
	case c.idleWait < 0 || c.idleWait > maxIdleWait:
		return c, fmt.Errorf("-idle-wait %s: want 0 to %s", c.idleWait, maxIdleWait)
	case c.parallel < 1 || c.parallel > maxDialWorkers:
		return c, fmt.Errorf("-dial-parallel %d: want 1 to %d", c.parallel, maxDialWorkers)
	case c.pid < 0:
		return c, fmt.Errorf("-pid %d: want a process id", c.pid)
	case c.pid > 0 && c.addr == "":
		return c, errors.New("-pid needs -addr: the started server's pid is known")
	case c.profile != "" && c.addr != "":
		return c, errors.New("-cpuprofile profiles the started server: not with -addr")
	}
	if c.addr != "" {
		if err := checkLoopback(c.addr); err != nil {
			return c, err
		}
	}
	return c, nil
}

// checkLoopback accepts only 127.0.0.1:PORT and [::1]:PORT: the load
// generator never sends to another machine.
func checkLoopback(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("-addr %q: want 127.0.0.1:PORT or [::1]:PORT: %w", addr, err)
	}
	ip := net.ParseIP(host)
	if ip == nil || !(ip.Equal(net.IPv4(127, 0, 0, 1)) || ip.Equal(net.IPv6loopback)) {
		return fmt.Errorf("-addr %q: only 127.0.0.1 or [::1] may be loaded", addr)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("-addr %q: port %q is not 1 to 65535", addr, port)
	}
	return nil
}

// run starts (or finds) the server, opens the sessions, measures idle
// memory, runs the load and closes the sessions.
func run(ctx context.Context, cfg config) (*result, error) {
	steps, err := stepFrames(cfg.env)
	if err != nil {
		return nil, err
	}
	res := &result{cfg: cfg, cpus: runtime.NumCPU()}
	if res.loadAvg, err = loadAverage(); err != nil {
		return nil, err
	}
	if err := raiseFileLimit(uint64(cfg.sessions) + 256); err != nil {
		return nil, err
	}
	addr, pid := cfg.addr, cfg.pid
	var ch *child
	if addr == "" {
		if ch, err = startChild(ctx, cfg.env, cfg.sessions, cfg.seed); err != nil {
			return nil, err
		}
		defer func() { _ = ch.stop() }()
		addr, pid = ch.addr, ch.pid()
	}
	res.serverPID = pid
	if err := checkLoopback(addr); err != nil {
		return nil, fmt.Errorf("server child: %w", err)
	}

	// Before: the server with no session.
	if ch != nil {
		if _, err := ch.command("gc"); err != nil {
			return nil, err
		}
		if res.before, err = ch.stats(); err != nil {
			return nil, err
		}
	}
	if pid > 0 {
		if res.rssBase, err = procRSS(pid); err != nil {
			return nil, err
		}
	}

	openCtx, cancelOpen := context.WithTimeoutCause(ctx, maxOpenTime,
		fmt.Errorf("the sessions were not all open within %s", maxOpenTime))
	sessions, errs := openSessions(openCtx, "ws://"+addr+"/ws", cfg.sessions, cfg.parallel)
	cancelOpen()
	res.opened, res.failed, res.failErr = len(sessions), len(errs), errSummary(errs)
	defer func() {
		for _, s := range sessions {
			s.close()
		}
	}()
	if len(sessions) == 0 {
		return nil, fmt.Errorf("no session opened: %w", res.failErr)
	}

	// Idle: every session open and reset, none busy.
	select {
	case <-time.After(cfg.idleWait):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if pid > 0 {
		if res.rssIdleAsFound, err = procRSS(pid); err != nil {
			return nil, err
		}
	}
	if ch != nil {
		if _, err := ch.command("gc"); err != nil {
			return nil, err
		}
		if res.idle, err = ch.stats(); err != nil {
			return nil, err
		}
		if res.rssIdle, err = procRSS(pid); err != nil {
			return nil, err
		}
	}

	// Load.
	var cpu0, cpu1 time.Duration // the server's, around the load
	if pid > 0 {
		if cpu0, err = procCPU(pid); err != nil {
			return nil, err
		}
	}
	if cfg.profile != "" {
		path, err := filepath.Abs(cfg.profile)
		if err != nil {
			return nil, fmt.Errorf("-cpuprofile: %w", err)
		}
		if _, err := ch.command("profile " + path); err != nil {
			return nil, err
		}
	}
	self0, err := procCPU(os.Getpid())
	if err != nil {
		return nil, err
	}
	start := make(chan struct{})
	results := make(chan driveResult, len(sessions))
	var budget atomic.Int64
	budget.Store(maxTotalSteps)
	t0 := time.Now()
	deadline := t0.Add(cfg.duration)
	for _, s := range sessions {
		go func() { results <- drive(ctx, s, steps, start, deadline, cfg.steps, cfg.think, &budget) }()
	}
	// An interrupt ends the load now: every session stops before its next
	// request, and a reply being awaited is given up at once.
	stopCut := context.AfterFunc(ctx, func() {
		for _, s := range sessions {
			_ = s.ws.NetConn().SetDeadline(time.Now())
		}
	})
	defer stopCut()
	close(start)
	var lat []time.Duration
	var lost []error
	for range sessions {
		r := <-results
		lat = append(lat, r.latencies...)
		res.resets += r.resets
		if r.err != nil {
			lost = append(lost, r.err)
		}
	}
	res.elapsed = time.Since(t0)
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("load interrupted after %s: %w", res.elapsed.Round(time.Millisecond), err)
	}
	self1, err := procCPU(os.Getpid())
	if err != nil {
		return nil, err
	}
	res.clientCPU = self1 - self0
	if cfg.profile != "" {
		if _, err := ch.command("endprofile"); err != nil {
			return nil, err
		}
	}
	if pid > 0 {
		if cpu1, err = procCPU(pid); err != nil {
			return nil, err
		}
		res.serverCPU = cpu1 - cpu0
	}
	res.steps = len(lat)
	res.lat = percentiles(lat)
	res.lost, res.lostErr = len(lost), errSummary(lost)
	return res, nil
}
