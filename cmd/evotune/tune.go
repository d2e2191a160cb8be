package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"evotune/cmd/evotune/internal/progress"
	"evotune/elites"
	"evotune/evo"
	"evotune/kernels"
	"evotune/space"
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
	Screen     int
	Restart    bool
	Interact   bool
	ILS        bool
	recordedFileFlags
	SeedFrom string
	// SeedConfigs are configs (k=v,...) to start a new search from, after
	// the elites of SeedFrom.
	SeedConfigs []string
	Arch        string
	NVCC        string
	GPUs        []int
	Jobs        int
	Cache       string
	Quiet       bool
	// KernelSource is a .cu file compiled in place of the embedded
	// kernel source.
	KernelSource string
	// ProgressEvery is how often a plain progress line is printed when
	// stderr is not a terminal.
	ProgressEvery time.Duration
}

// defaultTuneOptions returns the defaults of evotune tune.
func defaultTuneOptions() tuneOptions {
	return tuneOptions{
		problem:       defaultProblem(),
		Archive:       "evotune-archive",
		Strategy:      evo.StrategyEvo,
		Seed:          1,
		Parallel:      0, // auto: see backend.parallel
		Population:    0, // auto: see tuneOptions.evoOptions
		Elites:        evo.DefaultOptions().Elites,
		Screen:        0, // the search's default for its batches
		Restart:       evo.DefaultOptions().Restart,
		Interact:      evo.DefaultOptions().Interact,
		ILS:           evo.DefaultOptions().ILS,
		ProgressEvery: 10 * time.Second,
	}
}

func tuneCommand() command {
	return command{
		name:    "tune",
		summary: "search the kernel family's configurations for the fastest correct one",
		synopsis: "evotune tune [--shape BxHxSxD[:W]]... [--dtype fp16|bf16|fp8|int8] [--out-dtype fp16|bf16] [--causal] [--archive DIR]\n" +
			"               [--strategy evo|random|exhaustive] [--budget DURATION] [--evals N] [flags]",
		examples: `  # Tune the mission shape for eight hours on this machine's GPU.
  evotune tune --shape 1x8x512x64 --budget 8h

  # Run the same command again after an interruption: it resumes the archive.
  evotune tune --shape 1x8x512x64 --budget 8h

  # A two-shape objective, the second shape counting half.
  evotune tune --shape 1x8x512x64 --shape 2x8x512x64:0.5 --archive two-shapes

  # Search a recorded replay file instead of a GPU (no GPU needed).
  evotune tune --replay runner/testdata/replay/synthetic-1x8x512x64-fp16.jsonl.gz --archive replay-archive --budget 2h

  # One search of a public Kernel Tuner space (its cache file), 400 evaluations.
  evotune tune --kt-cache runner/testdata/ktcache/GEMM_A100.json.gz --archive gemm-archive --evals 400

  # Start a new search for bf16 from the elites of an fp16 archive.
  evotune tune --dtype bf16 --archive bf16-archive --seed-from evotune-archive
`,
		run: runTune,
	}
}

