package main

import (
	"encoding/json"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"evotune/cmd/evotune/internal/searchbench"
	"evotune/space"
)

// The Kernel Tuner spaces of the published study of tuning strategies,
// and its figures for them.
const (
	ktDir       = "../../runner/testdata/ktcache/"
	ktGEMM      = ktDir + "GEMM_A100.json.gz"
	ktConv      = ktDir + "convolution_A100.json.gz"
	ktMilo      = ktDir + "convolution_milo_A100.json.gz"
	ktPublished = ktDir + "published.json"
)

// TestBenchSearchKTCache runs bench-search on the GEMM space under the
// published protocol: the report holds both exact random baselines, the
// sampled random search agrees with its exact expectation, evo beats it,
// and every budget gets a verdict against the best published strategy.
func TestBenchSearchKTCache(t *testing.T) {
	stdout, stderr, code := runCLI(t, "bench-search", "--kt-cache", ktGEMM, "--kt-published", ktPublished,
		"--strategies", "evo,random", "--seeds", "12", "--budgets", "25,100,400", "--format", "json")
	if code != 0 || stderr != "" {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	var rep searchbench.Report
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("decoding the json report: %v\n%s", err, stdout)
	}
	cmp, kt := rep.Comparison, rep.KT
	if kt == nil || kt.Protocol != "published" || kt.Product != 82944 || kt.Timed != 17956 || cmp.Landscape.Configs != 82944 {
		t.Fatalf("kt %+v over %d configs; want the published protocol over 82944 configs, 17956 timed", kt, cmp.Landscape.Configs)
	}
	evoStats, random := cmp.Strategies[0], cmp.Strategies[1]
	for i, b := range cmp.Budgets {
		if kt.RandomProduct[i] != cmp.RandomFraction[i] || kt.RandomValid[i] <= kt.RandomProduct[i] {
			t.Errorf("budget %d: random baselines %.4f (product) and %.4f (valid only); want the comparison's %.4f and a higher one",
				b, kt.RandomProduct[i], kt.RandomValid[i], cmp.RandomFraction[i])
		}
		// 12 runs: the mean strays by about SD/√12; 4 of those is well out.
		if rb := random.Budgets[i]; math.Abs(rb.MeanFraction-cmp.RandomFraction[i]) > 4*rb.SDFraction/math.Sqrt(12)+1e-3 {
			t.Errorf("budget %d: sampled random %.4f ± %.4f, exact %.4f", b, rb.MeanFraction, rb.SDFraction, cmp.RandomFraction[i])
		}
	}
	if e, r := evoStats.Budgets[2].MeanFraction, cmp.RandomFraction[2]; e < r+0.02 {
		t.Errorf("budget 400: evo %.3f does not beat random's exact %.3f", e, r)
	}
	p := kt.Published
	if p == nil || p.Space != "GEMM_A100" || len(p.Strategies) != 15 || len(p.Verdicts) != 3 {
		t.Fatalf("published comparison %+v; want 15 strategies and 3 verdicts for GEMM_A100", p)
	}
	// At 25 the best published figure on this space is basin hopping's.
	if v := p.Verdicts[0]; v.Budget != 25 || v.BestName != "Basin hopping" || v.Best != 0.9728 ||
		v.Evo != evoStats.Budgets[0].MeanFraction || v.Pass != (v.Evo >= v.Best) {
		t.Errorf("verdict at 25: %+v", v)
	}
	for _, v := range p.Verdicts {
		for _, st := range p.Strategies {
			if x := st.Fractions[slices.Index(cmp.Budgets, v.Budget)]; x != nil && *x > v.Best {
				t.Errorf("budget %d: %s published %.4f above the best %.4f (%s)", v.Budget, st.Name, *x, v.Best, v.BestName)
			}
		}
	}

	// The text report ends with the table and one verdict line per budget.
	stdout, _, code = runCLI(t, "bench-search", "--kt-cache", ktConv, "--kt-published", ktPublished,
		"--strategies", "evo", "--seeds", "2", "--budgets", "25,50", "--format", "markdown")
	if code != 0 {
		t.Fatalf("markdown: exit %d", code)
	}
	for _, want := range []string{"| published: Dual annealing | 0.790 | 0.848 |", "| random, exact (published: all 18432) | 0.736 | 0.789 |",
		"| random, exact (valid only: 5776) |", " at 25: evo ", " at 50: evo ", "the best published (Dual annealing)"} {
		if !strings.Contains(strings.Join(strings.Fields(stdout), " "), want) {
			t.Errorf("markdown report lacks %q:\n%s", want, stdout)
		}
	}
}

