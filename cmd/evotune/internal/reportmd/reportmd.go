// Package reportmd renders evotune report: report.md with the best config
// and its speedup over the family default, convergence against
// evaluations and time, where candidates stopped, the elite table, the
// fastest config of each shape, p50 against registers and the provenance,
// with the SVG plots it shows.
package reportmd

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"evotune/cmd/evotune/internal/plot"
	"evotune/cmd/evotune/internal/textfmt"
	"evotune/elites"
	"evotune/space"
)

// The plots of a report, written beside report.md.
const (
	PlotEvals     = "convergence-evals.svg"
	PlotTime      = "convergence-time.svg"
	PlotGates     = "gates.svg"
	PlotRegisters = "p50-registers.svg"
)

// Build renders report.md and its plots for archive a, with its top
// elites in the table: file name → content. def is the kernel family's
// default config for the archive's problem and knobs its knobs in
// declaration order (nil when the problem is not one this build knows):
// speedups are over def, and elites are shown by how they differ from it.
// warnings (a damaged line that may hide an elite) head the report.
func Build(a *elites.Archive, top int, now time.Time, def space.Config, knobs []space.Knob, warnings []string) (map[string][]byte, error) {
	meta := a.Meta()
	results := a.Results()
	prov := elites.ProvenanceOf(a)
	files := map[string][]byte{}
	var md strings.Builder
	fmt.Fprintf(&md, "# evotune report: %s\n\n", textfmt.Problem(meta.Problem))
	fmt.Fprintf(&md, "Archive `%s`, %d results, report written %s.\n\n", a.Dir(), len(results), now.UTC().Format(time.RFC3339))
	for _, w := range warnings {
		fmt.Fprintf(&md, "**%s**\n\n", strings.TrimPrefix(w, "warning: "))
	}
	ev, err := elites.Gather(a, def)
	switch {
	case errors.Is(err, elites.ErrNoBest):
		md.WriteString("No configuration has passed every gate yet: there is no best, no convergence and no elite table.\n\n")
	case err != nil:
		return nil, err
	default:
		fmt.Fprintf(&md, "Best: **%s µs** (result %d), `%s`.\n\n", textfmt.US(ev.Best.Objective), ev.Best.Seq, ev.Best.Key)
		if ev.Default != nil {
			fmt.Fprintf(&md, "Family default: %s µs (result %d), so the best is **%.2fx** the default's speed, both measured in this archive.\n\n",
				textfmt.US(ev.Default.Objective), ev.Default.Seq, ev.Speedup)
		} else {
			md.WriteString("The family default has no passing result in this archive: no speedup over it can be given.\n\n")
		}
	}
	replayed := prov.Replay != ""
	if ev.Best.OK() {
		md.WriteString("## Convergence\n\n")
		evals, timed, xlabel := convergence(results, replayed)
		svgEvals, err := plot.Chart{
			Title:  "Best objective against evaluations",
			X:      plot.Axis{Label: "evaluations"},
			Y:      plot.Axis{Label: "best objective (p50, µs)", Scale: plot.Log},
			Series: []plot.Series{evals},
		}.SVG()
		if err != nil {
			return nil, err
		}
		svgTime, err := plot.Chart{
			Title:  "Best objective against time",
			X:      plot.Axis{Label: xlabel},
			Y:      plot.Axis{Label: "best objective (p50, µs)", Scale: plot.Log},
			Series: []plot.Series{timed},
		}.SVG()
		if err != nil {
			return nil, err
		}
		files[PlotEvals], files[PlotTime] = svgEvals, svgTime
		fmt.Fprintf(&md, "![best objective against evaluations](%s)\n\n![best objective against time](%s)\n\n", PlotEvals, PlotTime)
		if replayed {
			fmt.Fprintf(&md, "The results were replayed from `%s`: their clock times are virtual, so the time axis is the cumulative evaluation cost (compile, check and timing seconds) the results record.\n\n", prov.Replay)
		}
	}

	md.WriteString("## Where candidates stopped\n\n")
	gates, err := gateSection(results)
	if err != nil {
		return nil, err
	}
	files[PlotGates] = gates.svg
	fmt.Fprintf(&md, "![results by status](%s)\n\n", PlotGates)
	if err := textfmt.Table(&md, "markdown", []string{"status", "gate", "results"}, gates.rows); err != nil {
		return nil, err
	}
	md.WriteString("\n")

	if ev.Best.OK() {
		fmt.Fprintf(&md, "## Elites (top %d)\n\n", top)
		md.WriteString("Times in µs; for several shapes, weighted sums over the shapes like the objective. The 95% CI is that of the median. Speedup is over the family default measured in this archive.\n\n")
		if err := eliteTable(&md, a.Top(top), ev, meta.Problem, def, knobs); err != nil {
			return nil, err
		}
		md.WriteString("\n")
		if len(ev.Shapes) > 0 {
			md.WriteString("Fastest config on each shape alone:\n\n")
			var rows [][]string
			for _, s := range ev.Shapes {
				rows = append(rows, []string{s.Shape.String(), textfmt.US(s.Timing.P50US), textfmt.US(s.Timing.CILowUS) + " – " + textfmt.US(s.Timing.CIHighUS),
					strconv.Itoa(s.Result.Seq), textfmt.ConfigChanges(s.Result.Config, def, knobs)})
			}
			if err := textfmt.Table(&md, "markdown", []string{"shape", "p50", "95% CI", "result", "changes from default"}, rows); err != nil {
				return nil, err
			}
			md.WriteString("\n")
		}
		scatter, n := registerScatter(results)
		if n > 0 {
			svg, err := plot.Chart{
				Title:  "p50 against registers, every passing result",
				X:      plot.Axis{Label: "registers per thread (ptxas)"},
				Y:      plot.Axis{Label: "objective (p50, µs)", Scale: plot.Log},
				Series: []plot.Series{scatter},
			}.SVG()
			if err != nil {
				return nil, err
			}
			files[PlotRegisters] = svg
			fmt.Fprintf(&md, "![p50 against registers](%s)\n\n", PlotRegisters)
		}
	}

	provenanceSection(&md, a, prov)
	files["report.md"] = []byte(md.String())
	return files, nil
}

