package bundle

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"evotune/internal/testtool"
	"evotune/kernels"
	"evotune/space"
)

// testBundle is a two-shape fp16 bundle of the embedded source: the
// overall best a split-kv config, 2x8x512x64 tuned to a persistent one.
func testBundle(t *testing.T, dtype string) *Bundle {
	t.Helper()
	prob := space.Problem{Family: kernels.DefaultFamily, Dtype: dtype,
		Shapes: []space.Shape{{B: 1, H: 8, S: 512, D: 64}, {B: 2, H: 8, S: 512, D: 64}}}
	arch := "sm_80"
	if dtype == "fp8" {
		arch = "sm_89"
	}
	cfg := configsOf(t, prob, arch)
	best := cfg("split_kv=4,block_m=64,warps=4")
	other := cfg("persistent=1,block_m=128,warps=8,block_n=64,stages=3")
	b, err := New("tuned_sdpa", prob, kernels.SDPASource(), arch, best,
		[]ShapeBest{{Shape: prob.Shapes[0], Config: best}, {Shape: prob.Shapes[1], Config: other}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// configsOf returns a reader of k=v,... texts into bundle configs of prob's
// space on arch.
func configsOf(t *testing.T, prob space.Problem, arch string) func(kv string) Config {
	t.Helper()
	tg, err := kernels.TargetFor(arch)
	if err != nil {
		t.Fatal(err)
	}
	family, err := kernels.FamilyOf(prob.Family)
	if err != nil {
		t.Fatal(err)
	}
	sp, err := family.SpaceFor(prob, tg)
	if err != nil {
		t.Fatal(err)
	}
	return func(kv string) Config {
		t.Helper()
		c, err := sp.Parse(kv)
		if err != nil {
			t.Fatalf("%s: %v", kv, err)
		}
		flags, err := sp.Flags(c)
		if err != nil {
			t.Fatal(err)
		}
		return Config{Key: c.Key(), Config: c, Flags: flags}
	}
}

func TestNewDeduplicates(t *testing.T) {
	b := testBundle(t, "fp16")
	if len(b.Configs) != 2 {
		t.Fatalf("%d configs, want 2 (the best is also 1x8x512x64's)", len(b.Configs))
	}
	if len(b.Routes) != 2 || b.Routes[0].Config != 0 || b.Routes[1].Config != 1 {
		t.Errorf("routes %+v, want 1x8x512x64 to config 0 and 2x8x512x64 to config 1", b.Routes)
	}
	if _, err := New("not-c", b.Problem, b.Source, "", b.Configs[0], nil); err == nil {
		t.Error("New accepted a name that is not a C identifier")
	}
	other := b.Problem
	other.Family = "nope"
	if _, err := New("tuned", other, b.Source, "", b.Configs[0], nil); err == nil || !strings.Contains(err.Error(), kernels.DefaultFamily) {
		t.Errorf("New for family nope = %v; want an error naming the families there are", err)
	}
}

func TestFiles(t *testing.T) {
	b := testBundle(t, "fp16")
	files, err := b.Files()
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(Paths(files), " ")
	want := "tuned_sdpa_kernel/sdpa.cu tuned_sdpa_kernel/sdpa_params.h tuned_sdpa_plan.h tuned_sdpa_launch.h tuned_sdpa_launch.cu"
	if got != want {
		t.Fatalf("files %q, want %q", got, want)
	}
	src := kernels.SDPASource()
	for _, f := range files {
		if name, ok := strings.CutPrefix(f.Path, "tuned_sdpa_kernel/"); ok {
			if string(f.Data) != string(src.Files[name]) {
				t.Errorf("%s is not the source as measured", f.Path)
			}
			continue
		}
		if !strings.Contains(string(f.Data[:min(len(f.Data), 400)]), Marker) {
			t.Errorf("%s lacks the marker %q in its first lines", f.Path, Marker)
		}
	}
	cu := string(files[4].Data)
	for _, want := range []string{
		"#define sdpa tuned_sdpa_c0\n#define sdpa_fwd tuned_sdpa_c0_fwd\n",
		"#define sdpa tuned_sdpa_c1\n",
		"#define SDPA_SPLIT_KV 4\n",
		"#undef SDPA_SPLIT_KV\n",
		"#undef SDPA_FP8\n", // a default of the kernel's own, not a flag
		"{2, 8, 512, 1},",
		"static_assert(tuned_sdpa_c1::kThreads == 256",
		"hash " + src.Hash,
	} {
		if !strings.Contains(cu, want) {
			t.Errorf("tuned_sdpa_launch.cu lacks %q", want)
		}
	}
	h := string(files[3].Data)
	if !strings.Contains(h, "cudaError_t tuned_sdpa_forward(const void* q, const void* k, const void* v, void* o, int b, int h, int s, int d, float scale, void* workspace, size_t workspace_bytes, cudaStream_t stream);") {
		t.Errorf("tuned_sdpa_launch.h declares another forward:\n%s", h)
	}
	f8, err := testBundle(t, "fp8").Files()
	if err != nil {
		t.Fatal(err)
	}
	if h := string(f8[3].Data); !strings.Contains(h, "float scale, float q_scale, float k_scale, float v_scale, void* workspace") {
		t.Errorf("the fp8 launcher takes no dequantisation scales:\n%s", h)
	}
	if cu := string(f8[4].Data); !strings.Contains(cu, "__CUDACC_VER_MINOR__ < 4") || !strings.Contains(cu, "p.q_scale = q_scale;") {
		t.Error("the fp8 launcher neither checks nvcc nor passes the scales")
	}
	i8, err := testBundle(t, "int8").Files()
	if err != nil {
		t.Fatal(err)
	}
	h8 := string(i8[3].Data)
	for _, want := range []string{
		"float scale, const float* q_row_scale, const float* k_row_scale, const float* v_col_scale, void* workspace",
		"[b, h, s] for Q's and K's rows (tokens) and [b, h, d]\n// for V's columns",
		"int8 bytes (int8_t)",
		"#define TUNED_SDPA_INT8 1\n",
		"#define TUNED_SDPA_FP8 0\n",
		`#define TUNED_SDPA_OUT_DTYPE "fp16"`,
		"nvcc 11.8 or newer",
	} {
		if !strings.Contains(h8, want) {
			t.Errorf("the int8 launch header lacks %q:\n%s", want, h8)
		}
	}
	cu8 := string(i8[4].Data)
	for _, want := range []string{
		"if (q_row_scale == nullptr || k_row_scale == nullptr || v_col_scale == nullptr) return cudaErrorInvalidValue;",
		"p.q_row_scale = q_row_scale;\n    p.k_row_scale = k_row_scale;\n    p.v_col_scale = v_col_scale;\n",
		"#define SDPA_INT8 1\n",
	} {
		if !strings.Contains(cu8, want) {
			t.Errorf("the int8 launcher lacks %q", want)
		}
	}
	if strings.Contains(cu8, "__CUDACC_VER_MINOR__") || strings.Contains(cu8, "q_scale = q_scale") {
		t.Error("the int8 launcher asks for fp8's nvcc or passes fp8's scales")
	}
	if h := string(files[3].Data); strings.Contains(h, "row_scale") || !strings.Contains(h, "#define TUNED_SDPA_INT8 0\n") {
		t.Error("the fp16 launch header takes int8's scales or says it is int8")
	}
}

// writeBundle writes b's files under dir.
func writeBundle(t *testing.T, b *Bundle, dir string) {
	t.Helper()
	files, err := b.Files()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		path := filepath.Join(dir, filepath.FromSlash(f.Path))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, f.Data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func lookNVCC(t *testing.T) string {
	t.Helper()
	return testtool.LookPath(t, "nvcc", "the bundle cannot be compiled here", "installs it")
}

// hostCheck calls the launcher as a user's program would, on a machine with
// or without a GPU: every bad argument is refused before anything launches
// (a launch without a GPU would fail otherwise), and the routes pick the
// config tuned for each shape.
const hostCheck = `#include "tuned_sdpa_launch.h"
#include <stdio.h>
#include <string.h>

static int failures = 0;
static void expect(const char* what, cudaError_t got, cudaError_t want) {
    if (got != want) {
        printf("FAIL %s: %s, want %s\n", what, cudaGetErrorName(got), cudaGetErrorName(want));
        failures++;
    }
}
static void expect_key(int b, int h, int s, const char* want) {
    const char* got = tuned_sdpa_config_key(b, h, s, 64);
    if (got == NULL || strcmp(got, want) != 0) {
        printf("FAIL config for %dx%dx%d: %s, want %s\n", b, h, s, got ? got : "(null)", want);
        failures++;
    }
}

int main(int argc, char** argv) {
    if (argc != 3) return 2;
    alignas(16) static char buf[4][64];
    void* q = buf[0]; void* k = buf[1]; void* v = buf[2]; void* o = buf[3];
    expect("null q", tuned_sdpa_forward(NULL, k, v, o, 1, 8, 512, 64, 0.125f, NULL, 0, 0), cudaErrorInvalidValue);
    expect("null o", tuned_sdpa_forward(q, k, v, NULL, 1, 8, 512, 64, 0.125f, NULL, 0, 0), cudaErrorInvalidValue);
    expect("misaligned k", tuned_sdpa_forward(q, buf[1] + 2, v, o, 1, 8, 512, 64, 0.125f, NULL, 0, 0), cudaErrorInvalidValue);
    expect("head dim 128", tuned_sdpa_forward(q, k, v, o, 1, 8, 512, 128, 0.125f, NULL, 0, 0), cudaErrorInvalidValue);
    expect("s = 0", tuned_sdpa_forward(q, k, v, o, 1, 8, 0, 64, 0.125f, NULL, 0, 0), cudaErrorInvalidValue);
    expect("b = -1", tuned_sdpa_forward(q, k, v, o, -1, 8, 512, 64, 0.125f, NULL, 0, 0), cudaErrorInvalidValue);
    expect("nan scale", tuned_sdpa_forward(q, k, v, o, 1, 8, 512, 64, 0.0f / 0.0f, NULL, 0, 0), cudaErrorInvalidValue);
    if (tuned_sdpa_config_key(1, 8, 512, 128) != NULL) { printf("FAIL a config for D=128\n"); failures++; }
    expect_key(1, 8, 512, argv[1]);
    expect_key(2, 8, 512, argv[2]);
    expect_key(3, 5, 77, argv[1]);
    if (tuned_sdpa_workspace_bytes(1, 8, 512, 64) != (size_t)(4 * 8 * 512 * 64 * 4 + 4 * 8 * 512 * 4)) {
        printf("FAIL workspace of 1x8x512x64: %zu\n", tuned_sdpa_workspace_bytes(1, 8, 512, 64));
        failures++;
    }
    printf("%d failures\n", failures);
    return failures != 0;
}
`

// TestBundleCompilesAndRefuses compiles the launcher with nvcc as a main
// build would, links a host program against it and runs it: no GPU is
// needed for the checks it makes.
func TestBundleCompilesAndRefuses(t *testing.T) {
	nvcc := lookNVCC(t)
	b := testBundle(t, "fp16")
	dir := t.TempDir()
	writeBundle(t, b, dir)
	if err := os.WriteFile(filepath.Join(dir, "check.cu"), []byte(hostCheck), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "check")
	cmd := exec.Command(nvcc, "-std=c++17", "-O3", "-arch=sm_80", "-I", dir, "-o", bin,
		filepath.Join(dir, "tuned_sdpa_launch.cu"), filepath.Join(dir, "check.cu"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, out)
	}
	out, err := exec.Command(bin, b.Configs[0].Key, b.Configs[1].Key).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "0 failures") {
		t.Fatalf("the host check: %v\n%s", err, out)
	}
}

// TestFP8BundleCompiles compiles an fp8 launcher, which takes the
// dequantisation scales, with an nvcc that builds E4M3 mma ($EVOTUNE_FP8_NVCC,
// as the kernels' fp8 compile tests), for both fp8 architectures.
func TestFP8BundleCompiles(t *testing.T) {
	compileFP8Bundle(t, testBundle(t, "fp8"))
}

// compileFP8Bundle compiles the launcher of b (named tuned_sdpa) for sm_89
// and sm_90 with $EVOTUNE_FP8_NVCC, or skips.
func compileFP8Bundle(t *testing.T, b *Bundle) {
	t.Helper()
	nvcc := os.Getenv("EVOTUNE_FP8_NVCC")
	if nvcc == "" {
		t.Skipf("EVOTUNE_FP8_NVCC is not set: an fp8 bundle needs nvcc %s or newer", kernels.FP8MinNVCC)
	}
	dir := t.TempDir()
	writeBundle(t, b, dir)
	cmd := exec.Command(nvcc, "-std=c++17", "-O3", "-gencode=arch=compute_89,code=sm_89", "-gencode=arch=compute_90,code=sm_90",
		"-c", "-o", filepath.Join(dir, "launch.o"), filepath.Join(dir, "tuned_sdpa_launch.cu"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, out)
	}
}

// TestInt8BundleCompiles compiles an int8 launcher, which takes the row and
// column scale arrays, for every architecture the tuner targets with the
// nvcc on PATH: IMMA needs no newer nvcc than 11.8.
func TestInt8BundleCompiles(t *testing.T) {
	compileForEveryArch(t, "int8")
}

// TestBF16BundleCompiles compiles a bf16 launcher for every architecture
// the tuner targets, with the nvcc on PATH (11.8 in CI).
func TestBF16BundleCompiles(t *testing.T) {
	compileForEveryArch(t, "bf16")
}

// compileForEveryArch compiles a launcher of dtype for every architecture
// the tuner targets (sm_80, 86, 89, 90) with the nvcc on PATH.
func compileForEveryArch(t *testing.T, dtype string) {
	t.Helper()
	nvcc := lookNVCC(t)
	dir := t.TempDir()
	writeBundle(t, testBundle(t, dtype), dir)
	args := []string{"-std=c++17", "-O3"}
	for _, a := range []string{"80", "86", "89", "90"} {
		args = append(args, "-gencode=arch=compute_"+a+",code=sm_"+a)
	}
	args = append(args, "-c", "-o", filepath.Join(dir, "launch.o"), filepath.Join(dir, "tuned_sdpa_launch.cu"))
	cmd := exec.Command(nvcc, args...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, out)
	}
}

// TestWgmmaBundle exports an fp8 bundle tuned on sm_90 whose second config
// runs wgmma: the header says the build needs sm_90a (TUNED_SDPA_SM90A 1,
// which examples/device-check.sh and examples/torch/check.py read), the
// bundle without it says 0, and with $EVOTUNE_FP8_NVCC the launcher
// compiles for sm_90a as the header says and is refused, naming sm_90a, for
// plain sm_90 and for -arch=sm_90a (whose -c adds a compute_90 pass).
func TestWgmmaBundle(t *testing.T) {
	prob := space.Problem{Family: kernels.DefaultFamily, Dtype: "fp8",
		Shapes: []space.Shape{{B: 1, H: 8, S: 512, D: 64}, {B: 4, H: 16, S: 2048, D: 64}}}
	cfg := configsOf(t, prob, "sm_90")
	plain := cfg("block_m=64,warps=4,wgmma=off")
	wg := cfg("block_m=128,warps=8,stages=3,pv_fp8=0,wgmma=qk")
	header := func(b *Bundle) string {
		t.Helper()
		files, err := b.Files()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if strings.HasSuffix(f.Path, "_launch.h") {
				return string(f.Data)
			}
		}
		t.Fatal("no launch header")
		return ""
	}
	b, err := New("tuned_sdpa", prob, kernels.SDPASource(), "sm_90", plain,
		[]ShapeBest{{Shape: prob.Shapes[0], Config: plain}, {Shape: prob.Shapes[1], Config: wg}})
	if err != nil {
		t.Fatal(err)
	}
	if h := header(b); !strings.Contains(h, "#define TUNED_SDPA_SM90A 1 ") || !strings.Contains(h, "-gencode arch=compute_90a,code=sm_90a") {
		t.Errorf("a bundle with a wgmma config does not say it needs sm_90a:\n%s", h)
	}
	only, err := New("tuned_sdpa", prob, kernels.SDPASource(), "sm_90", plain, nil)
	if err != nil {
		t.Fatal(err)
	}
	if h := header(only); !strings.Contains(h, "#define TUNED_SDPA_SM90A 0 ") {
		t.Errorf("a bundle without wgmma says it needs sm_90a")
	}
	nvcc := os.Getenv("EVOTUNE_FP8_NVCC")
	if nvcc == "" {
		t.Skipf("EVOTUNE_FP8_NVCC is not set: the compile needs nvcc %s or newer", kernels.FP8MinNVCC)
	}
	dir := t.TempDir()
	writeBundle(t, b, dir)
	compileSM90a(t, nvcc, filepath.Join(dir, "tuned_sdpa_launch.cu"), "-arch=sm_90", "-arch=sm_90a")
}

// compileSM90a compiles a launcher that needs sm_90a: for sm_90a it must
// build, and for each of refused it must be refused naming sm_90a.
func compileSM90a(t *testing.T, nvcc, launcher string, refused ...string) {
	t.Helper()
	out := filepath.Join(filepath.Dir(launcher), "launch.o")
	for _, arch := range append([]string{"-gencode=arch=compute_90a,code=sm_90a"}, refused...) {
		cmd := exec.Command(nvcc, "-std=c++17", "-O3", arch, "-c", "-o", out, launcher)
		log, err := cmd.CombinedOutput()
		if ok := !slices.Contains(refused, arch); ok && err != nil {
			t.Errorf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, log)
		} else if !ok && (err == nil || !strings.Contains(string(log), "needs sm_90a")) {
			t.Errorf("%s: want the build refused naming sm_90a, got %v\n%s", arch, err, log)
		}
	}
}

