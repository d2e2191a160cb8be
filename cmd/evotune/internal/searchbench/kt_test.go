package searchbench

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"strconv"
	"testing"

	"evotune/runner"
)

// The Kernel Tuner spaces of the published study of tuning strategies,
// and its figures for them.
const (
	ktDir       = "../../../../runner/testdata/ktcache/"
	ktGEMM      = ktDir + "GEMM_A100.json.gz"
	ktConv      = ktDir + "convolution_A100.json.gz"
	ktPublished = ktDir + "published.json"
)

// TestKTRandomBaselineMatchesPublished pins the published protocol: over
// the full product of the tune parameters, an absent config costing an
// evaluation, the exact expected fraction of random search is the study's
// random-sampling figure at every budget, within the noise of the study's
// sampled means (the largest gap is 0.019). The exact figures are also
// pinned to 1e-4 (computed independently from the files), so a change in
// the reader or the protocol shows.
func TestKTRandomBaselineMatchesPublished(t *testing.T) {
	data, err := os.ReadFile(ktPublished)
	if err != nil {
		t.Fatal(err)
	}
	var pub PublishedFile
	if err := json.Unmarshal(data, &pub); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path  string
		exact []float64 // at KTBudgets
	}{
		{ktGEMM, []float64{0.7810, 0.8411, 0.8828, 0.9162, 0.9423, 0.9619, 0.9753}},
		{ktConv, []float64{0.7363, 0.7888, 0.8232, 0.8463, 0.8638, 0.8803, 0.8981}},
	} {
		name := KTSpaceName(tc.path)
		t.Run(name, func(t *testing.T) {
			kt, err := runner.LoadKTCache(tc.path)
			if err != nil {
				t.Fatal(err)
			}
			full, err := kt.Space(nil)
			if err != nil {
				t.Fatal(err)
			}
			land, err := Landscape(context.Background(), kt, full)
			if err != nil {
				t.Fatal(err)
			}
			published := pub.Spaces[name]["Random sampling"]
			if len(published) != len(KTBudgets) {
				t.Fatalf("published random sampling has %d budgets, want %d", len(published), len(KTBudgets))
			}
			for i, b := range KTBudgets {
				got := land.RandomFraction(b)
				if math.Abs(got-tc.exact[i]) > 1e-4 {
					t.Errorf("budget %d: exact random fraction %.5f, pinned %.4f", b, got, tc.exact[i])
				}
				if want := published[strconv.Itoa(b)]; math.Abs(got-want) > 0.025 {
					t.Errorf("budget %d: exact random fraction %.4f, the study's random sampling %.4f", b, got, want)
				}
			}
		})
	}
}
