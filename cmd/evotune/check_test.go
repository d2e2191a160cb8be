package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"evotune/internal/testtool"
	"evotune/runner"
)

// TestCheckCompileOnly compiles one config for sm_89 with the real nvcc and
// checks what each gate printed; the cubin must exist where it says.
func TestCheckCompileOnly(t *testing.T) {
	if _, err := runner.FindNVCC(t.Context(), "", os.Getenv("CUDA_HOME")); err != nil {
		testtool.Missing(t, fmt.Sprintf("no nvcc on this machine (%v)", err), "installs it")
	}
	cache := t.TempDir()
	stdout, stderr, code := runCLI(t, "check", "--compile-only", "--arch", "sm_89", "--cache", cache, "--config", "block_m=128,warps=8,stages=3")
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
	}
	for _, want := range []string{"constraint: ok\n", "compile:    ok, nvcc ", "-DSDPA_BLOCK_M=128 ", "-DSDPA_WARPS=8 ", "-DSDPA_STAGES=3 ",
		"ptxas:      sdpa_fwd: ", "ptxas gate: ok"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
	_, path, ok := strings.Cut(stdout, "cubin:      ")
	path, _, _ = strings.Cut(path, "\n")
	if !ok || !strings.HasPrefix(path, cache) {
		t.Fatalf("no cubin path in the cache directory in:\n%s", stdout)
	}
	if fi, err := os.Stat(path); err != nil || fi.Size() == 0 {
		t.Errorf("cubin %s: %v", filepath.Base(path), err)
	}
}

func TestCheckErrors(t *testing.T) {
	cases := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"check", "--config", "bogus=1"}, exitUsage, `evotune: check: --config "bogus=1": unknown knob "bogus"`},
		{[]string{"check", "--config", "block_m=7"}, exitUsage, `evotune: check: --config "block_m=7": `},
		{[]string{"check", "--arch", "sm_70", "--compile-only"}, exitUsage, `evotune: check: --arch: architecture "sm_70"`},
		{[]string{"check", "--compile-only", "--arch", "sm_89", "--nvcc", "testdata/no-such-nvcc"}, exitError, `evotune: check --nvcc: `},
		{[]string{"check", "--compile-only", "--arch", "sm_89", "--cache", "main.go/cache"}, exitError, `evotune: check --cache: `},
		// wgmma is a knob of sm_90's fp8 space only: named for sm_89 it is
		// unknown, and with no --arch it is read (and the run goes on to
		// look for nvcc).
		{[]string{"check", "--dtype", "fp8", "--config", "wgmma=qk", "--arch", "sm_89"}, exitUsage, `evotune: check: --config "wgmma=qk": unknown knob "wgmma"`},
		{[]string{"check", "--dtype", "fp8", "--config", "wgmma=qk", "--compile-only", "--arch", "sm_90", "--nvcc", "testdata/no-such-nvcc"}, exitError, `evotune: check --nvcc: `},
		{[]string{"check", "--dtype", "fp8", "--config", "wgmma=qk", "--nvcc", "testdata/no-such-nvcc"}, exitError, `evotune: check --nvcc: `},
		{[]string{"check", "--dtype", "fp8", "--config", "wgmma=bogus"}, exitUsage, `evotune: check: --config "wgmma=bogus": knob wgmma: value "bogus" not in [off qk]`},
		{[]string{"check", "--compile-only", "--config", "ws=0,producer_warps=2", "--arch", "sm_89"}, exitError, "evotune: check: block_m=64,block_n=64,fast_exp=1,kv_layout=swizzle,min_blocks_per_sm=1,persistent=0,producer_warps=2,q_in_regs=1,split_kv=1,stages=2,warps=4,ws=0 stopped at the constraint gate"},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			_, stderr, code := runCLI(t, tc.args...)
			if code != tc.code || !strings.HasPrefix(stderr, tc.want) || strings.Count(stderr, "\n") != 1 {
				t.Errorf("exit %d, stderr %q; want exit %d and one line starting %q", code, stderr, tc.code, tc.want)
			}
		})
	}
}
