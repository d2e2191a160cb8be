package main

// Hostile input: nothing in a flag, a config string, an archive or a replay
// file can make evotune run anything but nvcc, and nvcc only with -D flags
// rendered from the knob space. A fake nvcc (--nvcc) records every argument
// it is given.

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"evotune/kernels"
	"evotune/space"
)

// recordingNVCC is a stand-in for nvcc that appends each argument it is
// given to $0.argv (one a line, a "--" line after each run) and the .cu
// file it compiles to $0.src, answers
// --version like nvcc 11.8, and otherwise writes a cubin and a clean ptxas
// report.
const recordingNVCC = `#!/bin/sh
for a in "$@"; do
  printf '%s\n' "$a" >> "$0.argv"
  case "$a" in *.cu) cp "$a" "$0.src" ;; esac
done
echo -- >> "$0.argv"
if [ "$1" = "--version" ]; then
  echo 'Cuda compilation tools, release 11.8, V11.8.89'
  exit 0
fi
out=""
while [ $# -gt 0 ]; do
  if [ "$1" = "-o" ]; then out="$2"; shift; fi
  shift
done
echo cubin > "$out"
for f in sdpa_fwd sdpa_combine; do
  echo "ptxas info    : Compiling entry function '$f' for 'sm_89'" >&2
  echo "ptxas info    : Function properties for $f" >&2
  echo "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads" >&2
  echo "ptxas info    : Used 96 registers, 384 bytes cmem[0]" >&2
done
`

// fakeNVCC writes the recording nvcc into a new directory and returns its
// path; its runs are read with nvccRuns.
func fakeNVCC(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "nvcc")
	if err := os.WriteFile(path, []byte(recordingNVCC), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// nvccRuns returns the argument lists the fake nvcc at path was run with.
func nvccRuns(t *testing.T, path string) [][]string {
	t.Helper()
	f, err := os.Open(path + ".argv")
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var runs [][]string
	var cur []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if sc.Text() == "--" {
			runs = append(runs, cur)
			cur = nil
			continue
		}
		cur = append(cur, sc.Text())
	}
	return runs
}

// pwnMarkers are the files a successful injection below would create.
func pwnMarkers(t *testing.T) (local string, check func()) {
	t.Helper()
	local = filepath.Join(t.TempDir(), "pwn")
	_, err := os.Stat("/tmp/pwn")
	globalBefore := err == nil
	return local, func() {
		t.Helper()
		if _, err := os.Stat(local); err == nil {
			t.Errorf("%s exists: injected text was run", local)
		}
		if _, err := os.Stat("/tmp/pwn"); err == nil && !globalBefore {
			t.Error("/tmp/pwn exists: injected text was run")
		}
	}
}

// TestHostileConfigFlag feeds hostile --config strings to check: each is
// refused with one line and exit 2, before nvcc is run at all.
func TestHostileConfigFlag(t *testing.T) {
	bin := evotuneBinary(t)
	pwn, checkPwn := pwnMarkers(t)
	defer checkPwn()
	configs := []string{
		"block_m=64 -Xcompiler -fplugin=x",
		"block_m=$(touch " + pwn + ")",
		"block_m=`touch " + pwn + "`",
		"block_m=$(touch /tmp/pwn)",
		"block_m=64; rm -rf " + pwn,
		"block_m=64 && touch " + pwn,
		"block_m=64\nwarps=8",
		"block_m=64\n-DSDPA_EVIL=1",
		"block_m=64,-DSDPA_EVIL=1",
		"block_m=64,-Xcompiler=-fplugin=x",
		"evil=1",
		"SDPA_BLOCK_M=64",
		"block_m=64,block_m=128",
	}
	for _, cfg := range configs {
		nvcc := fakeNVCC(t)
		args := []string{"check", "--compile-only", "--arch", "sm_89", "--nvcc", nvcc, "--cache", t.TempDir(), "--config", cfg}
		stderr := runBinary(t, bin, exitUsage, args...)
		if !strings.HasPrefix(stderr, "evotune: check: --config") || strings.Count(stderr, "\n") != 1 {
			t.Errorf("--config %q: stderr %q; want one line about --config", cfg, stderr)
		}
		if runs := nvccRuns(t, nvcc); len(runs) > 0 {
			t.Errorf("--config %q: nvcc was run %d times: %q", cfg, len(runs), runs)
		}
	}
}

