package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"evotune/cmd/evotune/internal/bundle"
	"evotune/elites"
	"evotune/internal/durable"
	"evotune/kernels"
	"evotune/space"
)

// exportOptions are the flags of evotune export.
type exportOptions struct {
	Archive string
	Out     string
	Name    string
	To      string
	Force   bool
	Commit  bool
	// KernelSource is the kernel source the archive measured, when the
	// binary embeds another.
	KernelSource string
}

func defaultExportOptions() exportOptions {
	return exportOptions{Archive: "evotune-archive", Out: ".", Name: "evotune_best"}
}

func exportCommand() command {
	return command{
		name:     "export",
		summary:  "write the best configuration as a launcher bundle, a C header and JSON, with its provenance",
		synopsis: "evotune export [--archive DIR] [--out DIR] [--name NAME] [--kernel-source PATH] [--force] [--to DIR [--commit]]",
		examples: `  # Writes ./evotune_best.h and ./evotune_best.json, and the launcher a main
  # build compiles: evotune_best_launch.h, evotune_best_launch.cu,
  # evotune_best_plan.h and the kernel source in evotune_best_kernel/.
  evotune export --archive evotune-archive

  # An archive measured with another kernel source than this evotune embeds.
  evotune export --archive old-archive --kernel-source ../evotune-old/kernels

  evotune export --archive evotune-archive --out include --name sdpa_l4_best

  # Replaces the header that the main build includes, and commits it there
  # with the evidence in the commit message.
  evotune export --archive evotune-archive --to ../attention/include --commit
`,
		run: runExport,
	}
}

// exportName is what --name may be: it becomes file names and C identifiers.
var exportName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// exportMarker is in the first lines of every header that export writes:
// --to replaces only files that carry it.
const exportMarker = bundle.Marker

