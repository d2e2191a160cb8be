package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"

	"evotune/cmd/evotune/internal/elitetable"
	"evotune/cmd/evotune/internal/torchcmp"
	"evotune/elites"
	"evotune/internal/durable"
	"evotune/kernels"
	"evotune/runner"
	"evotune/space"
)

// benchOptions are the flags of evotune bench.
type benchOptions struct {
	Archive string
	Config  string
	Shapes  []string // BxHxSxD, or BxHxSxD:causal
	Dtype   string
	Family  string // of --config without --archive
	// OutDtype is fp8's or int8's output type ("" is fp16).
	OutDtype string
	// VTransposed: --config's fp8 V comes transposed (with --archive, the
	// archive's problem says).
	VTransposed bool
	// Baseline is an archive of another dtype (our best fp16, beside an
	// fp8 or int8 archive) whose best is timed on every shape in the same run.
	Baseline string
	Out      string
	Python   string
	Script   string
	gpu      gpuSetup
	GPU      int
}

func defaultBenchOptions() benchOptions {
	return benchOptions{
		Shapes: []string{"1x8x512x64", "2x8x512x64", "4x16x2048x64", "4x16x2048x128", "8x16x4096x64:causal"},
		Dtype:  "fp16", Out: "bench-out", Python: "python3", Script: filepath.Join("bench", "torch_sdpa.py"),
	}
}

func benchCommand() command {
	return command{
		name:    "bench",
		summary: "time an archive's best configuration beside the family default and PyTorch SDPA",
		synopsis: "evotune bench --archive DIR [--config k=v,...] [--shapes BxHxSxD[:causal],...] [--dtype fp16|bf16|fp8|int8] " +
			"[--out-dtype fp16|bf16] [--baseline-archive DIR] [--out DIR] [--python PATH] [--torch-script FILE]",
		examples: `  # On a GPU machine, from the repository root (for bench/torch_sdpa.py):
  evotune bench --archive evotune-archive --out results/bench-h100

  # A configuration of your own instead of the archive's best.
  evotune bench --archive evotune-archive --config block_m=128,warps=8 --shapes 1x8x512x64,2x8x512x64

  # fp8 beside our best fp16 and PyTorch's fp16 backends, with end-to-end accuracy.
  evotune bench --archive fp8-archive --dtype fp8 --baseline-archive evotune-archive
`,
		run: func(ctx context.Context, c *cli, args []string) error { return runBench(ctx, c, args, openBenchGPU) },
	}
}

// rigBench is the torchcmp.GPU of runner.Rigs on one GPU: the setup's
// family's, opened first, and one more for each other family a problem
// names (a baseline archive of another family), opened when first asked;
// one pipeline per problem.
type rigBench struct {
	ctx    context.Context
	setup  gpuSetup
	stderr io.Writer
	rig    *runner.Rig            // the setup's family's
	rigs   map[string]*runner.Rig // by family name, the first included
	pipes  map[string]*runner.Pipeline
}

func openBenchGPU(ctx context.Context, s gpuSetup, stderr io.Writer) (torchcmp.GPU, error) {
	s.gpusFlag = "--gpu"
	rig, err := s.open(ctx, "bench", false, stderr)
	if err != nil {
		return nil, err
	}
	name := cmp.Or(s.Family.Name, kernels.DefaultFamily)
	return &rigBench{ctx: ctx, setup: s, stderr: stderr, rig: rig, rigs: map[string]*runner.Rig{name: rig},
		pipes: map[string]*runner.Pipeline{}}, nil
}

func (b *rigBench) Env() space.Env { return b.rig.Env() }

// rigFor returns the rig of prob's family, opening it (with the family's
// embedded source) if this is the first problem of that family.
func (b *rigBench) rigFor(prob space.Problem) (*runner.Rig, error) {
	name := cmp.Or(prob.Family, kernels.DefaultFamily)
	if r, ok := b.rigs[name]; ok {
		return r, nil
	}
	family, err := kernels.FamilyOf(name)
	if err != nil {
		return nil, err
	}
	s := b.setup
	s.Family, s.Source = family, nil
	r, err := s.open(b.ctx, "bench", false, b.stderr)
	if err != nil {
		return nil, err
	}
	b.rigs[name] = r
	return r, nil
}