func runTune(ctx context.Context, c *cli, args []string) error {
	opts := defaultTuneOptions()
	fs := newFlagSet("tune")
	opts.register(fs)
	if _, err := c.parseFlags(fs, args, false); err != nil {
		return err
	}
	if err := opts.validate(fs.Changed("evals")); err != nil {
		return err
	}
	prob, _ := opts.problem.problem("tune") // validated above
	problemSet := fs.Changed("shape") || fs.Changed("dtype") || fs.Changed("out-dtype") || fs.Changed("causal") || fs.Changed("v-transposed")

	var b backend
	var err error
	if opts.KTCache != "" && (problemSet || opts.Arch != "") {
		return usagef("tune", "--kt-cache: the Kernel Tuner cache fixes the problem and GPU; --shape, --dtype, --causal and --arch do not apply")
	}
	if opts.Replay == "" && opts.KTCache == "" {
		// A problem the family cannot build (a head dimension it does not
		// have) is a usage error, found before any GPU or nvcc is looked for.
		if _, err := familySpace("tune", prob, cmp.Or(opts.Arch, kernels.DefaultArchOf(prob.Family))); err != nil {
			return err
		}
		if err := checkToolchain(ctx, "tune", opts.NVCC, prob); err != nil {
			return err
		}
	}
	if opts.Replay != "" || opts.KTCache != "" {
		b, err = replayBackend(c, opts, prob, problemSet)
	} else if opts.KernelSource != "" {
		var family kernels.Family
		var src kernels.Source
		if family, err = kernels.FamilyOf(prob.Family); err == nil {
			src, err = readKernelSource("tune", opts.KernelSource, family.Source())
		}
		if err == nil {
			b, err = gpuBackend(ctx, opts, prob, &src, c.stderr)
		}
	} else {
		b, err = gpuBackend(ctx, opts, prob, nil, c.stderr)
	}
	if err != nil {
		return err
	}
	defer b.close()

	meta := elites.NewMeta(b.problem, b.env)
	meta.Version, meta.Strategy, meta.Seed = moduleVersion(), opts.Strategy, opts.Seed
	seeds, err := opts.seeds(c.stderr, meta, b.space)
	if err != nil {
		return err
	}
	if opts.Parallel == 0 {
		opts.Parallel = b.parallel
	}
	started := opts.evoOptions(b.clock, nil)
	started.Seeds = seeds
	meta.Search = searchSettings(started)
	done := c.loading("archive " + opts.Archive)
	archive, state, err := openArchive(opts.Archive, meta)
	done()
	if err != nil {
		return err
	}
	defer archive.Close()
	warnSkipped(c.stderr, archive)
	completeConfigs(c.stderr, archive, b.space)
	warnForeign(c.stderr, archive, b.space)

	var shown *progress.Reporter
	if !opts.Quiet {
		shown = progress.New(c.stderr, c.terminal, c.now, opts.ProgressEvery, b.describe)
		shown.Width, shown.Replayed = c.width, b.replayed()
	}
	eo := opts.evoOptions(b.clock, shown)
	eo.Seeds = seeds
	eo.Confirmer = b.confirm
	search, err := startSearch(c.stderr, fs, b, archive, state, eo)
	if err != nil {
		return fmt.Errorf("tune --archive %s: %w", opts.Archive, err)
	}
	if !opts.Quiet {
		fmt.Fprintf(c.stderr, "evotune: tuning %s with %s (%s), archive %s\n",
			problemLine(b.problem), b.name, settingsText(search.Settings()), opts.Archive)
	}

	summary, runErr := search.Run(ctx)
	if shown != nil {
		shown.Finish()
	}
	writeSummary(c.stdout, c.outWidth, summary, archive, opts, b)
	if runErr != nil {
		return fmt.Errorf("tune: %w", runErr)
	}
	if summary.Stop == evo.StopCancelled {
		return errInterrupted
	}
	return nil
}

// register adds the flags of evotune tune to fs, bound to o.
func (o *tuneOptions) register(fs *pflag.FlagSet) {
	o.problem.register(fs, true)
	fs.StringVar(&o.Archive, "archive", o.Archive, "archive `directory`: created if absent, resumed if it holds this problem")
	fs.StringVar(&o.Strategy, "strategy", o.Strategy, "search strategy: "+strings.Join(evo.Strategies(), ", "))
	fs.Uint64Var(&o.Seed, "seed", o.Seed, "seed of the search's random number generator")
	fs.IntVar(&o.Evals, "evals", o.Evals, "stop after this many evaluations in total, resumed runs included (0: no limit)")
	fs.DurationVar(&o.Budget, "budget", o.Budget, "stop when the search has run this long in total, resumed runs included, e.g. 8h (0: no limit)")
	fs.IntVar(&o.Parallel, "parallel", o.Parallel, "candidates in flight at once (0: on a GPU, the nvcc jobs plus two per GPU; with --replay, 4; with --kt-cache, 1); with 1, evo breeds each child from every result before it, with more whole generations")
	fs.IntVar(&o.Population, "population", o.Population, "configs proposed in each generation (0: the search's default, raised to --parallel)")
	fs.IntVar(&o.Elites, "elites", o.Elites, "elites kept and reported (top K)")
	fs.IntVar(&o.Screen, "screen", o.Screen, "evo: candidates bred for each child, the one a model of the results so far rates best evaluated (1: off; 0: 4 with one in flight, 8 with more)")
	fs.BoolVar(&o.Restart, "restart", o.Restart, "evo: on stagnation, restart the population from its best and a batch of fresh configs (--restart=false: inject a quarter batch of fresh configs instead)")
	fs.BoolVar(&o.Interact, "interact", o.Interact, interactUsage)
	fs.BoolVar(&o.ILS, "ils", o.ILS, ilsUsage)
	fs.StringVar(&o.Replay, "replay", o.Replay, "answer from a recorded replay `file` instead of compiling and timing")
	o.recordedFileFlags.registerKT(fs)
	fs.StringVar(&o.SeedFrom, "seed-from", o.SeedFrom, "seed a new search with the elites of another archive `directory`")
	fs.StringArrayVar(&o.SeedConfigs, "seed-config", o.SeedConfigs, "seed a new search with this configuration (`k=v,...`, knobs not named take their default); repeatable")
	fs.StringVar(&o.Arch, "arch", o.Arch, "target architecture, e.g. sm_89 (default: the GPU's)")
	fs.StringVar(&o.NVCC, "nvcc", o.NVCC, "nvcc `path` (default: found on PATH or in /usr/local/cuda)")
	fs.IntSliceVar(&o.GPUs, "gpus", o.GPUs, "GPU indices to time on, e.g. 0,1 (default: GPU 0)")
	fs.IntVar(&o.Jobs, "jobs", o.Jobs, "parallel nvcc compiles (0: one per CPU)")
	fs.StringVar(&o.Cache, "cache", o.Cache, "compile cache `directory` (default: the user cache directory)")
	fs.StringVar(&o.KernelSource, "kernel-source", o.KernelSource, "compile this .cu `file` in place of the embedded kernel (same entry points and SdpaParams)")
	fs.BoolVar(&o.Quiet, "quiet", o.Quiet, "no progress output")
	fs.DurationVar(&o.ProgressEvery, "progress-every", o.ProgressEvery, "interval of the plain progress lines printed when stderr is not a terminal")
}

