package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"evotune/cmd/evotune/internal/torchcmp"
	"evotune/elites"
	"evotune/kernels"
	"evotune/space"
)

// benchNow is the clock of the bench tests.
var benchNow = time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC)

// fakeBenchGPU times every config without a GPU: the family default at
// 12 µs a call, anything else at 10 µs (eager: twice as long).
type fakeBenchGPU struct {
	evaluated []string // "shape key"
}

func (f *fakeBenchGPU) Env() space.Env {
	return space.Env{GPU: "Fake H100", ComputeCap: "9.0", Driver: "580.1", Arch: "sm_90", NVCC: "13.0.88", SourceHash: "abcdef0123456789"}
}

func (f *fakeBenchGPU) Space(prob space.Problem) (*space.Space, error) {
	t, err := kernels.TargetFor("sm_90")
	if err != nil {
		return nil, err
	}
	family, err := kernels.FamilyOf(prob.Family)
	if err != nil {
		return nil, err
	}
	return family.SpaceFor(prob, t)
}

func (f *fakeBenchGPU) us(prob space.Problem, cfg space.Config) float64 {
	sp, _ := f.Space(prob)
	us := 10.0
	if cfg.Key() == sp.Default().Key() {
		us = 12
	}
	if space.Quantized(prob.Dtype) {
		us /= 2
	}
	return us
}

func (f *fakeBenchGPU) Evaluate(_ context.Context, prob space.Problem, cfg space.Config) space.Result {
	f.evaluated = append(f.evaluated, prob.Shapes[0].String()+" "+cfg.Key())
	us := f.us(prob, cfg)
	acc := &space.Accuracy{MaxAbsErr: 1e-3}
	switch prob.Dtype {
	case "fp8":
		acc.E2ECos, acc.E2ERelL1 = 0.9987, 0.052
	case "int8":
		acc.E2ECos, acc.E2ERelL1 = 0.99993, 0.0118
	}
	return space.Result{Key: cfg.Key(), Config: cfg, Status: space.StatusOK, Gate: space.GateTimed, Objective: us,
		Accuracy: acc,
		Timings:  []space.Timing{{Shape: prob.Shapes[0], P50US: us, CILowUS: us - 0.1, CIHighUS: us + 0.1}}}
}

func (f *fakeBenchGPU) Eager(_ context.Context, prob space.Problem, cfg space.Config) (space.Timing, error) {
	return space.Timing{Shape: prob.Shapes[0], P50US: 2 * f.us(prob, cfg)}, nil
}

func (f *fakeBenchGPU) Close() error { return nil }

// fakePython is a python3 for PATH that prints torch_sdpa.py's JSON: cuDNN
// at 8 µs, flash at 20 µs, efficient unsupported, for whichever mask it is
// asked about.
const fakePython = `#!/bin/sh
causal=false
for a in "$@"; do [ "$a" = "--causal" ] && causal=true; done
echo "$@" >> "$(dirname "$0")/calls"
shapes=""
prev=""
for a in "$@"; do [ "$prev" = "--shapes" ] && shapes="$a"; prev="$a"; done
printf '{"torch":"2.11.0","cuda":"13.0","cudnn":91900,"device":"Fake H100","results":['
sep=""
for s in $(echo "$shapes" | tr ',' ' '); do
  printf '%s{"shape":"%s","backend":"flash","causal":%s,"graph_us":20,"eager_us":40,"error":""}' "$sep" "$s" "$causal"
  printf ',{"shape":"%s","backend":"cudnn","causal":%s,"graph_us":8,"eager_us":30,"error":""}' "$s" "$causal"
  printf ',{"shape":"%s","backend":"efficient","causal":%s,"graph_us":0,"eager_us":0,"error":"RuntimeError: no"}' "$s" "$causal"
  sep=","
done
printf ']}\n'
`

