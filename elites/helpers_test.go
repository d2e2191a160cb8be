package elites_test

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	"evotune/elites"
	"evotune/space"
)

// testMeta is the identity most tests create archives with.
func testMeta() elites.Meta {
	return elites.Meta{
		Problem: space.Problem{
			Family: "sdpa",
			Shapes: []space.Shape{{B: 1, H: 8, S: 512, D: 64}, {B: 2, H: 8, S: 512, D: 64}},
			Dtype:  "bf16",
			Causal: false,
		},
		SourceHash: "c0ffee",
		GPU:        "NVIDIA L4",
		Arch:       "sm_89",
		NVCC:       "13.0.88",
		Created:    time.Date(2026, 11, 22, 3, 0, 0, 0, time.UTC),
		Version:    "v0.1.0",
		Strategy:   "evo",
		Seed:       42,
	}
}

// okResult is a result that passed every gate with the given objective.
func okResult(key string, objective float64) space.Result {
	start := time.Date(2026, 11, 22, 3, 4, 5, 0, time.UTC)
	return space.Result{
		Key:    key,
		Config: space.Config{"block_m": "64", "name": key},
		Status: space.StatusOK,
		Gate:   space.GateTimed,
		Flags:  []string{"-DSDPA_BLOCK_M=64"},
		Ptxas:  &space.Ptxas{Registers: 96, SharedBytes: 32768},
		Accuracy: &space.Accuracy{
			MaxAbsErr: 0.001, MeanAbsErr: 0.0001, Cases: 6,
		},
		Timings: []space.Timing{{
			Shape: space.Shape{B: 1, H: 8, S: 512, D: 64},
			P50US: objective, P90US: objective * 1.1, P99US: objective * 1.2,
			SamplesUS:         []float64{objective, objective * 1.05},
			LaunchesPerSample: 100,
		}},
		Objective: objective,
		Cost:      space.Cost{CompileSec: 2.5, CheckSec: 0.1, TimeSec: 0.4},
		Env:       space.Env{GPU: "NVIDIA L4", Arch: "sm_89", NVCC: "13.0.88", SourceHash: "c0ffee"},
		Started:   start,
		Finished:  start.Add(3 * time.Second),
	}
}

// rejected is a result that stopped at a gate before timing.
func rejected(key string) space.Result {
	return space.Result{
		Key:    key,
		Config: space.Config{"name": key},
		Status: space.StatusPtxasReject,
		Gate:   space.GatePtxas,
		Reason: "spills 16 bytes",
	}
}

func mustCreate(t *testing.T, dir string) *elites.Archive {
	t.Helper()
	a, err := elites.Create(dir, testMeta())
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	t.Cleanup(func() { a.Close() })
	return a
}

func mustOpen(t *testing.T, dir string) *elites.Archive {
	t.Helper()
	a, err := elites.Open(dir, testMeta(), elites.OpenOptions{})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { a.Close() })
	return a
}

func mustRecord(t *testing.T, a *elites.Archive, rs ...space.Result) {
	t.Helper()
	for _, r := range rs {
		if err := a.Record(r); err != nil {
			t.Fatalf("Record(%s): %v", r.Key, err)
		}
	}
}

func mustClose(t *testing.T, a *elites.Archive) {
	t.Helper()
	if err := a.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

func keys(rs []space.Result) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.Key
	}
	return out
}

func seqs(rs []space.Result) []int {
	out := make([]int, len(rs))
	for i, r := range rs {
		out[i] = r.Seq
	}
	return out
}

// readLogFile reads dir's result log with the package's own reader.
func readLogFile(t *testing.T, dir string) ([]space.Result, []elites.LoadWarning) {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, "results.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	return elites.ReadLog(f)
}

// withoutSamples returns copies of rs with no timing samples, as an
// archive holds its results.
func withoutSamples(rs []space.Result) []space.Result {
	out := make([]space.Result, len(rs))
	for i, r := range rs {
		r.Timings = slices.Clone(r.Timings)
		for j := range r.Timings {
			r.Timings[j].SamplesUS = nil
		}
		out[i] = r
	}
	return out
}

// checkSamples checks that WithSamples gives each of a's results back as
// want has it, samples included.
func checkSamples(t *testing.T, a *elites.Archive, want []space.Result) {
	t.Helper()
	for i, r := range a.Results() {
		full, err := a.WithSamples(r)
		if err != nil {
			t.Errorf("WithSamples(%s): %v", r.Key, err)
			continue
		}
		if !reflect.DeepEqual(full, want[i]) {
			t.Errorf("WithSamples(%s):\n got %+v\nwant %+v", r.Key, full, want[i])
		}
	}
}
