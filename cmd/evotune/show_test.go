package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"evotune/cmd/evotune/internal/elitetable"
)

// testdata/archive is a small archive from a replay search, with one
// damaged line (line 6) inserted into its log.
const testArchive = "testdata/archive"

func TestShowGolden(t *testing.T) {
	cases := []struct {
		name string
		args []string
	}{
		{"show.txt", []string{"show", "--archive", testArchive}},
		{"show-top2.md", []string{"show", "--archive", testArchive, "--top", "2", "--format", "markdown"}},
		{"show-top2.json", []string{"show", "--archive", testArchive, "--top", "2", "--format", "json"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			stdout, stderr, code := runCLI(t, tc.args...)
			if code != 0 {
				t.Fatalf("exit %d, stderr %q", code, stderr)
			}
			want := "evotune: warning: testdata/archive/results.jsonl: skipped line 6 (byte 7583): not a result: unexpected end of JSON input\n"
			if stderr != want {
				t.Errorf("stderr:\n got %q\nwant %q", stderr, want)
			}
			golden(t, tc.name, stdout)
		})
	}
}

// TestShowJSON checks the JSON output against the archive itself: ranks in
// order, objectives ascending, and the speedup relative to the default.
func TestShowJSON(t *testing.T) {
	stdout, _, code := runCLI(t, "show", "--archive", testArchive, "--format", "json")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	var rep elitetable.Report
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("show --format json is not JSON: %v", err)
	}
	if rep.Evaluated != 24 || len(rep.Elites) != 8 {
		t.Fatalf("evaluated %d, %d elites; want 24 and 8", rep.Evaluated, len(rep.Elites))
	}
	if rep.DefaultUS <= 0 {
		t.Fatal("the archive measured the default config, but no default objective was reported")
	}
	sawDefault := false
	for i, e := range rep.Elites {
		if e.Rank != i+1 {
			t.Errorf("elite %d has rank %d", i, e.Rank)
		}
		if i > 0 && e.P50US < rep.Elites[i-1].P50US {
			t.Errorf("elite %d (%.3f µs) beats elite %d (%.3f µs)", i, e.P50US, i-1, rep.Elites[i-1].P50US)
		}
		if !(e.CILowUS <= e.P50US && e.P50US <= e.CIHighUS) {
			t.Errorf("elite %d: p50 %.3f outside its CI [%.3f, %.3f]", i, e.P50US, e.CILowUS, e.CIHighUS)
		}
		if got, want := e.Speedup, rep.DefaultUS/e.P50US; got != want {
			t.Errorf("elite %d: speedup %v, want %v", i, got, want)
		}
		if e.Changes == "(default)" {
			sawDefault = true
			if e.P50US != rep.DefaultUS {
				t.Errorf("the default's row has p50 %v, the default objective is %v", e.P50US, rep.DefaultUS)
			}
		}
		if !strings.Contains(e.Key, "block_m=") {
			t.Errorf("elite %d key %q is not a config key", i, e.Key)
		}
	}
	if !sawDefault {
		t.Error("the default config is among the 8 best of the test archive but no row says (default)")
	}
}

func TestShowErrors(t *testing.T) {
	dir := t.TempDir()
	_, stderr, code := runCLI(t, "show", "--archive", dir)
	if code != exitError || !strings.Contains(stderr, "is not an archive") || strings.Count(stderr, "\n") != 1 {
		t.Errorf("show on an empty directory: exit %d, stderr %q; want exit 1 and one line saying it is not an archive", code, stderr)
	}
}

// TestShowWarnsOfForeignConfigs appends a result whose config is not in the
// knob space (a value off block_m's list) to a copy of the test archive:
// show still prints the elites, and says on stderr that the log holds it.
func TestShowWarnsOfForeignConfigs(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "archive")
	if err := os.CopyFS(dir, os.DirFS(testArchive)); err != nil {
		t.Fatal(err)
	}
	log, err := os.ReadFile(filepath.Join(dir, "results.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(log)), "\n")
	var r map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &r); err != nil {
		t.Fatal(err)
	}
	cfg := r["config"].(map[string]any)
	cfg["block_m"] = "48"
	r["key"], r["seq"] = "foreign", 10000
	b, _ := json.Marshal(r)
	if err := os.WriteFile(filepath.Join(dir, "results.jsonl"), append(append(log, b...), '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := runCLI(t, "show", "--archive", dir)
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	if !strings.Contains(stderr, "1 results hold configs outside the knob space") || !strings.Contains(stderr, "block_m") {
		t.Errorf("stderr does not warn of the foreign config:\n%s", stderr)
	}
	if !strings.Contains(stdout, "p50") {
		t.Errorf("show printed no elite table:\n%s", stdout)
	}
}
