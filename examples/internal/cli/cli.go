// Package cli is the main function every example shares: run with a
// context that SIGINT and SIGTERM cancel, and exit 0 on success or on -h
// (the usage is the answer asked for), 1 with the error otherwise.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// Run is an example's program: it parses args and writes to out.
type Run func(ctx context.Context, args []string, out io.Writer) error

// Main runs run with the command line and exits with ExitCode's status.
func Main(name string, run Run) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout)
	stop()
	os.Exit(ExitCode(name, err, os.Stderr))
}

// ExitCode is the exit status for run's error: 0 for none and for
// flag.ErrHelp (-h, -help: the usage was printed as asked), else 1 after
// writing "name: error" to stderr.
func ExitCode(name string, err error, stderr io.Writer) int {
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return 0
	}
	fmt.Fprintf(stderr, "%s: %v\n", name, err)
	return 1
}
