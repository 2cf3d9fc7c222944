package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// child is a started process whose output goes to a log file and is
// watched line by line.
type child struct {
	cmd   *exec.Cmd
	start time.Time
	done  chan struct{} // closed once it has exited
	err   error         // its exit status; read after done
	log   *os.File

	mu    sync.Mutex
	marks map[string]chan struct{} // closed when a line holds the key
}

// startChild runs bin with args, its stdout and stderr appended to logPath.
func startChild(ctx context.Context, bin string, args []string, logPath string) (*child, error) {
	log, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(log, "\n$ %s %s\n", bin, strings.Join(args, " "))
	cmd := exec.CommandContext(ctx, bin, args...)
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	c := &child{cmd: cmd, done: make(chan struct{}), log: log, marks: map[string]chan struct{}{}}
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	c.start = time.Now()
	scanned := make(chan struct{})
	go func() { // the reader: owned by wait, which waits for it
		defer close(scanned)
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(log, line)
			c.mu.Lock()
			for k, ch := range c.marks {
				if strings.Contains(line, k) {
					close(ch)
					delete(c.marks, k)
				}
			}
			c.mu.Unlock()
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	go func() {
		c.err = cmd.Wait()
		pw.Close()
		<-scanned
		log.Close()
		close(c.done)
	}()
	return c, nil
}

// mark returns a channel closed when an output line contains s (from now
// on).
func (c *child) mark(s string) <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan struct{})
	c.marks[s] = ch
	return ch
}

// kill sends SIGKILL and waits for the process to be gone.
func (c *child) kill() {
	_ = c.cmd.Process.Signal(syscall.SIGKILL)
	<-c.done
}

// wait waits for the exit, at most d.
func (c *child) wait(d time.Duration) error {
	select {
	case <-c.done:
		return c.err
	case <-time.After(d):
		c.kill()
		return fmt.Errorf("still running after %v: killed", d)
	}
}