func runExport(ctx context.Context, c *cli, args []string) error {
	opts := defaultExportOptions()
	fs := newFlagSet("export")
	fs.StringVar(&opts.Archive, "archive", opts.Archive, "archive `directory`")
	fs.StringVar(&opts.Out, "out", opts.Out, "output `directory` (not used with --to unless given)")
	fs.StringVar(&opts.Name, "name", opts.Name, "base name of the files written (NAME.h, NAME.json) and of the dispatch table")
	fs.StringVar(&opts.To, "to", opts.To, "also write NAME.h and NAME.json into `directory` of a main build, replacing only an earlier export")
	fs.BoolVar(&opts.Force, "force", opts.Force, "export although a damaged log line may hold a better result; with --to: replace files that are not an evotune export")
	fs.BoolVar(&opts.Commit, "commit", opts.Commit, "with --to: git add and commit the files there, the evidence in the message")
	fs.StringVar(&opts.KernelSource, "kernel-source", opts.KernelSource, "the kernel source the archive measured, when this evotune embeds another: its .cu `path`, or a folder with sdpa.cu and sdpa_params.h")
	if _, err := c.parseFlags(fs, args, false); err != nil {
		return err
	}
	switch {
	case !exportName.MatchString(opts.Name):
		return usagef("export", "--name %q: want a C identifier (letters, digits, _)", opts.Name)
	case opts.Archive == "":
		return usagef("export", "--archive must name a directory")
	case opts.Out == "":
		return usagef("export", "--out must name a directory")
	case opts.Commit && opts.To == "":
		return usagef("export", "--commit needs --to: it commits the files where the main build includes them")
	}
	done := c.loading("archive " + opts.Archive)
	a, err := elites.Read(opts.Archive)
	done()
	if err != nil {
		return fmt.Errorf("export --archive: %w", err)
	}
	defer a.Close()
	warnSkipped(c.stderr, a)
	archivePath, err := filepath.Abs(opts.Archive)
	if err != nil {
		return fmt.Errorf("export --archive: %w", err)
	}
	exp, err := newExport(a, opts.Name, archivePath, c.now())
	if err != nil {
		return err
	}
	if hidden := hiddenBetter(a, exp.Result.Objective, "a result faster than "+us(exp.Result.Objective)+" µs"); len(hidden) > 0 {
		if !opts.Force {
			return fmt.Errorf("export: line %d of %s/results.jsonl is damaged and may have held a result faster than the best readable one (%s µs, result %d): run tune on the archive to evaluate it again, or pass --force to export the best readable one",
				a.Hidden(exp.Result.Objective)[0].Line, a.Dir(), us(exp.Result.Objective), exp.Result.Seq)
		}
		for _, h := range hidden {
			fmt.Fprintf(c.stdout, "%s; exported anyway (--force)\n", h)
		}
	}
	launcher, note, err := exportBundle(a, &exp, opts.KernelSource)
	if err != nil {
		return err
	}
	if note != "" {
		fmt.Fprintf(c.stderr, "evotune: export: %s\n", note)
	}
	header := []byte(exp.header())
	data, err := json.MarshalIndent(exp, "", "  ")
	if err != nil {
		return fmt.Errorf("export: encoding JSON: %w", err)
	}
	data = append(data, '\n')
	var dirs []string
	if opts.To == "" || fs.Changed("out") {
		dirs = append(dirs, opts.Out)
	}
	files := append([]bundle.File{{Path: opts.Name + ".h", Data: header}, {Path: opts.Name + ".json", Data: data}}, launcher...)
	if opts.To != "" {
		if err := checkReplaceable(opts.To, opts.Name, files, opts.Force); err != nil {
			return err
		}
		dirs = append(dirs, opts.To)
	}
	for _, dir := range dirs {
		if err := writeExport(dir, files); err != nil {
			return err
		}
		fmt.Fprintf(c.stdout, "wrote %s and %s: %s µs, %s\n", filepath.Join(dir, files[0].Path), filepath.Join(dir, files[1].Path),
			us(exp.Result.Objective), exp.Key)
		if exp.Bundle != nil {
			fmt.Fprintf(c.stdout, "wrote the launcher %s (%s_forward; %d configs, kernel source %s in %s)\n",
				filepath.Join(dir, opts.Name+"_launch.h"), opts.Name, len(exp.Bundle.Configs), shortHash(exp.Bundle.KernelSourceHash),
				filepath.Join(dir, opts.Name+"_kernel"))
		}
	}
	if opts.Commit {
		return commitExport(ctx, c.stdout, opts.To, bundle.Paths(files), exp)
	}
	return nil
}

// newExport gathers the evidence for the archive's best configuration.
func newExport(a *elites.Archive, name, archivePath string, now time.Time) (export, error) {
	meta := a.Meta()
	def, _ := familyDefault(meta.Problem, meta.Arch)
	ev, err := elites.Gather(a, def)
	if errors.Is(err, elites.ErrNoBest) {
		return export{}, fmt.Errorf("export: archive %s holds no configuration that passed every gate", a.Dir())
	}
	if err != nil {
		return export{}, fmt.Errorf("export: %w", err)
	}
	sp, err := familySpace("export", meta.Problem, cmpOr(meta.Arch, kernels.DefaultArch))
	if err != nil {
		return export{}, fmt.Errorf("export: the archive's problem: %w", err)
	}
	best := ev.Best
	flags, err := sp.Flags(best.Config)
	if err != nil {
		return export{}, fmt.Errorf("export: rendering the best config %s: %w", best.Key, err)
	}
	exp := export{
		Name: name, Key: best.Key, Config: best.Config, Flags: flags, Defines: defines(flags),
		Archive: archivePath, Exported: now.UTC().Truncate(time.Second), Meta: meta, Result: best,
		SpeedupVsDefault: ev.Speedup, Provenance: ev.Provenance,
	}
	if ev.Default != nil {
		exp.DefaultObjectiveUS = ev.Default.Objective
	}
	bench, ok, err := elites.ReadBench(a.Dir())
	if err != nil {
		return export{}, fmt.Errorf("export: %w", err)
	}
	if ok {
		exp.Torch = torchComparisonOf(bench, best, meta.Problem)
	}
	for _, s := range ev.Shapes {
		f, err := sp.Flags(s.Result.Config)
		if err != nil {
			return export{}, fmt.Errorf("export: rendering the best config %s of shape %s: %w", s.Key, s.Shape, err)
		}
		exp.Dispatch = append(exp.Dispatch, dispatchEntry{Shape: s.Shape, Key: s.Key, Config: s.Result.Config, Flags: f,
			Seq: s.Result.Seq, P50US: s.Timing.P50US, CILowUS: s.Timing.CILowUS, CIHighUS: s.Timing.CIHighUS})
	}
	return exp, nil
}

