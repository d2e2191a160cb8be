package main

import (
	"context"
	"fmt"
	"runtime/debug"
)

func versionCommand() command {
	return command{
		name:     "version",
		summary:  "print the module version and the VCS revision evotune was built from",
		synopsis: "evotune version",
		examples: "  evotune version\n",
		run:      runVersion,
	}
}

func runVersion(_ context.Context, c *cli, args []string) error {
	fs := newFlagSet("version")
	if _, err := c.parseFlags(fs, args, false); err != nil {
		return err
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return fmt.Errorf("reading build information: not available in this binary")
	}
	fmt.Fprintf(c.stdout, "evotune %s\n", versionLine(info))
	return nil
}

// versionLine renders the module version with the VCS revision, its time
// and whether the tree had local changes, as far as the build recorded them.
func versionLine(info *debug.BuildInfo) string {
	version := info.Main.Version
	if version == "" {
		version = "(devel)"
	}
	var revision, when, modified string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			revision = s.Value
		case "vcs.time":
			when = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				modified = "+modified"
			}
		}
	}
	line := version
	if revision != "" {
		if len(revision) > 12 {
			revision = revision[:12]
		}
		line += " revision " + revision + modified
		if when != "" {
			line += " (" + when + ")"
		}
	}
	return line + " " + info.GoVersion
}