// TestTuneKTCache runs single searches of a Kernel Tuner cache into an
// archive: under the published protocol some evaluations fail as absent
// from the cache and the run resumes; with --kt-valid-only every
// evaluation is a timed config.
func TestTuneKTCache(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "kt")
	args := []string{"tune", "--kt-cache", ktMilo, "--archive", dir, "--seed", "3", "--quiet"}
	if _, stderr, code := runCLI(t, append(args, "--evals", "40")...); code != 0 {
		t.Fatalf("tune: exit %d\n%s", code, stderr)
	}
	stdout, stderr, code := runCLI(t, append(args, "--evals", "64")...)
	if code != 0 {
		t.Fatalf("tune resumed: exit %d\n%s", code, stderr)
	}
	a := readArchive(t, dir)
	if n := len(a.Results()); n != 64 {
		t.Errorf("archive holds %d results after --evals 64, want 64", n)
	}
	if m := a.Meta(); m.Problem.Family != "kernel_tuner/convolution_kernel" || m.GPU != "NVIDIA A100-PCIE-40GB" {
		t.Errorf("archive made for %q on %q", m.Problem.Family, m.GPU)
	}
	absent := 0
	for _, r := range a.Results() {
		if r.Status == space.StatusConstraint && strings.Contains(r.Reason, "not in the Kernel Tuner cache") {
			absent++
		}
	}
	if absent == 0 {
		t.Errorf("no evaluation of the full product was absent from the cache (58%% of it is)")
	}
	best, ok := a.Best()
	if !ok || !strings.Contains(stdout, "best: "+us(best.Objective)+" µs") {
		t.Errorf("summary does not report the best (%v):\n%s", ok, stdout)
	}

	dir = filepath.Join(t.TempDir(), "valid")
	if _, stderr, code := runCLI(t, "tune", "--kt-cache", ktMilo, "--kt-valid-only", "--archive", dir, "--evals", "30", "--quiet"); code != 0 {
		t.Fatalf("tune --kt-valid-only: exit %d\n%s", code, stderr)
	}
	for _, r := range readArchive(t, dir).Results() {
		if !r.OK() {
			t.Errorf("--kt-valid-only evaluated %s with status %s", r.Key, r.Status)
		}
	}
}

func TestKTCacheFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"bench-search", "--kt-valid-only"}, "--kt-valid-only needs --kt-cache"},
		{[]string{"bench-search", "--kt-macro", "a"}, "--kt-macro needs --kt-cache"},
		{[]string{"bench-search", "--kt-published", ktPublished}, "--kt-published needs --kt-cache"},
		{[]string{"bench-search", "--kt-cache", ktConv, "--replay", "x.jsonl"}, "--kt-cache and --replay both name a recorded file"},
		{[]string{"bench-search", "--kt-cache", ktConv, "--kt-macro", "block_size_z"}, "block_size_z is not a tune parameter"},
		{[]string{"tune", "--kt-cache", ktConv, "--shape", "1x8x512x64"}, "--kt-cache: the Kernel Tuner cache fixes the problem"},
		{[]string{"tune", "--kt-cache", ktConv, "--arch", "sm_80"}, "--kt-cache: the Kernel Tuner cache fixes the problem"},
		{[]string{"tune", "--kt-valid-only"}, "--kt-valid-only needs --kt-cache"},
	} {
		_, stderr, code := runCLI(t, tc.args...)
		if code != exitUsage || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d naming %q", tc.args, code, stderr, exitUsage, tc.want)
		}
	}
	_, stderr, code := runCLI(t, "bench-search", "--kt-cache", ktConv, "--kt-published", ktGEMM, "--seeds", "1", "--strategies", "random", "--budgets", "5")
	if code != exitError || !strings.Contains(stderr, "--kt-published") {
		t.Errorf("a published file that is not JSON: exit %d, stderr %q", code, stderr)
	}
}
