package main

// The log is the truth: a search state that is lost, damaged or disagrees
// with the log is rebuilt from the log, and every reader checks the
// archive's identity against the results it reads.

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"evotune/elites"
	"evotune/space"
)

// rebuildArgs are the arguments of the runs below.
func rebuildArgs(archive string, more ...string) []string {
	return append([]string{"tune", "--replay", replayFile, "--archive", archive, "--seed", "5", "--parallel", "4", "--evals", "160", "--quiet"}, more...)
}

// referenceArchive runs the uninterrupted search once for the tests of this
// file and returns its archive directory.
func referenceArchive(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "reference")
	if _, stderr, code := runCLI(t, rebuildArgs(dir)...); code != 0 {
		t.Fatalf("reference run: exit %d\n%s", code, stderr)
	}
	return dir
}

// logLines returns the lines of the archive's log, newlines kept.
func logLines(t *testing.T, dir string) [][]byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "results.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	return bytes.SplitAfter(bytes.TrimSuffix(data, []byte("\n")), []byte("\n"))
}

func writeLog(t *testing.T, dir string, lines [][]byte) {
	t.Helper()
	data := bytes.Join(lines, nil)
	if len(data) > 0 && data[len(data)-1] != '\n' {
		data = append(data, '\n')
	}
	if err := os.WriteFile(filepath.Join(dir, "results.jsonl"), data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// checkSameOutcome checks that the archive in dir ends with the elites and
// the logged configs of the reference, whatever damaged lines it keeps.
func checkSameOutcome(t *testing.T, refDir, dir string, damaged int) {
	t.Helper()
	ref, got := readArchive(t, refDir), readArchive(t, dir)
	if n := len(got.Skipped()); n != damaged {
		t.Errorf("the archive has %d damaged lines, want %d: %v", n, damaged, got.Skipped())
	}
	keys := func(a []string) []string { slices.Sort(a); return a }
	var refKeys, gotKeys []string
	for _, r := range ref.Results() {
		refKeys = append(refKeys, r.Key)
	}
	for _, r := range got.Results() {
		gotKeys = append(gotKeys, r.Key)
	}
	if !slices.Equal(keys(refKeys), keys(gotKeys)) {
		t.Errorf("logged %d configs, the uninterrupted run %d (or other ones)", len(gotKeys), len(refKeys))
	}
	if a, b := eliteKeys(ref.Top(8)), eliteKeys(got.Top(8)); !slices.Equal(a, b) {
		t.Errorf("elites differ from the uninterrupted run:\n got %v\nwant %v", b, a)
	}
}

// TestTuneRebuildsState damages the state or the log of a finished replay
// search in each way a user found, then runs the same command: the search
// state is rebuilt from the log, said in one line, the results the log lacks
// are run again and nothing else, and the archive ends as the uninterrupted
// run's.
func TestTuneRebuildsState(t *testing.T) {
	t.Parallel() // slow (subprocesses, replays or nvcc) and independent of the other tests
	refDir := referenceArchive(t)
	ref := logLines(t, refDir)
	bestSeq := must(readArchive(t, refDir).Best()).Seq

	tests := []struct {
		name    string
		damage  func(t *testing.T, dir string)
		why     string // in the rebuild line
		rerun   int    // results evaluated again
		damaged int    // lines left damaged in the log
	}{
		{"log truncated, state intact", func(t *testing.T, dir string) {
			writeLog(t, dir, ref[:len(ref)/3])
		}, "the log lacks", len(ref) - len(ref)/3, 0},
		{"best line damaged", func(t *testing.T, dir string) {
			lines := slices.Clone(ref)
			lines[bestSeq-1] = bytes.Replace(lines[bestSeq-1], []byte(`"objective_us":`), []byte(`"objective_us":1e999,"was":`), 1)
			writeLog(t, dir, lines)
		}, "the log lacks 1 of", 1, 1},
		{"log cut to a tenth", func(t *testing.T, dir string) {
			writeLog(t, dir, ref[:len(ref)/10])
		}, "the log lacks", len(ref) - len(ref)/10, 0},
		{"state corrupt", func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(dir, "state.json"), []byte(`{"version": 1, "gen`), 0o644)
		}, "unexpected end of JSON input", 0, 0},
		{"state deleted", func(t *testing.T, dir string) {
			os.Remove(filepath.Join(dir, "state.json"))
		}, "state.json is missing", 0, 0},
		{"state deleted, log truncated", func(t *testing.T, dir string) {
			os.Remove(filepath.Join(dir, "state.json"))
			writeLog(t, dir, ref[:len(ref)/2])
		}, "state.json is missing", len(ref) - len(ref)/2, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := copyArchive(t, refDir)
			tt.damage(t, dir)
			before := len(logLines(t, dir))
			stdout, stderr, code := runCLI(t, rebuildArgs(dir)...)
			if code != 0 {
				t.Fatalf("tune: exit %d\n%s", code, stderr)
			}
			var rebuilt []string
			for _, line := range strings.Split(stderr, "\n") {
				if strings.Contains(line, "rebuilding the search state from the log") {
					rebuilt = append(rebuilt, line)
				}
			}
			if len(rebuilt) != 1 || !strings.Contains(rebuilt[0], tt.why) || !strings.Contains(rebuilt[0], dir) {
				t.Errorf("want one line saying the state was rebuilt because %q, naming %s; stderr:\n%s", tt.why, dir, stderr)
			}
			if got := len(logLines(t, dir)) - before; got != tt.rerun {
				t.Errorf("%d results run again, want %d (the ones the log lacks)", got, tt.rerun)
			}
			if !strings.Contains(stdout, "done: --evals 160 reached\n160 evaluations") {
				t.Errorf("the summary does not count the log's evaluations with this run's:\n%s", stdout)
			}
			checkSameOutcome(t, refDir, dir, tt.damaged)
		})
	}
}

