package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"github.com/spf13/pflag"

	"evotune/cmd/evotune/internal/searchbench"
	"evotune/evo"
)

// Where bench-search looks for a replay file when --replay is not given:
// a real recording first, else the synthetic one.
const (
	replayDir       = "runner/testdata/replay"
	realReplayGlob  = "h100-*.jsonl.gz"
	synthReplayName = "synthetic-1x8x512x64-fp16.jsonl.gz"
)

// benchSearchOptions are the flags of evotune bench-search.
type benchSearchOptions struct {
	recordedFileFlags
	// KTPublished is a file of published figures to set beside a Kernel
	// Tuner space's.
	KTPublished string
	Seeds       int
	FirstSeed   uint64
	Budgets     []int
	Strategies  []string
	Parallel    int
	Format      string
	// Tolerance is how close to the optimum counts as reaching it, for the
	// evaluations-to-reach table and the goal line; the goal is stated at
	// searchbench.GoalTolerance.
	Tolerance float64
	// Search holds the evo options under test (population, elites,
	// tournament, crossover, stagnation, screen, restart).
	Search evo.Options
}

func defaultBenchSearchOptions() benchSearchOptions {
	return benchSearchOptions{
		Seeds:      50,
		FirstSeed:  1,
		Budgets:    []int{50, 100, 200, 400, 800},
		Strategies: []string{evo.StrategyEvo, evo.StrategyRandom, evo.StrategyExhaustive},
		Format:     "table",
		Tolerance:  searchbench.GoalTolerance,
		Search:     evo.DefaultOptions(),
	}
}

func benchSearchCommand() command {
	return command{
		name:    "bench-search",
		summary: "compare the search strategies on a replay file against its known optimum",
		synopsis: "evotune bench-search [--replay FILE | --kt-cache FILE [--kt-valid-only] [--kt-published FILE]] [--seeds N] [--budgets N,N,...] [--strategies evo,random,exhaustive]\n" +
			"                      [--parallel N] [--format table|markdown|json] [search flags]",
		examples: `  # Compare evo, random and exhaustive search on the committed synthetic recording.
  evotune bench-search --replay runner/testdata/replay/synthetic-1x8x512x64-fp16.jsonl.gz

  # Try a population of 16 with tournaments of 4, as a markdown report.
  evotune bench-search --population 16 --tournament 4 --format markdown

  # A public Kernel Tuner space under the published protocol, beside the
  # published strategies' figures.
  evotune bench-search --kt-cache runner/testdata/ktcache/GEMM_A100.json.gz \
      --kt-published runner/testdata/ktcache/published.json

Every config of the replay file has a result, so the optimum is known. Each
strategy runs once per seed to the largest budget, in memory; the smaller
budgets are read off the same runs. The fraction reached is optimum/best
(1 = the optimum); a failed config uses an evaluation and yields nothing. P is
(mean − random)/(1 − random), random being the exact expected fraction of
random search without replacement. The exhaustive strategy walks the space in
its fixed order, so it runs once whatever --seeds says.

With --kt-cache the space is the full product of a Kernel Tuner cache's tune
parameters (the published protocol: a config absent from the cache, or failed
in it, costs an evaluation and yields nothing; --kt-valid-only searches the
timed configs alone), the budgets default to 25,50,...,1600, and the report
adds both exact random baselines and, with --kt-published, each published
strategy's mean fraction with a PASS/FAIL line per budget for evo against the
best of them.
`,
		run: runBenchSearch,
	}
}

