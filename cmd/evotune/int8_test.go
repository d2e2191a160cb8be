package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestInt8Problem checks that --dtype int8 names a tuning problem the family
// builds on every target architecture, sm_80 included (IMMA is Ampere's),
// with pv_accum as its one knob of its own and a bf16 output on request,
// and that int8's refusals are one line naming the flag.
func TestInt8Problem(t *testing.T) {
	count := func(args ...string) int { return spaceCount(t, args...) }
	fp16 := count()
	for _, arch := range []string{"sm_80", "sm_86", "sm_89", "sm_90"} {
		if n := count("--dtype", "int8", "--arch", arch); n == fp16 {
			t.Errorf("the int8 space on %s has as many configs as fp16's (%d): pv_accum did not reach the space", arch, n)
		}
	}
	count("--dtype", "int8", "--out-dtype", "bf16", "--arch", "sm_80")
	listing, _, _ := runCLI(t, "space", "--dtype", "int8", "--out-dtype", "bf16")
	if !strings.Contains(listing, "pv_accum") || strings.Contains(listing, "pv_fp8") {
		t.Errorf("the int8 space listing names pv_fp8 or lacks pv_accum:\n%s", listing)
	}
	if !strings.Contains(listing, "-DSDPA_INT8=1") || !strings.Contains(listing, "-DSDPA_OUT_BF16=1") {
		t.Errorf("the int8 space listing lacks its defines:\n%s", listing)
	}
	_, stderr, code := runCLI(t, "check", "--dtype", "int8", "--out-dtype", "int8")
	if want := `evotune: check: --out-dtype "int8": want fp16 or bf16`; code != exitUsage || !strings.HasPrefix(stderr, want) || strings.Count(stderr, "\n") != 1 {
		t.Errorf("exit %d, stderr %q; want exit %d and one line starting %q", code, stderr, exitUsage, want)
	}
}

// TestInt8TakesOldNVCC checks that int8 goes past the toolchain check with
// nvcc 11.8, where fp8 is refused: the nvcc is a script that reports release
// 11.8 and fails any compile, so int8 reaches the compile and fails there.
func TestInt8TakesOldNVCC(t *testing.T) {
	nvcc := filepath.Join(t.TempDir(), "nvcc")
	script := "#!/bin/sh\nif [ \"$1\" = --version ]; then\n" +
		"echo 'Cuda compilation tools, release 11.8, V11.8.89'\nexit 0\nfi\necho 'compile refused by the test' >&2\nexit 1\n"
	if err := os.WriteFile(nvcc, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	_, stderr, code := runCLI(t, "check", "--compile-only", "--arch", "sm_80", "--dtype", "int8", "--cache", t.TempDir(), "--nvcc", nvcc)
	if code == 0 || strings.Contains(stderr, "needs nvcc") || !strings.Contains(stderr, "stopped at the compile gate") {
		t.Errorf("int8 with nvcc 11.8: exit %d, stderr %q; want the compile reached and failed", code, stderr)
	}
}
