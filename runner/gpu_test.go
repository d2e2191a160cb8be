package runner

// Device tests: they need a GPU and nvcc, and skip with the reason when
// either is missing. The heavy ones (a sweep over the SDPA family, the
// benchmark against PyTorch) also need EVOTUNE_GPU_TESTS=1. They write their
// evidence to $EVOTUNE_EVIDENCE_DIR (default: a temporary directory).
//
// The GPU machine has no Go toolchain: build the test binary here
// (go test -c -o bin/runner.test ./runner) and run it there from the
// repository root, e.g. EVOTUNE_GPU_TESTS=1 bin/runner.test -test.run Device -test.v.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"text/tabwriter"
	"time"

	"golang.org/x/sync/errgroup"

	"evotune/kernels"
	"evotune/space"
)

// devEnv is what the device tests share: the compiler, the GPU's target and
// a running worker.
type devEnv struct {
	nvcc    NVCC
	arch    string
	target  kernels.Target
	info    kernels.Response
	bin     string // the worker binary
	worker  *Worker
	workDir string
}

// devGPUPresent reports whether this machine has an NVIDIA GPU, and if not why.
func devGPUPresent() (bool, string) {
	if _, err := os.Stat("/dev/nvidia0"); err == nil {
		return true, ""
	}
	if err := exec.Command("nvidia-smi", "-L").Run(); err == nil {
		return true, ""
	}
	return false, "no GPU here (no /dev/nvidia0, nvidia-smi -L fails)"
}

func devRequireHeavy(t *testing.T) {
	t.Helper()
	if os.Getenv("EVOTUNE_GPU_TESTS") != "1" {
		t.Skip("heavy device test: set EVOTUNE_GPU_TESTS=1 to run it")
	}
}

// devSetup builds and starts the worker for this machine's GPU, or skips.
func devSetup(t *testing.T) *devEnv {
	t.Helper()
	if ok, why := devGPUPresent(); !ok {
		t.Skip(why)
	}
	ctx := context.Background()
	nvcc, err := FindNVCC(ctx, "", os.Getenv("CUDA_HOME"))
	if err != nil {
		t.Skipf("a GPU but no nvcc: %v", err)
	}
	work := t.TempDir()
	cacheDir := os.Getenv("EVOTUNE_WORKER_CACHE")
	if cacheDir == "" {
		cacheDir = filepath.Join(work, "worker-cache")
	}

	// The GPU's architecture, from nvidia-smi when it can tell; else from a
	// worker built for sm_80, whose PTX the driver compiles for any newer GPU.
	arch := ""
	if out, err := exec.Command("nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader", "-i", "0").Output(); err == nil {
		arch, _ = ArchForComputeCap(strings.TrimSpace(string(out)), defaultArchs(t))
	}
	if arch == "" {
		arch = "sm_80"
	}
	bin, err := BuildWorker(ctx, nvcc.Path, kernels.WorkerSource(), arch, cacheDir)
	if err != nil {
		t.Fatalf("building the worker: %v", err)
	}
	w, err := StartWorker(ctx, bin, 0, devLogWriter{t})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := w.Close(); err != nil {
			t.Errorf("closing the worker: %v", err)
		}
	})
	info, err := w.Do(ctx, kernels.Request{Op: kernels.OpInfo}, 2*time.Minute)
	if err != nil || info.Error != "" {
		t.Fatalf("worker info: %v %s", err, info.Error)
	}
	gpuArch, err := ArchForComputeCap(info.ComputeCap, defaultArchs(t))
	if err != nil {
		t.Fatalf("worker info: %v", err)
	}
	if gpuArch != arch {
		t.Fatalf("the worker was built for %s but the GPU is %s", arch, gpuArch)
	}
	target, err := kernels.TargetFor(arch)
	if err != nil {
		t.Fatal(err)
	}
	target.SMs, target.SharedPerBlock = info.SMs, info.SharedPerBlock
	t.Logf("GPU %s (compute %s, %d SMs, %d KiB L2, driver %d), nvcc %s at %s",
		info.Device, info.ComputeCap, info.SMs, info.L2Bytes>>10, info.DriverVersion, nvcc.Version, nvcc.Path)
	return &devEnv{nvcc: nvcc, arch: arch, target: target, info: info, bin: bin, worker: w, workDir: work}
}

// devLogWriter sends the worker's stderr to the test log.
type devLogWriter struct{ t *testing.T }

