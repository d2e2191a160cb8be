package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"
	"golang.org/x/term"
)

// A cli is one invocation of evotune: where it writes, and the few things
// about its surroundings that tests replace.
type cli struct {
	stdout, stderr io.Writer
	// terminal reports whether stderr is a terminal (progress bar) or not
	// (plain progress lines).
	terminal bool
	// width is the terminal's width in columns, 0 when unknown.
	width int
	// outWidth is stdout's width when it is a terminal, 0 otherwise: tables
	// are fitted to it.
	outWidth int
	now      func() time.Time
}

// A command is one subcommand.
type command struct {
	name    string
	summary string // one line for "evotune help"
	// synopsis and examples are printed by --help around the flag list.
	synopsis string
	examples string
	run      func(ctx context.Context, c *cli, args []string) error
}

// commands returns the subcommands in the order "evotune help" lists them.
func commands() []command {
	return []command{
		tuneCommand(),
		showCommand(),
		reportCommand(),
		exportCommand(),
		spaceCommand(),
		checkCommand(),
		benchCommand(),
		devicesCommand(),
		mergeCommand(),
		benchSearchCommand(),
		versionCommand(),
	}
}

// run runs evotune with args (without the program name), writing to stdout
// and stderr. It is all of main but the process exit.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c := &cli{stdout: stdout, stderr: stderr, now: time.Now}
	if f, ok := stderr.(*os.File); ok {
		c.terminal = term.IsTerminal(int(f.Fd()))
		if c.terminal {
			c.width, _, _ = term.GetSize(int(f.Fd()))
		}
	}
	if f, ok := stdout.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		c.outWidth, _, _ = term.GetSize(int(f.Fd()))
	}
	return c.run(ctx, args)
}

func (c *cli) run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		c.printHelp(c.stdout)
		return nil
	}
	name := args[0]
	switch name {
	case "help", "-h", "--help":
		if len(args) > 1 {
			cmd, ok := lookupCommand(args[1])
			if !ok {
				return usagef("help", "unknown command %q (run evotune help)", args[1])
			}
			return helpDone(cmd.run(ctx, c, []string{"--help"}))
		}
		c.printHelp(c.stdout)
		return nil
	case "-v", "--version":
		name = "version"
	}
	cmd, ok := lookupCommand(name)
	if !ok {
		if strings.HasPrefix(name, "-") {
			return usagef("", "flag %s before a command (run evotune help)", name)
		}
		return usagef("", "unknown command %q (run evotune help)", name)
	}
	return helpDone(cmd.run(ctx, c, args[1:]))
}

func lookupCommand(name string) (command, bool) {
	for _, cmd := range commands() {
		if cmd.name == name {
			return cmd, true
		}
	}
	return command{}, false
}

func (c *cli) printHelp(w io.Writer) {
	fmt.Fprint(w, `evotune tunes the compile-time parameters of a CUDA attention kernel family
by evolutionary search, and keeps every result in an archive that resumes
exactly after an interruption.

Usage:

  evotune <command> [flags]

Commands:

`)
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	for _, cmd := range commands() {
		fmt.Fprintf(tw, "  %s\t%s\n", cmd.name, cmd.summary)
	}
	tw.Flush()
	fmt.Fprint(w, `
Run "evotune <command> --help" for the flags and examples of a command.
`)
}

// newFlagSet returns an empty flag set for cmd that reports errors instead
// of printing them, so that run decides what reaches the user.
func newFlagSet(name string) *pflag.FlagSet {
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.SortFlags = false
	return fs
}

// parseFlags parses args into fs, the flag set of the command of the same
// name. On --help it prints the command's help on stdout and returns
// errHelp; a bad flag is a usageError. Positional arguments are returned
// only when the command takes them (positional is true); otherwise they are
// an error.
func (c *cli) parseFlags(fs *pflag.FlagSet, args []string, positional bool) ([]string, error) {
	cmd, _ := lookupCommand(fs.Name())
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			printCommandHelp(c.stdout, cmd, fs)
			return nil, errHelp
		}
		return nil, usagef(cmd.name, "%v", err)
	}
	if !positional && fs.NArg() > 0 {
		return nil, usagef(cmd.name, "unexpected argument %q", fs.Arg(0))
	}
	return fs.Args(), nil
}

// errHelp says --help was answered; run turns it into success.
var errHelp = errors.New("help printed")

func printCommandHelp(w io.Writer, cmd command, fs *pflag.FlagSet) {
	fmt.Fprintf(w, "%s\n\nUsage:\n\n  %s\n\nFlags:\n\n", cmd.summary, cmd.synopsis)
	fmt.Fprint(w, fs.FlagUsagesWrapped(100))
	if cmd.examples != "" {
		fmt.Fprintf(w, "\nExamples:\n\n%s", cmd.examples)
	}
}

// helpDone converts errHelp into success.
func helpDone(err error) error {
	if errors.Is(err, errHelp) {
		return nil
	}
	return err
}
