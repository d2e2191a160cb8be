// Command evotune searches the compile-time parameters of a CUDA attention
// kernel family by evolution and keeps the best candidates in an archive
// that survives interruption.
//
// Usage:
//
//	evotune <command> [flags]
//
// Run "evotune help" for the list of commands and "evotune <command> --help"
// for the flags and examples of one.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// Exit codes.
const (
	exitError       = 1
	exitUsage       = 2
	exitInterrupted = 130 // as a shell reports a process ended by SIGINT
)

func main() {
	ctx, stop := interruptContext(os.Stderr)
	defer stop()
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(report(err, os.Stderr))
}

// interruptContext returns a context that is cancelled by the first SIGINT
// or SIGTERM, so that work in flight stops and the archive is left complete.
// A second signal ends the process at once: the user asked twice.
func interruptContext(stderr io.Writer) (context.Context, func()) {
	ctx, cancel := context.WithCancel(context.Background())
	signals := make(chan os.Signal, 2)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case <-signals:
			fmt.Fprintln(stderr, "evotune: stopping after the candidates in flight (interrupt again to quit at once)")
			cancel()
		case <-done:
			return
		}
		select {
		case <-signals:
			fmt.Fprintln(stderr, "evotune: interrupted twice, quitting")
			os.Exit(exitInterrupted)
		case <-done:
		}
	}()
	var once bool
	return ctx, func() {
		if once {
			return
		}
		once = true
		signal.Stop(signals)
		close(done)
		cancel()
	}
}

// report prints err (if any) on stderr and returns the process exit code.
func report(err error, stderr io.Writer) int {
	if err == nil {
		return 0
	}
	var usage *usageError
	switch {
	case errors.Is(err, errInterrupted):
		return exitInterrupted
	case errors.As(err, &usage):
		fmt.Fprintf(stderr, "evotune: %v\n", err)
		return exitUsage
	default:
		fmt.Fprintf(stderr, "evotune: %v\n", err)
		return exitError
	}
}

// errInterrupted is returned when the user stopped the work with a signal;
// whatever had to be said has already been printed.
var errInterrupted = errors.New("interrupted")

// A usageError is a mistake in the command line: an unknown command or flag,
// or a flag value that cannot be used. It exits with code 2.
type usageError struct {
	cmd string // the subcommand, empty for the top level
	msg string
}

func (e *usageError) Error() string {
	if e.cmd == "" {
		return e.msg
	}
	return e.cmd + ": " + e.msg
}

// usagef returns a usageError for subcommand cmd.
func usagef(cmd, format string, args ...any) error {
	return &usageError{cmd: cmd, msg: fmt.Sprintf(format, args...)}
}
