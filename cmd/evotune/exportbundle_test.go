package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"evotune/cmd/evotune/internal/export"
	"evotune/kernels"
)

// measuredArchive copies testdata/export/archive2 (two shapes) into a
// temporary directory as if its results had been measured from a kernel
// source of hash sourceHash rather than replayed.
func measuredArchive(t *testing.T, sourceHash string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "archive")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	replay := regexp.MustCompile(`,"replay":"[^"]*"`)
	for _, name := range []string{"meta.json", "results.jsonl", "bench.json"} {
		data, err := os.ReadFile(filepath.Join(testArchive2, name))
		if err != nil {
			t.Fatal(err)
		}
		text := replay.ReplaceAllString(string(data), "")
		text = strings.ReplaceAll(text, `"source_hash":"synthetic"`, `"source_hash":"`+sourceHash+`"`)
		text = strings.ReplaceAll(text, `"source_hash": "synthetic"`, `"source_hash": "`+sourceHash+`"`)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func readExportJSON(t *testing.T, path string) export.Export {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var exp export.Export
	if err := json.Unmarshal(data, &exp); err != nil {
		t.Fatal(err)
	}
	return exp
}

// TestExportBundle: an archive measured from the embedded source gets the
// launcher bundle beside the header, the source copied as it is, one config
// for each distinct per-shape best, and the JSON listing it all.
func TestExportBundle(t *testing.T) {
	src := kernels.SDPASource()
	archive := measuredArchive(t, src.Hash)
	out := t.TempDir()
	stdout, stderr, code := runCLI(t, "export", "--archive", archive, "--out", out, "--name", "attn")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, "wrote the launcher "+filepath.Join(out, "attn_launch.h")+" (attn_forward; 2 configs") {
		t.Errorf("stdout %q does not name the launcher", stdout)
	}
	for name, want := range src.Files {
		got, err := os.ReadFile(filepath.Join(out, "attn_kernel", name))
		if err != nil || string(got) != string(want) {
			t.Errorf("attn_kernel/%s is not the source as measured (%v)", name, err)
		}
	}
	exp := readExportJSON(t, filepath.Join(out, "attn.json"))
	if exp.Bundle == nil || exp.Bundle.KernelSourceHash != src.Hash || len(exp.Bundle.Configs) != 2 || exp.Bundle.Configs[0] != exp.Key {
		t.Fatalf("JSON bundle %+v: want 2 configs, the best first, source %s", exp.Bundle, src.Hash)
	}
	cu, err := os.ReadFile(filepath.Join(out, "attn_launch.cu"))
	if err != nil {
		t.Fatal(err)
	}
	// Each shape routes to its own best: the dispatch entries' keys.
	for _, d := range exp.Dispatch {
		idx := -1
		for i, k := range exp.Bundle.Configs {
			if k == d.Key {
				idx = i
			}
		}
		route := regexp.MustCompile(`\{` + regexp.QuoteMeta(strings.Join([]string{strconv.Itoa(d.Shape.B), strconv.Itoa(d.Shape.H), strconv.Itoa(d.Shape.S)}, ", ")) + `, (\d+)\},`)
		m := route.FindStringSubmatch(string(cu))
		if idx < 0 || m == nil || m[1] != strconv.Itoa(idx) {
			t.Errorf("shape %s: route %v, want config %d (%s)", d.Shape, m, idx, d.Key)
		}
	}
	for _, f := range exp.Bundle.Files {
		if _, err := os.Stat(filepath.Join(out, filepath.FromSlash(f))); err != nil {
			t.Errorf("the JSON lists %s: %v", f, err)
		}
	}
}

