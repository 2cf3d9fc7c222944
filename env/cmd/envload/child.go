package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/x/env/internal/builtin"
	"github.com/x/env/openenv"
)

// childEnvVar makes the executable run as the server child instead of the
// load generator (envload starts itself again with it set).
const childEnvVar = "ENVLOAD_SERVER_CHILD"

// serveChild is the server child: it serves env on 127.0.0.1 with the
// server's defaults (keepalive, idle reaper, limits, as envserver), prints
// "listening ADDR", then answers commands on stdin, one a line:
//
//	gc             runtime.GC and debug.FreeOSMemory, then "ok"
//	stats          "goroutines=N heap_inuse=B stack_inuse=B"
//	profile FILE   start a CPU profile into FILE, then "ok"
//	endprofile     stop it, then "ok"
//
// It shuts down when stdin closes, so it never outlives its parent.
func serveChild(args []string, stdin io.Reader, stdout io.Writer) error {
	fs := flag.NewFlagSet("envload server child", flag.ContinueOnError)
	name := fs.String("env", "echo", "environment")
	maxSessions := fs.Int("max-sessions", openenv.DefaultMaxSessions, "session limit")
	seed := fs.Uint64("seed", 1, "seed")
	if err := fs.Parse(args); err != nil {
		return err
	}
	factory, err := builtin.Factory(*name, *seed, false)
	if err != nil {
		return err
	}
	if err := raiseFileLimit(uint64(*maxSessions) + 256); err != nil {
		return err
	}
	srv := openenv.NewServer(factory, openenv.WithName(*name), openenv.WithMaxSessions(*maxSessions))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	if _, err := fmt.Fprintf(stdout, "listening %s\n", ln.Addr()); err != nil {
		return fmt.Errorf("report address: %w", err)
	}
	var profile *os.File
	defer func() {
		if profile != nil {
			pprof.StopCPUProfile()
			_ = profile.Close()
		}
	}()
	sc := bufio.NewScanner(stdin)
	for sc.Scan() {
		var reply string
		cmd, arg, _ := strings.Cut(strings.TrimSpace(sc.Text()), " ")
		switch cmd {
		case "profile":
			reply = "ok"
			f, err := os.Create(arg)
			if err == nil {
				err = pprof.StartCPUProfile(f)
			}
			if err != nil {
				reply = "error " + err.Error()
				break
			}
			profile = f
		case "endprofile":
			reply = "ok"
			if profile == nil {
				reply = "error no profile running"
				break
			}
			pprof.StopCPUProfile()
			if err := profile.Close(); err != nil {
				reply = "error " + err.Error()
			}
			profile = nil
		case "gc":
			runtime.GC()
			debug.FreeOSMemory()
			reply = "ok"
		case "stats":
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			reply = fmt.Sprintf("goroutines=%d heap_inuse=%d stack_inuse=%d", runtime.NumGoroutine(), m.HeapInuse, m.StackInuse)
		default:
			reply = fmt.Sprintf("error unknown command %q", cmd)
		}
		if _, err := fmt.Fprintln(stdout, reply); err != nil {
			break
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	errWS := srv.Shutdown(ctx)
	errHTTP := hs.Shutdown(ctx)
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", err)
	}
	return errors.Join(errWS, errHTTP)
}

// child is the parent's handle on a running server child.
type child struct {
	cmd  *exec.Cmd
	in   io.WriteCloser
	out  *bufio.Reader
	addr string
}

// startChild starts this executable as a server child and waits for its
// address.
func startChild(ctx context.Context, env string, maxSessions int, seed uint64) (*child, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find this executable to start the server child: %w", err)
	}
	cmd := exec.CommandContext(ctx, exe, "-env", env, "-max-sessions", strconv.Itoa(maxSessions), "-seed", strconv.FormatUint(seed, 10))
	cmd.Env = append(os.Environ(), childEnvVar+"=1")
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("server child stdin: %w", err)
	}
	outPipe, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("server child stdout: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start server child: %w", err)
	}
	c := &child{cmd: cmd, in: in, out: bufio.NewReader(outPipe)}
	line, err := c.readLine(30 * time.Second)
	if err != nil {
		_ = c.stop()
		return nil, fmt.Errorf("server child did not report its address: %w", err)
	}
	addr, ok := strings.CutPrefix(line, "listening ")
	if !ok {
		_ = c.stop()
		return nil, fmt.Errorf("server child said %q, want \"listening ADDR\"", line)
	}
	c.addr = addr
	return c, nil
}

// pid is the child's process id, for /proc.
func (c *child) pid() int { return c.cmd.Process.Pid }

// readLine reads one line of the child's output within d.
func (c *child) readLine(d time.Duration) (string, error) {
	type result struct {
		line string
		err  error
	}
	got := make(chan result, 1)
	go func() {
		s, err := c.out.ReadString('\n')
		got <- result{strings.TrimSpace(s), err}
	}()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case r := <-got:
		if r.err != nil {
			return "", fmt.Errorf("read from server child: %w", r.err)
		}
		return r.line, nil
	case <-t.C:
		// The reader goroutine ends when stop closes the pipe.
		return "", fmt.Errorf("no answer from server child within %s", d)
	}
}

// command sends one command line and returns the answer.
func (c *child) command(cmd string) (string, error) {
	if _, err := fmt.Fprintln(c.in, cmd); err != nil {
		return "", fmt.Errorf("send %q to server child: %w", cmd, err)
	}
	line, err := c.readLine(30 * time.Second)
	if err != nil {
		return "", err
	}
	if strings.HasPrefix(line, "error ") {
		return "", fmt.Errorf("server child: %s", line)
	}
	return line, nil
}

// childStats is the child's answer to "stats".
type childStats struct {
	goroutines            int
	heapInuse, stackInuse int64
}

// stats asks the child for its goroutine count and heap and stack in use.
func (c *child) stats() (childStats, error) {
	line, err := c.command("stats")
	if err != nil {
		return childStats{}, err
	}
	var s childStats
	if _, err := fmt.Sscanf(line, "goroutines=%d heap_inuse=%d stack_inuse=%d", &s.goroutines, &s.heapInuse, &s.stackInuse); err != nil {
		return childStats{}, fmt.Errorf("parse server child stats %q: %w", line, err)
	}
	return s, nil
}

// stop closes the child's stdin (it shuts its server down and exits) and
// waits for it, killing it after 15 s.
func (c *child) stop() error {
	_ = c.in.Close()
	done := make(chan error, 1)
	go func() { done <- c.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("server child: %w", err)
		}
		return nil
	case <-time.After(15 * time.Second):
		_ = c.cmd.Process.Kill()
		<-done
		return errors.New("server child did not exit within 15 s of its stdin closing: killed")
	}
}

// raiseFileLimit lifts RLIMIT_NOFILE to at least need, or says why not.
func raiseFileLimit(need uint64) error {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return fmt.Errorf("getrlimit: %w", err)
	}
	if lim.Cur >= need {
		return nil
	}
	cur := lim.Cur
	lim.Cur = min(need, lim.Max)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return fmt.Errorf("need %d open files, the limit is %d and raising it failed (%w): raise ulimit -n", need, cur, err)
	}
	if lim.Cur < need {
		return fmt.Errorf("need %d open files, the hard limit is %d: raise ulimit -Hn", need, lim.Max)
	}
	return nil
}
