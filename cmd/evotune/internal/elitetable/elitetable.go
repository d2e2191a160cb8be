// Package elitetable builds and renders the elite table of an archive, as
// evotune show and the end of evotune tune print it: the archive's
// identity, its results counted by status and its best configurations; and
// the damaged log lines that may have held a result the table, a report or
// an export would be missing.
package elitetable

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"

	"evotune/cmd/evotune/internal/textfmt"
	"evotune/elites"
	"evotune/space"
)

// A Report is what evotune show prints: the archive's identity, counts of
// results by status, and the elites.
type Report struct {
	Archive   string               `json:"archive"`
	Meta      elites.Meta          `json:"meta"`
	Evaluated int                  `json:"evaluated"`
	ByStatus  map[space.Status]int `json:"by_status"`
	// DefaultUS is the objective of the family's default config, when the
	// archive measured it.
	DefaultUS float64 `json:"default_objective_us,omitempty"`
	Elites    []Row   `json:"elites"`
	// Damaged names the damaged lines of the log that may have held an
	// elite: the table may be missing them.
	Damaged []string `json:"damaged,omitempty"`
}

// A Row is one line of the elite table. Times are in microseconds; for a
// multi-shape problem they are weighted sums over the shapes, like the
// objective.
type Row struct {
	Rank      int          `json:"rank"`
	Seq       int          `json:"seq"`
	Key       string       `json:"key"`
	Config    space.Config `json:"config"`
	P50US     float64      `json:"p50_us"`
	CILowUS   float64      `json:"ci_low_us"`
	CIHighUS  float64      `json:"ci_high_us"`
	P90US     float64      `json:"p90_us"`
	Speedup   float64      `json:"speedup_vs_default,omitempty"`
	Registers int          `json:"registers,omitempty"`
	Spills    int          `json:"spill_bytes"` // stores plus loads
	// Changes lists the knobs that differ from the family's default.
	Changes string `json:"changes"`
}

// New builds the report of archive a with its top elites. def is the
// kernel family's default config for the archive's problem and knobs its
// knobs in declaration order (nil when the problem is not one this build
// knows): speedups are over def, and elites are shown by how they differ
// from it.
func New(a *elites.Archive, top int, def space.Config, knobs []space.Knob) Report {
	meta := a.Meta()
	rep := Report{Archive: a.Dir(), Meta: meta, Evaluated: a.Len(), ByStatus: a.StatusCounts()}
	if def != nil {
		if r, ok := a.Lookup(def.Key()); ok && r.OK() {
			rep.DefaultUS = r.Objective
		}
	}
	rep.Elites = []Row{}
	best := a.Top(top)
	rep.Damaged = Hidden(a, Bound(best, top), "an elite")
	for i, r := range best {
		row := Row{Rank: i + 1, Seq: r.Seq, Key: r.Key, Config: r.Config, P50US: r.Objective,
			Changes: textfmt.ConfigChanges(r.Config, def, knobs)}
		for j, t := range r.Timings {
			w := meta.Problem.Weight(j)
			row.CILowUS += w * t.CILowUS
			row.CIHighUS += w * t.CIHighUS
			row.P90US += w * t.P90US
		}
		if rep.DefaultUS > 0 {
			row.Speedup = rep.DefaultUS / r.Objective
		}
		if r.Ptxas != nil {
			row.Registers = r.Ptxas.Registers
			row.Spills = r.Ptxas.SpillStores + r.Ptxas.SpillLoads
		}
		rep.Elites = append(rep.Elites, row)
	}
	return rep
}

// Write prints the report in format: "table", "markdown" or "json". A
// table is fitted to width columns (0: no limit) by wrapping the changes
// and leaving out p90, then the CI.
func (rep Report) Write(w io.Writer, format string, width int) error {
	if format == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	m := rep.Meta
	fmt.Fprintf(w, "archive %s: %s\n", rep.Archive, textfmt.Problem(m.Problem))
	fmt.Fprintf(w, "measured on %s (%s), nvcc %s, source %s\n", textfmt.OrUnknown(m.GPU), textfmt.OrUnknown(m.Arch),
		textfmt.OrUnknown(m.NVCC), textfmt.ShortHash(m.SourceHash))
	fmt.Fprintf(w, "%d evaluated%s\n", rep.Evaluated, textfmt.StatusCounts(rep.ByStatus))
	for _, d := range rep.Damaged {
		fmt.Fprintln(w, d)
	}
	if len(rep.Elites) == 0 {
		fmt.Fprintln(w, "no configuration has passed every gate yet")
		return nil
	}
	if format == "markdown" {
		fmt.Fprintln(w)
	}
	us := textfmt.US
	header := []string{"#", "p50 µs", "95% CI µs", "p90 µs", "speedup", "regs", "spills", "changes from default"}
	var rows [][]string
	for _, e := range rep.Elites {
		speedup := "-"
		if e.Speedup > 0 {
			speedup = fmt.Sprintf("%.2fx", e.Speedup)
		}
		regs := "-"
		if e.Registers > 0 {
			regs = strconv.Itoa(e.Registers)
		}
		rows = append(rows, []string{
			strconv.Itoa(e.Rank), us(e.P50US), us(e.CILowUS) + " – " + us(e.CIHighUS), us(e.P90US),
			speedup, regs, strconv.Itoa(e.Spills), e.Changes,
		})
	}
	if format == "table" {
		header, rows = textfmt.Fit(header, rows, width, "p90 µs", "95% CI µs")
	}
	return textfmt.Table(w, format, header, rows)
}

// Hidden renders, one a line, the damaged log lines of a that may have
// held an OK result with an objective below than: a table or an export of
// the readable results may be missing it. what says what it may have been,
// e.g. "an elite".
func Hidden(a *elites.Archive, than float64, what string) []string {
	var out []string
	for _, w := range a.Hidden(than) {
		held := ""
		if w.Key != "" {
			held = " (config " + w.Key + ")"
		}
		out = append(out, fmt.Sprintf("warning: line %d of %s/results.jsonl is damaged (%s) and may have held %s%s; it is not counted",
			w.Line, a.Dir(), w.Reason, what, held))
	}
	return out
}

// Bound is the objective a hidden result must beat to be among the k best,
// given the best top: the last of them when the table is full, any
// objective otherwise.
func Bound(top []space.Result, k int) float64 {
	if len(top) < k || len(top) == 0 {
		return math.Inf(1)
	}
	return top[len(top)-1].Objective
}
