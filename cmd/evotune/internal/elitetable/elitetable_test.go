package elitetable

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"evotune/elites"
	"evotune/space"
)

var (
	small = space.Shape{B: 1, H: 8, S: 512, D: 64}
	large = space.Shape{B: 2, H: 8, S: 1024, D: 64}
	// problem weighs the large shape half: objectives and the row's
	// times are 1×small + 0.5×large.
	problem = space.Problem{Family: "sdpa", Shapes: []space.Shape{small, large}, Weights: []float64{1, 0.5}, Dtype: "fp16"}
	def     = space.Config{"block_m": "64"}
	knobs   = []space.Knob{{Name: "block_m"}}
)

// ok is a timed result of block_m with p50s on the two shapes: CIs ±0.5
// and ±1 µs around them, p90s 1 and 2 µs above.
func ok(blockM string, p50Small, p50Large float64) space.Result {
	cfg := space.Config{"block_m": blockM}
	return space.Result{Key: cfg.Key(), Config: cfg, Status: space.StatusOK, Gate: space.GateTimed,
		Objective: p50Small + 0.5*p50Large, Ptxas: &space.Ptxas{Registers: 128, SpillStores: 4, SpillLoads: 8},
		Timings: []space.Timing{
			{Shape: small, P50US: p50Small, CILowUS: p50Small - 0.5, CIHighUS: p50Small + 0.5, P90US: p50Small + 1},
			{Shape: large, P50US: p50Large, CILowUS: p50Large - 1, CIHighUS: p50Large + 1, P90US: p50Large + 2},
		}}
}

func rejected(blockM string) space.Result {
	cfg := space.Config{"block_m": blockM}
	return space.Result{Key: cfg.Key(), Config: cfg, Status: space.StatusPtxasReject, Gate: space.GatePtxas, Reason: "spills"}
}

