package elites_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"evotune/elites"
	"evotune/space"
)

var (
	shapeA = space.Shape{B: 1, H: 8, S: 512, D: 64}
	shapeB = space.Shape{B: 2, H: 8, S: 512, D: 64}
)

// twoShapes is an OK result timed on both shapes of testMeta's problem.
func twoShapes(blockM string, a, b float64) space.Result {
	c := space.Config{"block_m": blockM}
	r := okResult(c.Key(), a+b)
	r.Config = c
	r.Timings = []space.Timing{
		{Shape: shapeA, P50US: a, CILowUS: a - 0.1, CIHighUS: a + 0.1},
		{Shape: shapeB, P50US: b, CILowUS: b - 0.1, CIHighUS: b + 0.1},
	}
	return r
}

func TestGather(t *testing.T) {
	dir := t.TempDir()
	a := mustCreate(t, dir)
	def := twoShapes("64", 10, 20) // the default: 30 µs
	fastA := twoShapes("128", 6, 21)
	fastB := twoShapes("32", 9, 15) // the overall best: 24 µs
	tieB := twoShapes("16", 11, 15) // same p50 on B as fastB, later: loses the tie
	late := rejected("block_m=256")
	late.Started = time.Date(2026, 11, 22, 2, 0, 0, 0, time.UTC) // earliest start of all
	def.Timings[0].SamplesUS = []float64{9.9, 10, 10.1}
	fastB.Timings[1].SamplesUS = []float64{14.9, 15, 15.2}
	mustRecord(t, a, def, fastA, fastB, tieB, late)

	ev, err := elites.Gather(a, space.Config{"block_m": "64"})
	if err != nil {
		t.Fatal(err)
	}
	if ev.Best.Key != "block_m=32" {
		t.Errorf("best %s, want block_m=32", ev.Best.Key)
	}
	if ev.Default == nil || ev.Default.Key != "block_m=64" {
		t.Fatalf("default result %v, want the one of key 64", ev.Default)
	}
	if !reflect.DeepEqual(ev.Best.Timings, fastB.Timings) || !reflect.DeepEqual(ev.Default.Timings, def.Timings) {
		t.Errorf("the evidence's timings are %+v and %+v, want the recorded ones, samples included", ev.Best.Timings, ev.Default.Timings)
	}
	if want := 30.0 / 24.0; ev.Speedup != want {
		t.Errorf("speedup %v, want %v", ev.Speedup, want)
	}
	got := make([]string, len(ev.Shapes))
	for i, s := range ev.Shapes {
		got[i] = s.Shape.String() + ":" + s.Key
	}
	if want := "1x8x512x64:block_m=128 2x8x512x64:block_m=32"; strings.Join(got, " ") != want {
		t.Errorf("per-shape bests %q, want %q", strings.Join(got, " "), want)
	}
	if ev.Shapes[0].Timing.P50US != 6 {
		t.Errorf("shape A's best carries p50 %v, want 6", ev.Shapes[0].Timing.P50US)
	}
	p := ev.Provenance
	if p.Evaluated != 5 || p.ByStatus[space.StatusOK] != 4 || p.ByGate[space.GatePtxas] != 1 {
		t.Errorf("counts: %d evaluated, by status %v, by gate %v", p.Evaluated, p.ByStatus, p.ByGate)
	}
	if p.GPU != "NVIDIA L4" || p.NVCC != "13.0.88" || p.SourceHash != "c0ffee" || p.Arch != "sm_89" {
		t.Errorf("provenance %+v", p)
	}
	if !p.First.Equal(late.Started) || !p.Last.Equal(def.Finished) {
		t.Errorf("first %v last %v, want %v and %v", p.First, p.Last, late.Started, def.Finished)
	}
}

func TestGatherNoDefault(t *testing.T) {
	cases := []struct {
		name string
		def  space.Config
	}{
		{"unknown family", nil},
		{"not evaluated", space.Config{"block_m": "512"}},
		{"rejected", space.Config{"block_m": "256"}},
	}
	a := mustCreate(t, t.TempDir())
	mustRecord(t, a, twoShapes("64", 10, 20), rejected("block_m=256"))
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ev, err := elites.Gather(a, tc.def)
			if err != nil {
				t.Fatal(err)
			}
			if ev.Default != nil || ev.Speedup != 0 {
				t.Errorf("default %v, speedup %v: want none", ev.Default, ev.Speedup)
			}
		})
	}
}

func TestGatherNothingPassed(t *testing.T) {
	a := mustCreate(t, t.TempDir())
	mustRecord(t, a, rejected("x"))
	if _, err := elites.Gather(a, nil); !errors.Is(err, elites.ErrNoBest) {
		t.Errorf("Gather on an archive with no OK result: %v, want ErrNoBest", err)
	}
}