// TestNVCCGetsOnlySpaceFlags checks that for accepted configs nvcc gets the
// fixed command line and, as -D flags, exactly what the space renders.
func TestNVCCGetsOnlySpaceFlags(t *testing.T) {
	bin := evotuneBinary(t)
	target, err := kernels.TargetFor("sm_89")
	if err != nil {
		t.Fatal(err)
	}
	prob := space.Problem{Family: kernels.DefaultFamily, Shapes: []space.Shape{{B: 1, H: 8, S: 512, D: 64}}, Dtype: "fp16"}
	sp, err := kernels.SDPASpace(prob, target)
	if err != nil {
		t.Fatal(err)
	}
	for _, cfg := range []string{"", "block_m=128,warps=8,stages=3", " block_m = 32 , ws=1,producer_warps=2 "} {
		nvcc := fakeNVCC(t)
		args := []string{"check", "--compile-only", "--arch", "sm_89", "--nvcc", nvcc, "--cache", t.TempDir(), "--config", cfg}
		runBinary(t, bin, 0, args...)
		c, err := sp.Parse(cfg)
		if err != nil {
			t.Fatal(err)
		}
		want, err := sp.Flags(c)
		if err != nil {
			t.Fatal(err)
		}
		runs := nvccRuns(t, nvcc)
		if len(runs) != 2 || !slices.Equal(runs[0], []string{"--version"}) {
			t.Fatalf("--config %q: nvcc runs %q; want --version, then one compile", cfg, runs)
		}
		var defines, others []string
		for _, a := range runs[1] {
			if strings.HasPrefix(a, "-D") {
				defines = append(defines, a)
			} else {
				others = append(others, a)
			}
		}
		if !slices.Equal(defines, want) {
			t.Errorf("--config %q: nvcc got -D flags %q, the space renders %q", cfg, defines, want)
		}
		// The rest is the fixed command line of kernels.NVCCArgs.
		fixed := kernels.NVCCArgs("sm_89", nil, "SRC", kernels.SDPASource().Name, "OUT")
		if len(others) != len(fixed) {
			t.Errorf("--config %q: nvcc got %q besides the -D flags, want the shape of %q", cfg, others, fixed)
			continue
		}
		for i, a := range others {
			if f := fixed[i]; f != "OUT" && !strings.Contains(f, "SRC") && a != f {
				t.Errorf("--config %q: nvcc argument %d is %q, want %q", cfg, i, a, f)
			}
		}
	}
}

