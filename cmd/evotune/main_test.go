package main

import (
	"bytes"
	"context"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

// runCLI runs evotune in-process with args and returns its output and exit code.
func runCLI(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	return runCLIClock(t, time.Now, args...)
}

// runCLIClock is runCLI with the command's clock replaced by now.
func runCLIClock(t *testing.T, now func() time.Time, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errOut bytes.Buffer
	c := &cli{stdout: &out, stderr: &errOut, now: now}
	err := helpDone(c.run(context.Background(), args))
	code = report(err, &errOut)
	return out.String(), errOut.String(), code
}

// golden compares got with testdata/golden/name, or rewrites it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	goldenFile(t, filepath.Join("testdata", "golden", name), got)
}

// builtBinary is the evotune binary that the end-to-end tests run as a
// subprocess, built once per test binary.
type builtBinary struct {
	once sync.Once
	path string
	err  error
}

var binary builtBinary

// evotuneBinary builds evotune into a temporary directory (once) and returns
// its path.
func evotuneBinary(t *testing.T) string {
	t.Helper()
	binary.once.Do(func() {
		dir, err := os.MkdirTemp("", "evotune-e2e-")
		if err != nil {
			binary.err = err
			return
		}
		binary.path = filepath.Join(dir, "evotune")
		cmd := exec.Command("go", "build", "-buildvcs=false", "-o", binary.path, ".")
		if out, err := cmd.CombinedOutput(); err != nil {
			binary.err = err
			binary.path = string(out)
		}
	})
	if binary.err != nil {
		t.Fatalf("building evotune: %v\n%s", binary.err, binary.path)
	}
	return binary.path
}

func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	if binary.path != "" && binary.err == nil {
		os.RemoveAll(filepath.Dir(binary.path))
	}
	os.Exit(code)
}

func TestHelpGolden(t *testing.T) {
	cases := [][]string{{}, {"help"}}
	for _, cmd := range commands() {
		cases = append(cases, []string{cmd.name, "--help"})
	}
	for _, args := range cases {
		name := "help"
		if len(args) > 0 && args[0] != "help" {
			name = args[0] + "-help"
		}
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			stdout, stderr, code := runCLI(t, args...)
			if code != 0 || stderr != "" {
				t.Fatalf("exit %d, stderr %q", code, stderr)
			}
			golden(t, name+".txt", stdout)
		})
	}
}

// TestHelpMatchesHelpCommand checks that "evotune help tune" prints the
// same as "evotune tune --help".
func TestHelpMatchesHelpCommand(t *testing.T) {
	a, _, _ := runCLI(t, "help", "tune")
	b, _, _ := runCLI(t, "tune", "--help")
	if a != b || a == "" {
		t.Errorf("evotune help tune and evotune tune --help differ:\n%s\n---\n%s", a, b)
	}
}

