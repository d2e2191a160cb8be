package main

import (
	"context"
	"encoding/json"
	"hash/fnv"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"evotune/cmd/evotune/internal/searchbench"
	"evotune/evo"
	"evotune/runner"
	"evotune/space"
)

// writeTinyReplay writes a replay file of the first n valid SDPA configs of
// the mission shape on sm_89, with pseudo-random objectives and one config
// in seven failing, and returns its path. A few thousand configs keep the
// recorded ones a few percent of the raw space, where uniform sampling by
// rejection is quick.
func writeTinyReplay(t *testing.T, n int) string {
	t.Helper()
	return writeReplay(t, n, func(_ space.Config, h uint64) float64 { return 10 + float64(h%1000)/10 })
}

// writeReplay writes a replay file of the first n valid SDPA configs of the
// mission shape on sm_89, the objective of each given by objective from the
// config and a hash of its key, one config in seven failing.
func writeReplay(t *testing.T, n int, objective func(c space.Config, h uint64) float64) string {
	t.Helper()
	prob, err := defaultProblem().problem("test")
	if err != nil {
		t.Fatal(err)
	}
	sp, err := familySpace("test", prob, "sm_89")
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	header, err := json.Marshal(map[string]runner.ReplayHeader{"replay_header": {
		Problem: &prob, Env: space.Env{GPU: "test", Arch: "sm_89"}, Recorded: "test: made up", Synthetic: true,
	}})
	if err != nil {
		t.Fatal(err)
	}
	b.Write(header)
	b.WriteByte('\n')
	count := 0
	sp.Enumerate(func(c space.Config) bool {
		h := fnv.New64a()
		h.Write([]byte(c.Key()))
		v := h.Sum64()
		r := space.Result{Key: c.Key(), Config: c, Status: space.StatusOK, Gate: space.GateTimed,
			Objective: objective(c, v), Cost: space.Cost{CompileSec: 1}}
		if v%7 == 0 {
			r.Status, r.Gate, r.Objective = space.StatusIncorrect, space.GateCorrectness, 0
		}
		line, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(line)
		b.WriteByte('\n')
		count++
		return count < n
	})
	path := filepath.Join(t.TempDir(), "tiny.jsonl")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestBenchSearchTable checks the text report's shape against a golden
// file in which every number is replaced by N: the header lines, both
// tables' columns and rows, and the goal line.
func TestBenchSearchTable(t *testing.T) {
	path := writeTinyReplay(t, 3000)
	stdout, stderr, code := runCLI(t, "bench-search", "--replay", path, "--seeds", "5",
		"--budgets", "10,40,20", "--parallel", "2", "--format", "markdown")
	if code != 0 || stderr != "" {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	shape := regexp.MustCompile(`-?[0-9]+(\.[0-9]+)?`).ReplaceAllString(stdout, "N")
	shape = regexp.MustCompile(` +`).ReplaceAllString(shape, " ")
	// Markdown column rules are as wide as the widest cell, which is a
	// number's width, not the table's shape.
	shape = regexp.MustCompile(`:-+`).ReplaceAllString(shape, ":-")
	shape = strings.Replace(shape, filepath.Dir(path), "DIR", 1)
	golden(t, "bench-search-shape.md", shape)
	if !strings.Contains(stdout, "PASS: ") && !strings.Contains(stdout, "**FAIL**") && !strings.Contains(stdout, "**PASS**") {
		t.Errorf("no verdict line:\n%s", stdout)
	}
}

// TestBenchSearchJSON runs many seeds on a tiny replay file and checks the
// figures: random search scores P ≈ 0 against its exact expectation, every
// strategy's fraction grows with the budget, exhaustive runs once, and the
// goal check agrees with evo's figures.
func TestBenchSearchJSON(t *testing.T) {
	path := writeTinyReplay(t, 3000)
	stdout, stderr, code := runCLI(t, "bench-search", "--replay", path, "--seeds", "80",
		"--budgets", "8,16,32,64,128", "--format", "json")
	if code != 0 || stderr != "" {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	var rep searchbench.Report
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("decoding the json report: %v\n%s", err, stdout)
	}
	cmp := rep.Comparison
	if cmp.Landscape.Configs != 3000 || len(cmp.Strategies) != 3 || len(cmp.Budgets) != 5 {
		t.Fatalf("report of %d configs, %d strategies, %d budgets; want 3000, 3, 5", cmp.Landscape.Configs, len(cmp.Strategies), len(cmp.Budgets))
	}
	for _, st := range cmp.Strategies {
		wantRuns := 80
		if st.Strategy == "exhaustive" {
			wantRuns = 1
		}
		if st.Runs != wantRuns {
			t.Errorf("%s: %d runs, want %d", st.Strategy, st.Runs, wantRuns)
		}
		for i := 1; i < len(st.Budgets); i++ {
			if st.Budgets[i].MeanFraction < st.Budgets[i-1].MeanFraction {
				t.Errorf("%s: mean fraction fell from %v to %v between budgets %d and %d", st.Strategy,
					st.Budgets[i-1].MeanFraction, st.Budgets[i].MeanFraction, st.Budgets[i-1].Budget, st.Budgets[i].Budget)
			}
		}
		if st.Strategy != "random" {
			continue
		}
		// The sampled random search agrees with the exact expectation: its
		// mean over the runs strays by about SD/√runs, so 4 of those bound
		// it (a 1-in-15,000 chance per budget of a false alarm).
		land := replayLandscape(t, path)
		for i, b := range st.Budgets {
			sd := land.RandomFractionSD(b.Budget)
			if d := b.MeanFraction - cmp.RandomFraction[i]; math.Abs(d) > 4*sd/math.Sqrt(float64(st.Runs)) {
				t.Errorf("random at budget %d: mean %.4f, exact %.4f: off by %.1f standard errors (SD of a run %.4f)",
					b.Budget, b.MeanFraction, cmp.RandomFraction[i], d/(sd/math.Sqrt(float64(st.Runs))), sd)
			}
		}
	}
	evo := cmp.Strategies[0]
	if evo.Strategy != "evo" {
		t.Fatalf("first strategy %s, want evo", evo.Strategy)
	}
	g := rep.Goal
	wantPass := evo.ReachMedian >= 0 && float64(evo.ReachMedian) <= searchbench.GoalShare*3000 &&
		float64(cmp.RandomReachMedian) >= searchbench.GoalSpeedup*float64(evo.ReachMedian)
	if g.Pass != wantPass || g.ReachMedian != evo.ReachMedian {
		t.Errorf("goal %+v; evo reached in %d (random %d): want pass=%v", g, evo.ReachMedian, cmp.RandomReachMedian, wantPass)
	}
}

// replayLandscape is the landscape bench-search computes for the replay at
// path.
func replayLandscape(t *testing.T, path string) evo.Landscape {
	t.Helper()
	prob, err := defaultProblem().problem("test")
	if err != nil {
		t.Fatal(err)
	}
	rs, err := loadReplay("bench-search", path, prob, false, "")
	if err != nil {
		t.Fatal(err)
	}
	land, err := searchbench.Landscape(context.Background(), rs.eval, rs.space)
	if err != nil {
		t.Fatal(err)
	}
	return land
}

// writeStructuredReplay writes a replay file whose objectives a model of
// knob values can learn: the log objective is a sum of one effect per knob
// value, drawn from a hash of "knob=value", plus ±1% noise.
func writeStructuredReplay(t *testing.T, n int) string {
	t.Helper()
	return writeReplay(t, n, func(c space.Config, h uint64) float64 {
		y := math.Log(10) + 0.02*(float64(h%1000)/1000-0.5)
		for name, value := range c {
			f := fnv.New64a()
			f.Write([]byte(name + "=" + value))
			y += 0.4 * float64(f.Sum64()%1000) / 1000
		}
		return math.Exp(y)
	})
}

// TestBenchSearchScreening runs bench-search on a small replay file with a
// learnable landscape: screened evo comes within 2% of the optimum in far
// fewer evaluations than random search and than unscreened evo.
func TestBenchSearchScreening(t *testing.T) {
	path := writeStructuredReplay(t, 3000)
	reach := func(screen string) (evo, random int, score float64) {
		stdout, stderr, code := runCLI(t, "bench-search", "--replay", path, "--seeds", "11", "--strategies", "evo,random",
			"--budgets", "25,50,100,200", "--screen", screen, "--format", "json")
		if code != 0 || stderr != "" {
			t.Fatalf("--screen %s: exit %d, stderr %q", screen, code, stderr)
		}
		var rep searchbench.Report
		if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
			t.Fatalf("decoding the json report: %v", err)
		}
		cmp := rep.Comparison
		if !strings.Contains(rep.Search, "screen "+screen) {
			t.Errorf("report names the search %q, want screen %s in it", rep.Search, screen)
		}
		return cmp.Strategies[0].ReachMedian, cmp.RandomReachMedian, cmp.Strategies[0].Budgets[2].Score
	}
	screened, random, score := reach("8")
	plain, _, _ := reach("1")
	t.Logf("median evaluations to within 2%%: screened %d, unscreened %d, random %d (exact); P at 100 screened %.2f", screened, plain, random, score)
	if screened < 0 || 3*screened > random {
		t.Errorf("screened evo needs %d evaluations, random search %d: want at least 3x fewer", screened, random)
	}
	if plain >= 0 && screened >= plain {
		t.Errorf("screened evo needs %d evaluations, unscreened %d: want fewer", screened, plain)
	}
	if score < 0.5 {
		t.Errorf("screened evo at 100 evaluations: P = %.2f, want ≥ 0.5", score)
	}
}

func TestBenchSearchUsageErrors(t *testing.T) {
	path := writeTinyReplay(t, 20)
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--seeds", "0"}, "--seeds must be at least 1"},
		{[]string{"--budgets", "10,0"}, "--budgets: 0 is not a positive evaluation count"},
		{[]string{"--strategies", "evo,annealing"}, `--strategies: unknown strategy "annealing"`},
		{[]string{"--strategies", "evo,evo"}, "--strategies: evo named twice"},
		{[]string{"--format", "csv"}, `--format "csv"`},
		{[]string{"--parallel", "-1"}, "--parallel must not be negative"},
		{[]string{"--population", "4", "--elites", "8"}, "elites must be in [1, population=4]"},
		{[]string{"--crossover", "1.5"}, "crossover rate must be in [0, 1]"},
		{[]string{"--screen", "0"}, "screen must be in [1, 64] candidates per child (1: off), got 0"},
		{[]string{"--screen", "100"}, "screen must be in [1, 64]"},
		{[]string{"--first-seed", "0"}, "--first-seed must be at least 1"},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			args := append([]string{"bench-search", "--replay", path}, tc.args...)
			_, stderr, code := runCLI(t, args...)
			if code != exitUsage || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d, stderr %q; want exit %d naming %q", code, stderr, exitUsage, tc.want)
			}
		})
	}
	// tune takes the same --screen, checked the same way.
	// (0 is its default there: 4 or 8, by the candidates in flight.)
	_, stderr, code := runCLI(t, "tune", "--replay", path, "--archive", filepath.Join(t.TempDir(), "a"), "--screen", "65")
	if want := "--screen must be in [1, 64]"; code != exitUsage || !strings.Contains(stderr, want) {
		t.Errorf("tune --screen 65: exit %d, stderr %q; want exit %d naming %q", code, stderr, exitUsage, want)
	}
	_, stderr, code = runCLI(t, "bench-search", "--replay", filepath.Join(t.TempDir(), "absent.jsonl"))
	if code != exitError || !strings.Contains(stderr, "bench-search --replay") {
		t.Errorf("absent file: exit %d, stderr %q", code, stderr)
	}
}