// TestHostileArchive crafts an archive whose log holds a result with a
// hostile config (the best objective of all) and whose search state names a
// hostile config: the log line stays inert (never an elite, never
// exported), and the state is rebuilt from the log with a line naming why.
func TestHostileArchive(t *testing.T) {
	t.Parallel() // slow (subprocesses, replays or nvcc) and independent of the other tests
	src := filepath.Join(t.TempDir(), "archive")
	if _, stderr, code := runCLI(t, "tune", "--replay", replayFile, "--archive", src, "--seed", "3", "--evals", "40", "--quiet"); code != 0 {
		t.Fatalf("tune: exit %d\n%s", code, stderr)
	}
	pwn, checkPwn := pwnMarkers(t)
	defer checkPwn()
	hostile := "64 -Xcompiler -fplugin=x $(touch " + pwn + ")"
	a := readArchive(t, src)
	best, ok := a.Best()
	if !ok {
		t.Fatal("the archive has no OK result")
	}
	bad := best
	bad.Config = best.Config.Clone()
	bad.Config["block_m"] = hostile
	bad.Key = bad.Config.Key()
	bad.Flags = []string{"-DSDPA_BLOCK_M=64", "-Xcompiler", "-fplugin=x"}
	bad.Objective = best.Objective / 100
	bad.Seq = len(a.Results()) + 1

	t.Run("log", func(t *testing.T) {
		dir := copyArchive(t, src)
		line, err := json.Marshal(bad)
		if err != nil {
			t.Fatal(err)
		}
		f, err := os.OpenFile(filepath.Join(dir, "results.jsonl"), os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		f.Write(append(line, '\n'))
		f.Close()
		// The search resumes: the hostile key matches no config it proposes.
		if _, stderr, code := runCLI(t, "tune", "--replay", replayFile, "--archive", dir, "--seed", "3", "--evals", "50", "--quiet"); code != 0 {
			t.Fatalf("tune on the crafted archive: exit %d\n%s", code, stderr)
		}
		for _, r := range readArchive(t, dir).Results() {
			if strings.Contains(r.Key, "fplugin") && r.Seq != bad.Seq {
				t.Errorf("the search proposed a hostile config: %s", r.Key)
			}
		}
		// Export renders the best config's flags from the space, which
		// refuses the value: one line, exit 1, and nothing written.
		out := filepath.Join(t.TempDir(), "export")
		_, stderr, code := runCLI(t, "export", "--archive", dir, "--out", out)
		if code != exitError || !strings.Contains(stderr, "not in") || strings.Count(stderr, "\n") != 1 {
			t.Errorf("export of a hostile best: exit %d, stderr %q; want exit 1 and one line refusing the value", code, stderr)
		}
		if files, _ := filepath.Glob(filepath.Join(out, "*")); len(files) > 0 {
			t.Errorf("export wrote %v for a hostile best", files)
		}
	})

	t.Run("state", func(t *testing.T) {
		dir := copyArchive(t, src)
		path := filepath.Join(dir, "state.json")
		var state map[string]any
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &state); err != nil {
			t.Fatal(err)
		}
		pop, ok := state["population"].([]any)
		if !ok || len(pop) == 0 {
			t.Fatalf("state.json has no population: %s", b)
		}
		pop[0] = bad.Key
		b, _ = json.Marshal(state)
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		// The state is a cache of the log: one that names a config the log
		// does not hold is rebuilt from the log, said in one line.
		_, stderr, code := runCLI(t, "tune", "--replay", replayFile, "--archive", dir, "--seed", "3", "--evals", "50", "--quiet")
		if code != 0 || !strings.Contains(stderr, "rebuilding the search state") || !strings.Contains(stderr, "population") || strings.Count(stderr, "\n") != 1 {
			t.Errorf("tune on a hostile state: exit %d, stderr %q; want exit 0 and one line rebuilding it, naming the population", code, stderr)
		}
		for _, r := range readArchive(t, dir).Results() {
			if strings.Contains(r.Key, "fplugin") {
				t.Errorf("the rebuilt search recorded a hostile config: %s", r.Key)
			}
		}
	})
}