// An export is the best configuration of an archive with the evidence for
// it: what the JSON file holds, and what the header's comment block says.
type export struct {
	Generator string       `json:"generator"` // exportMarker: says what wrote the file
	Name      string       `json:"name"`
	Key       string       `json:"key"`
	Config    space.Config `json:"config"`
	Flags     []string     `json:"flags"`
	Defines   []define     `json:"defines"`
	Archive   string       `json:"archive"`
	Exported  time.Time    `json:"exported"`
	Meta      elites.Meta  `json:"meta"`
	Result    space.Result `json:"result"`
	// DefaultObjectiveUS is the family default's objective measured in the
	// same archive; zero (and SpeedupVsDefault zero) when it was not.
	DefaultObjectiveUS float64           `json:"default_objective_us,omitempty"`
	SpeedupVsDefault   float64           `json:"speedup_vs_default,omitempty"`
	Torch              *torchComparison  `json:"torch,omitempty"` // nil: not measured
	Provenance         elites.Provenance `json:"provenance"`
	// Dispatch holds, for a multi-shape problem, the best config of each
	// shape on its own; the header's macros are the overall best.
	Dispatch []dispatchEntry `json:"dispatch,omitempty"`
	// Bundle lists the launcher's files; nil when none was written.
	Bundle *exportedBundle `json:"bundle,omitempty"`
}

// MarshalJSON fills in the generator, so that every JSON file export
// writes says what wrote it.
func (e export) MarshalJSON() ([]byte, error) {
	type plain export
	p := plain(e)
	p.Generator = exportMarker
	return json.Marshal(p)
}

// A define is one macro of the exported header.
type define struct {
	Macro string `json:"macro"`
	Value string `json:"value"`
}

// A torchComparison sets the exported config beside PyTorch SDPA as timed by
// evotune bench (bench.json in the archive directory).
type torchComparison struct {
	Bench   string       `json:"bench"`
	Version string       `json:"torch_version,omitempty"`
	Shapes  []torchShape `json:"shapes"`
}

// A torchShape compares one shape with PyTorch's fastest backend on it.
type torchShape struct {
	Shape   space.Shape `json:"shape"`
	Backend string      `json:"backend"`
	TorchUS float64     `json:"torch_us"` // CUDA-graph replay
	OursUS  float64     `json:"ours_us"`
	// SameRun says OursUS is the bench's own timing of the exported config,
	// beside PyTorch in one run; otherwise it is the config's p50 in the
	// archive, measured on another occasion.
	SameRun bool    `json:"same_run"`
	Speedup float64 `json:"speedup"` // TorchUS / OursUS
}

func torchComparisonOf(b elites.Bench, best space.Result, p space.Problem) *torchComparison {
	tc := &torchComparison{Bench: b.Path, Version: b.Torch}
	for _, shape := range p.Shapes {
		t, ok := b.Fastest(shape)
		if !ok {
			continue
		}
		ts := torchShape{Shape: shape, Backend: t.Backend, TorchUS: t.GraphUS}
		if o, ok := b.OursOn(shape, best.Key); ok {
			ts.OursUS, ts.SameRun = o.GraphUS, true
		} else if archived, ok := elites.TimingOf(best, shape); ok && archived.P50US > 0 {
			ts.OursUS = archived.P50US
		} else {
			continue
		}
		ts.Speedup = t.GraphUS / ts.OursUS
		tc.Shapes = append(tc.Shapes, ts)
	}
	if len(tc.Shapes) == 0 {
		return nil // the bench timed other shapes: nothing to compare
	}
	return tc
}