// TestReadersRefuseEditedMeta edits the shapes in meta.json of a finished
// archive: every command that reads it refuses, naming the field and both
// values, as tune does.
func TestReadersRefuseEditedMeta(t *testing.T) {
	t.Parallel() // slow (subprocesses, replays or nvcc) and independent of the other tests
	refDir := referenceArchive(t)
	dir := copyArchive(t, refDir)
	path := filepath.Join(dir, "meta.json")
	meta, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	edited := bytes.Replace(meta, []byte(`"s": 512`), []byte(`"s": 1024`), 1)
	if bytes.Equal(edited, meta) {
		t.Fatalf("meta.json holds no shape to edit:\n%s", meta)
	}
	if err := os.WriteFile(path, edited, 0o644); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	for _, args := range [][]string{
		{"show", "--archive", dir},
		{"show", "--archive", dir, "--format", "json"},
		{"report", "--archive", dir, "--out", filepath.Join(out, "report")},
		{"export", "--archive", dir, "--out", filepath.Join(out, "export")},
		{"bench", "--archive", dir, "--out", filepath.Join(out, "bench")},
		{"merge", "--archive", filepath.Join(out, "merged"), dir},
		{"merge", "--archive", copyArchive(t, refDir), dir},
	} {
		stdout, stderr, code := runCLI(t, args...)
		if code != exitError || !strings.Contains(stderr, "meta.json says shapes 1x8x1024x64, the results 1x8x512x64") ||
			!strings.Contains(stderr, dir) || stdout != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 1 naming the shapes of meta.json and of the results", args, code, stdout, stderr)
		}
	}
	if _, stderr, code := runCLI(t, rebuildArgs(dir)...); code != exitError || !strings.Contains(stderr, "shapes 1x8x1024x64, this run is 1x8x512x64") {
		t.Errorf("tune: exit %d, stderr %q; want exit 1 naming the shapes", code, stderr)
	}
	if files, _ := filepath.Glob(filepath.Join(out, "*", "*")); len(files) > 0 {
		t.Errorf("commands wrote %v from an archive whose meta.json disagrees with its results", files)
	}
}

