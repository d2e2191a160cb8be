package export

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"evotune/cmd/evotune/internal/bundle"
	"evotune/elites"
	"evotune/space"
)

var (
	small = space.Shape{B: 1, H: 8, S: 512, D: 64}
	large = space.Shape{B: 2, H: 8, S: 512, D: 64}
	at    = time.Date(2026, 11, 25, 3, 0, 0, 0, time.UTC)
)

// testSpace has one knob and one fixed define, so that every rendering is
// easy to read off.
func testSpace(blockM ...string) *space.Space {
	return &space.Space{Family: "sdpa",
		Knobs:   []space.Knob{{Name: "block_m", Macro: "SDPA_BLOCK_M", Values: blockM, Default: "64"}},
		Defines: []space.Define{{Macro: "SDPA_HEAD_DIM", Value: "64"}}}
}

// result is an OK result of config block_m=blockM timed at p50s[i] on the
// i-th shape of shapes, its objective the plain sum.
func result(seq int, blockM string, shapes []space.Shape, p50s ...float64) space.Result {
	cfg := space.Config{"block_m": blockM}
	r := space.Result{Seq: seq, Key: cfg.Key(), Config: cfg, Status: space.StatusOK, Gate: space.GateTimed,
		Started: at, Finished: at.Add(time.Minute)}
	for i, p50 := range p50s {
		r.Timings = append(r.Timings, space.Timing{Shape: shapes[i], P50US: p50, CILowUS: p50 - 0.5, CIHighUS: p50 + 0.5, P90US: p50 + 1, P99US: p50 + 2})
		r.Objective += p50
	}
	return r
}

// twoShapeArchive holds the default (block_m=64), the overall best
// (block_m=128) and block_m=32, fastest on the large shape alone, with a
// bench.json that timed the best beside PyTorch on the small shape only.
func twoShapeArchive(t *testing.T) *elites.Archive {
	t.Helper()
	shapes := []space.Shape{small, large}
	a, err := elites.Create(t.TempDir(), elites.Meta{Problem: space.Problem{Family: "sdpa", Shapes: shapes, Dtype: "fp16"},
		GPU: "NVIDIA L4", Arch: "sm_89", NVCC: "12.4.131", SourceHash: "c0ffee"})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []space.Result{
		result(1, "64", shapes, 25, 50),
		result(2, "128", shapes, 20, 40),
		result(3, "32", shapes, 30, 35),
	} {
		if err := a.Record(r); err != nil {
			t.Fatal(err)
		}
	}
	bench := elites.Bench{Torch: "2.5.1", Rows: []elites.BenchRow{
		{Shape: small.String(), Ours: elites.BenchMeasure{Key: "block_m=128", GraphUS: 19},
			Torch: map[string]elites.TorchTiming{"cudnn": {Backend: "cudnn", GraphUS: 38}, "flash": {Backend: "flash", GraphUS: 40}}},
		{Shape: large.String(), Ours: elites.BenchMeasure{Key: "block_m=64", GraphUS: 49},
			Torch: map[string]elites.TorchTiming{"flash": {Backend: "flash", GraphUS: 60}, "math": {Backend: "math", Error: "out of memory"}}},
	}}
	// bench.json is saved under the archive's lock, as evotune bench does,
	// and export reads the archive without writing it.
	a.Close()
	if err := elites.SaveBench(a.Dir(), bench); err != nil {
		t.Fatal(err)
	}
	read, err := elites.Read(a.Dir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { read.Close() })
	return read
}

