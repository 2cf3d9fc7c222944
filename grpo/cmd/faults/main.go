// Command faults runs the trainer under the faults a long run meets and
// checks that they cost retries, never the run (README, "Reliability"):
//
//	go build -o bin/wordle ./examples/wordle && go build -o bin/envserver ./env/cmd/envserver
//	go run ./grpo/cmd/faults -trainer bin/wordle -server bin/envserver
//
// kill: a small Wordle run (warm start, then GRPO, a checkpoint every
// step) is killed with SIGKILL again and again, at random moments and
// right after a temporary checkpoint folder appears, and restarted with
// -resume each time until it finishes; its outputs must equal those of an
// uninterrupted run: the adapter, the final checkpoints, the evaluation
// table and the completions byte for byte, the metrics logs but for
// wall-time figures, and no temporary folder left. A run that finishes
// before its next kill ends a campaign; campaigns go on until -kills
// kills were made, each compared.
//
// restart: the same run plays on an OpenEnv Wordle server
// (env/cmd/envserver) that is killed with SIGKILL during GRPO and started
// again -down later; the run must finish. dead: the server is killed and
// never comes back; the run must end with an error saying so.
//
// It prints what it measured, one line per event, and exits 1 when a
// check fails.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "faults:", err)
		stop()
		os.Exit(1)
	}
}

// config is the command line.
type config struct {
	modes   []string
	trainer string // the examples/wordle binary
	server  string // the env/cmd/envserver binary
	work    string
	kills   int
	down    time.Duration
	// killDelay is how long after GRPO's first step the server dies.
	killDelay time.Duration
	seed      uint64
	args      []string // the trainer's run, without -out
}

// defaultRun is a Wordle run small enough to be killed many times: a warm
// start of 6 steps and 6 GRPO steps of 2 words × 4 rollouts on the
// embedded model at hidden size 32.
const defaultRun = "-words crane,plant,brick,chart -sft-words 2 -sft-steps 6 -steps 6 -prompts 2 -generations 4 -hidden 32 -threads 1"

func parseFlags(args []string, stderr io.Writer) (config, error) {
	var c config
	var modes, trainArgs string
	fs := flag.NewFlagSet("faults", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&modes, "modes", "kill,restart,dead", "what to run: kill, restart, dead (comma-separated)")
	fs.StringVar(&c.trainer, "trainer", "bin/wordle", "the examples/wordle binary")
	fs.StringVar(&c.server, "server", "bin/envserver", "the env/cmd/envserver binary (restart, dead)")
	fs.StringVar(&c.work, "work", "", "folder for the runs' outputs (default: a temporary one, removed afterwards)")
	fs.IntVar(&c.kills, "kills", 12, "SIGKILLs of the kill loop before it lets the run finish")
	fs.DurationVar(&c.down, "down", 30*time.Second, "how long the env server stays down (restart)")
	fs.DurationVar(&c.killDelay, "kill-delay", 500*time.Millisecond, "how long after GRPO's first step the env server is killed (restart, dead)")
	fs.Uint64Var(&c.seed, "seed", 1, "seed of the kill moments")
	fs.StringVar(&trainArgs, "run", defaultRun, "the trainer's arguments (besides -out, -save-steps, -resume, -env-url)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	for _, m := range strings.Split(modes, ",") {
		switch m = strings.TrimSpace(m); m {
		case "kill", "restart", "dead":
			c.modes = append(c.modes, m)
		case "":
		default:
			return c, fmt.Errorf("-modes: unknown mode %q (want kill, restart, dead)", m)
		}
	}
	if c.kills < 1 || c.down < 0 || c.killDelay < 0 {
		return c, errors.New("want -kills ≥ 1, -down ≥ 0 and -kill-delay ≥ 0")
	}
	c.args = strings.Fields(trainArgs)
	return c, nil
}

func run(ctx context.Context, args []string, out io.Writer) error {
	cfg, err := parseFlags(args, out)
	if err != nil {
		return err
	}
	for _, bin := range []string{cfg.trainer, cfg.server} {
		if _, err := os.Stat(bin); err != nil {
			return fmt.Errorf("%w (build it: go build -o bin/wordle ./examples/wordle; go build -o bin/envserver ./env/cmd/envserver)", err)
		}
	}
	if cfg.work == "" {
		dir, err := os.MkdirTemp("", "faults-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		cfg.work = dir
	}
	var failed []string
	for _, m := range cfg.modes {
		dir := filepath.Join(cfg.work, m)
		var err error
		switch m {
		case "kill":
			err = killLoop(ctx, cfg, dir, out)
		case "restart":
			err = serverRestart(ctx, cfg, dir, out, true)
		case "dead":
			err = serverRestart(ctx, cfg, dir, out, false)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			fmt.Fprintf(out, "%s: FAIL: %v\n", m, err)
			failed = append(failed, m)
			continue
		}
		fmt.Fprintf(out, "%s: ok\n", m)
	}
	if len(failed) > 0 {
		return fmt.Errorf("failed: %s", strings.Join(failed, ", "))
	}
	return nil
}
