// Package export renders what evotune export writes beside the launcher
// bundle: NAME.h, the C header whose macros are an archive's best
// configuration with the evidence for it in its comment block (GPU,
// compiler, kernel source, timings, speedups over the family default and
// over PyTorch SDPA, and for a multi-shape problem the best config of each
// shape as a dispatch table), NAME.json, the same evidence for programs,
// and the commit message export --commit writes. What it renders is an
// Export, built from elites.Gather's evidence; the launcher itself is
// package bundle's.
package export

import (
	"cmp"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"evotune/cmd/evotune/internal/bundle"
	"evotune/cmd/evotune/internal/textfmt"
	"evotune/elites"
	"evotune/space"
)

// New builds the export of ev, the evidence for archive a's best
// configuration, its flags rendered by sp, the space of the archive's
// problem. The PyTorch comparison comes from the archive's bench.json, when
// there is one.
func New(a *elites.Archive, ev elites.Evidence, sp *space.Space, name, archivePath string, now time.Time) (Export, error) {
	meta := a.Meta()
	best := ev.Best
	flags, err := sp.Flags(best.Config)
	if err != nil {
		return Export{}, fmt.Errorf("rendering the best config %s: %w", best.Key, err)
	}
	exp := Export{
		Name: name, Key: best.Key, Config: best.Config, Flags: flags, Defines: defines(flags),
		Archive: archivePath, Exported: now.UTC().Truncate(time.Second), Meta: meta, Result: best,
		SpeedupVsDefault: ev.Speedup, Provenance: ev.Provenance,
	}
	if ev.Default != nil {
		exp.DefaultObjectiveUS = ev.Default.Objective
	}
	bench, ok, err := elites.ReadBench(a.Dir())
	if err != nil {
		return Export{}, err
	}
	if ok {
		bench.Complete(sp) // as the archive's results were read
		exp.Torch = torchComparisonOf(bench, best, meta.Problem)
	}
	for _, s := range ev.Shapes {
		f, err := sp.Flags(s.Result.Config)
		if err != nil {
			return Export{}, fmt.Errorf("rendering the best config %s of shape %s: %w", s.Key, s.Shape, err)
		}
		exp.Dispatch = append(exp.Dispatch, DispatchEntry{Shape: s.Shape, Key: s.Key, Config: s.Result.Config, Flags: f,
			Seq: s.Result.Seq, P50US: s.Timing.P50US, CILowUS: s.Timing.CILowUS, CIHighUS: s.Timing.CIHighUS})
	}
	return exp, nil
}

// An Export is the best configuration of an archive with the evidence for
// it: what the JSON file holds, and what the header's comment block says.
type Export struct {
	Generator string       `json:"generator"` // bundle.Marker: says what wrote the file
	Name      string       `json:"name"`
	Key       string       `json:"key"`
	Config    space.Config `json:"config"`
	Flags     []string     `json:"flags"`
	Defines   []Define     `json:"defines"`
	Archive   string       `json:"archive"`
	Exported  time.Time    `json:"exported"`
	Meta      elites.Meta  `json:"meta"`
	Result    space.Result `json:"result"`
	// DefaultObjectiveUS is the family default's objective measured in the
	// same archive; zero (and SpeedupVsDefault zero) when it was not.
	DefaultObjectiveUS float64           `json:"default_objective_us,omitempty"`
	SpeedupVsDefault   float64           `json:"speedup_vs_default,omitempty"`
	Torch              *TorchComparison  `json:"torch,omitempty"` // nil: not measured
	Provenance         elites.Provenance `json:"provenance"`
	// Dispatch holds, for a multi-shape problem, the best config of each
	// shape on its own; the header's macros are the overall best.
	Dispatch []DispatchEntry `json:"dispatch,omitempty"`
	// Bundle lists the launcher's files; nil when none was written.
	Bundle *Bundle `json:"bundle,omitempty"`
}

// A Bundle is what the export JSON says of the launcher bundle.
type Bundle struct {
	Files            []string `json:"files"`
	Configs          []string `json:"configs"` // compiled, the overall best first
	KernelSourceHash string   `json:"kernel_source_hash"`
}

// MarshalJSON fills in the generator, so that every JSON file export
// writes says what wrote it.
func (e Export) MarshalJSON() ([]byte, error) {
	type plain Export
	p := plain(e)
	p.Generator = bundle.Marker
	return json.Marshal(p)
}

// A Define is one macro of the exported header.
type Define struct {
	Macro string `json:"macro"`
	Value string `json:"value"`
}

// A TorchComparison sets the exported config beside PyTorch SDPA as timed by
// evotune bench (bench.json in the archive directory).
type TorchComparison struct {
	Bench   string       `json:"bench"`
	Version string       `json:"torch_version,omitempty"`
	Shapes  []TorchShape `json:"shapes"`
}