// TestHopperBundle exports an sdpa-hopper bundle of two configs (each
// shape's own): its launcher runs V's transpose and then the forward from
// each config's renamed entry points, the header says the build needs
// sm_90a, and with $EVOTUNE_FP8_NVCC the launcher compiles for sm_90a (the
// kernels' threads and shared memory checked against the plan header by
// static_assert) and is refused for plain sm_90.
func TestHopperBundle(t *testing.T) {
	prob := space.Problem{Family: "sdpa-hopper", Dtype: "fp8",
		Shapes: []space.Shape{{B: 4, H: 16, S: 2048, D: 64}, {B: 1, H: 8, S: 512, D: 64}}}
	cfg := configsOf(t, prob, "sm_90")
	best := cfg("stages=6")
	short := cfg("ncw=1,pingpong=0,pregs=24,persistent=0")
	b, text := hopperBundle(t, prob, best, []ShapeBest{{Shape: prob.Shapes[0], Config: best}, {Shape: prob.Shapes[1], Config: short}})
	for file, wants := range map[string][]string{
		"tuned_attn_launch.cu": {"#define fa8h tuned_attn_c1\n#define fa8h_fwd tuned_attn_c1_fwd\n#define fa8h_vt tuned_attn_c1_vt\n",
			"{reinterpret_cast<const void*>(&tuned_attn_c0_fwd), reinterpret_cast<const void*>(&tuned_attn_c0_vt)}",
			"static_assert(tuned_attn_c0::kThreads == 384", "static_assert(tuned_attn_c1::kThreads == 256",
			"err = cudaLaunchKernel(fns[1], dim3(static_cast<unsigned>(pl.vt_grid_x)"},
		"tuned_attn_launch.h": {"#define TUNED_ATTN_SM90A 1 "},
		"tuned_attn_plan.h":   {"p->vt_threads = 256;", "struct tuned_attn_plan {"},
	} {
		for _, want := range wants {
			if !strings.Contains(text[file], want) {
				t.Errorf("%s lacks %q", file, want)
			}
		}
	}
	compileHopperBundle(t, b)
}

