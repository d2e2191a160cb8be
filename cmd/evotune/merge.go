package main

import (
	"context"
	"fmt"
)

func mergeCommand() command {
	return command{
		name:     "merge",
		summary:  "merge the results of other archives of the same problem into one",
		synopsis: "evotune merge --archive DST SRC...",
		examples: `  # Two machines tuned the same problem; gather their results.
  evotune merge --archive evotune-archive night1-archive night2-archive
`,
		run: runMerge,
	}
}

func runMerge(ctx context.Context, c *cli, args []string) error {
	var dst string
	fs := newFlagSet("merge")
	fs.StringVar(&dst, "archive", "", "destination archive `directory` (created if absent)")
	srcs, err := c.parseFlags(fs, args, true)
	if err != nil {
		return err
	}
	switch {
	case dst == "":
		return usagef("merge", "--archive must name the destination archive")
	case len(srcs) == 0:
		return usagef("merge", "name at least one source archive after the flags")
	}
	return fmt.Errorf("merge: not wired to the archive yet")
}