// benchFixture makes a copy of the test archive, a fake python on PATH and
// a torch script path, and returns the archive and output directories.
func benchFixture(t *testing.T, python string) (archive, out, script string) {
	t.Helper()
	dir := t.TempDir()
	archive = filepath.Join(dir, "archive")
	if err := os.MkdirAll(archive, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"meta.json", "results.jsonl", "state.json"} {
		data, err := os.ReadFile(filepath.Join(testArchive, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(archive, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	bin := filepath.Join(dir, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, "python3"), []byte(python), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	script = filepath.Join(dir, "torch_sdpa.py")
	if err := os.WriteFile(script, []byte("# stand-in\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return archive, filepath.Join(dir, "out"), script
}

func runBenchCLI(t *testing.T, gpu *fakeBenchGPU, args ...string) (string, error) {
	t.Helper()
	var stdout bytes.Buffer
	c := &cli{stdout: &stdout, stderr: io.Discard, now: func() time.Time { return benchNow }}
	open := func(context.Context, gpuSetup, io.Writer) (torchcmp.GPU, error) { return gpu, nil }
	err := runBench(context.Background(), c, args, open)
	return stdout.String(), err
}

func TestBenchTableAndFiles(t *testing.T) {
	archive, out, script := benchFixture(t, fakePython)
	t.Setenv("EVOTUNE_COMMIT", "")
	gpu := &fakeBenchGPU{}
	stdout, err := runBenchCLI(t, gpu, "--archive", archive, "--out", out, "--torch-script", script,
		"--shapes", "1x8x512x64,4x16x2048x128,2x8x512x64:causal")
	if err != nil {
		t.Fatalf("bench: %v", err)
	}
	md, err := os.ReadFile(filepath.Join(out, "bench.md"))
	if err != nil {
		t.Fatal(err)
	}
	if string(md) != stdout {
		t.Errorf("stdout differs from bench.md")
	}
	for _, want := range []string{
		// The archive's best (D=64) at 10 µs beside the default at 12; cuDNN 8, flash 20.
		"| 1x8x512x64 | best | 10.00 | 20.00 | 12.00 (24.00) | 20.00 / 40.00 | 8.00 / 30.00 | unsupported | 1.25 | 0.50 |",
		"| 2x8x512x64 causal | best | 10.00 | 20.00 | 12.00 (24.00) |",
		// D=128: the default, labelled, with its note.
		"| 4x16x2048x128 | default † | 12.00 | 24.00 | 12.00 (24.00) | 20.00 / 40.00 | 8.00 / 30.00 | unsupported | 1.50 | 0.60 |",
		"4x16x2048x128: the best config was tuned for D=64: the family default is shown.",
		"- GPU: Fake H100 (compute 9.0, sm_90, driver 580.1)",
		"- PyTorch: 2.11.0, CUDA 13.0, cuDNN 91900",
		"- commit: unknown",
		"--json --dtype fp16 --shapes 1x8x512x64,4x16x2048x128`, then `python3 " + script + " --json --dtype fp16 --shapes 2x8x512x64 --causal`",
	} {
		if !strings.Contains(string(md), want) {
			t.Errorf("bench.md lacks %q:\n%s", want, md)
		}
	}
	// The D=128 shape times the default once; D=64 shapes time both.
	if n := len(gpu.evaluated); n != 5 {
		t.Errorf("%d evaluations, want 5: %v", n, gpu.evaluated)
	}

	data, err := os.ReadFile(filepath.Join(out, "bench.json"))
	if err != nil {
		t.Fatal(err)
	}
	copied, err := os.ReadFile(filepath.Join(archive, "bench.json"))
	if err != nil || !bytes.Equal(copied, data) {
		t.Errorf("the archive's bench.json differs from the output's (err %v)", err)
	}
	var rep elites.Bench
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatal(err)
	}
	// A test binary records no revision: with no $EVOTUNE_COMMIT the commit is
	// unknown, never the checkout the test happens to run in.
	if rep.GPU != "Fake H100" || rep.NVCC != "13.0.88" || rep.Torch != "2.11.0" || rep.Commit != "" || rep.Best == "" ||
		!rep.Date.Equal(benchNow) || !strings.HasPrefix(rep.Command, "evotune bench --archive") {
		t.Errorf("provenance: %+v", rep)
	}
	if len(rep.Rows) != 3 || rep.Rows[0].OursOverCuDNN != 1.25 || rep.Rows[1].Source != "default" || !rep.Rows[2].Causal {
		t.Errorf("rows: %+v", rep.Rows)
	}
	// What export reads back from the archive is what bench wrote.
	kept, ok, err := elites.ReadBench(archive)
	if err != nil || !ok {
		t.Fatalf("ReadBench of the archive: %v, %v", ok, err)
	}
	fastest, found := kept.Fastest(space.Shape{B: 1, H: 8, S: 512, D: 64})
	ours, oursFound := kept.OursOn(space.Shape{B: 1, H: 8, S: 512, D: 64}, rep.Best)
	if !found || fastest.Backend != "cudnn" || fastest.GraphUS != 8 || !oursFound || ours.GraphUS != 10 {
		t.Errorf("read back: fastest %+v (%v), ours %+v (%v); want cudnn at 8, ours at 10", fastest, found, ours, oursFound)
	}
}

func TestBenchTorchFailureKeepsOurTimings(t *testing.T) {
	archive, out, script := benchFixture(t, "#!/bin/sh\necho 'no CUDA device visible to PyTorch' >&2\nexit 1\n")
	_, err := runBenchCLI(t, &fakeBenchGPU{}, "--archive", archive, "--out", out, "--torch-script", script, "--shapes", "1x8x512x64")
	if err == nil || !strings.Contains(err.Error(), "no CUDA device visible") {
		t.Fatalf("bench: %v, want the PyTorch failure", err)
	}
	md, rerr := os.ReadFile(filepath.Join(out, "bench.md"))
	if rerr != nil {
		t.Fatal(rerr)
	}
	for _, want := range []string{"PyTorch comparison failed", "| 1x8x512x64 | best | 10.00 | 20.00 | 12.00 (24.00) | n/a | n/a | n/a | n/a | n/a |"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("bench.md lacks %q:\n%s", want, md)
		}
	}
}

func TestBenchUsage(t *testing.T) {
	_, _, script := benchFixture(t, fakePython)
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--archive", ""}, "--archive (or --config) is needed"},
		{[]string{"--shapes", "1x8x512"}, "--shapes"},
		{[]string{"--shapes", "1x8x512x64:masked"}, "the only suffix is :causal"},
		{[]string{"--dtype", "fp4"}, "--dtype"},
		{[]string{"--dtype", "bf16", "--out-dtype", "bf16"}, "--out-dtype"},
		{[]string{"--config", "block_m=64", "--dtype", "int8", "--v-transposed"}, "--v-transposed: only --dtype fp8"},
		{[]string{"--archive", "testdata/archive", "--torch-script", script, "--dtype", "fp8", "--v-transposed"}, "--v-transposed: the archive's problem says"},
		{[]string{"--archive", "testdata/archive", "--torch-script", script, "--baseline-archive", "nowhere"}, "--baseline-archive"},
		{[]string{"--archive", "testdata/archive", "--torch-script", "nowhere.py"}, "--torch-script"},
		{[]string{"--archive", "testdata/archive", "--torch-script", script, "--config", "nosuchknob=1"}, "--config"},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			_, err := runBenchCLI(t, &fakeBenchGPU{}, tc.args...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("bench %v: %v, want an error about %s", tc.args, err, tc.want)
			}
		})
	}
}

// TestBenchProblemFromArchive: without --dtype and --shapes, bench times the
// archive's best on the archive's own problem: a bf16 causal archive is
// benched as bf16 and causal, its best shown (no default with a dagger).
func TestBenchProblemFromArchive(t *testing.T) {
	archive, out, script := benchFixture(t, fakePython)
	t.Setenv("EVOTUNE_COMMIT", "0123abcd")
	metaPath := filepath.Join(archive, "meta.json")
	meta, err := os.ReadFile(metaPath)
	if err != nil {
		t.Fatal(err)
	}
	meta = bytes.Replace(meta, []byte(`"dtype": "fp16"`), []byte(`"dtype": "bf16"`), 1)
	meta = bytes.Replace(meta, []byte(`"causal": false`), []byte(`"causal": true`), 1)
	if err := os.WriteFile(metaPath, meta, 0o644); err != nil {
		t.Fatal(err)
	}
	// The results say the same problem as meta.json, as a bf16 causal tune's would.
	logPath := filepath.Join(archive, "results.jsonl")
	log, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	log = bytes.ReplaceAll(log, []byte(`"dtype":"fp16","causal":false`), []byte(`"dtype":"bf16","causal":true`))
	if err := os.WriteFile(logPath, log, 0o644); err != nil {
		t.Fatal(err)
	}
	gpu := &fakeBenchGPU{}
	stdout, err := runBenchCLI(t, gpu, "--archive", archive, "--out", out, "--torch-script", script)
	if err != nil {
		t.Fatalf("bench: %v", err)
	}
	for _, want := range []string{
		"| 1x8x512x64 causal | best | 10.00 | 20.00 | 12.00 (24.00) |",
		"--json --dtype bf16 --shapes 1x8x512x64 --causal`",
		"- commit: 0123abcd",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("bench.md lacks %q:\n%s", want, stdout)
		}
	}
	if strings.Contains(stdout, "†") || strings.Count(stdout, "| 1x8x512x64") != 1 {
		t.Errorf("want one row, the archive's best, no default in its place:\n%s", stdout)
	}

	// Flags still override the archive: --dtype fp16 shows the default, labelled.
	stdout, err = runBenchCLI(t, &fakeBenchGPU{}, "--archive", archive, "--out", out, "--torch-script", script, "--dtype", "fp16")
	if err != nil {
		t.Fatalf("bench --dtype fp16: %v", err)
	}
	if !strings.Contains(stdout, "| 1x8x512x64 causal | default † |") || !strings.Contains(stdout, "tuned for bf16") {
		t.Errorf("bench --dtype fp16 of a bf16 archive should show the labelled default:\n%s", stdout)
	}
}

