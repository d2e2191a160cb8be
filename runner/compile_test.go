package runner

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"evotune/kernels"
	"evotune/space"
)

// fakeNVCCScript is a stand-in for nvcc driven by the flags it is given:
// -DMODE=ok writes the cubin and a ptxas report, -DMODE=fail prints a
// compile error, -DMODE=hang starts a child that writes its pid and
// sleeps. Every run appends a line to $dir/calls.
const fakeNVCCScript = `#!/bin/sh
dir=$(dirname "$0")
echo run >> "$dir/calls"
out=""; mode=ok; src=""
while [ $# -gt 0 ]; do
  case "$1" in
    -o) out="$2"; shift ;;
    -DMODE=*) mode="${1#-DMODE=}" ;;
    -DSLEEP=*) sleep "${1#-DSLEEP=}" ;;
    *.cu) src="$1" ;;
  esac
  shift
done
case "$mode" in
  ok)
    cat "$src" > "$out"
    echo "ptxas info    : Compiling entry function 'sdpa_fwd' for 'sm_89'" >&2
    echo "ptxas info    : Function properties for sdpa_fwd" >&2
    echo "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads" >&2
    echo "ptxas info    : Used 96 registers, 384 bytes cmem[0]" >&2 ;;
  fail)
    echo "$src(7): error: identifier \"oops\" is undefined" >&2
    echo "$src(9): warning: variable \"x\" was declared but never referenced" >&2
    echo "1 error detected in the compilation of \"$src\"." >&2
    exit 2 ;;
  hang)
    sh -c 'echo $$ > "'"$dir"'/child.pid"; exec sleep 60' &
    wait ;;
esac
`

func fakePool(t *testing.T, cache *Cache, jobs int, timeout time.Duration) (*CompilePool, string) {
	t.Helper()
	dir := t.TempDir()
	nvcc := filepath.Join(dir, "nvcc")
	if err := os.WriteFile(nvcc, []byte(fakeNVCCScript), 0o755); err != nil {
		t.Fatal(err)
	}
	p, err := NewCompilePool(CompileOptions{
		NVCC:   NVCC{Path: nvcc, Version: "0.0.1"},
		Arch:   "sm_89",
		Source: kernels.Source{Name: "k.cu", Files: map[string][]byte{"k.cu": []byte("kernel source")}, Hash: "0123456789abcdef0123"},
		Args: func(arch string, flags []string, srcDir, srcName, out string) []string {
			return append(append([]string{"-arch=" + arch}, flags...), "-o", out, filepath.Join(srcDir, srcName))
		},
		WorkDir: filepath.Join(dir, "work"),
		Cache:   cache,
		Jobs:    jobs,
		Timeout: timeout,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p, dir
}

func calls(t *testing.T, dir string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "calls"))
	if errors.Is(err, os.ErrNotExist) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "run")
}

func TestCompilePoolOKAndCached(t *testing.T) {
	cache := openCache(t, t.TempDir(), 0)
	p, dir := fakePool(t, cache, 2, time.Minute)
	ctx := context.Background()
	flags := []string{"-DMODE=ok", "-DBLOCK=64"}
	first, err := p.Compile(ctx, flags)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Release()
	if first.Cached || first.CompileSec <= 0 {
		t.Errorf("first compile: cached %v, %.3fs", first.Cached, first.CompileSec)
	}
	if b, err := os.ReadFile(first.Path); err != nil || string(b) != "kernel source" {
		t.Errorf("cubin = %q, %v (the source was not written where nvcc reads it)", b, err)
	}
	rep, err := ParsePtxas(first.Ptxas)
	if k, ok := rep.Kernel("sdpa_fwd"); err != nil || !ok || k.Registers != 96 {
		t.Errorf("ptxas text not kept: %q", first.Ptxas)
	}
	second, err := p.Compile(ctx, flags)
	if err != nil {
		t.Fatal(err)
	}
	defer second.Release()
	if !second.Cached || second.Ptxas != first.Ptxas || second.Path != first.Path {
		t.Errorf("second compile not served from the cache: %+v", second)
	}
	if n := calls(t, dir); n != 1 {
		t.Errorf("nvcc ran %d times for one config, want 1", n)
	}
	other, err := p.Compile(ctx, []string{"-DMODE=ok", "-DBLOCK=128"})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Release()
	if other.Cached || calls(t, dir) != 2 {
		t.Error("a different config was served from the cache")
	}
}

func TestCompilePoolError(t *testing.T) {
	p, _ := fakePool(t, nil, 1, time.Minute)
	_, err := p.Compile(context.Background(), []string{"-DMODE=fail"})
	var ce *CompileError
	if !errors.As(err, &ce) {
		t.Fatalf("err = %v, want a *CompileError", err)
	}
	if ce.Timeout {
		t.Error("a compile error marked as a timeout")
	}
	want := `k.cu(7): error: identifier "oops" is undefined`
	if ce.Reason != want {
		t.Errorf("reason = %q, want %q", ce.Reason, want)
	}
	if !strings.Contains(ce.Output, "warning") {
		t.Error("full output not kept")
	}
}

func TestCompilePoolTimeoutKillsGroup(t *testing.T) {
	p, dir := fakePool(t, nil, 1, 500*time.Millisecond)
	start := time.Now()
	_, err := p.Compile(context.Background(), []string{"-DMODE=hang"})
	var ce *CompileError
	if !errors.As(err, &ce) || !ce.Timeout {
		t.Fatalf("err = %v, want a timeout *CompileError", err)
	}
	if d := time.Since(start); d > 4*time.Second {
		t.Errorf("timeout took %v", d)
	}
	assertChildGone(t, dir)
}