// TestReadersNameDamagedBest damages the log line of the best result: show
// and report name it in their own output, export refuses to export the
// second best unless --force, and after tune has evaluated it again nothing
// is hidden any more.
func TestReadersNameDamagedBest(t *testing.T) {
	t.Parallel() // slow (subprocesses, replays or nvcc) and independent of the other tests
	refDir := referenceArchive(t)
	ref := readArchive(t, refDir)
	best := must(ref.Best())
	second := ref.Top(2)[1]
	dir := copyArchive(t, refDir)
	lines := logLines(t, dir)
	lines[best.Seq-1] = bytes.Replace(lines[best.Seq-1], []byte(`"objective_us":`), []byte(`"objective_us":1e999,"was":`), 1)
	writeLog(t, dir, lines)
	named := fmt.Sprintf("line %d of %s/results.jsonl is damaged", best.Seq, dir)

	for _, format := range []string{"table", "markdown", "json"} {
		stdout, _, code := runCLI(t, "show", "--archive", dir, "--format", format)
		if code != 0 || !strings.Contains(stdout, named) || !strings.Contains(stdout, "may have held an elite") {
			t.Errorf("show --format %s: exit %d; stdout does not name %q:\n%s", format, code, named, stdout)
		}
	}
	reportDir := filepath.Join(t.TempDir(), "report")
	stdout, _, code := runCLI(t, "report", "--archive", dir, "--out", reportDir)
	md, _ := os.ReadFile(filepath.Join(reportDir, "report.md"))
	if code != 0 || !strings.Contains(stdout, named) || !strings.Contains(string(md), named) {
		t.Errorf("report: exit %d; neither stdout nor report.md may miss %q:\n%s", code, named, stdout)
	}

	out := filepath.Join(t.TempDir(), "export")
	_, stderr, code := runCLI(t, "export", "--archive", dir, "--out", out)
	if code != exitError || !strings.Contains(stderr, fmt.Sprintf("line %d of %s/results.jsonl is damaged", best.Seq, dir)) ||
		!strings.Contains(stderr, "--force") {
		t.Errorf("export: exit %d, stderr %q; want exit 1 naming the damaged line and --force", code, stderr)
	}
	if files, _ := filepath.Glob(filepath.Join(out, "*")); len(files) > 0 {
		t.Errorf("export wrote %v while a better result's line is damaged", files)
	}
	stdout, stderr, code = runCLI(t, "export", "--archive", dir, "--out", out, "--force")
	if code != 0 || !strings.Contains(stdout, named) || !strings.Contains(stdout, "exported anyway (--force)") || !strings.Contains(stdout, us(second.Objective)+" µs") {
		t.Errorf("export --force: exit %d, stdout %q, stderr %q; want the second best exported with the damaged line named", code, stdout, stderr)
	}

	// tune evaluates the damaged config again; then nothing is hidden.
	if _, stderr, code := runCLI(t, rebuildArgs(dir)...); code != 0 {
		t.Fatalf("tune: exit %d\n%s", code, stderr)
	}
	stdout, _, code = runCLI(t, "show", "--archive", dir)
	if code != 0 || strings.Contains(stdout, "damaged") || !strings.Contains(stdout, us(best.Objective)) {
		t.Errorf("show after tune evaluated the damaged config again: exit %d\n%s", code, stdout)
	}
	stdout, stderr, code = runCLI(t, "export", "--archive", dir, "--out", out)
	if code != 0 || !strings.Contains(stdout, us(best.Objective)+" µs") {
		t.Errorf("export after tune: exit %d, stdout %q, stderr %q; want the best exported", code, stdout, stderr)
	}
}

// TestResumeNamesIgnoredFlags resumes a finished archive with a larger
// budget and other search flags: one line names the flags ignored and the
// settings in force, the banner shows the settings in force, and the search
// ends as an uninterrupted run with the archive's settings.
func TestResumeNamesIgnoredFlags(t *testing.T) {
	t.Parallel() // slow (subprocesses, replays or nvcc) and independent of the other tests
	refDir := referenceArchive(t)
	longer := func(dir string, more ...string) []string {
		args := rebuildArgs(dir, more...)
		args[slices.Index(args, "--evals")+1] = "200"
		return slices.DeleteFunc(args, func(a string) bool { return a == "--quiet" })
	}
	want := filepath.Join(t.TempDir(), "uninterrupted")
	if _, stderr, code := runCLI(t, longer(want)...); code != 0 {
		t.Fatalf("uninterrupted run: exit %d\n%s", code, stderr)
	}
	dir := copyArchive(t, refDir)
	_, stderr, code := runCLI(t, longer(dir, "--strategy", "random", "--seed", "99", "--population", "12", "--screen", "8", "--restart=false", "--progress-every", "1h")...)
	if code != 0 {
		t.Fatalf("resume: exit %d\n%s", code, stderr)
	}
	var ignored, banner []string
	for _, line := range strings.Split(stderr, "\n") {
		if strings.Contains(line, "ignoring") {
			ignored = append(ignored, line)
		}
		if strings.HasPrefix(line, "evotune: tuning ") {
			banner = append(banner, line)
		}
	}
	const inForce = "evo strategy, seed 5, population 8, elites 8, screen 8"
	if len(ignored) != 1 || !strings.Contains(ignored[0], "ignoring --strategy random, --seed 99, --population 12, --restart false; in force: "+inForce) {
		t.Errorf("want one line naming the ignored flags (not --screen 8, which is in force) and the settings in force; stderr:\n%s", stderr)
	}
	if len(banner) != 1 || !strings.Contains(banner[0], "("+inForce+")") {
		t.Errorf("the banner does not show the settings in force:\n%s", stderr)
	}
	checkSameOutcome(t, want, dir, 0)

	// The same flags on a new archive are not ignored: nothing to say.
	fresh := filepath.Join(t.TempDir(), "fresh")
	if _, stderr, code := runCLI(t, rebuildArgs(fresh, "--strategy", "random", "--seed", "99")...); code != 0 || strings.Contains(stderr, "ignoring") {
		t.Errorf("a new search: exit %d, stderr %q", code, stderr)
	}
	// --restart=false reaches a new search and its banner.
	noRestart := filepath.Join(t.TempDir(), "no-restart")
	args := slices.DeleteFunc(rebuildArgs(noRestart, "--restart=false"), func(a string) bool { return a == "--quiet" })
	if _, stderr, code := runCLI(t, append(args, "--progress-every", "1h")...); code != 0 || !strings.Contains(stderr, "screen 8, no restarts)") {
		t.Errorf("a new search with --restart=false: exit %d, the banner does not say so:\n%s", code, stderr)
	}
}