// archive creates an archive of the results in a temporary directory and
// opens it again for reading, as evotune show does.
func archive(t *testing.T, results ...space.Result) (*elites.Archive, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "archive")
	a, err := elites.Create(dir, elites.Meta{Problem: problem, GPU: "NVIDIA L4", Arch: "sm_89", NVCC: "13.0.88", SourceHash: "c0ffee"})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range results {
		if err := a.Record(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	return read(t, dir), dir
}

func read(t *testing.T, dir string) *elites.Archive {
	t.Helper()
	a, err := elites.Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	return a
}

// TestNew builds the report of a default, a faster config and a rejected
// one: ranks by objective, times summed with the problem's weights,
// speedups over the default and the changes from it.
func TestNew(t *testing.T) {
	a, dir := archive(t, ok("64", 10, 20), rejected("32"), ok("128", 8, 16))
	rep := New(a, 5, def, knobs)
	if rep.Archive != dir || rep.Evaluated != 3 || rep.DefaultUS != 20 || len(rep.Damaged) != 0 {
		t.Errorf("archive %q, evaluated %d, default %v µs, damaged %q; want %q, 3, 20 µs, none", rep.Archive, rep.Evaluated, rep.DefaultUS, rep.Damaged, dir)
	}
	if rep.ByStatus[space.StatusOK] != 2 || rep.ByStatus[space.StatusPtxasReject] != 1 {
		t.Errorf("by status %v, want 2 ok and 1 ptxas_reject", rep.ByStatus)
	}
	want := []Row{
		{Rank: 1, Seq: 3, Key: "block_m=128", P50US: 16, CILowUS: 15, CIHighUS: 17, P90US: 18, Speedup: 1.25, Registers: 128, Spills: 12, Changes: "block_m=128"},
		{Rank: 2, Seq: 1, Key: "block_m=64", P50US: 20, CILowUS: 19, CIHighUS: 21, P90US: 22, Speedup: 1, Registers: 128, Spills: 12, Changes: "(default)"},
	}
	if len(rep.Elites) != len(want) {
		t.Fatalf("%d elites, want %d: %+v", len(rep.Elites), len(want), rep.Elites)
	}
	for i, got := range rep.Elites {
		if got.Config["block_m"] != strings.TrimPrefix(want[i].Key, "block_m=") {
			t.Errorf("elite %d: config %v, key %s", i, got.Config, want[i].Key)
		}
		got.Config = nil
		if !reflect.DeepEqual(got, want[i]) {
			t.Errorf("elite %d:\n got %+v\nwant %+v", i, got, want[i])
		}
	}

	// A problem this build does not know: no default, so no speedup, and
	// each elite is shown by its whole key.
	rep = New(a, 1, nil, nil)
	if rep.DefaultUS != 0 || len(rep.Elites) != 1 || rep.Elites[0].Speedup != 0 || rep.Elites[0].Changes != "block_m=128" {
		t.Errorf("with no default: default %v µs, elites %+v; want none, one row of speedup 0 and changes block_m=128", rep.DefaultUS, rep.Elites)
	}
}

// damage rewrites line i (0-based) of the archive's log so that it no
// longer reads as a result but still says it passed at its objective.
func damage(t *testing.T, dir string, i int) {
	t.Helper()
	path := filepath.Join(dir, "results.jsonl")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.SplitAfter(data, []byte("\n"))
	damaged := bytes.Replace(lines[i], []byte(`"status":"ok"`), []byte(`"status":"ok","config":7`), 1)
	if bytes.Equal(damaged, lines[i]) {
		t.Fatalf("line %d of the log says no status ok: %s", i+1, lines[i])
	}
	lines[i] = damaged
	if err := os.WriteFile(path, bytes.Join(lines, nil), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestDamaged: a damaged line that may have held an elite is named in the
// report and printed above the table, but only while the table has room
// for a result as slow as it says it was.
func TestDamaged(t *testing.T) {
	_, dir := archive(t, ok("64", 10, 20), ok("128", 8, 16), ok("32", 12, 24))
	damage(t, dir, 2) // block_m=32, which says 24 µs
	a := read(t, dir)

	rep := New(a, 5, def, knobs)
	if len(rep.Damaged) != 1 {
		t.Fatalf("damaged %q, want one line", rep.Damaged)
	}
	d := rep.Damaged[0]
	prefix := "warning: line 3 of " + dir + "/results.jsonl is damaged ("
	suffix := ") and may have held an elite (config block_m=32); it is not counted"
	if !strings.HasPrefix(d, prefix) || !strings.HasSuffix(d, suffix) {
		t.Errorf("damaged line %q\nwant %q...%q", d, prefix, suffix)
	}
	var b strings.Builder
	if err := rep.Write(&b, "table", 0); err != nil {
		t.Fatal(err)
	}
	if lines := strings.Split(b.String(), "\n"); len(lines) < 5 || lines[3] != d || !strings.HasPrefix(lines[4], "┌") {
		t.Errorf("the damaged line is not printed between the counts and the table:\n%s", b.String())
	}

	// Two elites fill a table of two, and the damaged line says 24 µs,
	// slower than both: it cannot have been an elite.
	if rep := New(a, 2, def, knobs); len(rep.Damaged) != 0 || len(rep.Elites) != 2 {
		t.Errorf("top 2: damaged %q, %d elites; want none and 2", rep.Damaged, len(rep.Elites))
	}

	if got := Hidden(a, 30, "a result faster than 30.00 µs"); len(got) != 1 || !strings.Contains(got[0], "may have held a result faster than 30.00 µs (config block_m=32)") {
		t.Errorf("Hidden(30) = %q, want the line of block_m=32", got)
	}
	if got := Hidden(a, 24, "a result faster than 24.00 µs"); len(got) != 0 {
		t.Errorf("Hidden(24) = %q, want none: the line says 24 µs, no faster", got)
	}
}

func TestBound(t *testing.T) {
	top := []space.Result{{Objective: 16}, {Objective: 20}}
	for _, tc := range []struct {
		top  []space.Result
		k    int
		want float64
	}{
		{top, 2, 20},          // full: the last of the table
		{top, 3, math.Inf(1)}, // room for one more: any objective
		{nil, 1, math.Inf(1)}, // empty
		{top[:1], 1, 16},      // one of one
	} {
		if got := Bound(tc.top, tc.k); got != tc.want {
			t.Errorf("Bound(%d results, %d) = %v, want %v", len(tc.top), tc.k, got, tc.want)
		}
	}
}

func write(t *testing.T, rep Report, format string, width int) string {
	t.Helper()
	var b strings.Builder
	if err := rep.Write(&b, format, width); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestWriteFits renders the table with no limit, then one column too
// narrow for it, then far too narrow: p90 goes first, then the CI.
func TestWriteFits(t *testing.T) {
	a, dir := archive(t, ok("64", 10, 20), rejected("32"), ok("128", 8, 16))
	rep := New(a, 5, def, knobs)
	full := write(t, rep, "table", 0)
	head := "archive " + dir + ": sdpa 1x8x512x64:1,2x8x1024x64:0.5 fp16\n" +
		"measured on NVIDIA L4 (sm_89), nvcc 13.0.88, source c0ffee\n" +
		"3 evaluated, 2 ok, 1 ptxas_reject\n"
	if !strings.HasPrefix(full, head) {
		t.Errorf("the report does not start with\n%s\ngot:\n%s", head, full)
	}
	for _, want := range []string{"│ # │ p50 µs │ 95% CI µs     │ p90 µs │ speedup │ regs │ spills │ changes from default │",
		"│ 1 │ 16.00  │ 15.00 – 17.00 │ 18.00  │ 1.25x   │ 128  │ 12     │ block_m=128          │",
		"│ 2 │ 20.00  │ 19.00 – 21.00 │ 22.00  │ 1.00x   │ 128  │ 12     │ (default)            │"} {
		if !strings.Contains(full, want) {
			t.Errorf("the table lacks\n%s\ngot:\n%s", want, full)
		}
	}
	widest := 0
	for line := range strings.SplitSeq(strings.TrimPrefix(full, head), "\n") {
		widest = max(widest, utf8.RuneCountInString(line))
	}

	narrower := write(t, rep, "table", widest-1)
	for line := range strings.SplitSeq(strings.TrimPrefix(narrower, head), "\n") {
		if n := utf8.RuneCountInString(line); n > widest-1 {
			t.Errorf("in %d columns, a line of %d: %s", widest-1, n, line)
		}
	}
	if strings.Contains(narrower, "p90 µs") || !strings.Contains(narrower, "95% CI µs") {
		t.Errorf("one column too narrow: want p90 left out and the CI kept:\n%s", narrower)
	}
	if narrowest := write(t, rep, "table", 40); strings.Contains(narrowest, "p90 µs") || strings.Contains(narrowest, "95% CI µs") ||
		!strings.Contains(narrowest, "changes from default") {
		t.Errorf("in 40 columns: want p90 and the CI left out, the changes kept:\n%s", narrowest)
	}
	// Markdown is never fitted: every column, however narrow the terminal.
	md := write(t, rep, "markdown", 40)
	if !strings.HasPrefix(md, head+"\n|") || !strings.Contains(md, "p90 µs") || strings.Contains(md, "┌") {
		t.Errorf("markdown: want the head, a blank line and a markdown table with every column:\n%s", md)
	}
}

// TestWriteEmpty: with no result past every gate there is no table.
func TestWriteEmpty(t *testing.T) {
	a, _ := archive(t, rejected("32"))
	out := write(t, New(a, 5, def, knobs), "table", 0)
	if !strings.HasSuffix(out, "1 evaluated, 1 ptxas_reject\nno configuration has passed every gate yet\n") || strings.Contains(out, "│") {
		t.Errorf("an archive with no elite:\n%s", out)
	}
}

// TestWriteJSON checks the JSON's shape, which scripts read: its field
// names, an empty list (not null) when there is no elite, and no damaged
// field when nothing is damaged.
func TestWriteJSON(t *testing.T) {
	a, _ := archive(t, ok("64", 10, 20), rejected("32"), ok("128", 8, 16))
	var doc map[string]any
	if err := json.Unmarshal([]byte(write(t, New(a, 5, def, knobs), "json", 40)), &doc); err != nil {
		t.Fatalf("not JSON: %v", err)
	}
	keys := func(m map[string]any) []string {
		var out []string
		for k := range m {
			out = append(out, k)
		}
		slices.Sort(out)
		return out
	}
	if got, want := keys(doc), []string{"archive", "by_status", "default_objective_us", "elites", "evaluated", "meta"}; !slices.Equal(got, want) {
		t.Errorf("keys %q, want %q", got, want)
	}
	rows := doc["elites"].([]any)
	first := rows[0].(map[string]any)
	if got, want := keys(first), []string{"changes", "ci_high_us", "ci_low_us", "config", "key", "p50_us", "p90_us", "rank", "registers", "seq", "speedup_vs_default", "spill_bytes"}; !slices.Equal(got, want) {
		t.Errorf("row keys %q, want %q", got, want)
	}
	if first["p50_us"] != 16.0 || first["speedup_vs_default"] != 1.25 || first["changes"] != "block_m=128" {
		t.Errorf("first row %v", first)
	}
	if s := doc["by_status"].(map[string]any); s["ok"] != 2.0 || s["ptxas_reject"] != 1.0 {
		t.Errorf("by_status %v", s)
	}

	a, _ = archive(t, rejected("32"))
	out := write(t, New(a, 5, def, knobs), "json", 0)
	if !strings.Contains(out, `"elites": []`) || strings.Contains(out, "default_objective_us") {
		t.Errorf("no elite: want an empty elites list and no default objective:\n%s", out)
	}
}