// source says where the comparison's two times come from.
func (s torchShape) source() string {
	if s.SameRun {
		return "both timed in one run of evotune bench"
	}
	return "PyTorch from " + elites.BenchName + ", ours the archive's p50 from another run"
}

// A dispatchEntry is the best config for one shape of a multi-shape problem.
type dispatchEntry struct {
	Shape    space.Shape  `json:"shape"`
	Key      string       `json:"key"`
	Config   space.Config `json:"config"`
	Flags    []string     `json:"flags"`
	Seq      int          `json:"seq"`
	P50US    float64      `json:"p50_us"`
	CILowUS  float64      `json:"ci_low_us"`
	CIHighUS float64      `json:"ci_high_us"`
}

// defines turns rendered -D flags back into macros: space.Flags is the one
// place flags are made, so the header says exactly what the search compiled.
func defines(flags []string) []define {
	var out []define
	for _, f := range flags {
		macro, value, _ := strings.Cut(strings.TrimPrefix(f, "-D"), "=")
		out = append(out, define{Macro: macro, Value: value})
	}
	return out
}

// header renders the C header.
func (e export) header() string {
	var b strings.Builder
	r, m, p := e.Result, e.Meta, e.Provenance
	b.WriteString("#pragma once\n")
	fmt.Fprintf(&b, "// %s.h: the best %s configuration an evotune search found.\n", e.Name, m.Problem.Family)
	fmt.Fprintf(&b, "// %s; do not edit. The evidence:\n//\n", exportMarker)
	line := func(label, format string, args ...any) {
		fmt.Fprintf(&b, "//   %-19s %s\n", label+":", fmt.Sprintf(format, args...))
	}
	line("problem", "%s", problemLine(m.Problem))
	line("GPU", "%s (%s, compute capability %s), driver %s", orUnknown(cmpOr(r.Env.GPU, p.GPU)), orUnknown(cmpOr(r.Env.Arch, p.Arch)),
		orUnknown(cmpOr(r.Env.ComputeCap, p.ComputeCap)), orUnknown(cmpOr(r.Env.Driver, p.Driver)))
	if uuid := cmpOr(r.Env.GPUUUID, p.GPUUUID); uuid != "" {
		line("GPU UUID", "%s", uuid)
	}
	line("nvcc", "%s", orUnknown(cmpOr(r.Env.NVCC, p.NVCC)))
	line("kernel source hash", "%s", orUnknown(cmpOr(r.Env.SourceHash, p.SourceHash)))
	if r.Env.Replay != "" {
		line("replayed", "from %s: not a measurement of this machine", r.Env.Replay)
	}
	for i, t := range r.Timings {
		line("p50", "%s µs at %s (95%% CI %s – %s µs, p90 %s µs, p99 %s µs)", us(t.P50US), t.Shape, us(t.CILowUS), us(t.CIHighUS), us(t.P90US), us(t.P99US))
		if len(r.Timings) > 1 {
			line("weight", "%g", m.Problem.Weight(i))
		}
	}
	line("objective", "%s µs", us(r.Objective))
	if e.SpeedupVsDefault > 0 {
		line("vs default config", "%.2fx (default %s µs, measured in the same archive)", e.SpeedupVsDefault, us(e.DefaultObjectiveUS))
	} else {
		line("vs default config", "not measured (the archive holds no passing result for the family default)")
	}
	if e.Torch == nil {
		line("vs PyTorch SDPA", "not measured (no %s with a torch section in the archive)", elites.BenchName)
	} else {
		for _, s := range e.Torch.Shapes {
			line("vs PyTorch SDPA", "%.2fx at %s (%s %s µs against %s µs, CUDA-graph replay, %s)", s.Speedup, s.Shape, s.Backend, us(s.TorchUS), us(s.OursUS), s.source())
		}
	}
	if r.Ptxas != nil {
		line("ptxas", "%d registers, %d bytes spilled, %d bytes shared, %d bytes stack",
			r.Ptxas.Registers, r.Ptxas.SpillStores+r.Ptxas.SpillLoads, r.Ptxas.SharedBytes, r.Ptxas.StackBytes)
	}
	line("measured", "%s", r.Finished.UTC().Format(time.RFC3339))
	line("exported", "%s", e.Exported.Format(time.RFC3339))
	line("archive", "%s (result %d of %d)", e.Archive, r.Seq, p.Evaluated)
	line("config", "%s", e.Key)
	b.WriteString("\n")
	for _, d := range e.Defines {
		fmt.Fprintf(&b, "#define %s %s\n", d.Macro, d.Value)
	}
	if len(e.Dispatch) > 0 {
		e.dispatchTable(&b)
	}
	return b.String()
}