func TestCompilePoolCancelKillsGroup(t *testing.T) {
	p, dir := fakePool(t, nil, 1, time.Minute)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for range 100 {
			if b, _ := os.ReadFile(filepath.Join(dir, "child.pid")); strings.HasSuffix(string(b), "\n") {
				break // the child is running and its pid is whole
			}
			time.Sleep(20 * time.Millisecond)
		}
		cancel()
	}()
	if _, err := p.Compile(ctx, []string{"-DMODE=hang"}); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	assertChildGone(t, dir)
}

// assertChildGone checks that the grandchild the fake nvcc started died
// with it (the process group was killed, not only nvcc).
func assertChildGone(t *testing.T, dir string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "child.pid"))
	if err != nil {
		t.Fatalf("fake nvcc did not start its child: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	for range 100 {
		if syscall.Kill(pid, 0) != nil {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	syscall.Kill(pid, syscall.SIGKILL)
	t.Errorf("nvcc's child %d outlived the kill", pid)
}

func TestCompilePoolBoundsParallelism(t *testing.T) {
	p, _ := fakePool(t, nil, 2, time.Minute)
	const n, each = 4, 300 * time.Millisecond
	start := time.Now()
	errs := make(chan error, n)
	for i := range n {
		go func() {
			c, err := p.Compile(context.Background(), []string{"-DSLEEP=0.3", "-DI=" + strconv.Itoa(i)})
			c.Release()
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	// Four 0.3 s compiles two at a time take at least two rounds.
	if d := time.Since(start); d < 2*each-50*time.Millisecond {
		t.Errorf("4 compiles with 2 jobs took %v: more than 2 ran at once", d)
	}
}

func TestCompileReason(t *testing.T) {
	tests := []struct {
		out, want string
	}{
		{"/w/src/sdpa.cu(3): error: a\n/w/src/sdpa.cu(4): error: b\nx(5): error: c\nx(6): error: d\n", "sdpa.cu(3): error: a; sdpa.cu(4): error: b; x(5): error: c"},
		{"nvcc fatal   : Unsupported gpu architecture 'sm_1'\n", "nvcc fatal   : Unsupported gpu architecture 'sm_1'"},
		{"something odd\nlast words\n\n", "last words"},
		{"", "exit status 1"},
	}
	for _, tt := range tests {
		if got := compileReason(tt.out, "/w/src", errors.New("exit status 1")); got != tt.want {
			t.Errorf("compileReason(%q) = %q, want %q", tt.out, got, tt.want)
		}
	}
}

// TestCompileSDPAGate compiles real configs of the SDPA family with the
// nvcc found here for sm_89 and takes them through the pipeline's gates up
// to the GPU, which a fake stands for: constraints, nvcc, ptxas figures of
// the real kernel, and the launch plan's register and shared memory fit.
func TestCompileSDPAGate(t *testing.T) {
	path := testNVCC(t)
	ctx := context.Background()
	nv, err := NVCCVersion(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	target, err := kernels.TargetFor("sm_89")
	if err != nil {
		t.Fatal(err)
	}
	prob := space.Problem{Family: kernels.DefaultFamily, Shapes: []space.Shape{{B: 1, H: 8, S: 512, D: 64}}, Dtype: "fp16"}
	sp, err := kernels.SDPASpace(prob, target)
	if err != nil {
		t.Fatal(err)
	}
	src := kernels.SDPASource()
	pool, err := NewCompilePool(CompileOptions{NVCC: NVCC{Path: path, Version: nv}, Arch: "sm_89", Source: src, Jobs: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	dev := &fakeDevice{}
	p, err := NewPipeline(PipelineOptions{
		Space: sp, Problem: prob, Target: target, Compiler: pool,
		GPUs: []GPU{{Device: dev, NVMLIndex: -1}},
		Gate: DefaultGateLimits(target.SharedPerBlock),
		Env:  space.Env{Arch: "sm_89", NVCC: nv, SourceHash: src.Hash},
	})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	configs := []space.Config{sp.Default(), sp.Sample(rng), sp.Sample(rng)}
	for _, c := range configs {
		r := p.Evaluate(ctx, c)
		t.Logf("%s: %s at %s %q, ptxas %+v, %.1fs", c.Key(), r.Status, r.Gate, r.Reason, r.Ptxas, r.Cost.CompileSec)
		switch {
		case r.Status == space.StatusCompileError || r.Status == space.StatusTimeout:
			t.Errorf("%s: %s: %s", c.Key(), r.Status, r.Reason)
		case r.Ptxas == nil || r.Ptxas.Registers <= 0:
			t.Errorf("%s: no ptxas figures for sdpa_fwd", c.Key())
		case r.Status != space.StatusOK && r.Status != space.StatusPtxasReject:
			t.Errorf("%s: %s at %s: %s (the fake GPU accepts everything)", c.Key(), r.Status, r.Gate, r.Reason)
		}
		if c.Key() == sp.Default().Key() && !r.OK() {
			t.Errorf("the family's default config does not pass the gates on sm_89: %s", r.Reason)
		}
	}
	for _, req := range dev.requests() {
		if !strings.HasSuffix(req.Cubin, ".cubin") || len(req.Plan.Launches) == 0 {
			t.Errorf("GPU request without a cubin or a plan: %+v", req)
		}
	}
}