func (b *rigBench) Space(prob space.Problem) (*space.Space, error) {
	r, err := b.rigFor(prob)
	if err != nil {
		return nil, err
	}
	return r.Space(prob)
}

func (b *rigBench) pipe(prob space.Problem) (*runner.Pipeline, error) {
	key := problemLine(prob)
	if p, ok := b.pipes[key]; ok {
		return p, nil
	}
	sp, err := b.Space(prob)
	if err != nil {
		return nil, err
	}
	r, err := b.rigFor(prob)
	if err != nil {
		return nil, err
	}
	p, err := r.Pipeline(prob, sp)
	if err != nil {
		return nil, err
	}
	b.pipes[key] = p
	return p, nil
}

func (b *rigBench) Evaluate(ctx context.Context, prob space.Problem, cfg space.Config) space.Result {
	p, err := b.pipe(prob)
	if err != nil {
		return space.Result{Key: cfg.Key(), Config: cfg, Gate: space.GateConstraint, Status: space.StatusConstraint, Reason: err.Error()}
	}
	return p.Evaluate(ctx, cfg)
}

func (b *rigBench) Eager(ctx context.Context, prob space.Problem, cfg space.Config) (space.Timing, error) {
	p, err := b.pipe(prob)
	if err != nil {
		return space.Timing{}, err
	}
	return p.Measure(ctx, cfg, prob.Shapes[0], true)
}

func (b *rigBench) Close() error {
	var errs []error
	for _, r := range b.rigs {
		errs = append(errs, r.Close())
	}
	return errors.Join(errs...)
}