// convergence returns the best objective so far, as step series, against
// the evaluation count and against time: clock time since the first start,
// or for replayed results (whose clocks are virtual) the cumulative cost.
func convergence(results []space.Result, replayed bool) (evals, timed plot.Series, xlabel string) {
	evals = plot.Series{Kind: plot.Step}
	best := 0.0
	for i, r := range results {
		if r.OK() && (best == 0 || r.Objective < best) {
			best = r.Objective
		}
		if best > 0 {
			evals.X = append(evals.X, float64(i+1))
			evals.Y = append(evals.Y, best)
		}
	}
	timed = plot.Series{Kind: plot.Step}
	type point struct{ x, y float64 }
	var pts []point
	if replayed {
		xlabel = "cumulative evaluation cost, minutes (replayed: clock times are virtual)"
		cost := 0.0
		for _, r := range results {
			cost += r.Cost.Total()
			pts = append(pts, point{cost / 60, r.Objective})
		}
	} else {
		xlabel = "minutes since the first evaluation started"
		var first time.Time
		for _, r := range results {
			if !r.Started.IsZero() && (first.IsZero() || r.Started.Before(first)) {
				first = r.Started
			}
		}
		ordered := slices.Clone(results)
		slices.SortStableFunc(ordered, func(x, y space.Result) int { return x.Finished.Compare(y.Finished) })
		for _, r := range ordered {
			pts = append(pts, point{r.Finished.Sub(first).Minutes(), r.Objective})
		}
		results = ordered
	}
	best = 0
	for i, p := range pts {
		if results[i].OK() && (best == 0 || p.y < best) {
			best = p.y
		}
		if best > 0 {
			timed.X = append(timed.X, p.x)
			timed.Y = append(timed.Y, best)
		}
	}
	return evals, timed, xlabel
}

// statusOrder is the order in which statuses are listed: how far a
// candidate got, furthest last.
var statusOrder = []space.Status{space.StatusConstraint, space.StatusCompileError, space.StatusPtxasReject,
	space.StatusIncorrect, space.StatusFault, space.StatusTimeout, space.StatusOK}

type gates struct {
	svg  []byte
	rows [][]string
}

// gateSection counts results by status (a bar a status seen) and by status
// and gate (the table).
func gateSection(results []space.Result) (gates, error) {
	byStatus := map[space.Status]int{}
	type sg struct {
		s space.Status
		g space.Gate
	}
	bySG := map[sg]int{}
	for _, r := range results {
		byStatus[r.Status]++
		bySG[sg{r.Status, r.Gate}]++
	}
	statuses := slices.Clone(statusOrder)
	for s := range byStatus {
		if !slices.Contains(statuses, s) {
			statuses = append(statuses, s) // a status this build does not know
		}
	}
	var out gates
	var labels []string
	var values []float64
	for _, s := range statuses {
		if byStatus[s] == 0 {
			continue
		}
		labels = append(labels, string(s))
		values = append(values, float64(byStatus[s]))
		var gs []space.Gate
		for k := range bySG {
			if k.s == s {
				gs = append(gs, k.g)
			}
		}
		slices.Sort(gs)
		for _, g := range gs {
			out.rows = append(out.rows, []string{string(s), cmp.Or(string(g), "-"), strconv.Itoa(bySG[sg{s, g}])})
		}
	}
	if len(values) == 0 {
		labels, values = []string{"(none)"}, []float64{0}
	}
	svg, err := plot.Bars{Title: "Results by status", YLabel: "results", Labels: labels, Values: values}.SVG()
	if err != nil {
		return gates{}, err
	}
	out.svg = svg
	return out, nil
}