func TestReadBench(t *testing.T) {
	cases := []struct {
		name    string
		content string // "" writes no file
		ok      bool
		err     string
		fastest string // backend:graph_us for 1x8x512x64; "" for none
		version string
	}{
		{name: "absent"},
		{name: "rows per shape", ok: true, fastest: "flash:10.3", version: "2.11.0",
			content: `{"gpu": "NVIDIA H100", "torch": "2.11.0", "rows": [{"shape": "1x8x512x64",
				"ours": {"key": "block_m=64", "graph_us": 7.5},
				"torch": {"flash": {"shape": "1x8x512x64", "backend": "flash", "graph_us": 10.3, "error": ""}}}]}`},
		{name: "fastest of several backends and rows", ok: true, fastest: "cudnn:9.3", version: "2.11.0",
			content: `{"torch": "2.11.0", "torch_cuda": "13.0", "rows": [
				{"shape": "1x8x512x64", "torch": {
					"flash": {"shape": "1x8x512x64", "backend": "flash", "graph_us": 10.3, "eager_us": 30.9},
					"cudnn": {"shape": "1x8x512x64", "backend": "cudnn", "graph_us": 9.3, "eager_us": 40.4},
					"efficient": {"shape": "1x8x512x64", "backend": "efficient", "graph_us": 0, "error": "not supported"}}},
				{"shape": "2x8x512x64", "torch": {"cudnn": {"shape": "2x8x512x64", "backend": "cudnn", "graph_us": 1.0}}}]}`},
		{name: "errors only", ok: true,
			content: `{"rows": [{"shape": "1x8x512x64", "torch": {"flash": {"shape": "1x8x512x64", "backend": "flash", "graph_us": 3, "error": "no GPU"}}}]}`},
		{name: "no timing", ok: true, content: `{"rows": []}`},
		// torch_sdpa.py's own output is not a bench: its "torch" is an object.
		{name: "another schema", content: `{"torch": {"torch": "2.11.0", "results": []}}`, err: "bench.json: json: cannot unmarshal object"},
		{name: "not an object", content: `[]`, err: "want a JSON object"},
		{name: "not JSON", content: `{"torch": `, err: "bench.json: unexpected end of JSON input"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if tc.content != "" {
				if err := os.WriteFile(filepath.Join(dir, elites.BenchName), []byte(tc.content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			b, ok, err := elites.ReadBench(dir)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil || ok != tc.ok {
				t.Fatalf("ok %v, err %v; want ok %v", ok, err, tc.ok)
			}
			if !ok {
				return
			}
			if b.Path != filepath.Join(dir, elites.BenchName) {
				t.Errorf("path %q", b.Path)
			}
			f, found := b.Fastest(shapeA)
			if got := fmt.Sprintf("%s:%g", f.Backend, f.GraphUS); found != (tc.fastest != "") || found && got != tc.fastest {
				t.Errorf("fastest %q (found %v), want %q", got, found, tc.fastest)
			}
			if o, found := b.OursOn(shapeA, "block_m=64"); tc.name == "rows per shape" && (!found || o.GraphUS != 7.5) {
				t.Errorf("the bench's own timing %v (found %v), want 7.5", o, found)
			}
			if b.Torch != tc.version {
				t.Errorf("version %q, want %q", b.Torch, tc.version)
			}
			if _, found := b.Fastest(space.Shape{B: 9, H: 9, S: 9, D: 64}); found {
				t.Error("a shape the bench did not time has a fastest backend")
			}
		})
	}
}

// TestSaveBench: a bench kept in an archive reads back as written, with
// its provenance; it is refused while a search holds the archive, and in a
// directory that is not an archive.
func TestSaveBench(t *testing.T) {
	dir := t.TempDir()
	a, err := elites.Create(dir, testMeta())
	if err != nil {
		t.Fatal(err)
	}
	b := elites.Bench{
		Env:  space.Env{GPU: "NVIDIA H100", Arch: "sm_90", NVCC: "12.4.131", SourceHash: "abc"},
		Date: time.Date(2026, 11, 25, 7, 0, 0, 0, time.UTC), Dtype: "fp16", Torch: "2.11.0", Best: "block_m=64",
		Rows: []elites.BenchRow{{Shape: "1x8x512x64", Ours: elites.BenchMeasure{Key: "block_m=64", GraphUS: 7.5},
			Torch: map[string]elites.TorchTiming{"cudnn": {Shape: "1x8x512x64", Backend: "cudnn", GraphUS: 9.3}}}},
	}
	err = elites.SaveBench(dir, b)
	if err == nil || !strings.Contains(err.Error(), "in use by") {
		t.Errorf("SaveBench into an archive a search holds: %v, want in use", err)
	}
	mustClose(t, a)
	if err := elites.SaveBench(dir, b); err != nil {
		t.Fatal(err)
	}
	got, ok, err := elites.ReadBench(dir)
	if err != nil || !ok {
		t.Fatalf("ReadBench: %v, %v", ok, err)
	}
	b.Path = filepath.Join(dir, elites.BenchName)
	if fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", b) {
		t.Errorf("read back\n%+v\nwant\n%+v", got, b)
	}
	if err := elites.SaveBench(t.TempDir(), b); err == nil || !strings.Contains(err.Error(), "is not an archive") {
		t.Errorf("SaveBench into a plain directory: %v, want not an archive", err)
	}
}
