package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"evotune/cmd/evotune/internal/export"
	"evotune/elites"
	"evotune/space"
)

// testArchive2 is testdata/archive made a two-shape problem (1x8x512x64 and
// 2x8x512x64, the second shape's timings derived from the first), with a
// bench.json holding PyTorch timings of both shapes.
const testArchive2 = "testdata/export/archive2"

// fixedNow is the clock of the golden tests.
var fixedNow = time.Date(2026, 11, 24, 8, 30, 0, 0, time.UTC)

// runCLIAt runs evotune in-process like runCLI, with the clock at now.
func runCLIAt(t *testing.T, now time.Time, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	return runCLIClock(t, func() time.Time { return now }, args...)
}

// goldenFile compares got with the file at path (relative to the package),
// or rewrites it with -update.
func goldenFile(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading golden file (run go test -update to create it): %v", err)
	}
	if got != string(want) {
		t.Errorf("output differs from %s (run go test -update if the change is meant):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

// readFile returns a file's content with the absolute archive path (which
// depends on where the checkout is) replaced by ARCHIVE.
func readFile(t *testing.T, path, archive string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	abs, err := filepath.Abs(archive)
	if err != nil {
		t.Fatal(err)
	}
	return strings.ReplaceAll(string(data), abs, "ARCHIVE")
}

func TestExportGolden(t *testing.T) {
	cases := []struct {
		name    string
		archive string
	}{
		{"single", testArchive},
		{"two-shapes", testArchive2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out := t.TempDir()
			_, stderr, code := runCLIAt(t, fixedNow, "export", "--archive", tc.archive, "--out", out, "--name", "sdpa_best")
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			for _, ext := range []string{".h", ".json"} {
				got := readFile(t, filepath.Join(out, "sdpa_best"+ext), tc.archive)
				goldenFile(t, filepath.Join("testdata", "export", tc.name+ext), got)
			}
		})
	}
}

func TestExport(t *testing.T) {
	out := t.TempDir()
	stdout, _, code := runCLI(t, "export", "--archive", testArchive, "--out", out, "--name", "sdpa_best")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	a := readArchive(t, testArchive)
	best, _ := a.Best()
	if !strings.Contains(stdout, best.Key) {
		t.Errorf("export did not name the best config %s: %q", best.Key, stdout)
	}
	data, err := os.ReadFile(filepath.Join(out, "sdpa_best.json"))
	if err != nil {
		t.Fatal(err)
	}
	var exp export.Export
	if err := json.Unmarshal(data, &exp); err != nil {
		t.Fatalf("sdpa_best.json: %v", err)
	}
	if exp.Key != best.Key || exp.Result.Objective != best.Objective || exp.Config.Key() != best.Key {
		t.Errorf("JSON holds %s (%.3f µs), want the best %s (%.3f µs)", exp.Key, exp.Result.Objective, best.Key, best.Objective)
	}
	if exp.Generator != exportMarker {
		t.Errorf("JSON generator %q, want %q", exp.Generator, exportMarker)
	}
	def, _ := familyDefault(a.Meta().Problem, a.Meta().Arch)
	defResult, ok := a.Lookup(def.Key())
	if !ok {
		t.Fatal("the test archive lacks the default config")
	}
	if want := defResult.Objective / best.Objective; exp.SpeedupVsDefault != want || exp.DefaultObjectiveUS != defResult.Objective {
		t.Errorf("speedup vs default %v (default %v µs), want %v (%v µs)", exp.SpeedupVsDefault, exp.DefaultObjectiveUS, want, defResult.Objective)
	}
	if exp.Torch != nil || exp.Dispatch != nil {
		t.Errorf("single-shape archive without bench.json: torch %v, dispatch %v; want neither", exp.Torch, exp.Dispatch)
	}
	header, err := os.ReadFile(filepath.Join(out, "sdpa_best.h"))
	if err != nil {
		t.Fatal(err)
	}
	h := string(header)
	// Every rendered flag is a #define, and every knob of the space is there.
	if len(exp.Flags) != len(best.Config)+3 {
		t.Errorf("%d flags for %d knobs and 3 fixed defines", len(exp.Flags), len(best.Config))
	}
	for _, f := range exp.Flags {
		macro, value, _ := strings.Cut(strings.TrimPrefix(f, "-D"), "=")
		if !strings.Contains(h, "\n#define "+macro+" "+value+"\n") {
			t.Errorf("header lacks #define %s %s", macro, value)
		}
	}
	for _, want := range []string{
		"#pragma once\n",
		"//   config:             " + best.Key + "\n",
		"//   objective:          " + us(best.Objective) + " µs\n",
		"//   kernel source hash: synthetic\n",
		"//   replayed:           from synthetic-1x8x512x64-fp16.jsonl.gz",
		"//   vs PyTorch SDPA:    not measured",
		"(95% CI " + us(best.Timings[0].CILowUS) + " – " + us(best.Timings[0].CIHighUS) + " µs",
	} {
		if !strings.Contains(h, want) {
			t.Errorf("header lacks %q:\n%s", want, h)
		}
	}
}

// TestExportDispatch checks the two-shape export against the archive: each
// dispatch entry is the fastest OK result on its shape, and the macros are
// the overall best.
func TestExportDispatch(t *testing.T) {
	out := t.TempDir()
	if _, stderr, code := runCLI(t, "export", "--archive", testArchive2, "--out", out); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var exp export.Export
	data, err := os.ReadFile(filepath.Join(out, "evotune_best.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &exp); err != nil {
		t.Fatal(err)
	}
	a := readArchive(t, testArchive2)
	shapes := a.Meta().Problem.Shapes
	if len(exp.Dispatch) != len(shapes) {
		t.Fatalf("%d dispatch entries for %d shapes", len(exp.Dispatch), len(shapes))
	}
	distinct := false
	for i, d := range exp.Dispatch {
		if d.Shape != shapes[i] {
			t.Errorf("entry %d is for %s, want %s", i, d.Shape, shapes[i])
		}
		for _, r := range a.Results() {
			if tm, ok := elites.TimingOf(r, d.Shape); r.OK() && ok && tm.P50US < d.P50US {
				t.Errorf("shape %s: %s has p50 %v, beating the dispatch entry's %v", d.Shape, r.Key, tm.P50US, d.P50US)
			}
		}
		distinct = distinct || d.Key != exp.Key
	}
	if !distinct {
		t.Error("every per-shape best is the overall best: the test archive no longer tells dispatch from the macros")
	}
	if exp.Torch == nil || len(exp.Torch.Shapes) != 2 || exp.Torch.Shapes[0].Backend != "cudnn" {
		t.Fatalf("torch comparison %+v: want cudnn, the fastest, for both shapes", exp.Torch)
	}
	if s := exp.Torch.Shapes[1]; s.Speedup != s.TorchUS/s.OursUS || s.OursUS != exp.Result.Timings[1].P50US {
		t.Errorf("torch comparison of %s: %+v", s.Shape, s)
	}
}

func absPath(t *testing.T, path string) string {
	t.Helper()
	abs, err := filepath.Abs(path)
	if err != nil {
		t.Fatal(err)
	}
	return abs
}

// TestExportHeaderCompiles includes the generated header in a C file that
// uses its macros and its dispatch table, and checks it with the C compiler.
func TestExportHeaderCompiles(t *testing.T) {
	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Skip("no C compiler (cc) on PATH: the generated header cannot be checked here")
	}
	out := t.TempDir()
	if _, stderr, code := runCLI(t, "export", "--archive", testArchive2, "--out", out, "--name", "sdpa_tuned"); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	src := `#include "sdpa_tuned.h"
#include "sdpa_tuned.h" /* twice: #pragma once */
#include <stddef.h>
#if SDPA_BLOCK_M <= 0 || SDPA_HEAD_DIM != 64
#error the macros are not usable in #if
#endif
const char *pick(int b, int h, int s, int d) {
	for (size_t i = 0; i < sizeof sdpa_tuned_dispatch / sizeof sdpa_tuned_dispatch[0]; i++) {
		if (sdpa_tuned_dispatch[i].b == b && sdpa_tuned_dispatch[i].h == h &&
		    sdpa_tuned_dispatch[i].s == s && sdpa_tuned_dispatch[i].d == d && sdpa_tuned_dispatch[i].p50_us > 0)
			return sdpa_tuned_dispatch[i].key;
	}
	return 0;
}
int tiles(void) { return SDPA_BLOCK_M * SDPA_BLOCK_N * SDPA_WARPS * SDPA_STAGES; }
`
	file := filepath.Join(out, "use.c")
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(cc, "-fsyntax-only", "-std=c11", "-Wall", "-Wextra", "-Werror", "-I", out, file)
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, msg)
	}
}

