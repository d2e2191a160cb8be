package main

import (
	"context"
	"fmt"
)

// spaceOptions are the flags of evotune space.
type spaceOptions struct {
	problem problemFlags
	Arch    string
	Count   bool
}

func spaceCommand() command {
	return command{
		name:     "space",
		summary:  "list the knobs, their values and the constraints of the kernel family's space",
		synopsis: "evotune space [--count] [--shape BxHxSxD] [--dtype fp16|bf16] [--causal] [--arch sm_XY]",
		examples: `  evotune space
  evotune space --shape 2x8x1024x128 --dtype bf16 --arch sm_90

  # Only the number of valid configurations.
  evotune space --count
`,
		run: runSpace,
	}
}

func runSpace(ctx context.Context, c *cli, args []string) error {
	opts := spaceOptions{problem: defaultProblem(), Arch: "sm_89"}
	fs := newFlagSet("space")
	opts.problem.register(fs, true)
	fs.StringVar(&opts.Arch, "arch", opts.Arch, "target architecture whose limits the constraints use")
	fs.BoolVar(&opts.Count, "count", opts.Count, "print only the number of valid configurations")
	if _, err := c.parseFlags(fs, args, false); err != nil {
		return err
	}
	if _, err := opts.problem.problem("space"); err != nil {
		return err
	}
	return fmt.Errorf("space: not wired to the kernel family yet")
}
