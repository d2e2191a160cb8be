package reportmd

import (
	"strings"
	"testing"
	"time"

	"evotune/elites"
	"evotune/space"
)

var shape = space.Shape{B: 1, H: 8, S: 512, D: 64}

func result(blockM string, us float64, regs int, at time.Time) space.Result {
	cfg := space.Config{"block_m": blockM}
	key := cfg.Key()
	if us == 0 {
		return space.Result{Key: key, Config: cfg, Status: space.StatusPtxasReject, Gate: space.GatePtxas, Reason: "spills"}
	}
	return space.Result{Key: key, Config: cfg, Status: space.StatusOK, Gate: space.GateTimed, Objective: us,
		Ptxas: &space.Ptxas{Registers: regs}, Timings: []space.Timing{{Shape: shape, P50US: us, CILowUS: us - 0.5, CIHighUS: us + 0.5}},
		Started: at, Finished: at.Add(time.Minute)}
}

// TestBuild renders an archive of a default, a faster config and a
// rejected one: the best with its speedup over the default, every plot,
// the gate table and the provenance.
func TestBuild(t *testing.T) {
	dir := t.TempDir()
	start := time.Date(2026, 11, 25, 3, 0, 0, 0, time.UTC)
	a, err := elites.Create(dir, elites.Meta{Problem: space.Problem{Family: "sdpa", Shapes: []space.Shape{shape}, Dtype: "fp16"},
		GPU: "NVIDIA L4", Arch: "sm_89", NVCC: "13.0.88", SourceHash: "c0ffee"})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	for _, r := range []space.Result{result("64", 20, 96, start), result("32", 0, 0, start), result("128", 16, 128, start.Add(time.Hour))} {
		if err := a.Record(r); err != nil {
			t.Fatal(err)
		}
	}
	def := space.Config{"block_m": "64"}
	knobs := []space.Knob{{Name: "block_m"}}
	files, err := Build(a, 5, start.Add(2*time.Hour), def, knobs, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"report.md", PlotEvals, PlotTime, PlotGates, PlotRegisters} {
		if len(files[name]) == 0 {
			t.Errorf("no %s", name)
		}
	}
	md := string(files["report.md"])
	for _, want := range []string{
		"# evotune report: sdpa 1x8x512x64 fp16",
		"Best: **16.00 µs** (result 3)",
		"so the best is **1.25x** the default's speed",
		"| ptxas_reject | ptxas | 1 ",
		"| 1 | 3      | 16.00 | 15.50 – 16.50 | -   | -   | 1.25x   | 128  | 0           | 0            | block_m=128          |",
		"- GPU: NVIDIA L4 (sm_89, compute capability unknown), driver unknown",
		"- counts: 3 evaluated, 2 ok, 1 ptxas_reject",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report.md lacks %q:\n%s", want, md)
		}
	}
}