// hopperBundle makes the sm_90 bundle tuned_attn of prob's family from
// best and shapes, and returns it with its files' text by path.
func hopperBundle(t *testing.T, prob space.Problem, best Config, shapes []ShapeBest) (*Bundle, map[string]string) {
	t.Helper()
	return bundleText(t, "tuned_attn", prob, "sm_90", best, shapes)
}

// bundleText makes the bundle name of prob's family for arch from best and
// shapes, and returns it with its files' text by path.
func bundleText(t *testing.T, name string, prob space.Problem, arch string, best Config, shapes []ShapeBest) (*Bundle, map[string]string) {
	t.Helper()
	f, err := kernels.FamilyOf(prob.Family)
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(name, prob, f.Source(), arch, best, shapes)
	if err != nil {
		t.Fatal(err)
	}
	files, err := b.Files()
	if err != nil {
		t.Fatal(err)
	}
	text := map[string]string{}
	for _, f := range files {
		text[f.Path] = string(f.Data)
	}
	return b, text
}

// compileHopperBundle compiles b's launcher for sm_90a with
// $EVOTUNE_FP8_NVCC, or skips.
func compileHopperBundle(t *testing.T, b *Bundle) {
	t.Helper()
	nvcc := os.Getenv("EVOTUNE_FP8_NVCC")
	if nvcc == "" {
		t.Skipf("EVOTUNE_FP8_NVCC is not set: the compile needs nvcc %s or newer", kernels.FP8MinNVCC)
	}
	dir := t.TempDir()
	writeBundle(t, b, dir)
	compileSM90a(t, nvcc, filepath.Join(dir, "tuned_attn_launch.cu"), "-arch=sm_90")
}

