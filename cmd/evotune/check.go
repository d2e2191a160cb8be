package main

import (
	"context"
	"fmt"
)

// checkOptions are the flags of evotune check.
type checkOptions struct {
	problem     problemFlags
	Config      string
	CompileOnly bool
	Arch        string
	NVCC        string
	Cache       string
	GPU         int
}

func checkCommand() command {
	return command{
		name:     "check",
		summary:  "run one configuration through every gate and print what each said",
		synopsis: "evotune check --config k=v,... [--shape BxHxSxD] [--dtype fp16|bf16] [--causal] [--compile-only] [--arch sm_XY]",
		examples: `  # The family's default configuration, on this machine's GPU.
  evotune check

  # Compile only (no GPU needed): ptxas figures and the cubin path.
  evotune check --config block_m=128,warps=8,stages=3 --compile-only --arch sm_89
`,
		run: runCheck,
	}
}

func runCheck(ctx context.Context, c *cli, args []string) error {
	opts := checkOptions{problem: defaultProblem()}
	fs := newFlagSet("check")
	fs.StringVar(&opts.Config, "config", opts.Config, "the configuration as `k=v,...`; knobs not named take their default")
	opts.problem.register(fs, true)
	fs.BoolVar(&opts.CompileOnly, "compile-only", opts.CompileOnly, "stop after the ptxas gate (no GPU needed)")
	fs.StringVar(&opts.Arch, "arch", opts.Arch, "target architecture, e.g. sm_89 (default: the GPU's)")
	fs.StringVar(&opts.NVCC, "nvcc", opts.NVCC, "nvcc `path` (default: found on PATH or in /usr/local/cuda)")
	fs.StringVar(&opts.Cache, "cache", opts.Cache, "compile cache `directory` (default: the user cache directory)")
	fs.IntVar(&opts.GPU, "gpu", opts.GPU, "index of the GPU to check on")
	if _, err := c.parseFlags(fs, args, false); err != nil {
		return err
	}
	if _, err := opts.problem.problem("check"); err != nil {
		return err
	}
	return fmt.Errorf("check: not wired to the runner yet")
}