// evoOptions turns the flags into the search's options.
func (o tuneOptions) evoOptions(clock evo.Clock, shown *progress.Reporter) evo.Options {
	// The search's own defaults breed one child at a time, which learns
	// the most from each result but would leave every other compile and
	// timing slot idle: with several in flight, generations are bred
	// whole, at least as many as are in flight.
	eo := evo.DefaultOptionsInFlight(o.Parallel)
	eo.Strategy, eo.Seed = o.Strategy, o.Seed
	eo.Elites, eo.Parallel = o.Elites, o.Parallel
	eo.Population = cmp.Or(o.Population, eo.Population)
	eo.Screen = cmp.Or(o.Screen, eo.Screen)
	eo.Restart, eo.Interact, eo.ILS = o.Restart, o.Interact, o.ILS
	eo.MaxEvals, eo.MaxTime = o.Evals, o.Budget
	eo.Clock = clock
	if shown != nil {
		eo.OnProgress = shown.Update
	}
	return eo
}

// A backend is where candidates are evaluated, with what the archive and
// the search need to know about it.
type backend struct {
	name    string // for people: "replay FILE", "GPU 0 (NVIDIA L4)"
	problem space.Problem
	space   *space.Space
	eval    evo.Evaluator
	env     space.Env
	clock   evo.Clock
	close   func() error
	// confirm re-measures a challenger beside the elite it would displace;
	// nil where timings are fixed (a replay), since measuring them again
	// would find the same.
	confirm evo.Confirmer
	// parallel is how many candidates keep this backend busy, the
	// --parallel 0 default.
	parallel int
}

// replayParallel is the candidates in flight of a replayed search when
// --parallel is 0: the virtual clock divides recorded costs by it. A
// Kernel Tuner cache is searched one evaluation at a time, as the
// published protocol and bench-search do (ktParallel).
const (
	replayParallel = 4
	ktParallel     = 1
)

// ilsUsage is the help of --ils, on tune and bench-search.
const ilsUsage = "evo: when a bred epoch stagnates, climb from kicks of the best over one-step neighbours (the next value below or above of one knob) before the restart"

// interactUsage is the help of --interact, on tune and bench-search.
const interactUsage = "evo: the screening model also rates each pair of knobs together, by the product of their positions in their value lists (--interact=false: knob values alone, and value pairs of macro knobs)"

// replayed reports whether the backend's clock is virtual: its times are
// recorded costs, not time passing.
func (b backend) replayed() bool {
	_, ok := b.clock.(*evo.VirtualClock)
	return ok
}

// describe renders a config key for people: the knobs that differ from the
// family's default.
func (b backend) describe(key string) string {
	c, err := b.space.Parse(key)
	if err != nil {
		return key
	}
	return configChanges(c, b.space.Default(), b.space.Knobs)
}

