package main

// An archive recorded before a knob of its family existed: its configs do
// not name the knob, and every command reads them as the configs they are
// now (space.Knob.Absent).

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"evotune/cmd/evotune/internal/export"
	"evotune/elites"
	"evotune/space"
)

// fp8ReplayFile is the committed synthetic fp8 replay file: a latency model
// of the fp8 space on sm_89 at the mission shape, qk_f16 included.
const fp8ReplayFile = "../../runner/testdata/replay/synthetic-1x8x512x64-fp8.jsonl.gz"

func fp8TuneArgs(archive string) []string {
	return []string{"tune", "--replay", fp8ReplayFile, "--archive", archive, "--seed", "5", "--parallel", "4", "--evals", "160", "--quiet"}
}

// beforeKnob rewrites the archive in dir as an evotune without the knob
// name would have recorded it: the results with name=value lose the knob
// from their config, key and flags (flag), the others are dropped (no
// config could hold another value then), the rest renumbered, and the
// search state removed (one saved then names configs without the knob). It
// returns how many results it dropped.
func beforeKnob(t *testing.T, dir, name, value, flag string) (dropped int) {
	t.Helper()
	var out [][]byte
	for _, line := range logLines(t, dir) {
		var r map[string]json.RawMessage
		if err := json.Unmarshal(line, &r); err != nil {
			t.Fatal(err)
		}
		var cfg space.Config
		var flags []string
		if err := json.Unmarshal(r["config"], &cfg); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(r["flags"], &flags); err != nil {
			t.Fatal(err)
		}
		if cfg[name] != value {
			dropped++
			continue
		}
		delete(cfg, name)
		flags = slices.DeleteFunc(flags, func(f string) bool { return f == flag })
		r["config"], _ = json.Marshal(cfg)
		r["key"], _ = json.Marshal(cfg.Key())
		r["flags"], _ = json.Marshal(flags)
		r["seq"], _ = json.Marshal(len(out) + 1)
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, append(b, '\n'))
	}
	writeLog(t, dir, out)
	if err := os.Remove(filepath.Join(dir, "state.json")); err != nil {
		t.Fatal(err)
	}
	return dropped
}

// copyDir copies the directory src into a new one.
func copyDir(t *testing.T, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "archive")
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	return dst
}

// completedArchive reads the archive in dir with its results completed, as
// the commands read it.
func completedArchive(t *testing.T, dir string) *elites.Archive {
	t.Helper()
	a := readArchive(t, dir)
	sp := archiveSpace(a)
	if sp == nil {
		t.Fatalf("no space for the problem of %s", dir)
	}
	a.Complete(sp)
	return a
}

