// Package torchcmp is evotune bench's comparison: a tuned configuration
// timed beside the family default (and, optionally, another archive's best)
// on a GPU, PyTorch SDPA timed on the same shapes by bench/torch_sdpa.py,
// the ratios between them, and bench.md. What it measures is an
// elites.Bench, the schema of bench.json.
package torchcmp

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os/exec"
	"strings"
	"time"

	"evotune/cmd/evotune/internal/textfmt"
	"evotune/elites"
	"evotune/kernels"
	"evotune/space"
)

// A Shape is one row of a comparison: a shape and its mask.
type Shape struct {
	Shape  space.Shape
	Causal bool
}

func (s Shape) String() string {
	if s.Causal {
		return s.Shape.String() + ":causal"
	}
	return s.Shape.String()
}

// ParseShapes reads BxHxSxD[:causal] items, each of which may be a
// comma-separated list.
func ParseShapes(items []string) ([]Shape, error) {
	var out []Shape
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
			out = append(out, Shape{Shape: s, Causal: hasMask})
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no shape")
	}
	return out, nil
}

// A GPU compiles and times configurations on one GPU; the command opens the
// real one and tests put a fake in its place.
type GPU interface {
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

// Row times the best config (when it was compiled for this shape's head
// dimension and dtype) and the family default on one shape, with V as
// tunedFor's fp8 takes it.
func Row(ctx context.Context, gpu GPU, s Shape, dtype, outDtype string, best space.Config, tunedFor space.Problem) (elites.BenchRow, error) {
	prob := space.Problem{Family: cmp.Or(tunedFor.Family, kernels.DefaultFamily), Shapes: []space.Shape{s.Shape}, Dtype: dtype, OutDtype: outDtype, Causal: s.Causal,
		VTransposed: tunedFor.VTransposed && dtype == "fp8"}
	row := elites.BenchRow{Shape: s.Shape.String(), Causal: s.Causal, Source: "best"}
	sp, err := gpu.Space(prob)
	if err != nil {
		return row, fmt.Errorf("the space of %s: %w", s, err)
	}
	def := sp.Default()
	row.Default = Measure(ctx, gpu, prob, def)
	ours := best
	if best != nil {
		// Recorded before knobs of sp existed, or tuned on an architecture
		// without them: the knobs' Absent values are the code it ran.
		ours, _ = sp.Complete(best)
	}
	switch {
	case len(tunedFor.Shapes) > 0 && tunedFor.Shapes[0].D != s.Shape.D:
		row.Note = fmt.Sprintf("the best config was tuned for D=%d: the family default is shown", tunedFor.Shapes[0].D)
	case tunedFor.Dtype != "" && tunedFor.Dtype != dtype:
		row.Note = fmt.Sprintf("the best config was tuned for %s: the family default is shown", tunedFor.Dtype)
	case best == nil:
		row.Note = "no best config: the family default is shown"
	default:
		if err := sp.Check(ours); err != nil {
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
	row.Ours = Measure(ctx, gpu, prob, ours)
	return row, nil
}

// A Baseline is the best config of another archive (of another dtype, say)
// and the problem it was tuned for, timed beside ours on every shape.
type Baseline struct {
	Key     string
	Config  space.Config
	Problem space.Problem
}

// AddBaseline times the baseline's best on row's shape s, in the
// baseline's dtype, or its family default where the best does not apply,
// and sets the row's ratio of ours over it.
func AddBaseline(ctx context.Context, gpu GPU, row *elites.BenchRow, s Shape, b Baseline) {
	row.Baseline = baselineMeasure(ctx, gpu, s, b)
	row.OursOverBaseline = 0
	if row.Ours.GraphUS > 0 && row.Baseline.GraphUS > 0 {
		row.OursOverBaseline = row.Ours.GraphUS / row.Baseline.GraphUS
	}
}

func baselineMeasure(ctx context.Context, gpu GPU, s Shape, b Baseline) *elites.BenchMeasure {
	prob := space.Problem{Family: cmp.Or(b.Problem.Family, kernels.DefaultFamily), Shapes: []space.Shape{s.Shape}, Dtype: b.Problem.Dtype, OutDtype: b.Problem.OutDtype, Causal: s.Causal,
		VTransposed: b.Problem.VTransposed}
	sp, err := gpu.Space(prob)
	if err != nil {
		return &elites.BenchMeasure{Status: space.StatusConstraint, Reason: err.Error()}
	}
	cfg := b.Config
	if done, ok := sp.Complete(cfg); ok {
		cfg = done
	}
	if len(b.Problem.Shapes) == 0 || b.Problem.Shapes[0].D != s.Shape.D || sp.Check(cfg) != nil {
		cfg = sp.Default()
	}
	m := Measure(ctx, gpu, prob, cfg)
	return &m
}

// Measure evaluates cfg through every gate (graph timing) and, when it
// passed, times it eagerly.
func Measure(ctx context.Context, gpu GPU, prob space.Problem, cfg space.Config) elites.BenchMeasure {
	r := gpu.Evaluate(ctx, prob, cfg)
	m := elites.BenchMeasure{Key: cfg.Key(), Config: cfg, Status: r.Status, Reason: r.Reason}
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
	if family, err := kernels.FamilyOf(prob.Family); err == nil {
		m.TFLOPs = family.FLOPs(prob.Shapes[0], prob.Causal) / t.P50US / 1e6
	}
	e, err := gpu.Eager(ctx, prob, cfg)
	if err != nil {
		m.EagerError = err.Error()
	} else {
		m.EagerUS = e.P50US
	}
	return m
}

// Report is torch_sdpa.py --json's output.
type Report struct {
	Torch   string               `json:"torch"`
	CUDA    string               `json:"cuda"`
	CuDNN   int                  `json:"cudnn"`
	Device  string               `json:"device"`
	Results []elites.TorchTiming `json:"results"`
}

// Dtype is the dtype PyTorch SDPA is timed in: ours, or for fp8 and int8
// (which PyTorch's flash and cuDNN backends do not take) the output dtype,
// which is what a user of quantised attention would otherwise run.
func Dtype(dtype, outDtype string) string {
	if !space.Quantized(dtype) {
		return dtype
	}
	return cmp.Or(outDtype, "fp16")
}

// RunTorch runs script (bench/torch_sdpa.py) --json with python once per
// mask (its --causal applies to every shape) and merges the results. It
// returns the command lines it ran; PyTorch is timed in Dtype(dtype,
// outDtype).
func RunTorch(ctx context.Context, python, script, dtype, outDtype string, shapes []Shape) (Report, []string, error) {
	var rep Report
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
		args := []string{script, "--json", "--dtype", Dtype(dtype, outDtype), "--shapes", strings.Join(names, ",")}
		if causal {
			args = append(args, "--causal")
		}
		line := python + " " + strings.Join(args, " ")
		cmds = append(cmds, line)
		tctx, cancel := context.WithTimeout(ctx, 15*time.Minute)
		cmd := exec.CommandContext(tctx, python, args...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		cancel()
		if err != nil {
			return rep, cmds, fmt.Errorf("%s: %w: %s", line, err, strings.TrimSpace(stderr.String()))
		}
		var part Report
		if err := json.Unmarshal(out, &part); err != nil {
			return rep, cmds, fmt.Errorf("%s: reading its JSON output: %w", line, err)
		}
		rep.Torch, rep.CUDA, rep.CuDNN, rep.Device = part.Torch, part.CUDA, part.CuDNN, part.Device
		rep.Results = append(rep.Results, part.Results...)
	}
	return rep, cmds, nil
}

// Attach puts PyTorch's timings into their rows of rep and computes the
// ratios.
func Attach(rep *elites.Bench, results []elites.TorchTiming) {
	for i := range rep.Rows {
		row := &rep.Rows[i]
		for _, t := range results {
			if t.Shape == row.Shape && t.Causal == row.Causal {
				if row.Torch == nil {
					row.Torch = map[string]elites.TorchTiming{}
				}
				row.Torch[t.Backend] = t
			}
		}
		row.OursOverCuDNN = ratio(row.Ours.GraphUS, row.Torch["cudnn"])
		row.OursOverFlash = ratio(row.Ours.GraphUS, row.Torch["flash"])
	}
}

func ratio(ours float64, t elites.TorchTiming) float64 {
	if !(ours > 0) || t.Error != "" || !(t.GraphUS > 0) {
		return 0
	}
	return ours / t.GraphUS
}

// Markdown renders rep as bench.md.
func Markdown(rep elites.Bench) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# evotune bench: tuned SDPA beside PyTorch SDPA\n\n")
	fmt.Fprintf(&b, "- GPU: %s (compute %s, %s, driver %s)\n", textfmt.OrUnknown(rep.GPU), textfmt.OrUnknown(rep.ComputeCap), textfmt.OrUnknown(rep.Arch), textfmt.OrUnknown(rep.Driver))
	fmt.Fprintf(&b, "- date: %s\n- commit: %s\n- nvcc: %s, kernel source %s\n", rep.Date.Format(time.RFC3339), textfmt.OrUnknown(rep.Commit), textfmt.OrUnknown(rep.NVCC), textfmt.ShortHash(rep.SourceHash))
	fmt.Fprintf(&b, "- PyTorch: %s, CUDA %s, cuDNN %d\n", textfmt.OrUnknown(rep.Torch), textfmt.OrUnknown(rep.TorchCUDA), rep.CuDNN)
	fmt.Fprintf(&b, "- command: `%s`", rep.Command)
	for _, c := range rep.TorchCommand {
		fmt.Fprintf(&b, ", then `%s`", c)
	}
	if rep.Given {
		fmt.Fprintf(&b, "\n- best: `%s` (given by --config, timed as %s)\n", textfmt.OrUnknown(rep.Best), textfmt.Problem(rep.TunedFor))
	} else {
		fmt.Fprintf(&b, "\n- best: `%s` (tuned for %s)\n", textfmt.OrUnknown(rep.Best), textfmt.Problem(rep.TunedFor))
	}
	if rep.Baseline != "" {
		fmt.Fprintf(&b, "- baseline: `%s` of %s (tuned for %s), timed in the same run\n", textfmt.OrUnknown(rep.BaselineBest), rep.Baseline, textfmt.Problem(rep.BaselineFor))
	}
	if space.Quantized(rep.Dtype) {
		fmt.Fprintf(&b, "- PyTorch is timed in %s (its flash and cuDNN backends take no %s); e2e is ours against fp32 attention on the unquantised inputs, worst check case at input scale 1 (cosine / relative L1)\n",
			Dtype(rep.Dtype, rep.TunedFor.OutDtype), rep.Dtype)
	}
	if rep.TunedFor.VTransposed && rep.Dtype == "fp8" {
		fmt.Fprintf(&b, "- V^T: ours reads V given transposed ([B, H, D, S rounded up to 16], as the quantisation pass to fp8 writes it), so no transpose is timed; PyTorch reads V as it is\n")
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
	if space.Quantized(rep.Dtype) {
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
		for _, m := range []elites.BenchMeasure{r.Ours, r.Default} {
			if m.Status != space.StatusOK && m.Key != "" {
				notes = append(notes, fmt.Sprintf("%s: `%s` %s: %s.", shape, m.Key, m.Status, m.Reason))
			}
			if m.EagerError != "" {
				notes = append(notes, fmt.Sprintf("%s: `%s` eager timing failed: %s.", shape, m.Key, m.EagerError))
			}
		}
		extra := ""
		if rep.Baseline != "" {
			base := elites.BenchMeasure{}
			if r.Baseline != nil {
				base = *r.Baseline
				if base.Status != space.StatusOK {
					notes = append(notes, fmt.Sprintf("%s: baseline `%s` %s: %s.", shape, base.Key, base.Status, base.Reason))
				}
			}
			extra += fmt.Sprintf(" %s | %s |", usCell(base.GraphUS), ratioCell(r.OursOverBaseline))
		}
		if space.Quantized(rep.Dtype) {
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

// e2eCell is a quantised dtype's end-to-end accuracy: cosine / relative L1 against fp32.
func e2eCell(m elites.BenchMeasure) string {
	if !(m.E2ECos > 0) {
		return "n/a"
	}
	return fmt.Sprintf("%.4f / %.3f", m.E2ECos, m.E2ERelL1)
}

func usCell(v float64) string {
	if !(v > 0) {
		return "n/a"
	}
	return textfmt.US(v)
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

func torchCell(m map[string]elites.TorchTiming, backend string) string {
	t, ok := m[backend]
	switch {
	case !ok:
		return "n/a"
	case t.Error != "":
		return "unsupported"
	}
	return usCell(t.GraphUS) + " / " + usCell(t.EagerUS)
}