// A TorchShape compares one shape with PyTorch's fastest backend on it.
type TorchShape struct {
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

func torchComparisonOf(b elites.Bench, best space.Result, p space.Problem) *TorchComparison {
	tc := &TorchComparison{Bench: b.Path, Version: b.Torch}
	for _, shape := range p.Shapes {
		t, ok := b.Fastest(shape)
		if !ok {
			continue
		}
		ts := TorchShape{Shape: shape, Backend: t.Backend, TorchUS: t.GraphUS}
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
func (s TorchShape) source() string {
	if s.SameRun {
		return "both timed in one run of evotune bench"
	}
	return "PyTorch from " + elites.BenchName + ", ours the archive's p50 from another run"
}

// A DispatchEntry is the best config for one shape of a multi-shape problem.
type DispatchEntry struct {
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
func defines(flags []string) []Define {
	var out []Define
	for _, f := range flags {
		macro, value, _ := strings.Cut(strings.TrimPrefix(f, "-D"), "=")
		out = append(out, Define{Macro: macro, Value: value})
	}
	return out
}

// Header renders the C header.
func (e Export) Header() string {
	var b strings.Builder
	r, m, p := e.Result, e.Meta, e.Provenance
	b.WriteString("#pragma once\n")
	fmt.Fprintf(&b, "// %s.h: the best %s configuration an evotune search found.\n", e.Name, m.Problem.Family)
	fmt.Fprintf(&b, "// %s; do not edit. The evidence:\n//\n", bundle.Marker)
	line := func(label, format string, args ...any) {
		fmt.Fprintf(&b, "//   %-19s %s\n", label+":", fmt.Sprintf(format, args...))
	}
	line("problem", "%s", textfmt.Problem(m.Problem))
	line("GPU", "%s (%s, compute capability %s), driver %s", textfmt.OrUnknown(cmp.Or(r.Env.GPU, p.GPU)), textfmt.OrUnknown(cmp.Or(r.Env.Arch, p.Arch)),
		textfmt.OrUnknown(cmp.Or(r.Env.ComputeCap, p.ComputeCap)), textfmt.OrUnknown(cmp.Or(r.Env.Driver, p.Driver)))
	if uuid := cmp.Or(r.Env.GPUUUID, p.GPUUUID); uuid != "" {
		line("GPU UUID", "%s", uuid)
	}
	line("nvcc", "%s", textfmt.OrUnknown(cmp.Or(r.Env.NVCC, p.NVCC)))
	line("kernel source hash", "%s", textfmt.OrUnknown(cmp.Or(r.Env.SourceHash, p.SourceHash)))
	if r.Env.Replay != "" {
		line("replayed", "from %s: not a measurement of this machine", r.Env.Replay)
	}
	for i, t := range r.Timings {
		line("p50", "%s µs at %s (95%% CI %s – %s µs, p90 %s µs, p99 %s µs)", textfmt.US(t.P50US), t.Shape, textfmt.US(t.CILowUS), textfmt.US(t.CIHighUS), textfmt.US(t.P90US), textfmt.US(t.P99US))
		if len(r.Timings) > 1 {
			line("weight", "%g", m.Problem.Weight(i))
		}
	}
	line("objective", "%s µs", textfmt.US(r.Objective))
	if e.SpeedupVsDefault > 0 {
		line("vs default config", "%.2fx (default %s µs, measured in the same archive)", e.SpeedupVsDefault, textfmt.US(e.DefaultObjectiveUS))
	} else {
		line("vs default config", "not measured (the archive holds no passing result for the family default)")
	}
	if e.Torch == nil {
		line("vs PyTorch SDPA", "not measured (no %s with a torch section in the archive)", elites.BenchName)
	} else {
		for _, s := range e.Torch.Shapes {
			line("vs PyTorch SDPA", "%.2fx at %s (%s %s µs against %s µs, CUDA-graph replay, %s)", s.Speedup, s.Shape, s.Backend, textfmt.US(s.TorchUS), textfmt.US(s.OursUS), s.source())
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
func (e Export) dispatchTable(b *strings.Builder) {
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

// CommitMessage names the config, its p50, its speedups and the archive;
// the body holds the evidence.
func (e Export) CommitMessage() (subject, body string) {
	r := e.Result
	speedup := "no default measured"
	if e.SpeedupVsDefault > 0 {
		speedup = fmt.Sprintf("%.2fx over the default", e.SpeedupVsDefault)
	}
	subject = fmt.Sprintf("%s: %s %s µs (%s), from evotune", e.Name, textfmt.Problem(e.Meta.Problem), textfmt.US(r.Objective), speedup)
	var b strings.Builder
	fmt.Fprintf(&b, "config: %s\n", e.Key)
	for _, t := range r.Timings {
		fmt.Fprintf(&b, "p50: %s µs at %s (95%% CI %s – %s µs)\n", textfmt.US(t.P50US), t.Shape, textfmt.US(t.CILowUS), textfmt.US(t.CIHighUS))
	}
	if e.SpeedupVsDefault > 0 {
		fmt.Fprintf(&b, "speedup over the default config: %.2fx (default %s µs, same archive)\n", e.SpeedupVsDefault, textfmt.US(e.DefaultObjectiveUS))
	} else {
		b.WriteString("speedup over the default config: not measured\n")
	}
	if e.Torch == nil {
		b.WriteString("speedup over PyTorch SDPA: not measured\n")
	} else {
		for _, s := range e.Torch.Shapes {
			fmt.Fprintf(&b, "speedup over PyTorch SDPA: %.2fx at %s (%s %s µs against %s µs, %s)\n", s.Speedup, s.Shape, s.Backend, textfmt.US(s.TorchUS), textfmt.US(s.OursUS), s.source())
		}
	}
	p := e.Provenance
	fmt.Fprintf(&b, "GPU: %s (%s), nvcc %s, kernel source %s\n", textfmt.OrUnknown(cmp.Or(r.Env.GPU, p.GPU)), textfmt.OrUnknown(cmp.Or(r.Env.Arch, p.Arch)),
		textfmt.OrUnknown(cmp.Or(r.Env.NVCC, p.NVCC)), textfmt.OrUnknown(cmp.Or(r.Env.SourceHash, p.SourceHash)))
	if r.Env.Replay != "" {
		fmt.Fprintf(&b, "replayed from %s: not a measurement of a machine\n", r.Env.Replay)
	}
	fmt.Fprintf(&b, "archive: %s (result %d of %d)\n", e.Archive, r.Seq, p.Evaluated)
	return subject, b.String()
}