// TestMergeNamesSource merges archives that disagree in both directions and
// sources that are not archives: every error names the archive that holds
// each value.
func TestMergeNamesSource(t *testing.T) {
	t.Parallel() // slow (subprocesses, replays or nvcc) and independent of the other tests
	synthetic := referenceArchive(t)
	meta := readArchive(t, synthetic).Meta()
	if meta.SourceHash == "" {
		t.Fatal("the replay archive has no kernel source hash")
	}
	real := filepath.Join(t.TempDir(), "real")
	m := elites.NewMeta(meta.Problem, space.Env{GPU: meta.GPU, Arch: meta.Arch, NVCC: meta.NVCC, SourceHash: "5c08aa"})
	a, err := elites.Create(real, m)
	if err != nil {
		t.Fatal(err)
	}
	a.Close()
	notArchive := t.TempDir()
	for _, tt := range []struct {
		dst, src string
		want     string
	}{
		{real, synthetic, "archive " + synthetic + " was made for kernel source hash " + meta.SourceHash + ", the destination " + real + " is 5c08aa"},
		{copyArchive(t, synthetic), real, "archive " + real + " was made for kernel source hash 5c08aa, the destination "},
		{real, notArchive, notArchive + " is not an archive"},
	} {
		_, stderr, code := runCLI(t, "merge", "--archive", tt.dst, tt.src)
		if code != exitError || !strings.Contains(stderr, tt.want) {
			t.Errorf("merge --archive %s %s: exit %d, stderr %q; want exit 1 and %q", tt.dst, tt.src, code, stderr, tt.want)
		}
	}
	// A new destination takes the first source's identity; the second
	// source is named against it.
	dst := filepath.Join(t.TempDir(), "new")
	_, stderr, code := runCLI(t, "merge", "--archive", dst, synthetic, real)
	if want := "archive " + real + " was made for kernel source hash 5c08aa, the destination " + dst + " is " + meta.SourceHash; code != exitError || !strings.Contains(stderr, want) {
		t.Errorf("merge into a new archive: exit %d, stderr %q; want %q", code, stderr, want)
	}
}

// TestReadersNameRebuiltIndex checks that a reader says on its own stderr,
// in one line, that a damaged results.idx was rebuilt from the log, and that
// the output is what the log says.
func TestReadersNameRebuiltIndex(t *testing.T) {
	dir := copyArchive(t, testArchive)
	want, _, code := runCLI(t, "show", "--archive", dir)
	if code != 0 {
		t.Fatalf("show: exit %d", code)
	}
	if err := os.WriteFile(filepath.Join(dir, "results.idx"), []byte("not an index"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, stderr, code := runCLI(t, "show", "--archive", dir)
	if code != 0 || got != want {
		t.Errorf("show after a damaged index: exit %d, output differs: %v", code, got != want)
	}
	if !strings.Contains(stderr, "evotune: archive "+dir+": rebuilding results.idx from the log") {
		t.Errorf("stderr %q does not say the index was rebuilt", stderr)
	}
}