// dispatchTable renders the per-shape table of a multi-shape problem.
func (e export) dispatchTable(b *strings.Builder) {
	fmt.Fprintf(b, `
// The macros above are the overall best: the config with the lowest weighted
// objective over all shapes. %s_dispatch lists, for each shape, the config
// that was fastest on that shape alone (its key and p50 in µs), for a build
// that compiles one kernel per shape and picks by shape at run time.
`, e.Name)
	fmt.Fprintf(b, "static const struct { int b, h, s, d; const char* key; double p50_us; } %s_dispatch[] = {\n", e.Name)
	for _, d := range e.Dispatch {
		fmt.Fprintf(b, "    {%d, %d, %d, %d, %q, %s},\n", d.Shape.B, d.Shape.H, d.Shape.S, d.Shape.D, d.Key, fmt.Sprintf("%.3f", d.P50US))
	}
	b.WriteString("};\n")
}

// checkReplaceable refuses to overwrite a file in dir that export did not
// write, unless force: the main build's own header must not be lost to a
// typo in --name. A generated file must carry exportMarker; the kernel
// source, copied as it is, may be replaced when the launcher beside it is
// an export.
func checkReplaceable(dir, name string, files []bundle.File, force bool) error {
	if force {
		return nil
	}
	exported := func(path string) (exists, marked bool, err error) {
		f, err := os.Open(path)
		if errors.Is(err, os.ErrNotExist) {
			return false, false, nil
		}
		if err != nil {
			return false, false, fmt.Errorf("export --to: checking %s: %w", path, err)
		}
		defer f.Close()
		head := make([]byte, 1024)
		n, _ := io.ReadFull(f, head)
		return true, bytes.Contains(head[:n], []byte(exportMarker)), nil
	}
	kernelDir := name + "_kernel/"
	for _, file := range files {
		path := filepath.Join(dir, filepath.FromSlash(file.Path))
		exists, marked, err := exported(path)
		if err != nil {
			return err
		}
		if !exists || marked {
			continue
		}
		if strings.HasPrefix(file.Path, kernelDir) {
			launcher := filepath.Join(dir, name+"_launch.h")
			if _, ok, err := exported(launcher); err != nil {
				return err
			} else if ok {
				continue
			}
			return fmt.Errorf("export --to: %s exists and %s beside it is not an evotune export; use --force to replace it", path, launcher)
		}
		return fmt.Errorf("export --to: %s exists and is not an evotune export (it lacks %q); use --force to replace it", path, exportMarker)
	}
	return nil
}

