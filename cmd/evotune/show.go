package main

import (
	"context"
	"fmt"

	"evotune/cmd/evotune/internal/elitetable"
	"evotune/elites"
)

// showOptions are the flags of evotune show.
type showOptions struct {
	Archive string
	Top     int
	Format  string
}

func defaultShowOptions() showOptions {
	return showOptions{Archive: "evotune-archive", Top: 8, Format: "table"}
}

func showCommand() command {
	return command{
		name:     "show",
		summary:  "print the elite table of an archive",
		synopsis: "evotune show [--archive DIR] [--top K] [--format table|markdown|json]",
		examples: `  evotune show
  evotune show --archive evotune-archive --top 3
  evotune show --format markdown > elites.md
  evotune show --format json | jq '.elites[0].config'
`,
		run: runShow,
	}
}

func runShow(ctx context.Context, c *cli, args []string) error {
	opts := defaultShowOptions()
	fs := newFlagSet("show")
	fs.StringVar(&opts.Archive, "archive", opts.Archive, "archive `directory`")
	fs.IntVar(&opts.Top, "top", opts.Top, "number of elites to print")
	fs.StringVar(&opts.Format, "format", opts.Format, "output format: table, markdown or json")
	if _, err := c.parseFlags(fs, args, false); err != nil {
		return err
	}
	switch {
	case opts.Top <= 0:
		return usagef("show", "--top must be positive")
	case opts.Format != "table" && opts.Format != "markdown" && opts.Format != "json":
		return usagef("show", "--format %q: want table, markdown or json", opts.Format)
	case opts.Archive == "":
		return usagef("show", "--archive must name a directory")
	}
	done := c.loading("archive " + opts.Archive)
	a, err := elites.Read(opts.Archive)
	done()
	if err != nil {
		return fmt.Errorf("show --archive: %w", err)
	}
	defer a.Close()
	warnSkipped(c.stderr, a)
	if sp := archiveSpace(a); sp != nil {
		completeConfigs(c.stderr, a, sp)
		warnForeign(c.stderr, a, sp)
	}
	return eliteTable(a, opts.Top).Write(c.stdout, opts.Format, c.outWidth)
}

// eliteTable is the elite table of archive a with its top elites, shown by
// how they differ from the default of its problem's kernel family.
func eliteTable(a *elites.Archive, top int) elitetable.Report {
	def, knobs := familyDefault(a.Meta().Problem, a.Meta().Arch)
	return elitetable.New(a, top, def, knobs)
}