// TestBuildRevision: bench records the revision the binary was built from,
// marked when the tree had local changes, and nothing when the build
// recorded none (so that $EVOTUNE_COMMIT or the checkout is asked instead).
func TestBuildRevision(t *testing.T) {
	for _, tc := range []struct {
		settings []debug.BuildSetting
		want     string
	}{
		{nil, ""},
		{[]debug.BuildSetting{{Key: "vcs.revision", Value: "8c6ddd2c"}}, "8c6ddd2c"},
		{[]debug.BuildSetting{{Key: "vcs.revision", Value: "8c6ddd2c"}, {Key: "vcs.modified", Value: "false"}}, "8c6ddd2c"},
		{[]debug.BuildSetting{{Key: "vcs.modified", Value: "true"}, {Key: "vcs.revision", Value: "8c6ddd2c"}}, "8c6ddd2c+modified"},
		{[]debug.BuildSetting{{Key: "vcs.modified", Value: "true"}}, ""},
	} {
		if got := buildRevision(&debug.BuildInfo{Settings: tc.settings}); got != tc.want {
			t.Errorf("buildRevision(%v) = %q, want %q", tc.settings, got, tc.want)
		}
	}
}

// TestBenchFP8BesideFP16 checks the bench of fp8 and of int8 (with a bf16
// output): ours beside the fp16 archive's best timed in the same run,
// PyTorch asked for the output dtype (its flash and cuDNN take neither), and
// the end-to-end accuracy column.
func TestBenchFP8BesideFP16(t *testing.T) {
	for _, tc := range []struct {
		dtype, out, torch string
		e2eCell           string
		e2eCos            float64
	}{
		{"fp8", "", "fp16", "0.9987 / 0.052", 0.9987},
		{"int8", "bf16", "bf16", "0.9999 / 0.012", 0.99993},
	} {
		t.Run(tc.dtype, func(t *testing.T) {
			fp16Archive, out, script := benchFixture(t, fakePython)
			gpu := &fakeBenchGPU{}
			sp, err := gpu.Space(space.Problem{Family: kernels.DefaultFamily, Shapes: []space.Shape{{B: 1, H: 8, S: 512, D: 64}}, Dtype: tc.dtype, OutDtype: tc.out})
			if err != nil {
				t.Fatal(err)
			}
			cfg := sp.Default()
			cfg["stages"] = "3" // any config but the default: timed at 5 µs
			if err := sp.Check(cfg); err != nil {
				t.Fatalf("the test's %s config: %v", tc.dtype, err)
			}
			args := []string{"--dtype", tc.dtype, "--config", cfg.Key(), "--baseline-archive", fp16Archive,
				"--out", out, "--torch-script", script, "--shapes", "1x8x512x64"}
			if tc.out != "" {
				args = append(args, "--out-dtype", tc.out)
			}
			stdout, err := runBenchCLI(t, gpu, args...)
			if err != nil {
				t.Fatalf("bench: %v", err)
			}
			for _, want := range []string{
				"| shape | config | ours graph | ours eager | default graph (eager) | flash | cuDNN | efficient | ours / cuDNN | ours / flash | TFLOP/s | baseline graph | ours / baseline | e2e cos / rel L1 |",
				// ours at 5 µs (default 6), the fp16 archive's best at 10, cuDNN 8, flash 20.
				"| 1x8x512x64 | best | 5.00 | 10.00 | 6.00 (12.00) | 20.00 / 40.00 | 8.00 / 30.00 | unsupported | 0.62 | 0.25 |",
				"| 10.00 | 0.50 | " + tc.e2eCell + " |",
				"--json --dtype " + tc.torch + " --shapes 1x8x512x64",
				"- baseline: `",
				"PyTorch is timed in " + tc.torch + " (its flash and cuDNN backends take no " + tc.dtype + ")",
			} {
				if !strings.Contains(stdout, want) {
					t.Errorf("bench.md lacks %q:\n%s", want, stdout)
				}
			}
			var rep elites.Bench
			data, err := os.ReadFile(filepath.Join(out, "bench.json"))
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(data, &rep); err != nil {
				t.Fatal(err)
			}
			if rep.Dtype != tc.dtype || rep.BaselineFor.Dtype != "fp16" || len(rep.Rows) != 1 || rep.Rows[0].Baseline == nil ||
				rep.Rows[0].OursOverBaseline != 0.5 || rep.Rows[0].Ours.E2ECos != tc.e2eCos {
				t.Errorf("bench.json: %+v", rep)
			}
		})
	}
}

