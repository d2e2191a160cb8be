package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"time"

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
	// OutDtype is fp8's output type ("" is fp16).
	OutDtype string
	// Baseline is an archive of another dtype (our best fp16, beside an
	// fp8 archive) whose best is timed on every shape in the same run.
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
		synopsis: "evotune bench --archive DIR [--config k=v,...] [--shapes BxHxSxD[:causal],...] [--dtype fp16|bf16|fp8] " +
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

// A benchShape is one row of the bench: a shape and its mask.
type benchShape struct {
	Shape  space.Shape
	Causal bool
}

func (s benchShape) String() string {
	if s.Causal {
		return s.Shape.String() + ":causal"
	}
	return s.Shape.String()
}

// parseBenchShapes reads BxHxSxD[:causal] items.
func parseBenchShapes(items []string) ([]benchShape, error) {
	var out []benchShape
	for _, item := range items {
		for _, text := range strings.Split(item, ",") {
			text = strings.TrimSpace(text)
			if text == "" {
				continue
			}
			shapeText, mask, hasMask := strings.Cut(text, ":")
			if hasMask && mask != "causal" {
				return nil, fmt.Errorf("%q: the only suffix is :causal", text)
			}
			s, err := space.ParseShape(shapeText)
			if err != nil {
				return nil, err
			}
			out = append(out, benchShape{Shape: s, Causal: hasMask})
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no shape")
	}
	return out, nil
}

// A benchGPU compiles and times configurations on one GPU; openBenchGPU
// opens the real one and tests replace it.
type benchGPU interface {
	// Env is the provenance of every measurement: GPU, driver, arch, nvcc,
	// kernel source hash.
	Env() space.Env
	// Space is the family's space for prob on this GPU.
	Space(prob space.Problem) (*space.Space, error)
	// Evaluate takes cfg through every gate for prob (one shape): the
	// result's timing is graph replay.
	Evaluate(ctx context.Context, prob space.Problem, cfg space.Config) space.Result
	// Eager times cfg (already evaluated OK) with plain launches.
	Eager(ctx context.Context, prob space.Problem, cfg space.Config) (space.Timing, error)
	Close() error
}

// rigBench is the benchGPU of a runner.Rig: one pipeline per problem.
type rigBench struct {
	rig   *runner.Rig
	pipes map[string]*benchPipe
}

type benchPipe struct {
	eval interface {
		Evaluate(context.Context, space.Config) space.Result
		Measure(context.Context, space.Config, space.Shape, bool) (space.Timing, error)
	}
}

func openBenchGPU(ctx context.Context, s gpuSetup, stderr io.Writer) (benchGPU, error) {
	s.gpusFlag = "--gpu"
	rig, err := s.open(ctx, "bench", false, stderr)
	if err != nil {
		return nil, err
	}
	return &rigBench{rig: rig, pipes: map[string]*benchPipe{}}, nil
}

func (b *rigBench) Env() space.Env { return b.rig.Env() }

func (b *rigBench) Space(prob space.Problem) (*space.Space, error) {
	return b.rig.Space(prob)
}

func (b *rigBench) pipe(prob space.Problem) (*benchPipe, error) {
	key := problemLine(prob)
	if p, ok := b.pipes[key]; ok {
		return p, nil
	}
	sp, err := b.Space(prob)
	if err != nil {
		return nil, err
	}
	pipe, err := b.rig.Pipeline(prob, sp)
	if err != nil {
		return nil, err
	}
	p := &benchPipe{eval: pipe}
	b.pipes[key] = p
	return p, nil
}

func (b *rigBench) Evaluate(ctx context.Context, prob space.Problem, cfg space.Config) space.Result {
	p, err := b.pipe(prob)
	if err != nil {
		return space.Result{Key: cfg.Key(), Config: cfg, Gate: space.GateConstraint, Status: space.StatusConstraint, Reason: err.Error()}
	}
	return p.eval.Evaluate(ctx, cfg)
}

func (b *rigBench) Eager(ctx context.Context, prob space.Problem, cfg space.Config) (space.Timing, error) {
	p, err := b.pipe(prob)
	if err != nil {
		return space.Timing{}, err
	}
	return p.eval.Measure(ctx, cfg, prob.Shapes[0], true)
}

func (b *rigBench) Close() error { return b.rig.Close() }

// A benchMeasure is one configuration timed on one row's shape.
type benchMeasure struct {
	Key    string       `json:"key"`
	Config space.Config `json:"config"`
	Status space.Status `json:"status"`
	Reason string       `json:"reason,omitempty"`
	// GraphUS is the median µs a call with CUDA-graph replay, with its 95%
	// CI; EagerUS with plain launches.
	GraphUS      float64 `json:"graph_us"`
	GraphCILowUS float64 `json:"graph_ci_low_us"`
	GraphCIHigh  float64 `json:"graph_ci_high_us"`
	EagerUS      float64 `json:"eager_us"`
	EagerError   string  `json:"eager_error,omitempty"`
	TFLOPs       float64 `json:"graph_tflops"`
	MaxAbsErr    float64 `json:"max_abs_err"`
	// fp8: the worst end-to-end error against fp32 attention on the
	// unquantised inputs over the check cases (cosine, relative L1).
	E2ECos    float64 `json:"e2e_cos,omitempty"`
	E2ERelL1  float64 `json:"e2e_rel_l1,omitempty"`
	Throttled bool    `json:"throttled,omitempty"`
}

// A torchTiming is one row of torch_sdpa.py's JSON output.
type torchTiming struct {
	Shape     string  `json:"shape"`
	Backend   string  `json:"backend"`
	Dtype     string  `json:"dtype"`
	Causal    bool    `json:"causal"`
	InputSets int     `json:"input_sets"`
	GraphUS   float64 `json:"graph_us"`
	EagerUS   float64 `json:"eager_us"`
	Launches  int     `json:"launches_per_sample"`
	TFLOPs    float64 `json:"graph_tflops,omitempty"`
	Error     string  `json:"error"`
}

// torchReport is torch_sdpa.py --json's output.
type torchReport struct {
	Torch   string        `json:"torch"`
	CUDA    string        `json:"cuda"`
	CuDNN   int           `json:"cudnn"`
	Device  string        `json:"device"`
	Results []torchTiming `json:"results"`
}

// Torch backends in table order.
var torchBackends = [...]string{"flash", "cudnn", "efficient"}

// A benchRow is one shape of the bench.
type benchRow struct {
	Shape  string `json:"shape"`
	Causal bool   `json:"causal"`
	// Source says which configuration "ours" is: "best" (the archive's or
	// --config), or "default" when the archive's was compiled for another
	// head dimension or dtype; Note says why.
	Source  string                 `json:"source"`
	Note    string                 `json:"note,omitempty"`
	Ours    benchMeasure           `json:"ours"`
	Default benchMeasure           `json:"default"`
	Torch   map[string]torchTiming `json:"torch,omitempty"`
	// Ratios of graph-replay times, ours over PyTorch's; 0 when either is
	// missing.
	OursOverCuDNN float64 `json:"ours_over_cudnn,omitempty"`
	OursOverFlash float64 `json:"ours_over_flash,omitempty"`
	// Baseline is the --baseline-archive's best (or its family default)
	// on this shape in its own dtype; OursOverBaseline is graph over graph.
	Baseline         *benchMeasure `json:"baseline,omitempty"`
	OursOverBaseline float64       `json:"ours_over_baseline,omitempty"`
}

// A benchReport is what bench.json holds.
type benchReport struct {
	GPU          string       `json:"gpu"`
	ComputeCap   string       `json:"compute_cap"`
	Driver       string       `json:"driver"`
	Arch         string       `json:"arch"`
	NVCC         string       `json:"nvcc"`
	SourceHash   string       `json:"source_hash"`
	Date         time.Time    `json:"date"`
	Commit       string       `json:"commit"`
	Command      string       `json:"command"`
	TorchCommand []string     `json:"torch_command"`
	Torch        string       `json:"torch"`
	TorchCUDA    string       `json:"torch_cuda"`
	CuDNN        int          `json:"cudnn"`
	TorchError   string       `json:"torch_error,omitempty"`
	Dtype        string       `json:"dtype"`
	Archive      string       `json:"archive,omitempty"`
	Best         string       `json:"best"`
	BestConfig   space.Config `json:"best_config"`
	// TunedFor is the problem the best configuration was tuned for.
	TunedFor space.Problem `json:"tuned_for"`
	// Baseline is --baseline-archive, its best and the problem it was tuned for.
	Baseline     string        `json:"baseline_archive,omitempty"`
	BaselineBest string        `json:"baseline_best,omitempty"`
	BaselineFor  space.Problem `json:"baseline_tuned_for,omitzero"`
	Rows         []benchRow    `json:"rows"`
}

func runBench(ctx context.Context, c *cli, args []string, open func(context.Context, gpuSetup, io.Writer) (benchGPU, error)) error {
	opts := defaultBenchOptions()
	fs := newFlagSet("bench")
	fs.StringVar(&opts.Archive, "archive", opts.Archive, "archive `directory` whose best configuration is timed; bench.json is copied into it")
	fs.StringVar(&opts.Config, "config", opts.Config, "time this configuration (`k=v,...`) instead of the archive's best")
	fs.StringSliceVar(&opts.Shapes, "shapes", opts.Shapes, "comma-separated shapes `BxHxSxD[:causal]`")
	fs.StringVar(&opts.Dtype, "dtype", opts.Dtype, "element type: "+space.DtypeList()+" (PyTorch is timed in fp16 beside fp8)")
	fs.StringVar(&opts.OutDtype, "out-dtype", opts.OutDtype, "output type of --dtype fp8: fp16 or bf16 (default fp16)")
	fs.StringVar(&opts.Baseline, "baseline-archive", opts.Baseline, "archive `directory` of another dtype (e.g. our best fp16 beside fp8) whose best is timed on every shape too")
	fs.StringVar(&opts.Out, "out", opts.Out, "`directory` for bench.md and bench.json")
	fs.StringVar(&opts.Python, "python", opts.Python, "python `interpreter` with PyTorch")
	fs.StringVar(&opts.Script, "torch-script", opts.Script, "`path` of bench/torch_sdpa.py")
	opts.gpu.register(fs, "sm_90")
	fs.IntVar(&opts.GPU, "gpu", opts.GPU, "index of the GPU to time on")
	if _, err := c.parseFlags(fs, args, false); err != nil {
		return err
	}
	shapes, err := parseBenchShapes(opts.Shapes)
	switch {
	case err != nil:
		return usagef("bench", "--shapes: %v", err)
	case !slices.Contains(space.Dtypes(), opts.Dtype):
		return usagef("bench", "--dtype %q: want %s", opts.Dtype, space.DtypeList())
	case opts.OutDtype != "" && opts.Dtype != "fp8":
		return usagef("bench", "--out-dtype %s: only --dtype fp8 takes one", opts.OutDtype)
	case opts.OutDtype != "" && opts.OutDtype != "fp16" && opts.OutDtype != "bf16":
		return usagef("bench", "--out-dtype %q: want fp16 or bf16", opts.OutDtype)
	case opts.Archive == "" && opts.Config == "":
		return usagef("bench", "--archive (or --config) is needed: what should be timed?")
	case opts.Out == "":
		return usagef("bench", "--out must name a directory")
	case opts.GPU < 0:
		return usagef("bench", "--gpu %d: want a GPU index", opts.GPU)
	}

	// What is timed: the archive's best, or --config, for the problem it was tuned for.
	if opts.OutDtype == "fp16" {
		opts.OutDtype = "" // the default output: one spelling, as tune writes it
	}
	tunedFor := space.Problem{Family: kernels.Family, Shapes: []space.Shape{shapes[0].Shape}, Dtype: opts.Dtype, OutDtype: opts.OutDtype}
	var best space.Config
	bestKey := ""
	if opts.Archive != "" {
		a, err := elites.Read(opts.Archive)
		if err != nil {
			return fmt.Errorf("bench --archive: %w", err)
		}
		warnSkipped(c.stderr, a)
		r, ok := a.Best()
		tunedFor = a.Meta().Problem
		a.Close()
		if !ok && opts.Config == "" {
			return fmt.Errorf("bench: archive %s holds no configuration that passed every gate", opts.Archive)
		}
		best, bestKey = r.Config, r.Key
	}
	var baseline benchBaseline
	if opts.Baseline != "" {
		if baseline, err = readBaseline(opts.Baseline, c.stderr); err != nil {
			return err
		}
	}
	if _, err := os.Stat(opts.Script); err != nil {
		return usagef("bench", "--torch-script: %v (run from the repository root, or name bench/torch_sdpa.py)", err)
	}

	opts.gpu.GPUs = []int{opts.GPU}
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
	rep := benchReport{
		GPU: env.GPU, ComputeCap: env.ComputeCap, Driver: env.Driver, Arch: env.Arch, NVCC: env.NVCC,
		SourceHash: env.SourceHash, Date: c.now().UTC().Truncate(time.Second), Commit: gitCommit(ctx),
		Command: strings.Join(append([]string{"evotune", "bench"}, args...), " "), Dtype: opts.Dtype,
		Archive: opts.Archive, Best: bestKey, BestConfig: best, TunedFor: tunedFor,
		Baseline: opts.Baseline, BaselineBest: baseline.Key, BaselineFor: baseline.Problem,
	}
	for _, s := range shapes {
		fmt.Fprintf(c.stderr, "evotune: bench %s\n", s)
		row, err := benchShapeRow(ctx, gpu, s, opts.Dtype, opts.OutDtype, best, tunedFor)
		if err != nil {
			return err
		}
		if opts.Baseline != "" {
			row.Baseline = benchBaselineRow(ctx, gpu, s, baseline)
			row.OursOverBaseline = 0
			if row.Ours.GraphUS > 0 && row.Baseline.GraphUS > 0 {
				row.OursOverBaseline = row.Ours.GraphUS / row.Baseline.GraphUS
			}
		}
		rep.Rows = append(rep.Rows, row)
	}
	torch, torchCmds, torchErr := runTorch(ctx, opts, shapes)
	rep.TorchCommand, rep.Torch, rep.TorchCUDA, rep.CuDNN = torchCmds, torch.Torch, torch.CUDA, torch.CuDNN
	if torchErr != nil {
		rep.TorchError = torchErr.Error()
	}
	rep.attachTorch(torch.Results)

	if err := rep.write(opts.Out, opts.Archive); err != nil {
		return err
	}
	fmt.Fprint(c.stdout, rep.markdown())
	if torchErr != nil {
		return fmt.Errorf("bench: the PyTorch comparison failed (our timings are in %s): %w", opts.Out, torchErr)
	}
	return nil
}

// benchShapeRow times the best config (when it was compiled for this
// shape's head dimension and dtype) and the family default on one shape.
func benchShapeRow(ctx context.Context, gpu benchGPU, s benchShape, dtype, outDtype string, best space.Config, tunedFor space.Problem) (benchRow, error) {
	prob := space.Problem{Family: kernels.Family, Shapes: []space.Shape{s.Shape}, Dtype: dtype, OutDtype: outDtype, Causal: s.Causal}
	row := benchRow{Shape: s.Shape.String(), Causal: s.Causal, Source: "best"}
	sp, err := gpu.Space(prob)
	if err != nil {
		return row, fmt.Errorf("bench: the space of %s: %w", s, err)
	}
	def := sp.Default()
	row.Default = measure(ctx, gpu, prob, def)
	ours := best
	switch {
	case len(tunedFor.Shapes) > 0 && tunedFor.Shapes[0].D != s.Shape.D:
		row.Note = fmt.Sprintf("the best config was tuned for D=%d: the family default is shown", tunedFor.Shapes[0].D)
	case tunedFor.Dtype != "" && tunedFor.Dtype != dtype:
		row.Note = fmt.Sprintf("the best config was tuned for %s: the family default is shown", tunedFor.Dtype)
	case best == nil:
		row.Note = "no best config: the family default is shown"
	default:
		if err := sp.Check(best); err != nil {
			row.Note = fmt.Sprintf("the best config is not valid here (%v): the family default is shown", err)
		}
	}
	if row.Note != "" {
		row.Source, row.Ours = "default", row.Default
		return row, nil
	}
	if ours.Key() == def.Key() {
		row.Ours = row.Default
		return row, nil
	}
	row.Ours = measure(ctx, gpu, prob, ours)
	return row, nil
}

// torchDtype is the dtype PyTorch SDPA is timed in: ours, or for fp8 (which
// PyTorch's flash and cuDNN backends do not take) the output dtype, which is
// what a user of fp8 attention would otherwise run.
func torchDtype(dtype, outDtype string) string {
	if dtype != "fp8" {
		return dtype
	}
	return cmpOr(outDtype, "fp16")
}

// A benchBaseline is the best of --baseline-archive and its problem.
type benchBaseline struct {
	Key     string
	Config  space.Config
	Problem space.Problem
}

// readBaseline reads the best of an archive timed beside ours.
func readBaseline(dir string, stderr io.Writer) (benchBaseline, error) {
	a, err := elites.Read(dir)
	if err != nil {
		return benchBaseline{}, fmt.Errorf("bench --baseline-archive: %w", err)
	}
	defer a.Close()
	warnSkipped(stderr, a)
	r, ok := a.Best()
	if !ok {
		return benchBaseline{}, fmt.Errorf("bench --baseline-archive: archive %s holds no configuration that passed every gate", dir)
	}
	return benchBaseline{Key: r.Key, Config: r.Config, Problem: a.Meta().Problem}, nil
}

// benchBaselineRow times the baseline's best on one shape, in the
// baseline's dtype, or its family default where the best does not apply.
func benchBaselineRow(ctx context.Context, gpu benchGPU, s benchShape, b benchBaseline) *benchMeasure {
	prob := space.Problem{Family: kernels.Family, Shapes: []space.Shape{s.Shape}, Dtype: b.Problem.Dtype, OutDtype: b.Problem.OutDtype, Causal: s.Causal}
	sp, err := gpu.Space(prob)
	if err != nil {
		return &benchMeasure{Status: space.StatusConstraint, Reason: err.Error()}
	}
	cfg := b.Config
	if len(b.Problem.Shapes) == 0 || b.Problem.Shapes[0].D != s.Shape.D || sp.Check(cfg) != nil {
		cfg = sp.Default()
	}
	m := measure(ctx, gpu, prob, cfg)
	return &m
}

// measure evaluates cfg through every gate (graph timing) and, when it
// passed, times it eagerly.
func measure(ctx context.Context, gpu benchGPU, prob space.Problem, cfg space.Config) benchMeasure {
	r := gpu.Evaluate(ctx, prob, cfg)
	m := benchMeasure{Key: cfg.Key(), Config: cfg, Status: r.Status, Reason: r.Reason}
	if r.Accuracy != nil {
		m.MaxAbsErr = r.Accuracy.MaxAbsErr
		m.E2ECos, m.E2ERelL1 = r.Accuracy.E2ECos, r.Accuracy.E2ERelL1
	}
	if !r.OK() || len(r.Timings) == 0 {
		if m.Reason == "" {
			m.Reason = fmt.Sprintf("stopped at the %s gate", r.Gate)
		}
		return m
	}
	t := r.Timings[0]
	m.GraphUS, m.GraphCILowUS, m.GraphCIHigh, m.Throttled = t.P50US, t.CILowUS, t.CIHighUS, t.Throttled
	m.TFLOPs = kernels.SDPAFLOPs(prob.Shapes[0], prob.Causal) / t.P50US / 1e6
	e, err := gpu.Eager(ctx, prob, cfg)
	if err != nil {
		m.EagerError = err.Error()
	} else {
		m.EagerUS = e.P50US
	}
	return m
}

// runTorch runs torch_sdpa.py --json once per mask (its --causal applies to
// every shape) and merges the results.
func runTorch(ctx context.Context, opts benchOptions, shapes []benchShape) (torchReport, []string, error) {
	var rep torchReport
	var cmds []string
	for _, causal := range []bool{false, true} {
		var names []string
		for _, s := range shapes {
			if s.Causal == causal {
				names = append(names, s.Shape.String())
			}
		}
		if len(names) == 0 {
			continue
		}
		args := []string{opts.Script, "--json", "--dtype", torchDtype(opts.Dtype, opts.OutDtype), "--shapes", strings.Join(names, ",")}
		if causal {
			args = append(args, "--causal")
		}
		line := opts.Python + " " + strings.Join(args, " ")
		cmds = append(cmds, line)
		tctx, cancel := context.WithTimeout(ctx, 15*time.Minute)
		cmd := exec.CommandContext(tctx, opts.Python, args...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		cancel()
		if err != nil {
			return rep, cmds, fmt.Errorf("%s: %w: %s", line, err, strings.TrimSpace(stderr.String()))
		}
		var part torchReport
		if err := json.Unmarshal(out, &part); err != nil {
			return rep, cmds, fmt.Errorf("%s: reading its JSON output: %w", line, err)
		}
		rep.Torch, rep.CUDA, rep.CuDNN, rep.Device = part.Torch, part.CUDA, part.CuDNN, part.Device
		rep.Results = append(rep.Results, part.Results...)
	}
	return rep, cmds, nil
}

// attachTorch puts PyTorch's timings into their rows and computes ratios.
func (rep *benchReport) attachTorch(results []torchTiming) {
	for i := range rep.Rows {
		row := &rep.Rows[i]
		for _, t := range results {
			if t.Shape == row.Shape && t.Causal == row.Causal {
				if row.Torch == nil {
					row.Torch = map[string]torchTiming{}
				}
				row.Torch[t.Backend] = t
			}
		}
		row.OursOverCuDNN = ratio(row.Ours.GraphUS, row.Torch["cudnn"])
		row.OursOverFlash = ratio(row.Ours.GraphUS, row.Torch["flash"])
	}
}

func ratio(ours float64, t torchTiming) float64 {
	if !(ours > 0) || t.Error != "" || !(t.GraphUS > 0) {
		return 0
	}
	return ours / t.GraphUS
}

// markdown renders the report as bench.md.
func (rep *benchReport) markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# evotune bench: tuned SDPA beside PyTorch SDPA\n\n")
	fmt.Fprintf(&b, "- GPU: %s (compute %s, %s, driver %s)\n", orUnknown(rep.GPU), orUnknown(rep.ComputeCap), orUnknown(rep.Arch), orUnknown(rep.Driver))
	fmt.Fprintf(&b, "- date: %s\n- commit: %s\n- nvcc: %s, kernel source %s\n", rep.Date.Format(time.RFC3339), orUnknown(rep.Commit), orUnknown(rep.NVCC), shortHash(rep.SourceHash))
	fmt.Fprintf(&b, "- PyTorch: %s, CUDA %s, cuDNN %d\n", orUnknown(rep.Torch), orUnknown(rep.TorchCUDA), rep.CuDNN)
	fmt.Fprintf(&b, "- command: `%s`", rep.Command)
	for _, c := range rep.TorchCommand {
		fmt.Fprintf(&b, ", then `%s`", c)
	}
	fmt.Fprintf(&b, "\n- best: `%s` (tuned for %s)\n", orUnknown(rep.Best), problemLine(rep.TunedFor))
	if rep.Baseline != "" {
		fmt.Fprintf(&b, "- baseline: `%s` of %s (tuned for %s), timed in the same run\n", orUnknown(rep.BaselineBest), rep.Baseline, problemLine(rep.BaselineFor))
	}
	if rep.Dtype == "fp8" {
		fmt.Fprintf(&b, "- PyTorch is timed in %s (its flash and cuDNN backends take no fp8); e2e is ours against fp32 attention on the unquantised inputs, worst check case (cosine / relative L1)\n",
			torchDtype(rep.Dtype, rep.TunedFor.OutDtype))
	}
	fmt.Fprintf(&b, "- method: %s; µs per call, median of the samples of a CUDA graph of many calls (graph) or of batches of plain launches "+
		"between events (eager), inputs rotated over sets larger than twice the L2, ours and PyTorch alike; PyTorch cells are graph / eager; "+
		"ratios are graph over graph (below 1: ours is faster); TFLOP/s is ours, graph.\n\n", rep.Dtype)
	if rep.TorchError != "" {
		fmt.Fprintf(&b, "PyTorch comparison failed: %s\n\n", rep.TorchError)
	}
	extraHead, extraRule := "", ""
	if rep.Baseline != "" {
		extraHead, extraRule = " baseline graph | ours / baseline |", "---|---|"
	}
	if rep.Dtype == "fp8" {
		extraHead, extraRule = extraHead+" e2e cos / rel L1 |", extraRule+"---|"
	}
	fmt.Fprintf(&b, "| shape | config | ours graph | ours eager | default graph (eager) | flash | cuDNN | efficient | ours / cuDNN | ours / flash | TFLOP/s |%s\n", extraHead)
	fmt.Fprintf(&b, "|---|---|---|---|---|---|---|---|---|---|---|%s\n", extraRule)
	var notes []string
	for _, r := range rep.Rows {
		shape := r.Shape
		if r.Causal {
			shape += " causal"
		}
		label := r.Source
		if r.Note != "" {
			notes = append(notes, fmt.Sprintf("%s: %s.", shape, r.Note))
			label += " †"
		}
		for _, m := range []benchMeasure{r.Ours, r.Default} {
			if m.Status != space.StatusOK && m.Key != "" {
				notes = append(notes, fmt.Sprintf("%s: `%s` %s: %s.", shape, m.Key, m.Status, m.Reason))
			}
			if m.EagerError != "" {
				notes = append(notes, fmt.Sprintf("%s: `%s` eager timing failed: %s.", shape, m.Key, m.EagerError))
			}
		}
		extra := ""
		if rep.Baseline != "" {
			base := benchMeasure{}
			if r.Baseline != nil {
				base = *r.Baseline
				if base.Status != space.StatusOK {
					notes = append(notes, fmt.Sprintf("%s: baseline `%s` %s: %s.", shape, base.Key, base.Status, base.Reason))
				}
			}
			extra += fmt.Sprintf(" %s | %s |", usCell(base.GraphUS), ratioCell(r.OursOverBaseline))
		}
		if rep.Dtype == "fp8" {
			extra += " " + e2eCell(r.Ours) + " |"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s (%s) | %s | %s | %s | %s | %s | %s |%s\n",
			shape, label, usCell(r.Ours.GraphUS), usCell(r.Ours.EagerUS), usCell(r.Default.GraphUS), usCell(r.Default.EagerUS),
			torchCell(r.Torch, "flash"), torchCell(r.Torch, "cudnn"), torchCell(r.Torch, "efficient"),
			ratioCell(r.OursOverCuDNN), ratioCell(r.OursOverFlash), tflopsCell(r.Ours.TFLOPs), extra)
	}
	if len(notes) > 0 {
		fmt.Fprintf(&b, "\n")
		for _, n := range notes {
			fmt.Fprintf(&b, "- %s\n", n)
		}
	}
	return b.String()
}

// e2eCell is fp8's end-to-end accuracy: cosine / relative L1 against fp32.
func e2eCell(m benchMeasure) string {
	if !(m.E2ECos > 0) {
		return "n/a"
	}
	return fmt.Sprintf("%.4f / %.3f", m.E2ECos, m.E2ERelL1)
}

func usCell(v float64) string {
	if !(v > 0) {
		return "n/a"
	}
	return us(v)
}

func ratioCell(v float64) string {
	if !(v > 0) || math.IsInf(v, 0) {
		return "n/a"
	}
	return fmt.Sprintf("%.2f", v)
}

func tflopsCell(v float64) string {
	if !(v > 0) {
		return "n/a"
	}
	return fmt.Sprintf("%.0f", v)
}

func torchCell(m map[string]torchTiming, backend string) string {
	t, ok := m[backend]
	switch {
	case !ok:
		return "n/a"
	case t.Error != "":
		return "unsupported"
	}
	return usCell(t.GraphUS) + " / " + usCell(t.EagerUS)
}

// write puts bench.md and bench.json in out and copies bench.json into the
// archive (when there is one), so that export can quote the comparison.
func (rep *benchReport) write(out, archive string) error {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return fmt.Errorf("bench --out: %w", err)
	}
	data, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return fmt.Errorf("bench: encoding bench.json: %w", err)
	}
	data = append(data, '\n')
	files := []struct {
		path string
		data []byte
	}{
		{filepath.Join(out, "bench.md"), []byte(rep.markdown())},
		{filepath.Join(out, "bench.json"), data},
	}
	if archive != "" {
		files = append(files, struct {
			path string
			data []byte
		}{filepath.Join(archive, "bench.json"), data})
	}
	for _, f := range files {
		if err := durable.WriteFile(f.path, f.data, 0o644); err != nil {
			return fmt.Errorf("bench: %w", err)
		}
	}
	return nil
}

// gitCommit is the commit of the code that ran: the revision this binary
// was built from (with "+modified" when its tree had local changes), else
// $EVOTUNE_COMMIT, else the working directory's checkout. The checkout comes
// last because a GPU machine given a copy of the tree may hold a stale one.
func gitCommit(ctx context.Context) string {
	if info, ok := debug.ReadBuildInfo(); ok {
		if c := buildRevision(info); c != "" {
			return c
		}
	}
	if c := os.Getenv("EVOTUNE_COMMIT"); c != "" {
		return c
	}
	out, err := exec.CommandContext(ctx, "git", "rev-parse", "HEAD").Output()
	if err == nil {
		return strings.TrimSpace(string(out))
	}
	return ""
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