// eliteTable writes the elites with their timings, ptxas figures and how
// they differ from the family default.
func eliteTable(md *strings.Builder, top []space.Result, ev elites.Evidence, p space.Problem, def space.Config, knobs []space.Knob) error {
	header := []string{"#", "result", "p50", "95% CI", "p90", "p99", "speedup", "regs", "spill bytes", "shared bytes", "changes from default"}
	var rows [][]string
	for i, r := range top {
		var lo, hi, p90, p99 float64
		for j, t := range r.Timings {
			w := p.Weight(j)
			lo, hi, p90, p99 = lo+w*t.CILowUS, hi+w*t.CIHighUS, p90+w*t.P90US, p99+w*t.P99US
		}
		speedup := "-"
		if ev.Default != nil {
			speedup = fmt.Sprintf("%.2fx", ev.Default.Objective/r.Objective)
		}
		regs, spills, shared := "-", "-", "-"
		if r.Ptxas != nil {
			regs = strconv.Itoa(r.Ptxas.Registers)
			spills = strconv.Itoa(r.Ptxas.SpillStores + r.Ptxas.SpillLoads)
			shared = strconv.Itoa(r.Ptxas.SharedBytes)
		}
		rows = append(rows, []string{strconv.Itoa(i + 1), strconv.Itoa(r.Seq), textfmt.US(r.Objective), textfmt.US(lo) + " – " + textfmt.US(hi), textfmt.US(p90), textfmt.US(p99),
			speedup, regs, spills, shared, textfmt.ConfigChanges(r.Config, def, knobs)})
	}
	return textfmt.Table(md, "markdown", header, rows)
}

// registerScatter returns the objective against registers of every passing
// result that has ptxas figures, and how many there are.
func registerScatter(results []space.Result) (plot.Series, int) {
	s := plot.Series{Kind: plot.Scatter}
	for _, r := range results {
		if r.OK() && r.Ptxas != nil && r.Ptxas.Registers > 0 {
			s.X = append(s.X, float64(r.Ptxas.Registers))
			s.Y = append(s.Y, r.Objective)
		}
	}
	return s, len(s.X)
}

// provenanceSection says where and when the results were measured.
func provenanceSection(md *strings.Builder, a *elites.Archive, p elites.Provenance) {
	md.WriteString("## Provenance\n\n")
	item := func(label, format string, args ...any) {
		fmt.Fprintf(md, "- %s: %s\n", label, fmt.Sprintf(format, args...))
	}
	item("problem", "%s", textfmt.Problem(p.Problem))
	item("GPU", "%s (%s, compute capability %s), driver %s", textfmt.OrUnknown(p.GPU), textfmt.OrUnknown(p.Arch), textfmt.OrUnknown(p.ComputeCap), textfmt.OrUnknown(p.Driver))
	item("GPU UUID", "%s", textfmt.OrUnknown(p.GPUUUID))
	item("nvcc", "%s", textfmt.OrUnknown(p.NVCC))
	item("kernel source hash", "%s", textfmt.OrUnknown(p.SourceHash))
	if p.Replay != "" {
		item("replayed from", "`%s` (not a measurement of any machine)", p.Replay)
	}
	m := a.Meta()
	item("archive created", "%s by evotune %s, strategy %s, seed %d", m.Created.UTC().Format(time.RFC3339), textfmt.OrUnknown(m.Version), textfmt.OrUnknown(m.Strategy), m.Seed)
	if !p.First.IsZero() {
		item("results", "%s to %s", p.First.UTC().Format(time.RFC3339), p.Last.UTC().Format(time.RFC3339))
	}
	item("counts", "%d evaluated%s", p.Evaluated, textfmt.StatusCounts(p.ByStatus))
	for _, w := range a.Skipped() {
		item("warning", "%s/results.jsonl: skipped %s", a.Dir(), w)
	}
}