// TestHostileReplay crafts a replay file whose fastest record has a hostile
// config: the search never proposes it, so it is never recorded, and tune
// runs nothing.
func TestHostileReplay(t *testing.T) {
	pwn, checkPwn := pwnMarkers(t)
	defer checkPwn()
	f, err := os.Open(replayFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(zr)
	sc.Buffer(nil, 1<<20)
	var out bytes.Buffer
	for i := 0; sc.Scan() && i < 3000; i++ {
		line := sc.Bytes()
		if i == 1 {
			var r space.Result
			if err := json.Unmarshal(line, &r); err != nil {
				t.Fatal(err)
			}
			r.Config["block_m"] = "64 -Xcompiler -fplugin=x $(touch " + pwn + ")"
			r.Key = r.Config.Key()
			r.Status, r.Gate, r.Reason, r.Objective = space.StatusOK, space.GateTimed, "", 0.001
			if line, err = json.Marshal(r); err != nil {
				t.Fatal(err)
			}
		}
		out.Write(line)
		out.WriteByte('\n')
	}
	replay := filepath.Join(t.TempDir(), "hostile.jsonl")
	if err := os.WriteFile(replay, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "archive")
	stdout, stderr, code := runCLI(t, "tune", "--replay", replay, "--archive", dir, "--evals", "60", "--quiet")
	switch {
	case code == exitUsage || code == exitError:
		// Refusing the file is as good, if it says why in one line.
		if strings.Count(stderr, "\n") != 1 {
			t.Errorf("tune refused the hostile replay with %q; want one line", stderr)
		}
		return
	case code != 0:
		t.Fatalf("tune: exit %d\n%s", code, stderr)
	}
	for _, r := range readArchive(t, dir).Results() {
		if strings.Contains(r.Key, "fplugin") {
			t.Errorf("the hostile replay record was proposed and recorded: %s", r.Key)
		}
	}
	if strings.Contains(stdout, "fplugin") {
		t.Errorf("the hostile record reached the summary:\n%s", stdout)
	}
}

// TestUsageErrorsOverTheBinary checks, on the real process, that bad
// flags, shapes, dtypes, knobs and files end with one clear line and exit
// code 2, before any GPU or nvcc is looked for.
func TestUsageErrorsOverTheBinary(t *testing.T) {
	bin := evotuneBinary(t)
	pwn, checkPwn := pwnMarkers(t)
	defer checkPwn()
	missing := filepath.Join(t.TempDir(), "missing.cu")
	tests := []struct {
		args []string
		want string // in the one line on stderr
	}{
		{[]string{"frobnicate"}, "unknown command"},
		{[]string{"tune", "--frobnicate"}, "--frobnicate"},
		{[]string{"tune", "--shape", "0x8x512x64"}, "--shape"},
		{[]string{"tune", "--shape", "-1x8x512x64"}, "--shape"},
		{[]string{"tune", "--shape", "1x8x99999999999x64"}, "--shape"},
		{[]string{"tune", "--shape", "1x8x99999999999999999999999x64"}, "--shape"},
		{[]string{"tune", "--shape", "1x8x512x65"}, "head dimension"},
		{[]string{"tune", "--shape", "1x8x512"}, "--shape"},
		{[]string{"tune", "--shape", "1x8x512x64:-1"}, "weight"},
		{[]string{"tune", "--shape", "1x8x512x64; touch " + pwn}, "--shape"},
		{[]string{"tune", "--dtype", "int4"}, "--dtype"},
		{[]string{"tune", "--dtype", "fp16 -Xcompiler -fplugin=x"}, "--dtype"},
		{[]string{"tune", "--evals", "-1"}, "--evals"},
		{[]string{"tune", "--parallel", "-1"}, "--parallel"},
		{[]string{"tune", "--strategy", "$(touch " + pwn + ")"}, "--strategy"},
		{[]string{"tune", "--arch", "sm_12; touch " + pwn}, "--arch"},
		{[]string{"tune", "--kernel-source", missing}, "--kernel-source"},
		{[]string{"tune", "--kernel-source", "$(touch " + pwn + ").cu"}, "--kernel-source"},
		{[]string{"tune", "--kernel-source", t.TempDir()}, "directory"},
		{[]string{"tune", "--replay", replayFile, "--kernel-source", missing}, "--kernel-source"},
		{[]string{"check", "--config", "evil=1"}, "--config"},
		{[]string{"check", "--config", "block_m=63"}, "--config"},
		{[]string{"check", "--dtype", "int4"}, "--dtype"},
		{[]string{"check", "--shape", "1x8x0x64"}, "--shape"},
		{[]string{"check", "--shape", "1x8x512x256"}, "head dimension"},
		{[]string{"check", "--arch", "sm_12"}, "--arch"},
		{[]string{"check", "--kernel-source", missing, "--compile-only", "--arch", "sm_89"}, "--kernel-source"},
	}
	for _, tt := range tests {
		cmd := exec.Command(bin, tt.args...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		var exit *exec.ExitError
		code := 0
		if errors.As(err, &exit) {
			code = exit.ExitCode()
		}
		line := stderr.String()
		if code != exitUsage || strings.Count(line, "\n") != 1 || !strings.HasPrefix(line, "evotune: ") || !strings.Contains(line, tt.want) {
			t.Errorf("evotune %q: exit %d, stderr %q; want exit 2 and one line naming %q", tt.args, code, line, tt.want)
		}
	}
}

// TestKernelSourceCompiled checks that check --kernel-source hands nvcc the
// file in place of the embedded sdpa.cu, and the embedded one without it.
func TestKernelSourceCompiled(t *testing.T) {
	bin := evotuneBinary(t)
	mine := filepath.Join(t.TempDir(), "mine.cu")
	text := []byte("// my kernel\nextern \"C\" __global__ void sdpa_fwd() {}\n")
	if err := os.WriteFile(mine, text, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		args []string
		want []byte
	}{
		{[]string{"--kernel-source", mine}, text},
		{nil, kernels.SDPASource().Files["sdpa.cu"]},
	} {
		nvcc := fakeNVCC(t)
		args := append([]string{"check", "--compile-only", "--arch", "sm_89", "--nvcc", nvcc, "--cache", t.TempDir()}, tt.args...)
		runBinary(t, bin, 0, args...)
		got, err := os.ReadFile(nvcc + ".src")
		if err != nil {
			t.Fatalf("%q: nvcc compiled no .cu file: %v", tt.args, err)
		}
		if !bytes.Equal(got, tt.want) {
			t.Errorf("%q: nvcc compiled %d bytes starting %q, want the %d bytes starting %q",
				tt.args, len(got), got[:min(40, len(got))], len(tt.want), tt.want[:min(40, len(tt.want))])
		}
	}
}

// TestReadKernelSource checks the source a --kernel-source file makes: its
// hash is the embedded source's exactly when the file is the embedded
// sdpa.cu, and differs for any other content.
func TestReadKernelSource(t *testing.T) {
	embedded := kernels.SDPASource()
	dir := t.TempDir()
	same := filepath.Join(dir, "same.cu")
	other := filepath.Join(dir, "other.cu")
	if err := os.WriteFile(same, embedded.Files["sdpa.cu"], 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(other, append(slices.Clone(embedded.Files["sdpa.cu"]), '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := readKernelSource("check", same, kernels.SDPASource())
	if err != nil {
		t.Fatal(err)
	}
	if s.Hash != embedded.Hash || s.Name != embedded.Name || !bytes.Equal(s.Files["sdpa_params.h"], embedded.Files["sdpa_params.h"]) {
		t.Errorf("the embedded sdpa.cu read from a file hashes to %s, the embedded source to %s", s.Hash, embedded.Hash)
	}
	o, err := readKernelSource("check", other, kernels.SDPASource())
	if err != nil {
		t.Fatal(err)
	}
	if o.Hash == embedded.Hash {
		t.Error("a changed sdpa.cu keeps the embedded source's hash")
	}
	empty := filepath.Join(dir, "empty.cu")
	os.WriteFile(empty, nil, 0o644)
	var usage *usageError
	if _, err := readKernelSource("check", empty, kernels.SDPASource()); !errors.As(err, &usage) || !strings.Contains(err.Error(), "empty") {
		t.Errorf("an empty file: %v, want a usage error saying it is empty", err)
	}
}
