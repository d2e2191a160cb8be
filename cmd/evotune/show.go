package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"

	"evotune/cmd/evotune/internal/textfmt"
	"evotune/elites"
	"evotune/kernels"
	"evotune/space"
)

// showOptions are the flags of evotune show.
type showOptions struct {
	Archive string
	Top     int
	Format  string
}

func defaultShowOptions() showOptions {
	return showOptions{Archive: "evotune-archive", Top: 8, Format: "table"}
}

func showCommand() command {
	return command{
		name:     "show",
		summary:  "print the elite table of an archive",
		synopsis: "evotune show [--archive DIR] [--top K] [--format table|markdown|json]",
		examples: `  evotune show
  evotune show --archive evotune-archive --top 3
  evotune show --format markdown > elites.md
  evotune show --format json | jq '.elites[0].config'
`,
		run: runShow,
	}
}

func runShow(ctx context.Context, c *cli, args []string) error {
	opts := defaultShowOptions()
	fs := newFlagSet("show")
	fs.StringVar(&opts.Archive, "archive", opts.Archive, "archive `directory`")
	fs.IntVar(&opts.Top, "top", opts.Top, "number of elites to print")
	fs.StringVar(&opts.Format, "format", opts.Format, "output format: table, markdown or json")
	if _, err := c.parseFlags(fs, args, false); err != nil {
		return err
	}
	switch {
	case opts.Top <= 0:
		return usagef("show", "--top must be positive")
	case opts.Format != "table" && opts.Format != "markdown" && opts.Format != "json":
		return usagef("show", "--format %q: want table, markdown or json", opts.Format)
	case opts.Archive == "":
		return usagef("show", "--archive must name a directory")
	}
	done := c.loading("archive " + opts.Archive)
	a, err := elites.Read(opts.Archive)
	done()
	if err != nil {
		return fmt.Errorf("show --archive: %w", err)
	}
	defer a.Close()
	warnSkipped(c.stderr, a)
	if meta := a.Meta(); meta.Problem.Family != "" {
		if sp, err := familySpace("show", meta.Problem, cmp.Or(meta.Arch, kernels.DefaultArch)); err == nil {
			warnForeign(c.stderr, a, sp)
		}
	}
	report := newShowReport(a, opts.Top)
	if opts.Format == "json" {
		enc := json.NewEncoder(c.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(report)
	}
	return report.write(c.stdout, opts.Format, c.outWidth)
}

// warnSkipped prints, on stderr, why the index was rebuilt (if it was) and
// the result-log lines that loading skipped:
// the user should know that a damaged log hides results.
func warnSkipped(stderr io.Writer, a *elites.Archive) {
	if n := a.IndexNote(); n != "" {
		fmt.Fprintf(stderr, "evotune: %s\n", n)
	}
	for _, w := range a.Skipped() {
		fmt.Fprintf(stderr, "evotune: warning: %s/results.jsonl: skipped %s\n", a.Dir(), w)
	}
}

// hiddenBetter renders, one a line, the damaged log lines of a that may
// have held an OK result with an objective below than: a table or an
// export of the readable results may be missing it. what says what it may
// have been, e.g. "an elite".
func hiddenBetter(a *elites.Archive, than float64, what string) []string {
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

// eliteBound is the objective a hidden result must beat to be among top:
// the last of them when the table is full, any objective otherwise.
func eliteBound(top []space.Result, k int) float64 {
	if len(top) < k || len(top) == 0 {
		return math.Inf(1)
	}
	return top[len(top)-1].Objective
}

// warnForeign prints, on stderr, how many results of the archive hold a
// config that is not one of sp's (an unknown knob, a value off a knob's
// list): a log edited by hand or made by another build. The search never
// proposes such a config and export refuses it, but they are loaded and
// shown, so the user is told. Constraint rejections are ordinary results.
func warnForeign(stderr io.Writer, a *elites.Archive, sp *space.Space) {
	n, first := 0, ""
	// The keys, not Results: at 100,000 results a copy of every result
	// is most of what opening costs.
	scratch := space.Config{}
	for _, key := range a.Keys() {
		cfg := scratch
		if !scratch.SetKey(key) {
			r, _ := a.Lookup(key) // a config its key does not give back
			cfg = r.Config
		}
		var rej *space.Rejection
		if err := sp.Check(cfg); err != nil && !errors.As(err, &rej) {
			if n == 0 {
				r, _ := a.Lookup(key)
				first = fmt.Sprintf("result %d: %v", r.Seq, err)
			}
			n++
		}
	}
	if n > 0 {
		fmt.Fprintf(stderr, "evotune: warning: %s/results.jsonl: %d results hold configs outside the knob space (first: %s)\n", a.Dir(), n, first)
	}
}

// A showReport is what evotune show prints: the archive's identity, counts
// of results by status, and the elites.
type showReport struct {
	Archive   string               `json:"archive"`
	Meta      elites.Meta          `json:"meta"`
	Evaluated int                  `json:"evaluated"`
	ByStatus  map[space.Status]int `json:"by_status"`
	// DefaultUS is the objective of the family's default config, when the
	// archive measured it.
	DefaultUS float64    `json:"default_objective_us,omitempty"`
	Elites    []eliteRow `json:"elites"`
	// Damaged names the damaged lines of the log that may have held an
	// elite: the table may be missing them.
	Damaged []string `json:"damaged,omitempty"`
}

// An eliteRow is one line of the elite table. Times are in microseconds;
// for a multi-shape problem they are weighted sums over the shapes, like
// the objective.
type eliteRow struct {
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

func newShowReport(a *elites.Archive, top int) showReport {
	meta := a.Meta()
	rep := showReport{Archive: a.Dir(), Meta: meta, Evaluated: a.Len(), ByStatus: a.StatusCounts()}
	def, knobs := familyDefault(meta.Problem, meta.Arch)
	if def != nil {
		if r, ok := a.Lookup(def.Key()); ok && r.OK() {
			rep.DefaultUS = r.Objective
		}
	}
	rep.Elites = []eliteRow{}
	best := a.Top(top)
	rep.Damaged = hiddenBetter(a, eliteBound(best, top), "an elite")
	for i, r := range best {
		row := eliteRow{Rank: i + 1, Seq: r.Seq, Key: r.Key, Config: r.Config, P50US: r.Objective,
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

// familyDefault returns the kernel family's default config for a problem
// and its knobs in declaration order, or nil when the archive's problem is
// not one this build knows. The default does not depend on the target, so
// an architecture this build does not know still has one.
func familyDefault(p space.Problem, arch string) (space.Config, []space.Knob) {
	t, err := kernels.TargetFor(arch)
	if err != nil {
		t, err = kernels.TargetFor(kernels.DefaultArch)
	}
	if err != nil {
		return nil, nil
	}
	family, err := kernels.FamilyOf(p.Family)
	if err != nil {
		return nil, nil
	}
	s, err := family.SpaceFor(p, t)
	if err != nil {
		return nil, nil
	}
	return s.Default(), s.Knobs
}

// write prints the report in format; a table is fitted to width columns
// (0: no limit) by wrapping the changes and leaving out p90, then the CI.
func (rep showReport) write(w io.Writer, format string, width int) error {
	m := rep.Meta
	fmt.Fprintf(w, "archive %s: %s\n", rep.Archive, problemLine(m.Problem))
	fmt.Fprintf(w, "measured on %s (%s), nvcc %s, source %s\n", orUnknown(m.GPU), orUnknown(m.Arch), orUnknown(m.NVCC), shortHash(m.SourceHash))
	fmt.Fprintf(w, "%d evaluated%s\n", rep.Evaluated, statusCounts(rep.ByStatus))
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
	return writeTable(w, format, header, rows)
}
