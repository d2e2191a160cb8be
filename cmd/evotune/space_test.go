package main

import (
	"strconv"
	"strings"
	"testing"
)

func TestSpaceGolden(t *testing.T) {
	cases := []struct {
		name string
		args []string
	}{
		{"space.txt", []string{"space"}},
		{"space-bf16-d128-sm90.txt", []string{"space", "--shape", "2x8x1024x128", "--dtype", "bf16", "--causal", "--arch", "sm_90"}},
		{"space-fp8-sm90.txt", []string{"space", "--dtype", "fp8", "--arch", "sm_90"}},
		// sdpa-hopper builds for sm_90 only, so that is its default.
		{"space-hopper-d128.txt", []string{"space", "--family", "sdpa-hopper", "--dtype", "fp8", "--shape", "4x16x2048x128"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			stdout, stderr, code := runCLI(t, tc.args...)
			if code != 0 || stderr != "" {
				t.Fatalf("exit %d, stderr %q", code, stderr)
			}
			golden(t, tc.name, stdout)
		})
	}
}

// TestSpaceCount checks that --count prints one integer, the valid size
// that the full listing reports.
func TestSpaceCount(t *testing.T) {
	stdout, stderr, code := runCLI(t, "space", "--count")
	if code != 0 || stderr != "" {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	n, err := strconv.Atoi(strings.TrimSuffix(stdout, "\n"))
	if err != nil || n <= 0 || strings.Count(stdout, "\n") != 1 {
		t.Fatalf("space --count printed %q, want one positive integer", stdout)
	}
	full, _, _ := runCLI(t, "space")
	if want := ", " + strconv.Itoa(n) + " valid\n"; !strings.HasSuffix(full, want) {
		t.Errorf("space listing does not end with %q", want)
	}
}

func TestSpaceErrors(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"space", "--arch", "sm_70"}, `evotune: space: --arch: architecture "sm_70": want one of sm_80, sm_86, sm_89, sm_90` + "\n"},
		{[]string{"space", "--shape", "1x8x512x96"}, "evotune: space: --shape: sdpa space: head dimension 96: want 64 or 128\n"},
		{[]string{"space", "--family", "fa3"}, `evotune: space: --family: kernel family "fa3": this evotune carries sdpa, sdpa-hopper` + "\n"},
		{[]string{"space", "--family", "sdpa-hopper"}, "evotune: space: --dtype fp16: the sdpa-hopper family takes fp8\n"},
		{[]string{"space", "--family", "sdpa-hopper", "--dtype", "fp8", "--arch", "sm_89"}, "evotune: space: --shape: sdpa-hopper space: the family needs sm_90 (wgmma), not sm_89\n"},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			_, stderr, code := runCLI(t, tc.args...)
			if code != exitUsage || stderr != tc.want {
				t.Errorf("exit %d, stderr %q; want exit %d, %q", code, stderr, exitUsage, tc.want)
			}
		})
	}
}