func TestExportTo(t *testing.T) {
	cases := []struct {
		name     string
		existing string // content of DIR/sdpa.h before; "" for none
		force    bool
		wantErr  string
	}{
		{name: "new file"},
		{name: "earlier export", existing: "#pragma once\n// sdpa.h: ...\n// " + exportMarker + "; do not edit.\n"},
		{name: "hand-written header", existing: "#pragma once\n#define SDPA_BLOCK_M 64\n",
			wantErr: "sdpa.h exists and is not an evotune export"},
		{name: "hand-written header forced", existing: "#define SDPA_BLOCK_M 64\n", force: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			header := filepath.Join(dir, "sdpa.h")
			if tc.existing != "" {
				if err := os.WriteFile(header, []byte(tc.existing), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			args := []string{"export", "--archive", testArchive, "--to", dir, "--name", "sdpa"}
			if tc.force {
				args = append(args, "--force")
			}
			stdout, stderr, code := runCLI(t, args...)
			got, _ := os.ReadFile(header)
			if tc.wantErr != "" {
				if code != exitError || !strings.Contains(stderr, tc.wantErr) || !strings.Contains(stderr, "--force") {
					t.Errorf("exit %d, stderr %q; want exit 1 naming %q and --force", code, stderr, tc.wantErr)
				}
				if string(got) != tc.existing {
					t.Errorf("the refused file was changed:\n%s", got)
				}
				return
			}
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			if !strings.Contains(string(got), exportMarker) || !strings.HasPrefix(stdout, "wrote "+header+" and ") {
				t.Errorf("stdout %q; header written:\n%s", stdout, got)
			}
			// With --to and no --out, nothing is written to the current directory.
			if _, err := os.Stat("sdpa.h"); err == nil {
				os.Remove("sdpa.h")
				os.Remove("sdpa.json")
				t.Error("export --to also wrote ./sdpa.h")
			}
		})
	}
}

func TestExportCommit(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not on PATH")
	}
	repo := t.TempDir()
	gitT := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", repo}, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	gitT("init", "-q")
	gitT("config", "user.name", "Test")
	gitT("config", "user.email", "test@example.com")
	gitT("config", "commit.gpgsign", "false")
	// Something else staged in the repository is not swept into the commit.
	if err := os.WriteFile(filepath.Join(repo, "other.txt"), []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gitT("add", "other.txt")
	include := filepath.Join(repo, "include")
	stdout, stderr, code := runCLI(t, "export", "--archive", testArchive, "--to", include, "--commit")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, "committed evotune_best.h and evotune_best.json in "+include) {
		t.Errorf("stdout %q", stdout)
	}
	a := readArchive(t, testArchive)
	best, _ := a.Best()
	msg := gitT("log", "-1", "--format=%B")
	for _, want := range []string{
		"evotune_best: sdpa 1x8x512x64 fp16 " + us(best.Objective) + " µs (",
		"x over the default), from evotune\n",
		"config: " + best.Key + "\n",
		"p50: " + us(best.Timings[0].P50US) + " µs at 1x8x512x64 (95% CI",
		"speedup over PyTorch SDPA: not measured\n",
		"archive: " + absPath(t, testArchive) + " (result " + strconv.Itoa(best.Seq) + " of 24)\n",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("commit message lacks %q:\n%s", want, msg)
		}
	}
	files := gitT("show", "--name-only", "--format=", "HEAD")
	if files != "include/evotune_best.h\ninclude/evotune_best.json\n" {
		t.Errorf("the commit holds %q, want the header and the JSON only", files)
	}
}

