package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// killLoop is the kill-and-resume check: an uninterrupted reference run,
// then the same run killed cfg.kills times and resumed until it finishes,
// and the two runs' outputs compared.
func killLoop(ctx context.Context, cfg config, dir string, out io.Writer) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	ref, killed := filepath.Join(dir, "uninterrupted"), filepath.Join(dir, "killed")
	logPath := filepath.Join(dir, "runs.log")
	args := func(outDir string) []string {
		return append(append([]string{}, cfg.args...), "-save-steps", "1", "-out", outDir)
	}
	c, err := startChild(ctx, cfg.trainer, args(ref), logPath)
	if err != nil {
		return err
	}
	if err := c.wait(30 * time.Minute); err != nil {
		return fmt.Errorf("the uninterrupted run: %w (log: %s)", err, logPath)
	}
	whole := time.Since(c.start)
	fmt.Fprintf(out, "kill: uninterrupted run took %v\n", whole.Round(time.Millisecond))

	rng := rand.New(rand.NewPCG(cfg.seed, 23))
	kills, runs := 0, 0
	var lost time.Duration // time spent in runs that were killed
	finished := false
	for kills < cfg.kills && !finished {
		a := args(killed)
		if runs > 0 {
			a = append(a, "-resume")
		}
		c, err := startChild(ctx, cfg.trainer, a, logPath)
		if err != nil {
			return err
		}
		runs++
		// Odd kills: right after a temporary checkpoint folder appears;
		// even ones: at a random moment of a run's length.
		var how string
		var fired <-chan struct{}
		if kills%2 == 1 {
			how = "once a temporary checkpoint folder appeared"
			fired = watchTemp(ctx, killed, c.done)
		} else {
			d := time.Duration(rng.Int64N(int64(whole)))
			how = fmt.Sprintf("at %v", d.Round(time.Millisecond))
			fired = after(d, c.done)
		}
		select {
		case <-fired:
			c.kill()
			kills++
			lost += time.Since(c.start)
			fmt.Fprintf(out, "kill: run %d killed %s, after %v; left %s\n", runs, how, time.Since(c.start).Round(time.Millisecond), progress(killed))
		case <-c.done:
			if c.err != nil {
				return fmt.Errorf("run %d failed: %w (log: %s)", runs, c.err, logPath)
			}
			fmt.Fprintf(out, "kill: run %d finished before its kill (%s)\n", runs, how)
			finished = true
		}
	}
	if !finished {
		c, err := startChild(ctx, cfg.trainer, append(args(killed), "-resume"), logPath)
		if err != nil {
			return err
		}
		runs++
		if err := c.wait(30 * time.Minute); err != nil {
			return fmt.Errorf("the last resumed run: %w (log: %s)", err, logPath)
		}
		fmt.Fprintf(out, "kill: run %d finished, in %v\n", runs, time.Since(c.start).Round(time.Millisecond))
	}
	fmt.Fprintf(out, "kill: %d SIGKILLs over %d runs (%v of killed runs); comparing with the uninterrupted run\n", kills, runs, lost.Round(time.Millisecond))
	return compareRuns(ref, killed, out)
}

// after returns a channel closed d from now, or never if stop closes
// first.
func after(d time.Duration, stop <-chan struct{}) <-chan struct{} {
	ch := make(chan struct{})
	t := time.NewTimer(d)
	go func() { // exits with the timer or stop
		defer t.Stop()
		select {
		case <-t.C:
			close(ch)
		case <-stop:
		}
	}()
	return ch
}

// watchTemp returns a channel closed as soon as a temporary checkpoint
// folder (".checkpoint-N.tmp…") exists under out's sft/ or grpo/ folders,
// or never if stop closes first.
func watchTemp(ctx context.Context, out string, stop <-chan struct{}) <-chan struct{} {
	ch := make(chan struct{})
	go func() { // exits when it fires or the child is gone
		for {
			for _, sub := range []string{"sft", "grpo"} {
				entries, _ := os.ReadDir(filepath.Join(out, sub))
				for _, e := range entries {
					if strings.HasPrefix(e.Name(), ".checkpoint-") && strings.Contains(e.Name(), ".tmp") {
						close(ch)
						return
					}
				}
			}
			select {
			case <-stop:
				return
			case <-ctx.Done():
				return
			case <-time.After(200 * time.Microsecond):
			}
		}
	}()
	return ch
}

// progress says which checkpoints a killed run left.
func progress(out string) string {
	var parts []string
	for _, sub := range []string{"sft", "grpo"} {
		entries, _ := os.ReadDir(filepath.Join(out, sub))
		var cks, tmps []string
		for _, e := range entries {
			switch {
			case strings.HasPrefix(e.Name(), "checkpoint-"):
				cks = append(cks, strings.TrimPrefix(e.Name(), "checkpoint-"))
			case strings.HasPrefix(e.Name(), ".checkpoint-"):
				tmps = append(tmps, e.Name())
			}
		}
		s := fmt.Sprintf("%s checkpoints [%s]", sub, strings.Join(cks, " "))
		if len(tmps) > 0 {
			s += fmt.Sprintf(" and %d temporary folder(s)", len(tmps))
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, ", ")
}
