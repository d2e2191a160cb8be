package main

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// tuneOptions are the flags of evotune tune.
type tuneOptions struct {
	problem    problemFlags
	Archive    string
	Strategy   string
	Seed       uint64
	Evals      int
	Budget     time.Duration
	Parallel   int
	Population int
	Elites     int
	Replay     string
	SeedFrom   string
	Arch       string
	NVCC       string
	GPUs       []int
	Jobs       int
	Cache      string
	Quiet      bool
	// ProgressEvery is how often a plain progress line is printed when
	// stderr is not a terminal.
	ProgressEvery time.Duration
}

// defaultTuneOptions returns the defaults of evotune tune.
func defaultTuneOptions() tuneOptions {
	return tuneOptions{
		problem:       defaultProblem(),
		Archive:       "evotune-archive",
		Strategy:      "evo",
		Seed:          1,
		Parallel:      4,
		Population:    16,
		Elites:        8,
		ProgressEvery: 10 * time.Second,
	}
}

// strategies returns the search strategies evotune tune accepts.
func strategies() []string { return []string{"evo", "random", "exhaustive"} }

func tuneCommand() command {
	return command{
		name:    "tune",
		summary: "search the kernel family's configurations for the fastest correct one",
		synopsis: "evotune tune [--shape BxHxSxD[:W]]... [--dtype fp16|bf16] [--causal] [--archive DIR]\n" +
			"               [--strategy evo|random|exhaustive] [--budget DURATION] [--evals N] [flags]",
		examples: `  # Tune the mission shape for eight hours on this machine's GPU.
  evotune tune --shape 1x8x512x64 --budget 8h

  # Run the same command again after an interruption: it resumes the archive.
  evotune tune --shape 1x8x512x64 --budget 8h

  # A two-shape objective, the second shape counting half.
  evotune tune --shape 1x8x512x64 --shape 2x8x512x64:0.5 --archive two-shapes

  # Search a recorded replay file instead of a GPU (no GPU needed).
  evotune tune --replay runner/testdata/replay/sdpa-synthetic.jsonl --archive replay-archive --budget 2h

  # Start a new search for bf16 from the elites of an fp16 archive.
  evotune tune --dtype bf16 --archive bf16-archive --seed-from evotune-archive
`,
		run: runTune,
	}
}

func runTune(ctx context.Context, c *cli, args []string) error {
	opts := defaultTuneOptions()
	fs := newFlagSet("tune")
	opts.problem.register(fs, true)
	fs.StringVar(&opts.Archive, "archive", opts.Archive, "archive `directory`: created if absent, resumed if it holds this problem")
	fs.StringVar(&opts.Strategy, "strategy", opts.Strategy, "search strategy: "+strings.Join(strategies(), ", "))
	fs.Uint64Var(&opts.Seed, "seed", opts.Seed, "seed of the search's random number generator")
	fs.IntVar(&opts.Evals, "evals", opts.Evals, "stop after this many evaluations in total, resumed ones included (0: no limit)")
	fs.DurationVar(&opts.Budget, "budget", opts.Budget, "stop when the evaluations have cost this much time in total, e.g. 8h (0: no limit)")
	fs.IntVar(&opts.Parallel, "parallel", opts.Parallel, "candidates in flight at once")
	fs.IntVar(&opts.Population, "population", opts.Population, "population size of the evo strategy")
	fs.IntVar(&opts.Elites, "elites", opts.Elites, "elites kept and reported (top K)")
	fs.StringVar(&opts.Replay, "replay", opts.Replay, "answer from a recorded replay `file` instead of compiling and timing")
	fs.StringVar(&opts.SeedFrom, "seed-from", opts.SeedFrom, "seed a new search with the elites of another archive `directory`")
	fs.StringVar(&opts.Arch, "arch", opts.Arch, "target architecture, e.g. sm_89 (default: the GPU's)")
	fs.StringVar(&opts.NVCC, "nvcc", opts.NVCC, "nvcc `path` (default: found on PATH or in /usr/local/cuda)")
	fs.IntSliceVar(&opts.GPUs, "gpus", opts.GPUs, "GPU indices to time on, e.g. 0,1 (default: GPU 0)")
	fs.IntVar(&opts.Jobs, "jobs", opts.Jobs, "parallel nvcc compiles (0: one per CPU)")
	fs.StringVar(&opts.Cache, "cache", opts.Cache, "compile cache `directory` (default: the user cache directory)")
	fs.BoolVar(&opts.Quiet, "quiet", opts.Quiet, "no progress output")
	fs.DurationVar(&opts.ProgressEvery, "progress-every", opts.ProgressEvery, "interval of the plain progress lines printed when stderr is not a terminal")
	if _, err := c.parseFlags(fs, args, false); err != nil {
		return err
	}
	if err := opts.validate(fs.Changed("evals")); err != nil {
		return err
	}
	return fmt.Errorf("tune: no evaluator is wired into this build yet")
}

// validate checks the flag values that do not need the archive or a GPU.
func (o tuneOptions) validate(evalsSet bool) error {
	if _, err := o.problem.problem("tune"); err != nil {
		return err
	}
	known := false
	for _, s := range strategies() {
		known = known || s == o.Strategy
	}
	switch {
	case !known:
		return usagef("tune", "--strategy %q: want one of %s", o.Strategy, strings.Join(strategies(), ", "))
	case o.Archive == "":
		return usagef("tune", "--archive must name a directory")
	case evalsSet && o.Evals <= 0, o.Evals < 0:
		return usagef("tune", "--evals must be positive")
	case o.Budget < 0:
		return usagef("tune", "--budget must not be negative")
	case o.Parallel <= 0:
		return usagef("tune", "--parallel must be positive")
	case o.Parallel > 1024:
		return usagef("tune", "--parallel %d: at most 1024 candidates in flight", o.Parallel)
	case o.Population < 2:
		return usagef("tune", "--population must be at least 2")
	case o.Elites <= 0:
		return usagef("tune", "--elites must be positive")
	case o.Jobs < 0:
		return usagef("tune", "--jobs must not be negative")
	case o.ProgressEvery <= 0:
		return usagef("tune", "--progress-every must be positive")
	case o.Arch != "" && !strings.HasPrefix(o.Arch, "sm_"):
		return usagef("tune", "--arch %q: want sm_XY, e.g. sm_89", o.Arch)
	}
	for _, g := range o.GPUs {
		if g < 0 {
			return usagef("tune", "--gpus: index %d is negative", g)
		}
	}
	return nil
}