// replayBackend answers from a recorded file: a replay file, whose problem
// and architecture are the file's (flags that ask for others are refused),
// or a Kernel Tuner cache. A virtual clock charges each candidate its
// recorded cost, so that --budget behaves as it did on the GPU.
func replayBackend(c *cli, opts tuneOptions, prob space.Problem, problemSet bool) (backend, error) {
	var rs recordedSpace
	var err error
	done := c.loading("replay " + filepath.Base(opts.Replay+opts.KTCache))
	if opts.KTCache != "" {
		rs, err = loadKTCache("tune", opts.KTCache, opts.KTValidOnly, opts.KTMacro)
	} else {
		rs, err = loadReplay("tune", opts.Replay, prob, problemSet, opts.Arch)
	}
	done()
	if err != nil {
		return backend{}, err
	}
	parallel := replayParallel
	if opts.KTCache != "" {
		parallel = ktParallel
	}
	parallel = cmp.Or(opts.Parallel, parallel)
	return backend{
		name:     "replay " + filepath.Base(rs.path),
		problem:  rs.problem,
		space:    rs.space,
		eval:     rs.eval,
		env:      rs.env,
		clock:    evo.NewVirtualClock(parallel),
		parallel: parallel,
		close:    func() error { return nil },
	}, nil
}

// openArchive opens the archive in dir for meta's problem, or creates it,
// and returns the saved search state (nil for a new search). An archive of
// another problem is refused with the fields that differ.
func openArchive(dir string, meta elites.Meta) (*elites.Archive, []byte, error) {
	exists, err := elites.Exists(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("tune --archive: %w", err)
	}
	if !exists {
		a, err := elites.Create(dir, meta)
		if err != nil {
			return nil, nil, fmt.Errorf("tune --archive: %w", err)
		}
		return a, nil, nil
	}
	a, err := elites.Open(dir, meta, elites.OpenOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("tune --archive: %w", err)
	}
	state, err := a.State()
	if err != nil {
		a.Close()
		return nil, nil, fmt.Errorf("tune --archive: %w", err)
	}
	return a, state, nil
}

// seeds returns the configs a new search starts from: the --elites best of
// --seed-from's archive, then the --seed-config configs. The --seed-config
// texts are checked first, so a typo is reported even on a resume. When the
// archive already holds a search, that search is resumed: its first
// generation, where seeds go, is in its saved state, so seeds says so and
// returns none.
func (o tuneOptions) seeds(stderr io.Writer, meta elites.Meta, sp *space.Space) ([]space.Config, error) {
	if o.SeedFrom == "" && len(o.SeedConfigs) == 0 {
		return nil, nil
	}
	given, err := seedConfigs(o.SeedConfigs, sp)
	if err != nil {
		return nil, err
	}
	if exists, err := elites.Exists(o.Archive); err != nil {
		return nil, fmt.Errorf("tune --archive: %w", err)
	} else if exists {
		fmt.Fprintf(stderr, "evotune: %s: archive %s already holds a search; resuming it without seeds\n", o.seedFlags(), o.Archive)
		return nil, nil
	}
	var seeds []space.Config
	if o.SeedFrom != "" {
		if seeds, err = seedFrom(stderr, o.SeedFrom, meta, o.Elites, sp); err != nil {
			return nil, err
		}
	}
	return append(seeds, given...), nil
}

// seedFlags names the seeding flags given, for messages.
func (o tuneOptions) seedFlags() string {
	var names []string
	if o.SeedFrom != "" {
		names = append(names, "--seed-from "+o.SeedFrom)
	}
	if len(o.SeedConfigs) > 0 {
		names = append(names, "--seed-config")
	}
	return strings.Join(names, ", ")
}

// seedFrom returns the configs of the k best results of the archive in dir.
func seedFrom(stderr io.Writer, dir string, meta elites.Meta, k int, sp *space.Space) ([]space.Config, error) {
	src, err := elites.Open(dir, meta, elites.OpenOptions{Seed: true})
	if err != nil {
		return nil, fmt.Errorf("tune --seed-from: %w", err)
	}
	defer src.Close()
	seeds := src.Seeds(k)
	valid := 0
	for i, c := range seeds {
		// A config recorded before knobs of sp existed means their Absent
		// values (an sm_89 config on sm_90: wgmma=off).
		if done, ok := sp.Complete(c); ok {
			seeds[i] = done
		}
		if sp.Check(seeds[i]) == nil {
			valid++
		}
	}
	// Configs of another problem may break this one's constraints; the
	// search skips those, and the count says how many remain.
	fmt.Fprintf(stderr, "evotune: seeding from %d of the %d best configs of %s (the others are not valid here)\n", valid, len(seeds), dir)
	return seeds, nil
}