func TestExportCommitOutsideGit(t *testing.T) {
	dir := t.TempDir()
	_, stderr, code := runCLIAt(t, fixedNow, "export", "--archive", testArchive, "--to", dir, "--commit")
	if code != exitError || !strings.Contains(stderr, "export --commit: "+dir+" is not inside a git work tree") {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
}

func TestExportUsage(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"export", "--commit"}, "evotune: export: --commit needs --to"},
		{[]string{"export", "--name", "1x"}, `evotune: export: --name "1x": want a C identifier`},
	}
	for _, tc := range cases {
		_, stderr, code := runCLI(t, tc.args...)
		if code != exitUsage || !strings.HasPrefix(stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and %q", tc.args, code, stderr, tc.want)
		}
	}
}

func TestExportNothingPassed(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "archive")
	p := space.Problem{Family: "sdpa", Shapes: []space.Shape{{B: 1, H: 8, S: 512, D: 64}}, Dtype: "fp16"}
	a, err := elites.Create(dir, elites.NewMeta(p, space.Env{Arch: "sm_89"}))
	if err != nil {
		t.Fatal(err)
	}
	a.Close()
	_, stderr, code := runCLI(t, "export", "--archive", dir, "--out", t.TempDir())
	if code != exitError || !strings.Contains(stderr, "holds no configuration that passed every gate") {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
}

