package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/x/grpo"
)

// serverRestart runs the trainer against an OpenEnv Wordle server that is
// killed with SIGKILL once GRPO has taken its first step. With comeBack it
// is started again cfg.down later and the run must finish; without, the
// run must end with an error naming the unreachable server.
func serverRestart(ctx context.Context, cfg config, dir string, out io.Writer, comeBack bool) error {
	mode := "dead"
	if comeBack {
		mode = "restart"
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	url := "http://127.0.0.1:" + strconv.Itoa(port)
	serverLog, trainLog := filepath.Join(dir, "server.log"), filepath.Join(dir, "trainer.log")
	serverArgs := []string{"-env", "wordle", "-port", strconv.Itoa(port)}
	srv, err := startServer(ctx, cfg.server, serverArgs, serverLog, url)
	if err != nil {
		return err
	}
	defer func() { srv.kill() }()

	outDir := filepath.Join(dir, "out")
	tr, err := startChild(ctx, cfg.trainer, append(append([]string{}, cfg.args...), "-env-url", url, "-out", outDir), trainLog)
	if err != nil {
		return err
	}
	defer tr.kill()
	select {
	case <-tr.mark("grpo step 1/"):
	case <-tr.done:
		return fmt.Errorf("the run ended before GRPO's first step: %v (log: %s)", tr.err, trainLog)
	}
	time.Sleep(cfg.killDelay) // into step 2, its games in play
	srv.kill()
	downAt := time.Since(tr.start)
	fmt.Fprintf(out, "%s: env server killed (SIGKILL) %v into the run, %v after GRPO step 1\n", mode, downAt.Round(time.Millisecond), cfg.killDelay)
	if !comeBack {
		begin := time.Now()
		err := tr.wait(10 * time.Minute)
		if err == nil {
			return errors.New("the run finished with its env server dead")
		}
		tail := lastLines(trainLog, "wordle:")
		fmt.Fprintf(out, "dead: the run ended %v after the server died, exit %v: %s\n", time.Since(begin).Round(time.Millisecond), err, tail)
		if !strings.Contains(tail, "connection refused") || !strings.Contains(tail, "RolloutRetryBudget") {
			return fmt.Errorf("the run's error does not say the server was unreachable: %s", tail)
		}
		return nil
	}
	select {
	case <-time.After(cfg.down):
	case <-tr.done:
		return fmt.Errorf("the run ended while the server was down: %v (log: %s)", tr.err, trainLog)
	}
	if srv, err = startServer(ctx, cfg.server, serverArgs, serverLog, url); err != nil {
		return err
	}
	fmt.Fprintf(out, "restart: env server back after %v\n", cfg.down)
	if err := tr.wait(30 * time.Minute); err != nil {
		return fmt.Errorf("the run did not survive the restart: %w (log: %s)", err, trainLog)
	}
	steps, err := grpo.ReadMetrics(filepath.Join(outDir, "grpo", grpo.MetricsFile))
	if err != nil {
		return err
	}
	var replayed, failed, tools float64
	for _, s := range steps {
		replayed += s.Metrics[grpo.MetricRolloutsReplayed]
		failed += s.Metrics[grpo.MetricRolloutsFailed]
		tools += s.Metrics[grpo.MetricTimeTools]
	}
	fmt.Fprintf(out, "restart: the run finished %v after the kill: %d GRPO steps, %.0f rollouts replayed, %.0f left out, %.1f s waiting on the env\n",
		(time.Since(tr.start) - downAt).Round(time.Millisecond), len(steps), replayed, failed, tools)
	return nil
}

// startServer starts the env server and waits for its /health.
func startServer(ctx context.Context, bin string, args []string, logPath, url string) (*child, error) {
	c, err := startChild(ctx, bin, args, logPath)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		conn, err := net.DialTimeout("tcp", strings.TrimPrefix(url, "http://"), time.Second)
		if err == nil {
			conn.Close()
			return c, nil
		}
		select {
		case <-c.done:
			return nil, fmt.Errorf("the env server exited: %v (log: %s)", c.err, logPath)
		case <-time.After(20 * time.Millisecond):
		}
	}
	c.kill()
	return nil, fmt.Errorf("the env server did not listen within 30 s (log: %s)", logPath)
}

// freePort asks the kernel for a free TCP port.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// lastLines returns the log's last line starting with prefix, bounded.
func lastLines(path, prefix string) string {
	data, _ := os.ReadFile(path)
	var last string
	for _, l := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(l, prefix) {
			last = l
		}
	}
	if len(last) > 600 {
		last = last[:600] + "…"
	}
	return last
}
