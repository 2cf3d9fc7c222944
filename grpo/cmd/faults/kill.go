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
// then campaigns of the same run, each killed again and again and resumed
// until it finishes, until cfg.kills kills are done; every campaign's
// outputs are compared with the reference's.
func killLoop(ctx context.Context, cfg config, dir string, out io.Writer) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	ref := filepath.Join(dir, "uninterrupted")
	logPath := filepath.Join(dir, "runs.log")
	c, err := startChild(ctx, cfg.trainer, killArgs(cfg, ref), logPath)
	if err != nil {
		return err
	}
	if err := c.wait(30 * time.Minute); err != nil {
		return fmt.Errorf("the uninterrupted run: %w (log: %s)", err, logPath)
	}
	whole := time.Since(c.start)
	fmt.Fprintf(out, "kill: uninterrupted run took %v\n", whole.Round(time.Millisecond))

	rng := rand.New(rand.NewPCG(cfg.seed, 23))
	kills := 0
	for campaign := 1; kills < cfg.kills; campaign++ {
		n, err := killCampaign(ctx, cfg, filepath.Join(dir, fmt.Sprintf("killed-%d", campaign)), logPath, whole, cfg.kills-kills, rng, out)
		if err != nil {
			return err
		}
		kills += n
		if n == 0 && campaign > 3 {
			return fmt.Errorf("%d campaigns finished without a kill", campaign)
		}
		if err := compareRuns(ref, filepath.Join(dir, fmt.Sprintf("killed-%d", campaign)), out); err != nil {
			return fmt.Errorf("campaign %d: %w", campaign, err)
		}
	}
	return nil
}

// killArgs is the trainer's command line writing into outDir, with a
// checkpoint every step.
func killArgs(cfg config, outDir string) []string {
	return append(append([]string{}, cfg.args...), "-save-steps", "1", "-out", outDir)
}

// killCampaign runs the trainer into dir, killing it up to budget times
// (odd kills right after a new temporary checkpoint folder appears, even
// ones at a random moment of a run's length) and resuming it each time,
// until a run finishes. It returns the kills made.
func killCampaign(ctx context.Context, cfg config, dir, logPath string, whole time.Duration, budget int, rng *rand.Rand, out io.Writer) (int, error) {
	kills, runs := 0, 0
	var lost time.Duration // time spent in runs that were killed
	for {
		a := killArgs(cfg, dir)
		if runs > 0 {
			a = append(a, "-resume")
		}
		known := tempNames(dir) // left by the last kill: the next run removes them
		c, err := startChild(ctx, cfg.trainer, a, logPath)
		if err != nil {
			return kills, err
		}
		runs++
		if kills >= budget {
			if err := c.wait(30 * time.Minute); err != nil {
				return kills, fmt.Errorf("the last resumed run: %w (log: %s)", err, logPath)
			}
			fmt.Fprintf(out, "kill: %s: run %d finished in %v\n", filepath.Base(dir), runs, time.Since(c.start).Round(time.Millisecond))
			break
		}
		var how string
		var fired <-chan struct{}
		if kills%2 == 1 {
			how = "once a new temporary checkpoint folder appeared"
			fired = watchTemp(ctx, dir, known, c.done)
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
			fmt.Fprintf(out, "kill: %s: run %d killed %s, after %v; left %s\n", filepath.Base(dir), runs, how, time.Since(c.start).Round(time.Millisecond), progress(dir))
			continue
		case <-c.done:
		}
		if c.err != nil {
			return kills, fmt.Errorf("run %d failed: %w (log: %s)", runs, c.err, logPath)
		}
		fmt.Fprintf(out, "kill: %s: run %d finished before its kill (%s)\n", filepath.Base(dir), runs, how)
		break
	}
	fmt.Fprintf(out, "kill: %s: %d SIGKILLs over %d runs (%v of killed runs); comparing with the uninterrupted run\n", filepath.Base(dir), kills, runs, lost.Round(time.Millisecond))
	return kills, nil
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
// folder (".checkpoint-N.tmp…") not in known exists under out's sft/ or
// grpo/ folders, or never if stop closes first.
func watchTemp(ctx context.Context, out string, known map[string]bool, stop <-chan struct{}) <-chan struct{} {
	ch := make(chan struct{})
	go func() { // exits when it fires or the child is gone
		for {
			for name := range tempNames(out) {
				if !known[name] {
					close(ch)
					return
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

// tempNames are the temporary checkpoint folders under out's sft/ and
// grpo/ folders.
func tempNames(out string) map[string]bool {
	names := map[string]bool{}
	for _, sub := range []string{"sft", "grpo"} {
		entries, _ := os.ReadDir(filepath.Join(out, sub))
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), ".checkpoint-") && strings.Contains(e.Name(), ".tmp") {
				names[filepath.Join(sub, e.Name())] = true
			}
		}
	}
	return names
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
