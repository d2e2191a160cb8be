package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"evotune/elites"
	"evotune/space"
)

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
	var exp export
	if err := json.Unmarshal(data, &exp); err != nil {
		t.Fatalf("sdpa_best.json: %v", err)
	}
	if exp.Key != best.Key || exp.Result.Objective != best.Objective || exp.Config.Key() != best.Key {
		t.Errorf("JSON holds %s (%.3f µs), want the best %s (%.3f µs)", exp.Key, exp.Result.Objective, best.Key, best.Objective)
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
		"#ifndef SDPA_BEST_H\n#define SDPA_BEST_H\n", "#endif // SDPA_BEST_H\n",
		"//   config:      " + best.Key + "\n",
		"//   objective:   " + us(best.Objective) + " µs\n",
		"//   source hash: synthetic\n",
		"//   replayed:    from synthetic-1x8x512x64-fp16.jsonl.gz",
		"(95% CI " + us(best.Timings[0].CILowUS) + " – " + us(best.Timings[0].CIHighUS) + " µs",
	} {
		if !strings.Contains(h, want) {
			t.Errorf("header lacks %q:\n%s", want, h)
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
