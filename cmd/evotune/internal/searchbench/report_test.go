package searchbench

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"

	"evotune/evo"
)

// testReport is a report of one strategy at two budgets, the second with
// the NaN score of a budget at which random search is sure to succeed.
func testReport() Report {
	return Report{
		Replay: "r.jsonl.gz", Problem: "sdpa 1x8x512x64 fp16", Recorded: "synthetic", Seeds: 4, FirstSeed: 1,
		Search: SearchParams(evo.Options{Population: 16, Elites: 2, Tournament: 3, CrossoverRate: 0.5, Stagnation: 5, Screen: 1}),
		Comparison: evo.StrategyComparison{
			Landscape: evo.Landscape{Configs: 100, OK: 90, Optimum: 12.5},
			Budgets:   []int{10, 100}, Tolerance: 0.02, RandomFraction: []float64{0.8, 1},
			Within: 3, RandomReachMedian: 23, RandomReachMean: 25,
			RandomReached: 1,
			Strategies: []evo.StrategyStats{{Strategy: "evo", Runs: 4, ReachMedian: 5, Reached: 1, Budgets: []evo.BudgetStats{
				{Budget: 10, MeanFraction: 0.9, MedianFraction: 0.95, Score: 0.5},
				{Budget: 100, MeanFraction: 1, MedianFraction: 1, Score: math.NaN()},
			}}},
		},
		Goal: evo.GoalCheck{Pass: true, ReachMedian: 5, Why: "5 evaluations"},
	}
}

// TestReportJSONHoldsNaNScores checks that a NaN score, which JSON cannot
// hold, is written as 0 and the report stays otherwise whole.
func TestReportJSONHoldsNaNScores(t *testing.T) {
	r := testReport()
	var buf bytes.Buffer
	if err := r.Write(&buf, "json"); err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(buf.Bytes(), &back); err != nil {
		t.Fatalf("decoding: %v\n%s", err, buf.String())
	}
	got := back.Comparison.Strategies[0].Budgets
	if got[0].Score != 0.5 || got[1].Score != 0 || back.Search != r.Search || !back.Goal.Pass {
		t.Errorf("decoded %+v, search %q", got, back.Search)
	}
	if !math.IsNaN(r.Comparison.Strategies[0].Budgets[1].Score) {
		t.Error("writing json changed the report's own score")
	}
}

// TestReportText checks the lines of the text report: the header, the
// NaN score as "-", the evaluations to reach, and the goal line.
func TestReportText(t *testing.T) {
	var buf bytes.Buffer
	if err := testReport().Write(&buf, "markdown"); err != nil {
		t.Fatal(err)
	}
	out := strings.Join(strings.Fields(buf.String()), " ")
	for _, want := range []string{
		"replay r.jsonl.gz (sdpa 1x8x512x64 fp16): synthetic",
		"100 configs, 90 ok, optimum 12.50 µs, 3 within 2% of it",
		"4 seeds per strategy, 1..4",
		"| 100 | evo | 4 | 1.000 | 1.000 | - | 1.000 |",
		"| evo | 4 | 5 | 5.00% | 100% | 4.6x |",
		"**PASS**: evo within 2% of the optimum in ≤ 5% of the space, ≥ 3x fewer evaluations than random: 5 evaluations",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, buf.String())
		}
	}
}

// TestSearchParamsNamesTheBatch checks that a report names bred batches
// only when Options.Batch sets them, so that reports of the defaults read
// as before.
func TestSearchParamsNamesTheBatch(t *testing.T) {
	o := evo.DefaultOptions()
	if got := SearchParams(o); !strings.HasSuffix(got, ", bred batches of 1") {
		t.Fatalf("defaults: %q does not end with the bred batch", got)
	}
	for _, b := range []int{0, o.Population} {
		o.Batch = b
		if got := SearchParams(o); strings.Contains(got, "batch") {
			t.Fatalf("batch %d (whole generations): %q names a batch", b, got)
		}
	}
}
