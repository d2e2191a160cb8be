package main

import (
	"context"
	"fmt"

	"evotune/elites"
)

func mergeCommand() command {
	return command{
		name:     "merge",
		summary:  "merge the results of other archives of the same problem into one",
		synopsis: "evotune merge --archive DST SRC...",
		examples: `  # Two machines tuned the same problem; gather their results.
  evotune merge --archive evotune-archive night1-archive night2-archive

  # A new archive from two others.
  evotune merge --archive combined night1-archive night2-archive
`,
		run: runMerge,
	}
}

func runMerge(ctx context.Context, c *cli, args []string) error {
	var dst string
	fs := newFlagSet("merge")
	fs.StringVar(&dst, "archive", "", "destination archive `directory` (created if absent, with the identity of the first source)")
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
	a, err := openMergeDestination(dst, srcs[0])
	if err != nil {
		return err
	}
	defer a.Close()
	// Results recorded before knobs of this evotune existed, here and in
	// the sources, are merged as the configs they are now.
	completeConfigs(c.stderr, a, archiveSpace(a))
	for _, src := range srcs {
		added, err := elites.Merge(a, src)
		if err != nil {
			return fmt.Errorf("merge: %w", err)
		}
		fmt.Fprintf(c.stdout, "%s: %d new results\n", src, added)
	}
	fmt.Fprintf(c.stdout, "%s now holds %d results\n", dst, a.Len())
	return a.Close()
}

// openMergeDestination opens dst for writing with its own identity, or
// creates it with the identity of the archive in first.
func openMergeDestination(dst, first string) (*elites.Archive, error) {
	exists, err := elites.Exists(dst)
	if err != nil {
		return nil, fmt.Errorf("merge --archive: %w", err)
	}
	var meta elites.Meta
	if exists {
		view, err := elites.Read(dst)
		if err != nil {
			return nil, fmt.Errorf("merge --archive: %w", err)
		}
		meta = view.Meta()
		view.Close()
		a, err := elites.Open(dst, meta, elites.OpenOptions{})
		if err != nil {
			return nil, fmt.Errorf("merge --archive: %w", err)
		}
		return a, nil
	}
	src, err := elites.Read(first)
	if err != nil {
		return nil, fmt.Errorf("merge: %w", err)
	}
	meta = src.Meta()
	src.Close()
	a, err := elites.Create(dst, meta)
	if err != nil {
		return nil, fmt.Errorf("merge --archive: %w", err)
	}
	return a, nil
}
