package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"evotune/cmd/evotune/internal/elitetable"
	"evotune/cmd/evotune/internal/reportmd"
	"evotune/elites"
	"evotune/internal/durable"
)

// reportOptions are the flags of evotune report.
type reportOptions struct {
	Archive string
	Out     string
	Top     int
}

func defaultReportOptions() reportOptions {
	return reportOptions{Archive: "evotune-archive", Out: "evotune-report", Top: 8}
}

func reportCommand() command {
	return command{
		name:     "report",
		summary:  "write a markdown report of an archive with SVG plots beside it",
		synopsis: "evotune report [--archive DIR] [--out DIR] [--top K]",
		examples: `  # Writes evotune-report/report.md and its SVG plots.
  evotune report --archive evotune-archive

  evotune report --archive evotune-archive --out results/l4-night --top 5
`,
		run: runReport,
	}
}

func runReport(ctx context.Context, c *cli, args []string) error {
	opts := defaultReportOptions()
	fs := newFlagSet("report")
	fs.StringVar(&opts.Archive, "archive", opts.Archive, "archive `directory`")
	fs.StringVar(&opts.Out, "out", opts.Out, "output `directory` for report.md and the SVG plots")
	fs.IntVar(&opts.Top, "top", opts.Top, "number of elites in the table")
	if _, err := c.parseFlags(fs, args, false); err != nil {
		return err
	}
	switch {
	case opts.Top <= 0:
		return usagef("report", "--top must be positive")
	case opts.Archive == "":
		return usagef("report", "--archive must name a directory")
	case opts.Out == "":
		return usagef("report", "--out must name a directory")
	}
	done := c.loading("archive " + opts.Archive)
	a, err := elites.Read(opts.Archive)
	done()
	if err != nil {
		return fmt.Errorf("report --archive: %w", err)
	}
	defer a.Close()
	warnSkipped(c.stderr, a)
	completeConfigs(c.stderr, a, archiveSpace(a))
	def, knobs := familyDefault(a.Meta().Problem, a.Meta().Arch)
	hidden := elitetable.Hidden(a, elitetable.Bound(a.Top(opts.Top), opts.Top), "an elite")
	files, err := reportmd.Build(a, opts.Top, c.now(), def, knobs, hidden)
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	if err := os.MkdirAll(opts.Out, 0o755); err != nil {
		return fmt.Errorf("report --out: %w", err)
	}
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		path := filepath.Join(opts.Out, name)
		if err := durable.WriteFile(path, files[name], 0o644); err != nil {
			return fmt.Errorf("report: %w", err)
		}
	}
	for _, d := range hidden {
		fmt.Fprintln(c.stdout, d)
	}
	fmt.Fprintf(c.stdout, "wrote %s and %d plots\n", filepath.Join(opts.Out, "report.md"), len(files)-1)
	return nil
}
