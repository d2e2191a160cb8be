package searchbench

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"evotune/cmd/evotune/internal/textfmt"
	"evotune/evo"
)

// The goal bench-search checks: evo comes within GoalTolerance of the
// optimum in at most GoalShare of the recorded space's evaluations (median
// over seeds), and needs at least GoalSpeedup times fewer evaluations than
// random search to get there.
const (
	GoalTolerance = 0.02
	GoalShare     = 0.05
	GoalSpeedup   = 3
)

// SearchParams names the evo options under test, for the report.
func SearchParams(o evo.Options) string {
	onOff := func(b bool) string {
		if b {
			return "on"
		}
		return "off"
	}
	s := fmt.Sprintf("population %d, elites %d, tournament %d, crossover %g, stagnation %d, screen %d, restart %s, interactions %s, ILS %s",
		o.Population, o.Elites, o.Tournament, o.CrossoverRate, o.Stagnation, o.Screen, onOff(o.Restart), onOff(o.Interact), onOff(o.ILS))
	if o.Batch > 0 && o.Batch < o.Population {
		s += fmt.Sprintf(", bred batches of %d", o.Batch)
	}
	return s
}

// A Report is what bench-search prints: the comparison of the strategies
// on one recorded space, evo's goal check and, for a Kernel Tuner cache,
// the comparison with the exact random baselines and published figures.
type Report struct {
	Replay     string                 `json:"replay"`
	Problem    string                 `json:"problem"`
	Recorded   string                 `json:"recorded"`
	Seeds      int                    `json:"seeds"`
	FirstSeed  uint64                 `json:"first_seed"`
	Search     string                 `json:"search"`
	Comparison evo.StrategyComparison `json:"comparison"`
	Goal       evo.GoalCheck          `json:"goal"`
	// KT is set for a Kernel Tuner cache.
	KT *KTComparison `json:"kt,omitempty"`
}

// Write renders r in format: table, markdown or json.
func (r Report) Write(w io.Writer, format string) error {
	if format == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(r.jsonSafe())
	}
	sc := r.Comparison
	land := sc.Landscape
	tol := textfmt.Percent(sc.Tolerance, 0)
	lines := []string{
		fmt.Sprintf("replay %s (%s): %s", r.Replay, r.Problem, r.Recorded),
		fmt.Sprintf("%d configs, %d ok, optimum %s µs, %d within %s of it", land.Configs, land.OK, textfmt.US(land.Optimum), sc.Within, tol),
		fmt.Sprintf("%d seeds per strategy, %d..%d (exhaustive runs once: its order is fixed); evo with %s",
			r.Seeds, r.FirstSeed, r.FirstSeed+uint64(r.Seeds)-1, r.Search),
	}
	for _, l := range lines {
		if format == "markdown" {
			fmt.Fprintf(w, "%s  \n", l)
		} else {
			fmt.Fprintln(w, l)
		}
	}
	fmt.Fprintln(w)

	title := func(s string) {
		if format == "markdown" {
			fmt.Fprintf(w, "**%s**\n\n", s)
		} else {
			fmt.Fprintln(w, s)
		}
	}
	title("Fraction of the optimum reached (optimum/best; a failed config yields nothing), and P = (mean − random)/(1 − random)")
	var rows [][]string
	for bi, b := range sc.Budgets {
		for _, st := range sc.Strategies {
			bs := st.Budgets[bi]
			rows = append(rows, []string{strconv.Itoa(b), st.Strategy, strconv.Itoa(st.Runs),
				textfmt.Fixed(bs.MeanFraction, 3), textfmt.Fixed(bs.MedianFraction, 3), textfmt.Fixed(bs.Score, 2), textfmt.Fixed(sc.RandomFraction[bi], 3)})
		}
	}
	if err := textfmt.Table(w, format, []string{"budget", "strategy", "runs", "mean", "median", "P", "random (exact)"}, rows); err != nil {
		return err
	}
	fmt.Fprintln(w)

	title(fmt.Sprintf("Evaluations to come within %s of the optimum (median over runs, a run that never did counting as never; random search's exact mean is %s)",
		tol, textfmt.Fixed(sc.RandomReachMean, 0)))
	largest := sc.Budgets[len(sc.Budgets)-1]
	rows = nil
	for _, st := range sc.Strategies {
		med, share, ratio := fmt.Sprintf("> %d", largest), "-", "-"
		if st.ReachMedian >= 0 {
			med = strconv.Itoa(st.ReachMedian)
			share = textfmt.Percent(float64(st.ReachMedian)/float64(land.Configs), 2)
			ratio = textfmt.Fixed(float64(sc.RandomReachMedian)/float64(st.ReachMedian), 1) + "x"
		}
		rows = append(rows, []string{st.Strategy, strconv.Itoa(st.Runs), med, share, textfmt.Percent(st.Reached, 0), ratio})
	}
	rows = append(rows, []string{"random (exact)", "-", strconv.Itoa(sc.RandomReachMedian),
		textfmt.Percent(float64(sc.RandomReachMedian)/float64(land.Configs), 2), textfmt.Percent(sc.RandomReached, 0), "1.0x"})
	header := []string{"strategy", "runs", "median evals", "share of space", fmt.Sprintf("reached by %d", largest), "random ÷ this"}
	if err := textfmt.Table(w, format, header, rows); err != nil {
		return err
	}
	fmt.Fprintln(w)

	verdict := "FAIL"
	if r.Goal.Pass {
		verdict = "PASS"
	}
	goal := fmt.Sprintf("%s: evo within %s of the optimum in ≤ %s of the space, ≥ %gx fewer evaluations than random: %s",
		verdict, tol, textfmt.Percent(GoalShare, 0), float64(GoalSpeedup), r.Goal.Why)
	if format == "markdown" {
		goal = "**" + verdict + "**" + strings.TrimPrefix(goal, verdict)
	}
	fmt.Fprintln(w, goal)
	if r.KT != nil {
		fmt.Fprintln(w)
		return r.KT.Write(w, format, sc)
	}
	return nil
}

// jsonSafe replaces the NaN scores, which JSON cannot hold, by 0.
func (r Report) jsonSafe() Report {
	out := r
	out.Comparison.Strategies = slices.Clone(r.Comparison.Strategies)
	for i, st := range out.Comparison.Strategies {
		st.Budgets = slices.Clone(st.Budgets)
		for j := range st.Budgets {
			if math.IsNaN(st.Budgets[j].Score) {
				st.Budgets[j].Score = 0
			}
		}
		out.Comparison.Strategies[i] = st
	}
	return out
}