// TestHopperBundleVTransposed: a bundle of a problem whose V comes
// transposed says so in its header (the layout and V_TRANSPOSED 1), its plan
// has no transpose launch and no workspace, and with $EVOTUNE_FP8_NVCC its
// launcher compiles for sm_90a.
func TestHopperBundleVTransposed(t *testing.T) {
	prob := space.Problem{Family: "sdpa-hopper", Dtype: "fp8", VTransposed: true,
		Shapes: []space.Shape{{B: 4, H: 16, S: 2048, D: 64}}}
	cfg := configsOf(t, prob, "sm_90")
	best := cfg("stages=4")
	b, text := hopperBundle(t, prob, best, []ShapeBest{{Shape: prob.Shapes[0], Config: best}})
	for file, wants := range map[string][]string{
		"tuned_attn_launch.h": {"#define TUNED_ATTN_V_TRANSPOSED 1 ", "v holds V^T, contiguous\n// [b, h, d, sp]"},
		"tuned_attn_plan.h":   {"p->vt_grid_x = 0;", "p->workspace_bytes = 0;"},
	} {
		for _, want := range wants {
			if !strings.Contains(text[file], want) {
				t.Errorf("%s lacks %q", file, want)
			}
		}
	}
	if strings.Contains(text["tuned_attn_plan.h"], "p->vt_threads = 256;") {
		t.Error("the plan has a transpose launch although V comes transposed")
	}
	compileHopperBundle(t, b)
}