func TestUsageErrors(t *testing.T) {
	cases := []struct {
		args []string
		want string // the one line on stderr
	}{
		{[]string{"frobnicate"}, `evotune: unknown command "frobnicate" (run evotune help)`},
		{[]string{"--shape", "1x8x512x64"}, `evotune: flag --shape before a command (run evotune help)`},
		{[]string{"help", "frobnicate"}, `evotune: help: unknown command "frobnicate" (run evotune help)`},
		{[]string{"tune", "--bogus"}, `evotune: tune: unknown flag: --bogus`},
		{[]string{"tune", "--shape", "0x8x512x64"}, `evotune: tune: --shape "0x8x512x64": "0" is not a positive integer`},
		{[]string{"tune", "--shape", "-1x8x512x64"}, `evotune: tune: --shape "-1x8x512x64": "-1" is not a positive integer`},
		{[]string{"tune", "--shape", "1x8x512"}, `evotune: tune: --shape "1x8x512": want BxHxSxD, e.g. 1x8x512x64`},
		{[]string{"tune", "--shape", "1x8x999999999x64"}, `evotune: tune: --shape "1x8x999999999x64": S = 999999999 exceeds 262144`},
		{[]string{"tune", "--shape", "1x8x512x64:0"}, `evotune: tune: --shape "1x8x512x64:0": weight "0" is not a positive number`},
		{[]string{"tune", "--shape", "1x8x512x64", "--shape", "1x8x512x128"}, `evotune: tune: --shape: shapes 1x8x512x64 and 1x8x512x128: all shapes of a problem share the head dimension (it is compiled in)`},
		{[]string{"tune", "--dtype", "int4"}, `evotune: tune: --dtype "int4": want fp16, bf16, fp8 or int8`},
		{[]string{"tune", "--strategy", "annealing"}, `evotune: tune: --strategy "annealing": want one of evo, random, exhaustive`},
		{[]string{"tune", "--evals", "0"}, `evotune: tune: --evals must be positive`},
		{[]string{"tune", "--evals", "-3"}, `evotune: tune: --evals must be positive`},
		{[]string{"tune", "--evals", "many"}, `evotune: tune: invalid argument "many" for "--evals" flag: strconv.ParseInt: parsing "many": invalid syntax`},
		{[]string{"tune", "--budget", "-1h"}, `evotune: tune: --budget must not be negative`},
		{[]string{"tune", "--parallel", "-1"}, `evotune: tune: --parallel must not be negative (0: as many as the machine keeps busy)`},
		{[]string{"tune", "--population", "1"}, `evotune: tune: --population must be at least 2 (0: the search's default)`},
		{[]string{"tune", "--elites", "0"}, `evotune: tune: --elites must be positive`},
		{[]string{"tune", "--arch", "89"}, `evotune: tune: --arch "89": want sm_XY, e.g. sm_89`},
		{[]string{"tune", "--gpus", "-1"}, `evotune: tune: --gpus: index -1 is negative`},
		{[]string{"tune", "extra"}, `evotune: tune: unexpected argument "extra"`},
		{[]string{"show", "--top", "0"}, `evotune: show: --top must be positive`},
		{[]string{"show", "--format", "xml"}, `evotune: show: --format "xml": want table, markdown or json`},
		{[]string{"export", "--name", "best-config"}, `evotune: export: --name "best-config": want a C identifier (letters, digits, _)`},
		{[]string{"space", "--dtype", "fp32"}, `evotune: space: --dtype "fp32": want fp16, bf16, fp8 or int8`},
		{[]string{"check", "--shape", "1x8x0x64"}, `evotune: check: --shape "1x8x0x64": "0" is not a positive integer`},
		{[]string{"merge", "src"}, `evotune: merge: --archive must name the destination archive`},
		{[]string{"merge", "--archive", "dst"}, `evotune: merge: name at least one source archive after the flags`},
		{[]string{"version", "now"}, `evotune: version: unexpected argument "now"`},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			stdout, stderr, code := runCLI(t, tc.args...)
			if code != exitUsage {
				t.Errorf("exit code %d, want %d", code, exitUsage)
			}
			if stdout != "" {
				t.Errorf("stdout %q, want nothing", stdout)
			}
			if want := tc.want + "\n"; stderr != want {
				t.Errorf("stderr:\n got %q\nwant %q", stderr, want)
			}
		})
	}
}

func TestVersion(t *testing.T) {
	stdout, stderr, code := runCLI(t, "version")
	if code != 0 || stderr != "" {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	if !strings.HasPrefix(stdout, "evotune ") || !strings.HasSuffix(stdout, "\n") || strings.Count(stdout, "\n") != 1 {
		t.Errorf("version printed %q, want one line starting with evotune", stdout)
	}
}

func TestVersionLine(t *testing.T) {
	cases := []struct {
		name string
		info debug.BuildInfo
		want string
	}{
		{"no vcs", debug.BuildInfo{GoVersion: "go1.26.8"}, "(devel) go1.26.8"},
		{"clean", debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.2.0"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "3f2afe0a72a2bea4f72cbf5d99f614d21b930d56"},
			{Key: "vcs.time", Value: "2026-11-22T13:47:28Z"},
			{Key: "vcs.modified", Value: "false"},
		}}, "v1.2.0 revision 3f2afe0a72a2 (2026-11-22T13:47:28Z) go1.26.8"},
		{"modified", debug.BuildInfo{GoVersion: "go1.26.8", Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "abc"},
			{Key: "vcs.modified", Value: "true"},
		}}, "(devel) revision abc+modified go1.26.8"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := versionLine(&tc.info); got != tc.want {
				t.Errorf("versionLine = %q, want %q", got, tc.want)
			}
		})
	}
}