func runBench(ctx context.Context, c *cli, args []string, open func(context.Context, gpuSetup, io.Writer) (torchcmp.GPU, error)) error {
	opts := defaultBenchOptions()
	fs := newFlagSet("bench")
	fs.StringVar(&opts.Archive, "archive", opts.Archive, "archive `directory` whose best configuration is timed; bench.json is copied into it")
	fs.StringVar(&opts.Config, "config", opts.Config, "time this configuration (`k=v,...`) instead of the archive's best")
	fs.StringSliceVar(&opts.Shapes, "shapes", opts.Shapes, "comma-separated shapes `BxHxSxD[:causal]` (with --archive, default the archive's shapes and mask)")
	fs.StringVar(&opts.Dtype, "dtype", opts.Dtype, "element type: "+space.DtypeList()+" (with --archive, default the archive's; PyTorch is timed in the output type beside fp8 and int8)")
	fs.StringVar(&opts.OutDtype, "out-dtype", opts.OutDtype, "output type of --dtype fp8 or int8: fp16 or bf16 (default fp16)")
	fs.BoolVar(&opts.VTransposed, "v-transposed", opts.VTransposed, vTransposedUsage+" (--config without --archive; an archive says)")
	fs.StringVar(&opts.Family, "family", opts.Family, "kernel family of --config: "+strings.Join(kernels.FamilyNames(), ", ")+" (with --archive, the archive's)")
	fs.StringVar(&opts.Baseline, "baseline-archive", opts.Baseline, "archive `directory` of another dtype (e.g. our best fp16 beside fp8 or int8) whose best is timed on every shape too")
	fs.StringVar(&opts.Out, "out", opts.Out, "`directory` for bench.md and bench.json")
	fs.StringVar(&opts.Python, "python", opts.Python, "python `interpreter` with PyTorch")
	fs.StringVar(&opts.Script, "torch-script", opts.Script, "`path` of bench/torch_sdpa.py")
	opts.gpu.register(fs, "sm_90")
	fs.IntVar(&opts.GPU, "gpu", opts.GPU, "index of the GPU to time on")
	if _, err := c.parseFlags(fs, args, false); err != nil {
		return err
	}
	shapes, err := torchcmp.ParseShapes(opts.Shapes)
	if err != nil {
		return usagef("bench", "--shapes: %v", err)
	}
	if opts.OutDtype, err = checkDtypes("bench", opts.Dtype, opts.OutDtype); err != nil {
		return err
	}
	switch {
	case opts.Archive == "" && opts.Config == "":
		return usagef("bench", "--archive (or --config) is needed: what should be timed?")
	case opts.Out == "":
		return usagef("bench", "--out must name a directory")
	case opts.GPU < 0:
		return usagef("bench", "--gpu %d: want a GPU index", opts.GPU)
	}

	// What is timed: the archive's best, or --config, for the problem it was tuned for.
	configFamily, err := kernels.FamilyOf(opts.Family)
	if err != nil {
		return usagef("bench", "--family: %v", err)
	}
	if opts.Family != "" && opts.Archive != "" {
		return usagef("bench", "--family: the archive names its family")
	}
	if opts.VTransposed && opts.Archive != "" {
		return usagef("bench", "--v-transposed: the archive's problem says how V comes")
	}
	if err := checkVTransposed("bench", configFamily, opts.Dtype, opts.VTransposed); err != nil {
		return err
	}
	tunedFor := space.Problem{Family: cmp.Or(opts.Family, kernels.DefaultFamily), Shapes: []space.Shape{shapes[0].Shape}, Dtype: opts.Dtype, OutDtype: opts.OutDtype, VTransposed: opts.VTransposed}
	var best space.Config
	bestKey := ""
	if opts.Archive != "" {
		a, err := elites.Read(opts.Archive)
		if err != nil {
			return fmt.Errorf("bench --archive: %w", err)
		}
		warnSkipped(c.stderr, a)
		completeConfigs(c.stderr, a, archiveSpace(a))
		r, ok := a.Best()
		for _, d := range elitetable.Hidden(a, elitetable.Bound(a.Top(1), 1), "a result faster than the best timed here") {
			fmt.Fprintln(c.stdout, d)
		}
		tunedFor = a.Meta().Problem
		a.Close()
		if !ok && opts.Config == "" {
			return fmt.Errorf("bench: archive %s holds no configuration that passed every gate", opts.Archive)
		}
		best, bestKey = r.Config, r.Key
		// The archive's problem is what its best was tuned for: the
		// dtype and the shapes with their mask, unless the flags say.
		if !fs.Changed("dtype") {
			opts.Dtype = tunedFor.Dtype
			if !fs.Changed("out-dtype") {
				opts.OutDtype = tunedFor.OutDtype
			}
		}
		if !fs.Changed("shapes") {
			shapes = shapes[:0]
			for _, s := range tunedFor.Shapes {
				shapes = append(shapes, torchcmp.Shape{Shape: s, Causal: tunedFor.Causal})
			}
		}
	}
	var baseline torchcmp.Baseline
	if opts.Baseline != "" {
		if baseline, err = readBaseline(opts.Baseline, c.stderr); err != nil {
			return err
		}
	}
	if _, err := os.Stat(opts.Script); err != nil {
		return usagef("bench", "--torch-script: %v (run from the repository root, or name bench/torch_sdpa.py)", err)
	}

	opts.gpu.GPUs = []int{opts.GPU}
	// The rig compiles the archive's family; a baseline of another family
	// gets its own (rigBench.rigFor).
	family, err := kernels.FamilyOf(tunedFor.Family)
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	opts.gpu.Family = family
	gpu, err := open(ctx, opts.gpu, c.stderr)
	if err != nil {
		return fmt.Errorf("%w (bench needs a GPU)", err)
	}
	defer gpu.Close()
	if opts.Config != "" {
		sp, err := gpu.Space(tunedFor)
		if err != nil {
			return fmt.Errorf("bench: the space of %s: %w", problemLine(tunedFor), err)
		}
		if best, err = sp.Parse(opts.Config); err != nil {
			return usagef("bench", "--config %q: %v", opts.Config, err)
		}
		bestKey = best.Key()
	}

	env := gpu.Env()
	rep := elites.Bench{
		Env: env, Date: c.now().UTC().Truncate(time.Second), Commit: gitCommit(),
		Command: strings.Join(append([]string{"evotune", "bench"}, args...), " "), Dtype: opts.Dtype,
		Archive: opts.Archive, Best: bestKey, BestConfig: best, TunedFor: tunedFor, Given: opts.Config != "",
		Baseline: opts.Baseline, BaselineBest: baseline.Key, BaselineFor: baseline.Problem,
	}
	for _, s := range shapes {
		fmt.Fprintf(c.stderr, "evotune: bench %s\n", s)
		row, err := torchcmp.Row(ctx, gpu, s, opts.Dtype, opts.OutDtype, best, tunedFor)
		if err != nil {
			return fmt.Errorf("bench: %w", err)
		}
		if opts.Baseline != "" {
			torchcmp.AddBaseline(ctx, gpu, &row, s, baseline)
		}
		rep.Rows = append(rep.Rows, row)
	}
	torch, torchCmds, torchErr := torchcmp.RunTorch(ctx, opts.Python, opts.Script, opts.Dtype, opts.OutDtype, shapes)
	rep.TorchCommand, rep.Torch, rep.TorchCUDA, rep.CuDNN = torchCmds, torch.Torch, torch.CUDA, torch.CuDNN
	if torchErr != nil {
		rep.TorchError = torchErr.Error()
	}
	torchcmp.Attach(&rep, torch.Results)

	md := torchcmp.Markdown(rep)
	if err := writeBench(rep, md, opts.Out, opts.Archive); err != nil {
		return err
	}
	fmt.Fprint(c.stdout, md)
	if torchErr != nil {
		return fmt.Errorf("bench: the PyTorch comparison failed (our timings are in %s): %w", opts.Out, torchErr)
	}
	return nil
}