// TestNew builds the export of a two-shape archive: the overall best with
// its flags and defines, the default's objective, the PyTorch comparison
// from bench.json (the bench's own timing where it timed the best, the
// archive's p50 elsewhere), and each shape's own best for the dispatch
// table.
func TestNew(t *testing.T) {
	a := twoShapeArchive(t)
	ev, err := elites.Gather(a, space.Config{"block_m": "64"})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 25, 9, 30, 15, 999, time.FixedZone("CET", 3600))
	exp, err := New(a, ev, testSpace("32", "64", "128"), "attn", "/archive", now)
	if err != nil {
		t.Fatal(err)
	}
	if exp.Name != "attn" || exp.Key != "block_m=128" || exp.Result.Seq != 2 || exp.Archive != "/archive" {
		t.Errorf("export of %s (result %d) named %s from %s; want block_m=128 (result 2), attn, /archive", exp.Key, exp.Result.Seq, exp.Name, exp.Archive)
	}
	if want := time.Date(2026, 11, 25, 8, 30, 15, 0, time.UTC); !exp.Exported.Equal(want) || exp.Exported.Location() != time.UTC {
		t.Errorf("exported %v, want %v: UTC, whole seconds", exp.Exported, want)
	}
	if got := strings.Join(exp.Flags, " "); got != "-DSDPA_HEAD_DIM=64 -DSDPA_BLOCK_M=128" {
		t.Errorf("flags %q", got)
	}
	if len(exp.Defines) != 2 || exp.Defines[1] != (Define{Macro: "SDPA_BLOCK_M", Value: "128"}) {
		t.Errorf("defines %+v", exp.Defines)
	}
	if exp.DefaultObjectiveUS != 75 || exp.SpeedupVsDefault != 75.0/60 {
		t.Errorf("default %v µs, speedup %v; want 75 µs and 1.25", exp.DefaultObjectiveUS, exp.SpeedupVsDefault)
	}
	want := []TorchShape{
		{Shape: small, Backend: "cudnn", TorchUS: 38, OursUS: 19, SameRun: true, Speedup: 2},
		{Shape: large, Backend: "flash", TorchUS: 60, OursUS: 40, Speedup: 1.5},
	}
	if exp.Torch == nil || exp.Torch.Version != "2.5.1" || !strings.HasSuffix(exp.Torch.Bench, elites.BenchName) || len(exp.Torch.Shapes) != len(want) {
		t.Fatalf("torch comparison %+v; want version 2.5.1 from %s, two shapes", exp.Torch, elites.BenchName)
	}
	for i, w := range want {
		if exp.Torch.Shapes[i] != w {
			t.Errorf("torch comparison at %s: %+v, want %+v", w.Shape, exp.Torch.Shapes[i], w)
		}
	}
	if len(exp.Dispatch) != 2 {
		t.Fatalf("dispatch %+v: want one entry per shape", exp.Dispatch)
	}
	for i, w := range []struct {
		key  string
		seq  int
		p50  float64
		flag string
	}{{"block_m=128", 2, 20, "-DSDPA_BLOCK_M=128"}, {"block_m=32", 3, 35, "-DSDPA_BLOCK_M=32"}} {
		d := exp.Dispatch[i]
		if d.Key != w.key || d.Seq != w.seq || d.P50US != w.p50 || d.CILowUS != w.p50-0.5 || d.Flags[1] != w.flag {
			t.Errorf("dispatch entry %d: %+v, want %s (result %d) at %v µs, %s", i, d, w.key, w.seq, w.p50, w.flag)
		}
	}
}

