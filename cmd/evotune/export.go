package main

import (
	"context"
	"fmt"
	"regexp"
)

// exportOptions are the flags of evotune export.
type exportOptions struct {
	Archive string
	Out     string
	Name    string
}

func defaultExportOptions() exportOptions {
	return exportOptions{Archive: "evotune-archive", Out: ".", Name: "evotune_best"}
}

func exportCommand() command {
	return command{
		name:     "export",
		summary:  "write the best configuration as a C header and JSON, with its provenance",
		synopsis: "evotune export [--archive DIR] [--out DIR] [--name NAME]",
		examples: `  # Writes ./evotune_best.h and ./evotune_best.json.
  evotune export --archive evotune-archive

  evotune export --archive evotune-archive --out include --name sdpa_l4_best
`,
		run: runExport,
	}
}

// exportName is what --name may be: it becomes file names and a C include guard.
var exportName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func runExport(ctx context.Context, c *cli, args []string) error {
	opts := defaultExportOptions()
	fs := newFlagSet("export")
	fs.StringVar(&opts.Archive, "archive", opts.Archive, "archive `directory`")
	fs.StringVar(&opts.Out, "out", opts.Out, "output `directory`")
	fs.StringVar(&opts.Name, "name", opts.Name, "base name of the files written (NAME.h, NAME.json)")
	if _, err := c.parseFlags(fs, args, false); err != nil {
		return err
	}
	switch {
	case !exportName.MatchString(opts.Name):
		return usagef("export", "--name %q: want a C identifier (letters, digits, _)", opts.Name)
	case opts.Archive == "":
		return usagef("export", "--archive must name a directory")
	case opts.Out == "":
		return usagef("export", "--out must name a directory")
	}
	return fmt.Errorf("export: not wired to the archive yet")
}