// TestBenchHopperBesideFP16: a config of the sdpa-hopper family is timed in
// its own family's space beside an fp16 archive of the first family (each
// with its own family's default), not refused as a config of the first.
func TestBenchHopperBesideFP16(t *testing.T) {
	fp16Archive, out, script := benchFixture(t, fakePython)
	gpu := &fakeBenchGPU{}
	sp, err := gpu.Space(space.Problem{Family: "sdpa-hopper", Shapes: []space.Shape{{B: 1, H: 8, S: 512, D: 64}}, Dtype: "fp8"})
	if err != nil {
		t.Fatal(err)
	}
	cfg := sp.Default()
	cfg["stages"] = "6"
	stdout, err := runBenchCLI(t, gpu, "--family", "sdpa-hopper", "--dtype", "fp8", "--config", cfg.Key(), "--baseline-archive", fp16Archive,
		"--out", out, "--torch-script", script, "--shapes", "1x8x512x64")
	if err != nil {
		t.Fatalf("bench: %v", err)
	}
	// ours at 5 µs (the hopper default 6), the fp16 archive's best at 10.
	for _, want := range []string{"| 1x8x512x64 | best | 5.00 | 10.00 | 6.00 (12.00) |", "| 10.00 | 0.50 |",
		"given by --config, timed as sdpa-hopper 1x8x512x64 fp8"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("bench.md lacks %q:\n%s", want, stdout)
		}
	}
	if _, err := runBenchCLI(t, gpu, "--family", "fa3", "--dtype", "fp8", "--config", cfg.Key(), "--out", out, "--torch-script", script); err == nil ||
		!strings.Contains(err.Error(), "--family") {
		t.Errorf("--family fa3: %v, want a usage error naming --family", err)
	}
}