// TestNewRenderError: a best config the space cannot render is named in
// the error, and so is a shape's best.
func TestNewRenderError(t *testing.T) {
	a := twoShapeArchive(t)
	ev, err := elites.Gather(a, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(a, ev, testSpace("32", "64"), "attn", "/archive", at); err == nil || !strings.Contains(err.Error(), "rendering the best config block_m=128:") {
		t.Errorf("error %v; want it to name the best config", err)
	}
	if _, err := New(a, ev, testSpace("64", "128"), "attn", "/archive", at); err == nil || !strings.Contains(err.Error(), "rendering the best config block_m=32 of shape 2x8x512x64:") {
		t.Errorf("error %v; want it to name the shape's best", err)
	}
}

// measured is a single-shape export of a config measured on a GPU, faster
// than the default, without a PyTorch comparison.
func measured() Export {
	r := result(7, "128", []space.Shape{small}, 20)
	r.Env = space.Env{GPU: "NVIDIA L4", GPUUUID: "GPU-1234", Arch: "sm_89", ComputeCap: "8.9", Driver: "580.95", NVCC: "12.4.131", SourceHash: "c0ffee"}
	r.Ptxas = &space.Ptxas{Registers: 128, SpillStores: 8, SpillLoads: 4, SharedBytes: 32768}
	flags := []string{"-DSDPA_HEAD_DIM=64", "-DSDPA_BLOCK_M=128"}
	return Export{Name: "attn", Key: r.Key, Config: r.Config, Flags: flags, Defines: defines(flags), Archive: "/archive",
		Exported: at.Add(time.Hour), Meta: elites.Meta{Problem: space.Problem{Family: "sdpa", Shapes: []space.Shape{small}, Dtype: "fp16"}},
		Result: r, DefaultObjectiveUS: 25, SpeedupVsDefault: 1.25, Provenance: elites.Provenance{Evaluated: 40}}
}

// replayed is measured as an archive replayed from a recorded file renders
// it: the environment known from the archive only, no default measured,
// and a PyTorch comparison from another run.
func replayed() Export {
	e := measured()
	e.Result.Env = space.Env{Replay: "synthetic.jsonl.gz"}
	e.Result.Ptxas = nil
	e.Provenance.Env = space.Env{GPU: "NVIDIA H100", Arch: "sm_90", NVCC: "12.4.131", SourceHash: "synthetic", Replay: "synthetic.jsonl.gz"}
	e.DefaultObjectiveUS, e.SpeedupVsDefault = 0, 0
	e.Torch = &TorchComparison{Bench: "/archive/bench.json", Shapes: []TorchShape{{Shape: small, Backend: "flash", TorchUS: 30, OursUS: 20, Speedup: 1.5}}}
	return e
}

// TestHeader renders the header's evidence and macros: what was measured
// where, or that it was not, each line padded to one column.
func TestHeader(t *testing.T) {
	cases := []struct {
		name    string
		exp     Export
		want    []string
		wantNot []string
	}{
		{"measured", measured(), []string{
			"#pragma once\n// attn.h: the best sdpa configuration an evotune search found.\n// " + bundle.Marker + "; do not edit. The evidence:\n//\n",
			"//   problem:            sdpa 1x8x512x64 fp16\n",
			"//   GPU:                NVIDIA L4 (sm_89, compute capability 8.9), driver 580.95\n",
			"//   GPU UUID:           GPU-1234\n",
			"//   kernel source hash: c0ffee\n",
			"//   p50:                20.00 µs at 1x8x512x64 (95% CI 19.50 – 20.50 µs, p90 21.00 µs, p99 22.00 µs)\n",
			"//   vs default config:  1.25x (default 25.00 µs, measured in the same archive)\n",
			"//   vs PyTorch SDPA:    not measured (no bench.json with a torch section in the archive)\n",
			"//   ptxas:              128 registers, 12 bytes spilled, 32768 bytes shared, 0 bytes stack\n",
			"//   measured:           2026-11-25T03:01:00Z\n",
			"//   exported:           2026-11-25T04:00:00Z\n",
			"//   archive:            /archive (result 7 of 40)\n",
			"//   config:             block_m=128\n\n#define SDPA_HEAD_DIM 64\n#define SDPA_BLOCK_M 128\n",
		}, []string{"replayed:", "weight:", "_dispatch"}},
		{"replayed", replayed(), []string{
			"//   GPU:                NVIDIA H100 (sm_90, compute capability unknown), driver unknown\n",
			"//   kernel source hash: synthetic\n",
			"//   replayed:           from synthetic.jsonl.gz: not a measurement of this machine\n",
			"//   vs default config:  not measured (the archive holds no passing result for the family default)\n",
			"//   vs PyTorch SDPA:    1.50x at 1x8x512x64 (flash 30.00 µs against 20.00 µs, CUDA-graph replay, PyTorch from bench.json, ours the archive's p50 from another run)\n",
		}, []string{"GPU UUID:", "ptxas:"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := tc.exp.Header()
			for _, w := range tc.want {
				if !strings.Contains(h, w) {
					t.Errorf("header lacks %q:\n%s", w, h)
				}
			}
			for _, w := range tc.wantNot {
				if strings.Contains(h, w) {
					t.Errorf("header holds %q:\n%s", w, h)
				}
			}
		})
	}
}

// TestHeaderDispatch: a two-shape export weighs each timing and ends with
// the per-shape table after the overall best's macros.
func TestHeaderDispatch(t *testing.T) {
	e := measured()
	shapes := []space.Shape{small, large}
	e.Meta.Problem.Shapes = shapes
	e.Meta.Problem.Weights = []float64{1, 0.5}
	e.Result = result(7, "128", shapes, 20, 40)
	e.Dispatch = []DispatchEntry{{Shape: small, Key: "block_m=128", P50US: 20}, {Shape: large, Key: "block_m=32", P50US: 35.25}}
	h := e.Header()
	for _, w := range []string{
		"//   p50:                40.00 µs at 2x8x512x64 (95% CI 39.50 – 40.50 µs, p90 41.00 µs, p99 42.00 µs)\n//   weight:             0.5\n",
		"#define SDPA_BLOCK_M 128\n\n// The macros above are the overall best",
		"// objective over all shapes. attn_dispatch lists, for each shape, the config\n",
		"static const struct { int b, h, s, d; const char* key; double p50_us; } attn_dispatch[] = {\n" +
			"    {1, 8, 512, 64, \"block_m=128\", 20.000},\n    {2, 8, 512, 64, \"block_m=32\", 35.250},\n};\n",
	} {
		if !strings.Contains(h, w) {
			t.Errorf("header lacks %q:\n%s", w, h)
		}
	}
	if !strings.HasSuffix(h, "};\n") {
		t.Errorf("header does not end with the dispatch table:\n%s", h)
	}
}

// TestMarshalJSON: the JSON says what wrote it whatever Generator holds,
// leaves out what was not measured, and reads back as the same export.
func TestMarshalJSON(t *testing.T) {
	e := measured()
	data, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	var fields map[string]any
	if err := json.Unmarshal(data, &fields); err != nil {
		t.Fatal(err)
	}
	if fields["generator"] != bundle.Marker {
		t.Errorf("generator %v, want %q", fields["generator"], bundle.Marker)
	}
	for _, absent := range []string{"torch", "dispatch", "bundle"} {
		if _, ok := fields[absent]; ok {
			t.Errorf("JSON holds %q, which was not measured or written", absent)
		}
	}
	var back Export
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	if back.Generator != bundle.Marker || back.Key != e.Key || back.SpeedupVsDefault != e.SpeedupVsDefault || back.Header() != e.Header() {
		t.Errorf("the JSON read back renders another header:\n%s\nwant\n%s", back.Header(), e.Header())
	}
}

func TestDefines(t *testing.T) {
	got := defines([]string{"-DSDPA_BLOCK_M=128", "-DSDPA_SCALE=0.125f", "-DSDPA_FLAG"})
	want := []Define{{"SDPA_BLOCK_M", "128"}, {"SDPA_SCALE", "0.125f"}, {"SDPA_FLAG", ""}}
	if len(got) != len(want) {
		t.Fatalf("defines %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("define %d: %+v, want %+v", i, got[i], want[i])
		}
	}
}

// TestTorchComparisonOf: a bench that timed none of the problem's shapes,
// or only PyTorch where the archive holds no timing of the best, compares
// nothing.
func TestTorchComparisonOf(t *testing.T) {
	best := result(2, "128", []space.Shape{small}, 20)
	other := elites.Bench{Rows: []elites.BenchRow{{Shape: large.String(), Torch: map[string]elites.TorchTiming{"flash": {Backend: "flash", GraphUS: 60}}}}}
	if tc := torchComparisonOf(other, best, space.Problem{Shapes: []space.Shape{small}}); tc != nil {
		t.Errorf("a bench of another shape compares %+v", tc)
	}
	if tc := torchComparisonOf(other, best, space.Problem{Shapes: []space.Shape{large}}); tc != nil {
		t.Errorf("a shape the best was never timed on compares %+v", tc)
	}
}

// TestCommitMessage: the subject names the config's objective and speedup,
// the body the evidence, one line each.
func TestCommitMessage(t *testing.T) {
	subject, body := measured().CommitMessage()
	if want := "attn: sdpa 1x8x512x64 fp16 20.00 µs (1.25x over the default), from evotune"; subject != want {
		t.Errorf("subject %q, want %q", subject, want)
	}
	if want := "config: block_m=128\n" +
		"p50: 20.00 µs at 1x8x512x64 (95% CI 19.50 – 20.50 µs)\n" +
		"speedup over the default config: 1.25x (default 25.00 µs, same archive)\n" +
		"speedup over PyTorch SDPA: not measured\n" +
		"GPU: NVIDIA L4 (sm_89), nvcc 12.4.131, kernel source c0ffee\n" +
		"archive: /archive (result 7 of 40)\n"; body != want {
		t.Errorf("body:\n%s\nwant:\n%s", body, want)
	}
	subject, body = replayed().CommitMessage()
	if want := "attn: sdpa 1x8x512x64 fp16 20.00 µs (no default measured), from evotune"; subject != want {
		t.Errorf("subject %q, want %q", subject, want)
	}
	for _, w := range []string{
		"speedup over the default config: not measured\n",
		"speedup over PyTorch SDPA: 1.50x at 1x8x512x64 (flash 30.00 µs against 20.00 µs, PyTorch from bench.json, ours the archive's p50 from another run)\n",
		"GPU: NVIDIA H100 (sm_90), nvcc 12.4.131, kernel source synthetic\n",
		"replayed from synthetic.jsonl.gz: not a measurement of a machine\n",
	} {
		if !strings.Contains(body, w) {
			t.Errorf("body lacks %q:\n%s", w, body)
		}
	}
}