func (l devLogWriter) Write(b []byte) (int, error) {
	l.t.Log("worker: " + strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

// pool returns a compile pool for the SDPA family on this GPU.
func (e *devEnv) pool(t *testing.T) *CompilePool { return e.poolFor(t, kernels.SDPASource()) }

// poolFor returns a compile pool for a family's source on this GPU.
func (e *devEnv) poolFor(t *testing.T, src kernels.Source) *CompilePool {
	t.Helper()
	cache, err := OpenCache(filepath.Join(e.workDir, "cubins-"+src.Name), 4<<30)
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewCompilePool(CompileOptions{NVCC: e.nvcc, Arch: e.arch, Source: src, Cache: cache,
		WorkDir: filepath.Join(e.workDir, "build-"+src.Name)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func devSpace(t *testing.T, e *devEnv, shape space.Shape, dtype string, causal bool) *space.Space {
	t.Helper()
	sp, err := kernels.SDPASpace(space.Problem{Family: kernels.DefaultFamily, Shapes: []space.Shape{shape}, Dtype: dtype, Causal: causal}, e.target)
	if err != nil {
		t.Fatal(err)
	}
	return sp
}

// devCandidate is a compiled config.
type devCandidate struct {
	config space.Config
	cubin  *Cubin
}

func devCompile(ctx context.Context, pool *CompilePool, sp *space.Space, c space.Config) (*Cubin, error) {
	if err := sp.Check(c); err != nil {
		return nil, err
	}
	flags, err := sp.Flags(c)
	if err != nil {
		return nil, err
	}
	return pool.Compile(ctx, flags)
}

// devCheckCase is one correctness case and its outcome.
type devCheckCase struct {
	Shape      string  `json:"shape"`
	Dtype      string  `json:"dtype"`
	Causal     bool    `json:"causal"`
	Seed       uint64  `json:"seed"`
	MaxAbsErr  float64 `json:"max_abs_err"`
	MeanAbsErr float64 `json:"mean_abs_err"`
	RelL2      float64 `json:"rel_l2"`
	BadFrac    float64 `json:"bad_frac"`
	NaN        int     `json:"nan"`
	Inf        int     `json:"inf"`
	Repeatable bool    `json:"repeatable"`
	OutStd     float64 `json:"out_std"`
	RefStd     float64 `json:"ref_std"`
	Error      string  `json:"error,omitempty"`
	Pass       bool    `json:"pass"`
	Why        string  `json:"why,omitempty"`
}

// devCheck runs one check and judges it with the dtype's tolerance.
func (e *devEnv) devCheck(ctx context.Context, cubin string, c space.Config, shape space.Shape, dtype string, causal bool, seed uint64) devCheckCase {
	out := devCheckCase{Shape: shape.String(), Dtype: dtype, Causal: causal, Seed: seed}
	plan, err := kernels.SDPAPlan(c, shape, e.target)
	if err != nil {
		out.Error = "plan: " + err.Error()
		out.Why = out.Error
		return out
	}
	tol := kernels.ToleranceFor(dtype, "")
	resp, err := e.worker.Do(ctx, kernels.Request{Op: kernels.OpCheck, Cubin: cubin, Plan: plan, Shape: shape, Dtype: dtype,
		Causal: causal, Seed: seed, Atol: tol.Atol, Rtol: tol.Rtol}, time.Minute)
	switch {
	case err != nil:
		out.Error = err.Error()
	case resp.Error != "":
		out.Error = resp.Error
	}
	if out.Error != "" {
		out.Why = out.Error
		return out
	}
	out.MaxAbsErr, out.MeanAbsErr, out.RelL2, out.BadFrac = resp.MaxAbsErr, resp.MeanAbsErr, resp.RelL2, resp.BadFrac
	out.NaN, out.Inf, out.Repeatable, out.OutStd, out.RefStd = resp.NaN, resp.Inf, resp.Repeatable, resp.OutStd, resp.RefStd
	out.Why = devJudge(resp, tol)
	out.Pass = out.Why == ""
	return out
}

// devJudge returns why a check response fails tol, or "".
func devJudge(r kernels.Response, tol kernels.Tolerance) string {
	var why []string
	if r.NaN > 0 || r.Inf > 0 {
		why = append(why, fmt.Sprintf("%d NaN, %d Inf", r.NaN, r.Inf))
	}
	if r.MaxAbsErr > tol.MaxAbs {
		why = append(why, fmt.Sprintf("max abs err %.3g > %.3g", r.MaxAbsErr, tol.MaxAbs))
	}
	if r.MeanAbsErr > tol.MeanAbs {
		why = append(why, fmt.Sprintf("mean abs err %.3g > %.3g", r.MeanAbsErr, tol.MeanAbs))
	}
	if r.RelL2 > tol.RelL2 {
		why = append(why, fmt.Sprintf("rel L2 %.3g > %.3g", r.RelL2, tol.RelL2))
	}
	if r.BadFrac > tol.BadFrac {
		why = append(why, fmt.Sprintf("bad fraction %.3g > %.3g", r.BadFrac, tol.BadFrac))
	}
	if !r.Repeatable {
		why = append(why, "not bitwise repeatable")
	}
	return strings.Join(why, "; ")
}

func devMedian(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// devTime times a compiled config and returns the median per-call time.
func (e *devEnv) devTime(ctx context.Context, cubin string, c space.Config, shape space.Shape, dtype string, causal bool) (float64, kernels.Response, error) {
	plan, err := kernels.SDPAPlan(c, shape, e.target)
	if err != nil {
		return 0, kernels.Response{}, err
	}
	resp, err := e.worker.Do(ctx, kernels.Request{Op: kernels.OpTime, Cubin: cubin, Plan: plan, Shape: shape, Dtype: dtype,
		Causal: causal, Samples: 50, MinSampleUS: 200}, 5*time.Minute)
	if err != nil {
		return 0, resp, err
	}
	if resp.Error != "" {
		return 0, resp, errors.New(resp.Error)
	}
	return devMedian(resp.SamplesUS), resp, nil
}

func devShape(t *testing.T, s string) space.Shape {
	t.Helper()
	sh, err := space.ParseShape(s)
	if err != nil {
		t.Fatal(err)
	}
	return sh
}

func devEvidenceDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("EVOTUNE_EVIDENCE_DIR")
	if dir == "" {
		return t.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func devWriteJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s", path)
}

// devCommit names the code under test: $EVOTUNE_COMMIT when set (a copy
// of a working tree on another machine can carry a stale .git), else git's
// HEAD.
func devCommit() string {
	if c := os.Getenv("EVOTUNE_COMMIT"); c != "" {
		return c
	}
	if out, err := exec.Command("git", "rev-parse", "HEAD").Output(); err == nil {
		return strings.TrimSpace(string(out))
	}
	return "unknown"
}

// devRepoFile finds path (relative to the repository root) from the
// working directory or one of its parents.
func devRepoFile(t *testing.T, path string) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		p := filepath.Join(dir, path)
		if _, err := os.Stat(p); err == nil {
			return p
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatalf("%s not found in the working directory or its parents", path)
		}
		dir = parent
	}
}

// TestDeviceWorkerBasics checks info, check and time on the default config.
func TestDeviceWorkerBasics(t *testing.T) {
	e := devSetup(t)
	ctx := context.Background()
	shape := devShape(t, "1x8x512x64")
	sp := devSpace(t, e, shape, "fp16", false)
	c := sp.Default()
	cubin, err := devCompile(ctx, e.pool(t), sp, c)
	if err != nil {
		t.Fatalf("compiling the default config: %v", err)
	}
	defer cubin.Release()

	for seed := uint64(1); seed <= 2; seed++ {
		cc := e.devCheck(ctx, cubin.Path, c, shape, "fp16", false, seed)
		t.Logf("check seed %d: max %.3g mean %.3g relL2 %.3g bad %.3g out std %.4f ref std %.4f",
			seed, cc.MaxAbsErr, cc.MeanAbsErr, cc.RelL2, cc.BadFrac, cc.OutStd, cc.RefStd)
		if !cc.Pass {
			t.Errorf("default config at %s seed %d: %s", shape, seed, cc.Why)
		}
		if cc.RefStd <= 0 || math.Abs(cc.OutStd-cc.RefStd) > 0.01*cc.RefStd {
			t.Errorf("output std %.5f vs reference std %.5f: want them within 1%%", cc.OutStd, cc.RefStd)
		}
	}
	p50, resp, err := e.devTime(ctx, cubin.Path, c, shape, "fp16", false)
	if err != nil {
		t.Fatalf("timing the default config: %v", err)
	}
	if len(resp.SamplesUS) < 30 || resp.LaunchesPerSample < 1 || resp.InputSets < 1 {
		t.Errorf("time: %d samples, %d launches a sample, %d input sets", len(resp.SamplesUS), resp.LaunchesPerSample, resp.InputSets)
	}
	for _, s := range resp.SamplesUS {
		if !(s > 0) {
			t.Errorf("a sample of %g µs", s)
		}
	}
	if us := p50 * float64(resp.LaunchesPerSample); us < 150 && resp.LaunchesPerSample < 4096 {
		t.Errorf("a sample lasts %.1f µs, want at least the 200 µs asked for", us)
	}
	t.Logf("default config at %s fp16: p50 %.2f µs a call (%d calls a sample, %d input sets)", shape, p50, resp.LaunchesPerSample, resp.InputSets)
	if n := e.worker.Restarts(); n != 0 {
		t.Errorf("the worker restarted %d times", n)
	}
}

// devProbes are small kernels that misbehave in known ways, to prove that
// the worker's check and fault handling notice.
const devProbes = `#include "sdpa_params.h"
__device__ unsigned long long probe_counter;
extern "C" __global__ void probe_nothing(SdpaParams p) {}
extern "C" __global__ void probe_zeros(SdpaParams p) {
    size_t n = (size_t)p.b * p.h * p.s * p.d;
    for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) ((unsigned short*)p.o)[i] = 0;
}
extern "C" __global__ void probe_changing(SdpaParams p) {
    size_t n = (size_t)p.b * p.h * p.s * p.d;
    unsigned long long k = atomicAdd(&probe_counter, 1ull);
    for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        ((unsigned short*)p.o)[i] = (unsigned short)(0x3000 + ((k / (gridDim.x * blockDim.x)) & 0xff));
}
extern "C" __global__ void probe_fault(SdpaParams p) { *(volatile int*)(p.o_part + (1ull << 40)) = 1; }
extern "C" __global__ void probe_spin(SdpaParams p) {
    // A volatile global read each turn: the loop has a side effect, so the
    // compiler may not assume it ends.
    while (*(volatile unsigned long long*)&probe_counter != ~0ull) {}
}
`

// TestDeviceWorkerFaults checks that wrong, incomplete, non-repeatable,
// faulting and hanging kernels are each reported as such, and that the
// worker comes back after the fatal ones.
func TestDeviceWorkerFaults(t *testing.T) {
	e := devSetup(t)
	ctx := context.Background()
	dir := t.TempDir()
	src := kernels.WorkerSource()
	if err := os.WriteFile(filepath.Join(dir, "sdpa_params.h"), src.Files["sdpa_params.h"], 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "probes.cu"), []byte(devProbes), 0o644); err != nil {
		t.Fatal(err)
	}
	cubin := filepath.Join(dir, "probes.cubin")
	if out, err := exec.Command(e.nvcc.Path, "-cubin", "-arch="+e.arch, "-I"+dir, "-o", cubin, filepath.Join(dir, "probes.cu")).CombinedOutput(); err != nil {
		t.Fatalf("nvcc probes: %v\n%s", err, out)
	}
	shape := space.Shape{B: 1, H: 2, S: 100, D: 64}
	n := shape.B * shape.H * shape.S * shape.D
	plan := func(kernel string) kernels.Plan {
		return kernels.Plan{Launches: []kernels.Launch{{Kernel: kernel, Grid: [3]int{4, 1, 1}, Block: [3]int{128, 1, 1}}}}
	}
	check := func(kernel string, timeout time.Duration) (kernels.Response, error) {
		return e.worker.Do(ctx, kernels.Request{Op: kernels.OpCheck, Cubin: cubin, Plan: plan(kernel), Shape: shape, Dtype: "fp16",
			Seed: 1, Atol: 1e-3, Rtol: 1e-2}, timeout)
	}

	r, err := check("probe_nothing", time.Minute)
	if err != nil || r.Error != "" {
		t.Fatalf("probe_nothing: %v %s", err, r.Error)
	}
	if r.NaN != n || r.BadFrac != 1 || !(r.MaxAbsErr > 1e300) {
		t.Errorf("probe_nothing: %d NaN (want %d, every unwritten element), bad %.3g, max err %g", r.NaN, n, r.BadFrac, r.MaxAbsErr)
	}
	r, err = check("probe_zeros", time.Minute)
	if err != nil || r.Error != "" {
		t.Fatalf("probe_zeros: %v %s", err, r.Error)
	}
	if r.NaN != 0 || r.MaxAbsErr < 1e-2 || r.OutStd != 0 || r.RefStd <= 0 || !r.Repeatable {
		t.Errorf("probe_zeros: want a large error from a finite, repeatable, constant output: %+v", r)
	}
	r, err = check("probe_changing", time.Minute)
	if err != nil || r.Error != "" {
		t.Fatalf("probe_changing: %v %s", err, r.Error)
	}
	if r.Repeatable {
		t.Error("probe_changing: reported repeatable though every run writes a different value")
	}
	r, err = check("probe_missing", time.Minute)
	if err != nil || r.Error == "" || r.Sticky || !strings.Contains(r.Error, "probe_missing") {
		t.Errorf("a missing kernel: %v, response %+v; want a non-sticky error naming it", err, r)
	}
	if e.worker.Restarts() != 0 {
		t.Fatalf("the worker restarted %d times before any fatal probe", e.worker.Restarts())
	}

	r, err = check("probe_fault", time.Minute)
	if err != nil || !r.Sticky || !strings.Contains(r.Error, "CUDA_ERROR_ILLEGAL_ADDRESS") {
		t.Errorf("probe_fault: %v, response %+v; want a sticky illegal address", err, r)
	}
	r, err = check("probe_zeros", time.Minute)
	if err != nil || r.Error != "" {
		t.Errorf("after the fault: %v %s", err, r.Error)
	}
	if e.worker.Restarts() != 1 {
		t.Errorf("Restarts = %d after one fault, want 1", e.worker.Restarts())
	}

	_, err = check("probe_spin", 5*time.Second)
	if !errors.Is(err, ErrWorkerTimeout) {
		t.Errorf("probe_spin: %v, want ErrWorkerTimeout", err)
	}
	r, err = check("probe_zeros", time.Minute)
	if err != nil || r.Error != "" {
		t.Errorf("after the hang: %v %s", err, r.Error)
	}
	if e.worker.Restarts() != 2 {
		t.Errorf("Restarts = %d after a fault and a hang, want 2", e.worker.Restarts())
	}
}

// devCoverSelect picks n configs from valid: first a greedy cover of every
// (knob, value) pair that any valid config has, then seeded random others.
func devCoverSelect(valid []space.Config, n int, seed uint64) []space.Config {
	type pair struct{ knob, value string }
	keys := make([]string, len(valid))
	uncovered := map[pair]bool{}
	for i, c := range valid {
		keys[i] = c.Key()
		for k, v := range c {
			uncovered[pair{k, v}] = true
		}
	}
	var picked []space.Config
	used := map[string]bool{}
	for len(uncovered) > 0 {
		best, bestGain := -1, 0
		for i, c := range valid {
			if used[keys[i]] {
				continue
			}
			gain := 0
			for k, v := range c {
				if uncovered[pair{k, v}] {
					gain++
				}
			}
			if gain > bestGain {
				best, bestGain = i, gain
			}
		}
		if best < 0 {
			break
		}
		c := valid[best]
		picked = append(picked, c)
		used[keys[best]] = true
		for k, v := range c {
			delete(uncovered, pair{k, v})
		}
	}
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	order := rng.Perm(len(valid))
	for _, i := range order {
		if len(picked) >= n {
			break
		}
		if !used[keys[i]] {
			picked = append(picked, valid[i])
			used[keys[i]] = true
		}
	}
	return picked
}

// devSweepVariant is one compiled form of a config and the cases it is checked on.
type devSweepVariant struct {
	Name   string
	D      int
	Dtype  string
	Causal bool
	Shapes []string
}

type devSweepRecord struct {
	Variant string         `json:"variant"`
	Key     string         `json:"key"`
	Config  space.Config   `json:"config"`
	Compile string         `json:"compile_error,omitempty"`
	Cases   []devCheckCase `json:"cases,omitempty"`
	Pass    bool           `json:"pass"`
}

// TestDeviceFamilySweep checks many configs, chosen to cover every knob
// value, for fp16 and bf16, causal and not, D=64 and D=128, on shapes that
// are and are not multiples of the tiles, with three seeds each.
func TestDeviceFamilySweep(t *testing.T) {
	devRequireHeavy(t)
	e := devSetup(t)
	ctx := context.Background()
	n := 200
	if s := os.Getenv("EVOTUNE_SWEEP_N"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v <= 0 {
			t.Fatalf("EVOTUNE_SWEEP_N=%q: want a positive integer", s)
		}
		n = v
	}
	n128 := max(n/4, 1)
	if s := os.Getenv("EVOTUNE_SWEEP_N_D128"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v <= 0 {
			t.Fatalf("EVOTUNE_SWEEP_N_D128=%q: want a positive integer", s)
		}
		n128 = v
	}
	variants := []devSweepVariant{
		{Name: "d64-fp16", D: 64, Dtype: "fp16", Shapes: []string{"1x8x512x64", "2x8x500x64"}},
		{Name: "d64-bf16", D: 64, Dtype: "bf16", Shapes: []string{"1x8x512x64", "2x8x500x64"}},
		{Name: "d64-fp16-causal", D: 64, Dtype: "fp16", Causal: true, Shapes: []string{"1x4x300x64"}},
		{Name: "d64-bf16-causal", D: 64, Dtype: "bf16", Causal: true, Shapes: []string{"1x4x300x64"}},
		{Name: "d128-fp16", D: 128, Dtype: "fp16", Shapes: []string{"1x3x77x128"}},
		{Name: "d128-bf16", D: 128, Dtype: "bf16", Shapes: []string{"1x3x77x128"}},
	}
	seeds := []uint64{1, 2, 3}
	configs := map[int][]space.Config{}
	for _, d := range []int{64, 128} {
		sp := devSpace(t, e, space.Shape{B: 1, H: 1, S: 128, D: d}, "fp16", false)
		valid := sp.ValidConfigs()
		want := n
		if d == 128 {
			want = n128
		}
		configs[d] = devCoverSelect(valid, want, 1)
		t.Logf("D=%d: %d valid configs, %d chosen", d, len(valid), len(configs[d]))
	}

	shapes := map[string]space.Shape{}
	for _, v := range variants {
		for _, s := range v.Shapes {
			shapes[s] = devShape(t, s)
		}
	}
	pool := e.pool(t)
	var mu sync.Mutex
	var records []devSweepRecord
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(runtime.NumCPU())
	for _, v := range variants {
		sp := devSpace(t, e, shapes[v.Shapes[0]], v.Dtype, v.Causal)
		for _, c := range configs[v.D] {
			g.Go(func() error {
				rec := devSweepRecord{Variant: v.Name, Key: c.Key(), Config: c}
				cubin, err := devCompile(gctx, pool, sp, c)
				if err != nil {
					if gctx.Err() != nil {
						return gctx.Err()
					}
					rec.Compile = err.Error()
				} else {
					rec.Pass = true
					for _, s := range v.Shapes {
						for _, seed := range seeds {
							cc := e.devCheck(gctx, cubin.Path, c, shapes[s], v.Dtype, v.Causal, seed)
							rec.Cases = append(rec.Cases, cc)
							rec.Pass = rec.Pass && cc.Pass
						}
					}
					cubin.Release()
				}
				mu.Lock()
				records = append(records, rec)
				mu.Unlock()
				return nil
			})
		}
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	devSortRecords(records, func(r devSweepRecord) (string, string) { return r.Variant, r.Key })

	type variantSummary struct {
		Variant   string  `json:"variant"`
		Configs   int     `json:"configs"`
		Cases     int     `json:"cases"`
		Failed    int     `json:"failed_configs"`
		CompileKO int     `json:"compile_errors"`
		WorstMax  float64 `json:"worst_max_abs_err"`
		WorstRel  float64 `json:"worst_rel_l2"`
		MeanMax   float64 `json:"mean_max_abs_err"`
	}
	var summaries []variantSummary
	var failed []string
	for _, v := range variants {
		s := variantSummary{Variant: v.Name}
		var sumMax float64
		for _, r := range records {
			if r.Variant != v.Name {
				continue
			}
			s.Configs++
			if r.Compile != "" {
				s.CompileKO++
			}
			if !r.Pass {
				s.Failed++
				why := r.Compile
				for _, c := range r.Cases {
					if !c.Pass {
						why = fmt.Sprintf("%s seed %d: %s", c.Shape, c.Seed, c.Why)
						break
					}
				}
				failed = append(failed, fmt.Sprintf("%s %s: %s", v.Name, r.Key, why))
			}
			for _, c := range r.Cases {
				if c.Error != "" {
					continue
				}
				s.Cases++
				s.WorstMax = math.Max(s.WorstMax, c.MaxAbsErr)
				s.WorstRel = math.Max(s.WorstRel, c.RelL2)
				sumMax += c.MaxAbsErr
			}
		}
		if s.Cases > 0 {
			s.MeanMax = sumMax / float64(s.Cases)
		}
		summaries = append(summaries, s)
	}

	evidence := map[string]any{
		"gpu":          e.info.Device,
		"compute_cap":  e.info.ComputeCap,
		"driver":       e.info.DriverVersion,
		"date":         time.Now().UTC().Format(time.RFC3339),
		"commit":       devCommit(),
		"nvcc":         e.nvcc.Version,
		"arch":         e.arch,
		"source_hash":  kernels.SDPASource().Hash,
		"worker_hash":  kernels.WorkerSource().Hash,
		"command":      strings.Join(os.Args, " "),
		"seeds":        seeds,
		"variants":     variants,
		"summary":      summaries,
		"failed":       failed,
		"configs":      records,
		"restarts":     e.worker.Restarts(),
		"sweep_n":      n,
		"sweep_n_d128": n128,
	}
	devWriteJSON(t, filepath.Join(devEvidenceDir(t), "family-sweep.json"), evidence)

	var tab bytes.Buffer
	tw := tabwriter.NewWriter(&tab, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "variant\tconfigs\tcases\tfailed\tcompile errors\tworst max abs\tmean max abs\tworst rel L2")
	for _, s := range summaries {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%.3g\t%.3g\t%.3g\n", s.Variant, s.Configs, s.Cases, s.Failed, s.CompileKO, s.WorstMax, s.MeanMax, s.WorstRel)
	}
	tw.Flush()
	t.Logf("family sweep on %s:\n%s", e.info.Device, tab.String())
	if len(failed) > 0 {
		t.Errorf("%d configs failed:\n%s", len(failed), strings.Join(failed, "\n"))
	}
}

// devTorchResult is one line of bench/torch_sdpa.py --json.
type devTorchResult struct {
	Shape   string  `json:"shape"`
	Backend string  `json:"backend"`
	GraphUS float64 `json:"graph_us"`
	EagerUS float64 `json:"eager_us"`
	Error   string  `json:"error"`
}

type devTorchReport struct {
	Torch   string           `json:"torch"`
	CUDA    string           `json:"cuda"`
	CuDNN   int              `json:"cudnn"`
	Device  string           `json:"device"`
	Results []devTorchResult `json:"results"`
}

// TestDeviceBenchDefault times the default config and a few hand-picked
// alternatives beside PyTorch SDPA on the same GPU, in the same run.
func TestDeviceBenchDefault(t *testing.T) {
	devRequireHeavy(t)
	e := devSetup(t)
	ctx := context.Background()
	shapes := []string{"1x8x512x64", "2x8x512x64", "4x16x2048x64", "4x16x2048x128"}
	alternatives := []space.Config{
		{"block_m": "128", "warps": "8"},
		{"block_m": "128", "warps": "8", "stages": "3"},
		{"block_n": "128"},
		{"block_m": "128", "block_n": "32", "warps": "8"},
		{"ws": "1", "stages": "3"},
		{"split_kv": "2"},
		{"persistent": "1", "min_blocks_per_sm": "2"},
	}
	pool := e.pool(t)

	type row struct {
		Shape      string             `json:"shape"`
		DefaultUS  float64            `json:"default_us"`
		DefaultTF  float64            `json:"default_tflops"`
		BestUS     float64            `json:"best_us"`
		BestConfig string             `json:"best_config"`
		AltUS      map[string]float64 `json:"alternatives_us"`
		Incorrect  []string           `json:"incorrect,omitempty"`
		Torch      []devTorchResult   `json:"torch,omitempty"`
	}
	var rows []row
	for _, s := range shapes {
		shape := devShape(t, s)
		sp := devSpace(t, e, shape, "fp16", false)
		cands := []space.Config{sp.Default()}
		for _, o := range alternatives {
			c := sp.Default()
			for k, v := range o {
				c[k] = v
			}
			if err := sp.Check(c); err != nil {
				t.Logf("%s: alternative %s is not valid here: %v", s, c.Key(), err)
				continue
			}
			cands = append(cands, c)
		}
		compiled := make([]*Cubin, len(cands))
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(runtime.NumCPU())
		for i, c := range cands {
			g.Go(func() error {
				cb, err := devCompile(gctx, pool, sp, c)
				if err != nil {
					return fmt.Errorf("compiling %s: %w", c.Key(), err)
				}
				compiled[i] = cb
				return nil
			})
		}
		if err := g.Wait(); err != nil {
			t.Fatal(err)
		}
		r := row{Shape: s, AltUS: map[string]float64{}, BestUS: math.Inf(1)}
		for i, c := range cands {
			cc := e.devCheck(ctx, compiled[i].Path, c, shape, "fp16", false, 1)
			if !cc.Pass {
				r.Incorrect = append(r.Incorrect, c.Key()+": "+cc.Why)
				if i == 0 {
					t.Errorf("the default config is incorrect at %s: %s", s, cc.Why)
				}
				continue
			}
			us, _, err := e.devTime(ctx, compiled[i].Path, c, shape, "fp16", false)
			if err != nil {
				t.Errorf("timing %s at %s: %v", c.Key(), s, err)
				continue
			}
			if i == 0 {
				r.DefaultUS = us
				r.DefaultTF = kernels.SDPAFLOPs(shape, false) / us / 1e6
			} else {
				r.AltUS[c.Key()] = us
			}
			if us < r.BestUS {
				r.BestUS, r.BestConfig = us, c.Key()
			}
		}
		for _, cb := range compiled {
			cb.Release()
		}
		rows = append(rows, r)
	}

	// PyTorch on the same shapes, in the same run.
	script := devRepoFile(t, "bench/torch_sdpa.py")
	tctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	torchCmd := []string{"python3", script, "--json", "--dtype", "fp16", "--shapes", strings.Join(shapes, ",")}
	cmd := exec.CommandContext(tctx, torchCmd[0], torchCmd[1:]...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var torch devTorchReport
	torchErr := ""
	if err != nil {
		torchErr = fmt.Sprintf("%s: %v: %s", strings.Join(torchCmd, " "), err, strings.TrimSpace(stderr.String()))
	} else if err := json.Unmarshal(out, &torch); err != nil {
		torchErr = fmt.Sprintf("reading torch_sdpa.py output: %v", err)
	}
	torchUS := func(shape, backend string) (devTorchResult, bool) {
		for _, r := range torch.Results {
			if r.Shape == shape && r.Backend == backend && r.Error == "" && r.GraphUS > 0 {
				return r, true
			}
		}
		return devTorchResult{}, false
	}
	for i := range rows {
		for _, r := range torch.Results {
			if r.Shape == rows[i].Shape {
				rows[i].Torch = append(rows[i].Torch, r)
			}
		}
	}

	var md strings.Builder
	fmt.Fprintf(&md, "# SDPA default config vs PyTorch SDPA\n\n")
	fmt.Fprintf(&md, "- GPU: %s (compute %s, %d SMs, driver %d)\n", e.info.Device, e.info.ComputeCap, e.info.SMs, e.info.DriverVersion)
	fmt.Fprintf(&md, "- date: %s\n- commit: %s\n- nvcc: %s (%s)\n", time.Now().UTC().Format(time.RFC3339), devCommit(), e.nvcc.Version, e.arch)
	fmt.Fprintf(&md, "- PyTorch: %s, CUDA %s, cuDNN %d\n", torch.Torch, torch.CUDA, torch.CuDNN)
	fmt.Fprintf(&md, "- command: `%s`, then `%s`\n", strings.Join(os.Args, " "), strings.Join(torchCmd, " "))
	fmt.Fprintf(&md, "- method: fp16, not causal; µs per call, median of 50 samples of a CUDA graph of many calls, "+
		"inputs rotated over sets larger than twice the L2 (ours and PyTorch alike); eager PyTorch in brackets.\n\n")
	if torchErr != "" {
		fmt.Fprintf(&md, "PyTorch comparison failed: %s\n\n", torchErr)
	}
	fmt.Fprintf(&md, "| shape | default | TFLOP/s | best of %d (config) | flash | cuDNN | efficient | default / cuDNN | default / flash | best / cuDNN | best / flash |\n", len(alternatives)+1)
	fmt.Fprintf(&md, "|---|---|---|---|---|---|---|---|---|---|---|\n")
	ratio := func(a float64, r devTorchResult, ok bool) string {
		if !ok || !(a > 0) || math.IsInf(a, 0) {
			return "n/a"
		}
		return fmt.Sprintf("%.2f", a/r.GraphUS)
	}
	cell := func(r devTorchResult, ok bool) string {
		if !ok {
			return "n/a"
		}
		return fmt.Sprintf("%.1f (%.1f)", r.GraphUS, r.EagerUS)
	}
	for _, r := range rows {
		flash, okF := torchUS(r.Shape, "flash")
		cudnn, okC := torchUS(r.Shape, "cudnn")
		eff, okE := torchUS(r.Shape, "efficient")
		fmt.Fprintf(&md, "| %s | %.2f | %.0f | %.2f (`%s`) | %s | %s | %s | %s | %s | %s | %s |\n",
			r.Shape, r.DefaultUS, r.DefaultTF, r.BestUS, r.BestConfig, cell(flash, okF), cell(cudnn, okC), cell(eff, okE),
			ratio(r.DefaultUS, cudnn, okC), ratio(r.DefaultUS, flash, okF), ratio(r.BestUS, cudnn, okC), ratio(r.BestUS, flash, okF))
	}
	for _, r := range rows {
		for _, bad := range r.Incorrect {
			fmt.Fprintf(&md, "\nIncorrect at %s (not timed): %s\n", r.Shape, bad)
		}
	}
	dir := devEvidenceDir(t)
	if err := os.WriteFile(filepath.Join(dir, "bench-default.md"), []byte(md.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	devWriteJSON(t, filepath.Join(dir, "bench-default.json"), map[string]any{
		"gpu": e.info.Device, "compute_cap": e.info.ComputeCap, "driver": e.info.DriverVersion,
		"date": time.Now().UTC().Format(time.RFC3339), "commit": devCommit(), "nvcc": e.nvcc.Version, "arch": e.arch,
		"source_hash": kernels.SDPASource().Hash, "command": strings.Join(os.Args, " "), "torch_command": strings.Join(torchCmd, " "),
		"torch": torch, "torch_error": torchErr, "rows": rows,
	})
	t.Logf("\n%s", md.String())
	if torchErr != "" {
		t.Errorf("PyTorch comparison: %s", torchErr)
	}
}

// TestDeviceReferenceMatchesTorch checks the worker's fp32 reference against
// PyTorch's math SDPA in fp64 on the same rounded inputs.
func TestDeviceReferenceMatchesTorch(t *testing.T) {
	devRequireHeavy(t)
	e := devSetup(t)
	script := devRepoFile(t, "bench/torch_sdpa.py")
	cases := []struct {
		shape, dtype string
		causal       bool
		seed         string
	}{
		{"1x8x512x64", "fp16", false, "1"},
		{"2x3x77x128", "bf16", false, "2"},
		{"1x4x300x64", "fp16", true, "3"},
		{"1x2x1000x64", "bf16", true, "4"},
	}
	var dirs []string
	for _, c := range cases {
		dir := filepath.Join(t.TempDir(), strings.Join([]string{c.shape, c.dtype, strconv.FormatBool(c.causal)}, "-"))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		args := []string{"--dump-ref", dir, "--shape", c.shape, "--dtype", c.dtype, "--seed", c.seed}
		if c.causal {
			args = append(args, "--causal")
		}
		if out, err := exec.Command(e.bin, args...).CombinedOutput(); err != nil {
			t.Fatalf("worker %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		dirs = append(dirs, dir)
	}
	out, err := exec.Command("python3", append([]string{script, "--json", "--check-ref"}, dirs...)...).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("torch_sdpa.py --check-ref: %v\n%s", err, ee.Stderr)
		}
		t.Fatal(err)
	}
	var got struct {
		Checks []struct {
			Dir       string  `json:"dir"`
			MaxAbsErr float64 `json:"max_abs_err"`
			RefMaxAbs float64 `json:"ref_max_abs"`
		} `json:"checks"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("reading %s: %v", out, err)
	}
	if len(got.Checks) != len(dirs) {
		t.Fatalf("%d checks for %d dumps", len(got.Checks), len(dirs))
	}
	for _, c := range got.Checks {
		t.Logf("%s: max abs err %.3g (reference max |o| %.3g)", filepath.Base(c.Dir), c.MaxAbsErr, c.RefMaxAbs)
		if !(c.MaxAbsErr < 1e-5) || !(c.RefMaxAbs > 0) {
			t.Errorf("%s: the reference is %.3g from PyTorch's fp64 math SDPA, want < 1e-5", filepath.Base(c.Dir), c.MaxAbsErr)
		}
	}
	devWriteJSON(t, filepath.Join(devEvidenceDir(t), "reference-vs-torch.json"), map[string]any{
		"gpu": e.info.Device, "date": time.Now().UTC().Format(time.RFC3339), "commit": devCommit(), "checks": got.Checks,
	})
}

// TestDevCoverSelect checks, without a GPU, that the sweep's selection
// covers every knob value a valid config can have, without duplicates.
func TestDevCoverSelect(t *testing.T) {
	target, err := kernels.TargetFor("sm_89")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []int{64, 128} {
		sp, err := kernels.SDPASpace(space.Problem{Family: kernels.DefaultFamily, Shapes: []space.Shape{{B: 1, H: 1, S: 128, D: d}}, Dtype: "fp16"}, target)
		if err != nil {
			t.Fatal(err)
		}
		valid := sp.ValidConfigs()
		for _, n := range []int{1, 40} {
			got := devCoverSelect(valid, n, 7)
			seen := map[string]bool{}
			have := map[string]bool{}
			for _, c := range got {
				if seen[c.Key()] {
					t.Errorf("D=%d n=%d: %s chosen twice", d, n, c.Key())
				}
				seen[c.Key()] = true
				for k, v := range c {
					have[k+"="+v] = true
				}
			}
			for _, c := range valid {
				for k, v := range c {
					if !have[k+"="+v] {
						t.Errorf("D=%d n=%d: no chosen config has %s=%s", d, n, k, v)
					}
				}
			}
			if n > len(got) && len(got) < len(valid) {
				t.Errorf("D=%d: %d chosen, want %d", d, len(got), n)
			}
			t.Logf("D=%d n=%d: %d configs of %d valid", d, n, len(got), len(valid))
		}
	}
}