func TestMerge(t *testing.T) {
	dst := filepath.Join(t.TempDir(), "merged")
	stdout, stderr, code := runCLI(t, "merge", "--archive", dst, testArchive)
	if code != 0 {
		t.Fatalf("merge: exit %d, %s", code, stderr)
	}
	src := readArchive(t, testArchive)
	n := len(src.Results())
	if want := testArchive + ": " + strconv.Itoa(n) + " new results\n"; !strings.HasPrefix(stdout, want) {
		t.Errorf("merge printed %q, want it to start with %q", stdout, want)
	}
	got := readArchive(t, dst)
	if len(got.Results()) != n || got.Meta().Problem.Dtype != src.Meta().Problem.Dtype {
		t.Fatalf("merged archive holds %d results, want %d", len(got.Results()), n)
	}
	if b1, _ := got.Best(); b1.Key != must(src.Best()).Key {
		t.Errorf("merged best %s differs from the source's", b1.Key)
	}
	// Merging again adds nothing: a config is recorded once.
	stdout, _, code = runCLI(t, "merge", "--archive", dst, testArchive)
	if code != 0 || !strings.HasPrefix(stdout, testArchive+": 0 new results\n") {
		t.Errorf("second merge: exit %d, %q", code, stdout)
	}
	// An archive of another problem does not merge.
	other := filepath.Join(t.TempDir(), "bf16")
	p := space.Problem{Family: "sdpa", Shapes: []space.Shape{{B: 1, H: 8, S: 512, D: 64}}, Dtype: "bf16"}
	a, err := elites.Create(other, elites.NewMeta(p, space.Env{Arch: "sm_89"}))
	if err != nil {
		t.Fatal(err)
	}
	a.Close()
	_, stderr, code = runCLI(t, "merge", "--archive", dst, other)
	if code != exitError || !strings.Contains(stderr, "dtype") {
		t.Errorf("merging another problem: exit %d, %q; want exit 1 naming the dtype", code, stderr)
	}
}

func must(r space.Result, ok bool) space.Result { return r }