// TestArchiveBeforeQKF16 takes a finished fp8 replay search, rewrites it as
// it would have been recorded before qk_f16 existed, and runs the commands
// on it: show and export read its configs with qk_f16=0 and say so in one
// line instead of warning of configs outside the knob space; export renders
// qk_f16's flag; bench times the completed best; and tune, resumed, answers
// every old config from the log, evaluates only the configs the old search
// could not have held, and ends as the search that never lost them.
func TestArchiveBeforeQKF16(t *testing.T) {
	refDir := filepath.Join(t.TempDir(), "reference")
	if _, stderr, code := runCLI(t, fp8TuneArgs(refDir)...); code != 0 {
		t.Fatalf("reference run: exit %d\n%s", code, stderr)
	}
	ref := readArchive(t, refDir)
	old := copyArchive(t, refDir)
	dropped := beforeKnob(t, old, "qk_f16", "0", "-DSDPA_QK_F16=0")
	kept := len(ref.Results()) - dropped
	if dropped == 0 || kept < 40 {
		t.Fatalf("the reference search evaluated %d configs with qk_f16=1 and %d without; the test needs both", dropped, kept)
	}
	var refBest space.Result // the best result the old archive keeps
	for _, r := range ref.Top(len(ref.Results())) {
		if r.Config["qk_f16"] == "0" {
			refBest = r
			break
		}
	}
	// checkStderr checks that cmd said, of the archive in dir, that the
	// old results were completed, and warned of nothing.
	checkStderr := func(t *testing.T, cmd, dir, stderr string) {
		t.Helper()
		note := "evotune: " + dir + "/results.jsonl: " + strconv.Itoa(kept) +
			" results were recorded before knobs of this evotune existed: read with qk_f16=0, the code they compiled\n"
		if strings.Contains(stderr, "warning") || !strings.Contains(stderr, note) {
			t.Errorf("%s: stderr %q, want the line %q and no warning", cmd, stderr, note)
		}
	}

	t.Run("show", func(t *testing.T) {
		stdout, stderr, code := runCLI(t, "show", "--archive", old, "--top", "1", "--format", "json")
		if code != 0 {
			t.Fatalf("exit %d\n%s", code, stderr)
		}
		checkStderr(t, "show", old, stderr)
		var rep struct{ Elites []struct{ Key string } }
		if err := json.Unmarshal([]byte(stdout), &rep); err != nil || len(rep.Elites) != 1 || rep.Elites[0].Key != refBest.Key {
			t.Errorf("show's best: %v %+v, want %s", err, rep, refBest.Key)
		}
	})

	t.Run("export", func(t *testing.T) {
		out := t.TempDir()
		_, stderr, code := runCLI(t, "export", "--archive", old, "--out", out)
		if code != 0 {
			t.Fatalf("exit %d\n%s", code, stderr)
		}
		checkStderr(t, "export", old, stderr)
		data, err := os.ReadFile(filepath.Join(out, "evotune_best.json"))
		if err != nil {
			t.Fatal(err)
		}
		var exp export.Export
		if err := json.Unmarshal(data, &exp); err != nil {
			t.Fatal(err)
		}
		if exp.Key != refBest.Key || exp.Config["qk_f16"] != "0" || !slices.Contains(exp.Flags, "-DSDPA_QK_F16=0") {
			t.Errorf("exported %s with flags %v, want %s with -DSDPA_QK_F16=0", exp.Key, exp.Flags, refBest.Key)
		}
		if slices.Contains(exp.Result.Flags, "-DSDPA_QK_F16=0") {
			t.Errorf("the exported result's recorded flags %v were rewritten", exp.Result.Flags)
		}
		header, err := os.ReadFile(filepath.Join(out, "evotune_best.h"))
		if err != nil || !bytes.Contains(header, []byte("#define SDPA_QK_F16 0\n")) {
			t.Errorf("the header does not define SDPA_QK_F16 0 (%v)", err)
		}
	})

	t.Run("bench", func(t *testing.T) {
		// The fake GPU is an H100: its fp8 space has wgmma too, which
		// this sm_89 search never named (mma.sync: wgmma=off).
		_, out, script := benchFixture(t, fakePython)
		gpu := &fakeBenchGPU{}
		stdout, err := runBenchCLI(t, gpu, "--archive", copyDir(t, old), "--out", out, "--torch-script", script)
		if err != nil {
			t.Fatalf("bench: %v", err)
		}
		if !strings.Contains(stdout, "| 1x8x512x64 | best |") {
			t.Errorf("bench did not time the archive's best:\n%s", stdout)
		}
		want, _ := space.FromKey(refBest.Key)
		want["wgmma"] = "off"
		if !slices.Contains(gpu.evaluated, "1x8x512x64 "+want.Key()) {
			t.Errorf("bench timed %q, want the completed best %s", gpu.evaluated, want.Key())
		}
		rep, ok, err := elites.ReadBench(out)
		if err != nil || !ok || rep.Best != refBest.Key || rep.BestConfig["qk_f16"] != "0" {
			t.Errorf("bench.json names the best %s (%v, %v), want %s", rep.Best, ok, err, refBest.Key)
		}
	})

	t.Run("repeated since", func(t *testing.T) {
		// An evotune that could not read the old configs evaluated the
		// best one again, under its full key, and measured it slower: that
		// result stands for the config, the old one is named once and not
		// ranked, and nothing is outside the space.
		dir := copyDir(t, old)
		oldBest, ok := completedArchive(t, old).Lookup(refBest.Key)
		if !ok {
			t.Fatalf("the old archive does not hold %s", refBest.Key)
		}
		again := refBest
		again.Seq, again.Objective = kept+1, refBest.Objective+0.5
		line, err := json.Marshal(again)
		if err != nil {
			t.Fatal(err)
		}
		f, err := os.OpenFile(filepath.Join(dir, "results.jsonl"), os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write(append(line, '\n')); err != nil {
			t.Fatal(err)
		}
		f.Close()
		stdout, stderr, code := runCLI(t, "show", "--archive", dir, "--format", "json")
		if code != 0 {
			t.Fatalf("exit %d\n%s", code, stderr)
		}
		for _, want := range []string{
			"evotune: " + dir + "/results.jsonl: " + strconv.Itoa(kept-1) + " results were recorded before knobs of this evotune existed: read with qk_f16=0, the code they compiled\n",
			"evotune: warning: " + dir + "/results.jsonl: 1 results recorded before knobs of this evotune existed repeat a config evaluated since, whose result stands (first: result " + strconv.Itoa(oldBest.Seq) + ")\n",
		} {
			if !strings.Contains(stderr, want) {
				t.Errorf("stderr lacks %q:\n%s", want, stderr)
			}
		}
		if strings.Contains(stderr, "outside the knob space") {
			t.Errorf("stderr warns of configs outside the knob space:\n%s", stderr)
		}
		var rep struct{ Elites []struct{ Seq int } }
		if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
			t.Fatal(err)
		}
		for _, e := range rep.Elites {
			if e.Seq == oldBest.Seq {
				t.Errorf("show ranks the repeated result %d beside result %d, which stands for its config", oldBest.Seq, kept+1)
			}
		}
		if _, stderr, code := runCLI(t, "export", "--archive", dir, "--out", t.TempDir()); code != 0 {
			t.Errorf("export: exit %d\n%s", code, stderr)
		}
	})

	t.Run("tune resumes", func(t *testing.T) {
		dir := copyDir(t, old)
		logPath := filepath.Join(dir, "results.jsonl")
		before, err := os.ReadFile(logPath)
		if err != nil {
			t.Fatal(err)
		}
		stdout, stderr, code := runCLI(t, fp8TuneArgs(dir)...)
		if code != 0 {
			t.Fatalf("tune: exit %d\n%s", code, stderr)
		}
		checkStderr(t, "tune", dir, stderr)
		after, err := os.ReadFile(logPath)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(after, before) {
			t.Fatal("the resumed search changed the lines recorded before it")
		}
		if got := bytes.Count(after, []byte("\n")) - bytes.Count(before, []byte("\n")); got != dropped {
			t.Errorf("the resumed search evaluated %d configs, want the %d with qk_f16=1 it could not find", got, dropped)
		}
		if !strings.Contains(stdout, "done: --evals 160 reached\n160 evaluations") {
			t.Errorf("the summary does not count the old results as the evaluations they were:\n%s", stdout)
		}
		got := completedArchive(t, dir)
		seen := map[string]bool{}
		for _, r := range got.Results() {
			if seen[r.Key] {
				t.Errorf("config %s evaluated twice", r.Key)
			}
			seen[r.Key] = true
		}
		refKeys, gotKeys := ref.Keys(), got.Keys()
		slices.Sort(refKeys)
		slices.Sort(gotKeys)
		if !slices.Equal(refKeys, gotKeys) {
			t.Errorf("logged %d configs, the search that never lost qk_f16 %d (or other ones)", len(gotKeys), len(refKeys))
		}
		if a, b := eliteKeys(ref.Top(8)), eliteKeys(got.Top(8)); !slices.Equal(a, b) {
			t.Errorf("elites differ from the search that never lost qk_f16:\n got %v\nwant %v", b, a)
		}
	})
}