// TestExportKernelSource: an archive measured from another source than the
// binary's is refused in one line naming --kernel-source, and exported with
// it when its hash is the archive's, as a file or as a folder.
func TestExportKernelSource(t *testing.T) {
	embedded := kernels.SDPASource()
	modified := append([]byte("// a kernel edited before the search\n"), embedded.Files["sdpa.cu"]...)
	src := embedded.With("sdpa.cu", modified)
	archive := measuredArchive(t, src.Hash)

	out := t.TempDir()
	_, stderr, code := runCLI(t, "export", "--archive", archive, "--out", out)
	if code != exitError || strings.Count(strings.TrimSpace(stderr), "\n") != 0 || !strings.Contains(stderr, "--kernel-source") ||
		!strings.Contains(stderr, src.Hash[:12]) {
		t.Errorf("exit %d, stderr %q: want one line naming --kernel-source and the measured hash", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(out, "evotune_best.h")); err == nil {
		t.Error("a refused export still wrote the header")
	}

	file := filepath.Join(t.TempDir(), "edited.cu")
	folder := t.TempDir()
	for path, data := range map[string][]byte{
		file:                                   modified,
		filepath.Join(folder, "sdpa.cu"):       modified,
		filepath.Join(folder, "sdpa_params.h"): embedded.Files["sdpa_params.h"],
	} {
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, given := range []string{file, folder} {
		out := t.TempDir()
		if _, stderr, code := runCLI(t, "export", "--archive", archive, "--out", out, "--kernel-source", given); code != 0 {
			t.Fatalf("--kernel-source %s: exit %d: %s", given, code, stderr)
		}
		got, err := os.ReadFile(filepath.Join(out, "evotune_best_kernel", "sdpa.cu"))
		if err != nil || string(got) != string(modified) {
			t.Errorf("--kernel-source %s: the bundle's sdpa.cu is not the source given (%v)", given, err)
		}
	}

	// A source of another hash is refused.
	if _, stderr, code := runCLI(t, "export", "--archive", archive, "--out", t.TempDir(), "--kernel-source", filepath.Join(folder, "sdpa_params.h")); code != exitError || !strings.Contains(stderr, "hashes to") {
		t.Errorf("a source of another hash: exit %d, stderr %q", code, stderr)
	}
}

// TestExportBundleTo: --to replaces an earlier bundle, and refuses a
// kernel folder that no earlier export wrote.
func TestExportBundleTo(t *testing.T) {
	archive := measuredArchive(t, kernels.SDPASource().Hash)
	dir := t.TempDir()
	args := []string{"export", "--archive", archive, "--to", dir, "--name", "attn"}
	for i := range 2 {
		if _, stderr, code := runCLI(t, args...); code != 0 {
			t.Fatalf("export --to, run %d: exit %d: %s", i+1, code, stderr)
		}
	}
	other := t.TempDir()
	if err := os.MkdirAll(filepath.Join(other, "attn_kernel"), 0o755); err != nil {
		t.Fatal(err)
	}
	mine := filepath.Join(other, "attn_kernel", "sdpa.cu")
	if err := os.WriteFile(mine, []byte("// the main build's own kernel\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, stderr, code := runCLI(t, "export", "--archive", archive, "--to", other, "--name", "attn")
	if code != exitError || !strings.Contains(stderr, mine) || !strings.Contains(stderr, "--force") {
		t.Errorf("exit %d, stderr %q: want a refusal naming %s and --force", code, stderr, mine)
	}
	if got, _ := os.ReadFile(mine); string(got) != "// the main build's own kernel\n" {
		t.Error("the refused kernel file was changed")
	}
}

// TestExportReplayedNoBundle: a replayed archive measured no kernel source,
// so export writes the header and JSON and says why there is no launcher.
func TestExportReplayedNoBundle(t *testing.T) {
	out := t.TempDir()
	_, stderr, code := runCLI(t, "export", "--archive", testArchive2, "--out", out)
	if code != 0 || !strings.Contains(stderr, "no launcher: the archive's results were replayed") {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(out, "evotune_best_launch.h")); err == nil {
		t.Error("a launcher was written for a replayed archive")
	}
}

// TestExportBundleCommit: --commit commits the whole bundle, the kernel
// source included, and nothing else.
func TestExportBundleCommit(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not on PATH")
	}
	repo := t.TempDir()
	for _, args := range [][]string{{"init", "-q"}, {"config", "user.name", "Test"}, {"config", "user.email", "test@example.com"},
		{"config", "commit.gpgsign", "false"}} {
		if out, err := exec.Command("git", append([]string{"-C", repo}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	archive := measuredArchive(t, kernels.SDPASource().Hash)
	if _, stderr, code := runCLI(t, "export", "--archive", archive, "--to", filepath.Join(repo, "third_party"), "--name", "attn", "--commit"); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	out, err := exec.Command("git", "-C", repo, "show", "--name-only", "--format=", "HEAD").Output()
	if err != nil {
		t.Fatal(err)
	}
	want := "third_party/attn.h\nthird_party/attn.json\nthird_party/attn_kernel/sdpa.cu\nthird_party/attn_kernel/sdpa_params.h\n" +
		"third_party/attn_launch.cu\nthird_party/attn_launch.h\nthird_party/attn_plan.h\n"
	if string(out) != want {
		t.Errorf("the commit holds\n%s\nwant\n%s", out, want)
	}
}