func runBenchSearch(ctx context.Context, c *cli, args []string) error {
	opts := defaultBenchSearchOptions()
	fs := newFlagSet("bench-search")
	opts.register(fs)
	if _, err := c.parseFlags(fs, args, false); err != nil {
		return err
	}
	if err := opts.validate(); err != nil {
		return err
	}
	if opts.KTCache != "" && !fs.Changed("budgets") {
		opts.Budgets = searchbench.KTBudgets
	}
	if opts.Replay == "" && opts.KTCache == "" {
		path, err := defaultReplay()
		if err != nil {
			return err
		}
		opts.Replay = path
	}
	var rs recordedSpace
	var err error
	if opts.KTCache != "" {
		rs, err = loadKTCache("bench-search", opts.KTCache, opts.KTValidOnly, opts.KTMacro)
	} else {
		prob, _ := defaultProblem().problem("bench-search") // the mission shape, valid
		rs, err = loadReplay("bench-search", opts.Replay, prob, false, "")
	}
	if err != nil {
		return err
	}
	land, err := searchbench.Landscape(ctx, rs.eval, rs.space)
	if err != nil {
		return fmt.Errorf("bench-search %s: %w", rs.path, err)
	}
	workers := opts.Parallel
	if workers == 0 {
		workers = runtime.NumCPU()
	}
	sc, err := evo.CompareStrategies(ctx, rs.space, rs.eval, land, evo.CompareOptions{
		Base: opts.Search, Strategies: opts.Strategies, Seeds: opts.Seeds, FirstSeed: opts.FirstSeed,
		Budgets: opts.Budgets, Tolerance: opts.Tolerance, Workers: workers,
	})
	if err != nil {
		if ctx.Err() != nil {
			return errInterrupted
		}
		return fmt.Errorf("bench-search: %w", err)
	}
	rep := searchbench.Report{
		Replay:     filepath.Base(rs.path),
		Problem:    problemLine(rs.problem),
		Recorded:   rs.recorded,
		Seeds:      opts.Seeds,
		FirstSeed:  opts.FirstSeed,
		Search:     searchbench.SearchParams(opts.Search),
		Comparison: sc,
		Goal:       sc.Goal(evo.StrategyEvo, searchbench.GoalShare, searchbench.GoalSpeedup),
	}
	if rs.kt != nil {
		if rep.KT, err = searchbench.NewKTComparison(ctx, rs.kt, rs.path, rs.ktValidOnly, sc, opts.KTPublished); err != nil {
			return fmt.Errorf("bench-search: %w", err)
		}
	}
	return rep.Write(c.stdout, opts.Format)
}

// register adds the flags of evotune bench-search to fs, bound to o.
func (o *benchSearchOptions) register(fs *pflag.FlagSet) {
	fs.StringVar(&o.Replay, "replay", o.Replay, "replay `file` whose every config has a result (default: "+
		replayDir+"/"+realReplayGlob+" when present, else "+synthReplayName+" there)")
	o.recordedFileFlags.registerKT(fs)
	fs.StringVar(&o.KTPublished, "kt-published", o.KTPublished, "with --kt-cache: a JSON `file` of published mean fractions of the optimum per space, strategy and budget, to compare evo with (the space is the cache file's name without .json.gz)")
	fs.IntVar(&o.Seeds, "seeds", o.Seeds, "runs of each strategy, with seeds F..F+N-1 (F: --first-seed)")
	fs.Uint64Var(&o.FirstSeed, "first-seed", o.FirstSeed, "seed of each strategy's first run, e.g. 51 with --seeds 100 for seeds 51..150")
	fs.IntSliceVar(&o.Budgets, "budgets", o.Budgets, "evaluation counts at which the strategies are compared")
	fs.StringSliceVar(&o.Strategies, "strategies", o.Strategies, "strategies to compare: "+strings.Join(evo.Strategies(), ", "))
	fs.IntVar(&o.Parallel, "parallel", o.Parallel, "runs at once (0: one per CPU)")
	fs.StringVar(&o.Format, "format", o.Format, "output format: table, markdown or json")
	fs.Float64Var(&o.Tolerance, "tolerance", o.Tolerance, "how close to the optimum counts as reaching it (0.05: within 5%); the goal is stated at 0.02")
	fs.IntVar(&o.Search.Population, "population", o.Search.Population, "evo: configs in each generation")
	fs.IntVar(&o.Search.Elites, "elites", o.Search.Elites, "evo: elites carried into every generation")
	fs.IntVar(&o.Search.Tournament, "tournament", o.Search.Tournament, "evo: members drawn to pick each parent")
	fs.IntVar(&o.Search.Batch, "batch", o.Search.Batch, "evo: children proposed in each bred generation after the first (1: each child bred from every result before it; 0: the population)")
	fs.Float64Var(&o.Search.CrossoverRate, "crossover", o.Search.CrossoverRate, "evo: probability that a child is a crossover")
	fs.IntVar(&o.Search.Stagnation, "stagnation", o.Search.Stagnation, "evo: generations without a new best before fresh configs are taken (see --restart)")
	fs.BoolVar(&o.Search.Restart, "restart", o.Search.Restart, "evo: on stagnation, restart the population from its best and a batch of fresh configs (--restart=false: inject a quarter batch of fresh configs instead)")
	fs.BoolVar(&o.Search.Interact, "interact", o.Search.Interact, interactUsage)
	fs.BoolVar(&o.Search.ILS, "ils", o.Search.ILS, ilsUsage)
	fs.IntVar(&o.Search.Screen, "screen", o.Search.Screen, "evo: candidates bred for each child, the one a model of the results so far rates best proposed (1: off)")
}