// readBaseline reads the best of an archive timed beside ours.
func readBaseline(dir string, stderr io.Writer) (torchcmp.Baseline, error) {
	a, err := elites.Read(dir)
	if err != nil {
		return torchcmp.Baseline{}, fmt.Errorf("bench --baseline-archive: %w", err)
	}
	defer a.Close()
	warnSkipped(stderr, a)
	completeConfigs(stderr, a, archiveSpace(a))
	r, ok := a.Best()
	if !ok {
		return torchcmp.Baseline{}, fmt.Errorf("bench --baseline-archive: archive %s holds no configuration that passed every gate", dir)
	}
	return torchcmp.Baseline{Key: r.Key, Config: r.Config, Problem: a.Meta().Problem}, nil
}

// writeBench puts bench.md and bench.json in out, and keeps bench.json in
// the archive (when there is one), so that export can quote the comparison.
func writeBench(rep elites.Bench, md, out, archive string) error {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return fmt.Errorf("bench --out: %w", err)
	}
	data, err := rep.Encode()
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	for name, content := range map[string][]byte{"bench.md": []byte(md), elites.BenchName: data} {
		if err := durable.WriteFile(filepath.Join(out, name), content, 0o644); err != nil {
			return fmt.Errorf("bench: %w", err)
		}
	}
	if archive != "" {
		if err := elites.SaveBench(archive, rep); err != nil {
			return fmt.Errorf("bench: keeping %s in the archive (it is in %s): %w", elites.BenchName, out, err)
		}
	}
	return nil
}

// gitCommit is the commit of the code that ran: the revision this binary
// was built from (with "+modified" when its tree had local changes), else
// $EVOTUNE_COMMIT (set by whoever built it without version control), else
// "" (rendered as unknown). The working directory's checkout is never
// asked: it need not be the code this binary was built from.
func gitCommit() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		if c := buildRevision(info); c != "" {
			return c
		}
	}
	return os.Getenv("EVOTUNE_COMMIT")
}

// buildRevision is the VCS revision recorded in a build, with "+modified"
// for a tree with local changes; "" when the build recorded none (go test,
// go run outside a checkout).
func buildRevision(info *debug.BuildInfo) string {
	var rev, modified string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				modified = "+modified"
			}
		}
	}
	if rev == "" {
		return ""
	}
	return rev + modified
}