// TestBundleVTransposed: an fp8 bundle of the first family whose V comes
// transposed says so in its header, every config's build defines
// SDPA_V_GIVEN 1 (the problem macro that makes the kernel read V^T), and
// with $EVOTUNE_FP8_NVCC its launcher compiles for both fp8 architectures.
func TestBundleVTransposed(t *testing.T) {
	prob := space.Problem{Family: kernels.DefaultFamily, Dtype: "fp8", VTransposed: true,
		Shapes: []space.Shape{{B: 1, H: 8, S: 512, D: 64}, {B: 2, H: 8, S: 512, D: 64}}}
	cfg := configsOf(t, prob, "sm_89")
	best := cfg("block_m=16,block_n=256,stages=3,pv_fp8=0")
	other := cfg("persistent=1,block_m=128,warps=8,block_n=64,stages=3")
	b, text := bundleText(t, "tuned_sdpa", prob, "sm_89", best,
		[]ShapeBest{{Shape: prob.Shapes[0], Config: best}, {Shape: prob.Shapes[1], Config: other}})
	if h := text["tuned_sdpa_launch.h"]; !strings.Contains(h, "#define TUNED_SDPA_V_TRANSPOSED 1 ") || !strings.Contains(h, "v holds V^T") {
		t.Errorf("the header does not say V comes transposed:\n%s", h)
	}
	if n := strings.Count(text["tuned_sdpa_launch.cu"], "#define SDPA_V_GIVEN 1"); n != 2 {
		t.Errorf("the launcher defines SDPA_V_GIVEN 1 for %d configs, want 2", n)
	}
	compileFP8Bundle(t, b)
}