// validate checks the flag values that do not need the replay file.
func (o benchSearchOptions) validate() error {
	const cmd = "bench-search"
	if err := o.recordedFileFlags.validate(cmd); err != nil {
		return err
	}
	if o.KTPublished != "" && o.KTCache == "" {
		return usagef(cmd, "--kt-published needs --kt-cache")
	}
	switch {
	case o.Seeds < 1:
		return usagef(cmd, "--seeds must be at least 1")
	case o.FirstSeed < 1:
		return usagef(cmd, "--first-seed must be at least 1")
	case len(o.Budgets) == 0:
		return usagef(cmd, "--budgets must name at least one evaluation count")
	case o.Parallel < 0:
		return usagef(cmd, "--parallel must not be negative")
	case !slices.Contains([]string{"table", "markdown", "json"}, o.Format):
		return usagef(cmd, "--format %q: want table, markdown or json", o.Format)
	case len(o.Strategies) == 0:
		return usagef(cmd, "--strategies must name at least one strategy")
	case !(o.Tolerance >= 0 && o.Tolerance < 1):
		return usagef(cmd, "--tolerance must be in [0, 1), got %v", o.Tolerance)
	}
	for _, b := range o.Budgets {
		if b < 1 {
			return usagef(cmd, "--budgets: %d is not a positive evaluation count", b)
		}
	}
	seen := map[string]bool{}
	for _, s := range o.Strategies {
		if !slices.Contains(evo.Strategies(), s) {
			return usagef(cmd, "--strategies: unknown strategy %q (valid: %s)", s, strings.Join(evo.Strategies(), ", "))
		}
		if seen[s] {
			return usagef(cmd, "--strategies: %s named twice", s)
		}
		seen[s] = true
	}
	if err := o.Search.Validate(); err != nil {
		return usagef(cmd, "search flags: %v", err)
	}
	return nil
}

// defaultReplay finds the replay file to use when --replay is not given:
// the last real recording in replayDir by name, else the synthetic one.
func defaultReplay() (string, error) {
	real, err := filepath.Glob(filepath.Join(replayDir, realReplayGlob))
	if err != nil {
		return "", fmt.Errorf("bench-search: looking for a replay file: %w", err)
	}
	if len(real) > 0 {
		slices.Sort(real)
		return real[len(real)-1], nil
	}
	synth := filepath.Join(replayDir, synthReplayName)
	if _, err := os.Stat(synth); err != nil {
		return "", usagef("bench-search", "--replay: no file given and none found in %s (run from the repository root or name one)", replayDir)
	}
	return synth, nil
}