// writeExport writes files into dir, each durably, so that a build never
// includes half a header, even after a power cut.
func writeExport(dir string, files []bundle.File) error {
	for _, f := range files {
		path := filepath.Join(dir, filepath.FromSlash(f.Path))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return fmt.Errorf("export: creating %s: %w", filepath.Dir(path), err)
		}
		if err := durable.WriteFile(path, f.Data, 0o644); err != nil {
			return fmt.Errorf("export: %w", err)
		}
	}
	return nil
}

// commitExport commits files (relative to dir) in the git work tree that
// holds dir, the evidence in the message. Only these files are committed,
// whatever else is staged there.
func commitExport(ctx context.Context, stdout io.Writer, dir string, files []string, e export) error {
	out, err := git(ctx, dir, "rev-parse", "--is-inside-work-tree")
	if err != nil || strings.TrimSpace(out) != "true" {
		return fmt.Errorf("export --commit: %s is not inside a git work tree", dir)
	}
	if _, err := git(ctx, dir, append([]string{"add", "--"}, files...)...); err != nil {
		return fmt.Errorf("export --commit: %w", err)
	}
	subject, body := e.commitMessage()
	args := append([]string{"commit", "-q", "-m", subject, "-m", body, "--"}, files...)
	if _, err := git(ctx, dir, args...); err != nil {
		return fmt.Errorf("export --commit: %w", err)
	}
	rev, err := git(ctx, dir, "rev-parse", "--short", "HEAD")
	if err != nil {
		return fmt.Errorf("export --commit: %w", err)
	}
	fmt.Fprintf(stdout, "committed %s in %s: %s\n", strings.Join(files, " and "), dir, strings.TrimSpace(rev))
	return nil
}

// git runs git -C dir args and returns its stdout; a failure carries git's
// stderr.
func git(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", append([]string{"-C", dir}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// commitMessage names the config, its p50, its speedups and the archive;
// the body holds the evidence.
func (e export) commitMessage() (subject, body string) {
	r := e.Result
	speedup := "no default measured"
	if e.SpeedupVsDefault > 0 {
		speedup = fmt.Sprintf("%.2fx over the default", e.SpeedupVsDefault)
	}
	subject = fmt.Sprintf("%s: %s %s µs (%s), from evotune", e.Name, problemLine(e.Meta.Problem), us(r.Objective), speedup)
	var b strings.Builder
	fmt.Fprintf(&b, "config: %s\n", e.Key)
	for _, t := range r.Timings {
		fmt.Fprintf(&b, "p50: %s µs at %s (95%% CI %s – %s µs)\n", us(t.P50US), t.Shape, us(t.CILowUS), us(t.CIHighUS))
	}
	if e.SpeedupVsDefault > 0 {
		fmt.Fprintf(&b, "speedup over the default config: %.2fx (default %s µs, same archive)\n", e.SpeedupVsDefault, us(e.DefaultObjectiveUS))
	} else {
		b.WriteString("speedup over the default config: not measured\n")
	}
	if e.Torch == nil {
		b.WriteString("speedup over PyTorch SDPA: not measured\n")
	} else {
		for _, s := range e.Torch.Shapes {
			fmt.Fprintf(&b, "speedup over PyTorch SDPA: %.2fx at %s (%s %s µs against %s µs, %s)\n", s.Speedup, s.Shape, s.Backend, us(s.TorchUS), us(s.OursUS), s.source())
		}
	}
	p := e.Provenance
	fmt.Fprintf(&b, "GPU: %s (%s), nvcc %s, kernel source %s\n", orUnknown(cmpOr(r.Env.GPU, p.GPU)), orUnknown(cmpOr(r.Env.Arch, p.Arch)),
		orUnknown(cmpOr(r.Env.NVCC, p.NVCC)), orUnknown(cmpOr(r.Env.SourceHash, p.SourceHash)))
	if r.Env.Replay != "" {
		fmt.Fprintf(&b, "replayed from %s: not a measurement of a machine\n", r.Env.Replay)
	}
	fmt.Fprintf(&b, "archive: %s (result %d of %d)\n", e.Archive, r.Seq, p.Evaluated)
	return subject, b.String()
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