// seedConfigs parses the --seed-config texts into configs of sp, refusing a
// config that is not valid there (a seed the search would silently skip is
// a typo the user wants to hear about).
func seedConfigs(texts []string, sp *space.Space) ([]space.Config, error) {
	var out []space.Config
	for _, text := range texts {
		c, err := sp.Parse(text)
		if err != nil {
			return nil, usagef("tune", "--seed-config %q: %v", text, err)
		}
		if err := sp.Check(c); err != nil {
			return nil, usagef("tune", "--seed-config %q: not valid for this problem: %v", text, err)
		}
		out = append(out, c)
	}
	return out, nil
}

// stateGeneration reads the generation number from a saved search state,
// for the resume message only: 0 when the state does not say.
func stateGeneration(state []byte) int {
	var s struct {
		Generation int `json:"generation"`
	}
	if json.Unmarshal(state, &s) != nil {
		return 0
	}
	return s.Generation
}

// moduleVersion is the version recorded in a new archive's identity.
func moduleVersion() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	return versionLine(info)
}

// writeSummary prints how the run ended, the counts and the elites.
func writeSummary(w io.Writer, width int, s evo.Summary, a *elites.Archive, opts tuneOptions, b backend) {
	var why string
	switch s.Stop {
	case evo.StopBudget:
		why = fmt.Sprintf("done: --evals %d reached", opts.Evals)
	case evo.StopTime:
		why = fmt.Sprintf("done: --budget %s spent", human(opts.Budget))
	case evo.StopExhausted:
		why = "done: every valid configuration has been evaluated"
	case evo.StopCancelled:
		why = "stopped: interrupted; the archive is complete, run the same command to resume"
	default:
		why = "stopped by an error"
	}
	clock := ""
	if _, ok := b.clock.(*evo.VirtualClock); ok {
		clock = " (replayed costs)"
	}
	fmt.Fprintf(w, "%s\n", why)
	fmt.Fprintf(w, "%d evaluations, %d answered from the archive, %d generations, elapsed %s%s%s\n",
		s.Evals, s.StoreHits, s.Generations, human(s.Elapsed), clock, statusCounts(s.ByStatus))
	if len(s.Elites) > 0 {
		best := s.Elites[0]
		fmt.Fprintf(w, "best: %s µs (%s)\n  key %s\n", us(best.Objective), b.describe(best.Key), best.Key)
	}
	fmt.Fprintln(w)
	eliteTable(a, opts.Elites).Write(w, "table", width)
}

// validate checks the flag values that do not need the archive or a GPU.
func (o tuneOptions) validate(evalsSet bool) error {
	if _, err := o.problem.problem("tune"); err != nil {
		return err
	}
	if err := o.recordedFileFlags.validate("tune"); err != nil {
		return err
	}
	switch {
	case !slices.Contains(evo.Strategies(), o.Strategy):
		return usagef("tune", "--strategy %q: want one of %s", o.Strategy, strings.Join(evo.Strategies(), ", "))
	case o.Archive == "":
		return usagef("tune", "--archive must name a directory")
	case evalsSet && o.Evals <= 0, o.Evals < 0:
		return usagef("tune", "--evals must be positive")
	case o.Budget < 0:
		return usagef("tune", "--budget must not be negative")
	case o.Parallel < 0:
		return usagef("tune", "--parallel must not be negative (0: as many as the machine keeps busy)")
	case o.Parallel > 1024:
		return usagef("tune", "--parallel %d: at most 1024 candidates in flight", o.Parallel)
	case o.Population != 0 && o.Population < 2:
		return usagef("tune", "--population must be at least 2 (0: the search's default)")
	case o.Elites <= 0:
		return usagef("tune", "--elites must be positive")
	case o.Population != 0 && o.Elites > o.Population:
		return usagef("tune", "--elites %d exceeds --population %d", o.Elites, o.Population)
	case o.Screen < 0 || o.Screen > evo.MaxScreen:
		return usagef("tune", "--screen must be in [1, %d] candidates per child (1: off; 0: the default), got %d", evo.MaxScreen, o.Screen)
	case o.Jobs < 0:
		return usagef("tune", "--jobs must not be negative")
	case o.ProgressEvery <= 0:
		return usagef("tune", "--progress-every must be positive")
	case o.KernelSource != "" && (o.Replay != "" || o.KTCache != ""):
		return usagef("tune", "--kernel-source: a recorded file answers and nothing is compiled")
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
