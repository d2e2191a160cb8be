package main

// Process faults on the real binary with the replay evaluator: kills at
// random moments, torn logs, a full disk, and a second process on the same
// archive.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"evotune/elites"
)

// faultArgs are the arguments of the runs below: small enough that twenty
// interrupted runs fit in a few seconds each on two cores.
func faultArgs(archive string) []string {
	return []string{"tune", "--replay", replayFile, "--archive", archive, "--seed", "11", "--parallel", "4", "--evals", "120", "--quiet"}
}

// completeLines returns the whole lines of the log at path (a torn last
// line is the one in flight when the process died).
func completeLines(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return b[:bytes.LastIndexByte(b, '\n')+1]
}

// openWritable opens the archive in dir as tune would (lock, identity) and
// closes it again: after a kill the archive must open.
func openWritable(t *testing.T, dir string) *elites.Archive {
	t.Helper()
	view, err := elites.Read(dir)
	if err != nil {
		t.Fatalf("reading the archive after a kill: %v", err)
	}
	a, err := elites.Open(dir, view.Meta(), elites.OpenOptions{})
	if err != nil {
		t.Fatalf("opening the archive after a kill: %v", err)
	}
	return a
}

// TestTuneSurvivesTwentyKills SIGKILLs a replay search 20 times at seeded
// moments, resuming each time: each kill waits for 0 to 7 more logged
// results than the run started with (0: during start-up), so the kills walk
// through the run from start-up to its last evaluations. After every kill the
// archive opens, every line written before the kill is still there after the
// next run, and no config is recorded twice; a run that completes holds the
// elites of an uninterrupted run. A run can outrun its kill on a loaded
// machine (the polling here is starved while the run goes on): its archive is
// checked as complete and the remaining kills start a fresh archive, so that
// all 20 land mid-run whatever the load.
func TestTuneSurvivesTwentyKills(t *testing.T) {
	t.Parallel() // slow (subprocesses, replays or nvcc) and independent of the other tests
	if testing.Short() {
		t.Skip("twenty killed and resumed runs take about half a minute; skipped with -short (TestTuneResume kills once)")
	}
	bin := evotuneBinary(t)
	refDir := filepath.Join(t.TempDir(), "reference")
	runBinary(t, bin, 0, faultArgs(refDir)...)
	ref := readArchive(t, refDir)

	// Kill points: a number of results for the run to log beyond those it
	// found, plus a random delay of up to 3 ms, so that kills land between
	// lines, inside a write, and around state saves.
	rng := rand.New(rand.NewPCG(20, 26))
	const want, maxRuns = 20, 100
	dir := filepath.Join(t.TempDir(), "archive")
	log := filepath.Join(dir, "results.jsonl")
	kills, archives := 0, 1
	for run := 1; kills < want; run++ {
		if run > maxRuns {
			t.Fatalf("only %d of %d kills landed mid-run in %d runs", kills, want, maxRuns)
		}
		before := completeLines(t, log)
		target := bytes.Count(before, []byte("\n")) + rng.IntN(8)
		p := startTune(t, bin, faultArgs(dir))
		// Poll the log's size and count its lines only when it grew: the
		// polling must not take the CPU from the run it waits for.
		exited, size := false, int64(-1)
		for !exited {
			if fi, err := os.Stat(log); err == nil && fi.Size() != size {
				size = fi.Size()
				if bytes.Count(completeLines(t, log), []byte("\n")) >= target {
					break
				}
			}
			select {
			case err := <-p.done:
				p.done <- err
				exited = true
			case <-time.After(time.Millisecond):
			}
		}
		time.Sleep(time.Duration(rng.IntN(3000)) * time.Microsecond)
		p.Process.Kill()
		err := <-p.done
		if err == nil {
			t.Logf("run %d finished before its kill (after %d kills): checked as complete, a fresh archive follows", run, kills)
			if !bytes.HasPrefix(completeLines(t, log), before) {
				t.Fatalf("run %d lost or changed lines recorded before it", run)
			}
			checkSameSearch(t, ref, readArchive(t, dir))
			archives++
			dir = filepath.Join(t.TempDir(), fmt.Sprintf("archive-%d", archives))
			log = filepath.Join(dir, "results.jsonl")
			continue
		}
		if !killedBy(err, syscall.SIGKILL) {
			t.Fatalf("kill %d: the run ended with %v, not by the kill\n%s", kills+1, err, p.stderr.String())
		}
		kills++
		if strings.Contains(p.stderr.String(), "in use") {
			t.Fatalf("kill %d: the lock of the killed run blocked this one:\n%s", kills, p.stderr.String())
		}
		after := completeLines(t, log)
		if !bytes.HasPrefix(after, before) {
			t.Fatalf("kill %d: lines recorded before the previous kill were lost or changed", kills)
		}
		if _, err := os.Stat(filepath.Join(dir, "meta.json")); err != nil {
			continue // killed before the archive existed
		}
		a := openWritable(t, dir)
		keys := map[string]bool{}
		for _, r := range a.Results() {
			if keys[r.Key] {
				t.Errorf("kill %d: config %s recorded twice", kills, r.Key)
			}
			keys[r.Key] = true
		}
		if n := bytes.Count(after, []byte("\n")); len(keys) != n {
			t.Errorf("kill %d: the archive holds %d results, the log %d whole lines", kills, len(keys), n)
		}
		a.Close()
	}
	before := completeLines(t, log)
	runBinary(t, bin, 0, faultArgs(dir)...)
	if !bytes.HasPrefix(completeLines(t, log), before) {
		t.Error("the final run lost or changed lines recorded before it")
	}
	t.Logf("%d kills over %d archives, then a run to completion (%d of %d results logged before it)",
		kills, archives, bytes.Count(before, []byte("\n")), len(ref.Results()))
	checkSameSearch(t, ref, readArchive(t, dir))
}

// TestShowTruncatedLog cuts an archive's log at seeded byte offsets, as a
// crash or a full disk may leave it: evotune show warns about the torn line
// and reports every whole line before it.
func TestShowTruncatedLog(t *testing.T) {
	t.Parallel() // slow (subprocesses, replays or nvcc) and independent of the other tests
	src := filepath.Join(t.TempDir(), "archive")
	if _, stderr, code := runCLI(t, "tune", "--replay", replayFile, "--archive", src, "--seed", "3", "--evals", "30", "--quiet"); code != 0 {
		t.Fatalf("tune: exit %d\n%s", code, stderr)
	}
	full, err := os.ReadFile(filepath.Join(src, "results.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(5, 8))
	offsets := []int{0, 1, len(full) - 1, bytes.IndexByte(full, '\n') + 1}
	for range 8 {
		offsets = append(offsets, rng.IntN(len(full)))
	}
	for _, off := range offsets {
		t.Run(strconv.Itoa(off), func(t *testing.T) {
			dir := copyArchive(t, src)
			if err := os.Truncate(filepath.Join(dir, "results.jsonl"), int64(off)); err != nil {
				t.Fatal(err)
			}
			whole := bytes.Count(full[:off], []byte("\n"))
			torn := off > 0 && full[off-1] != '\n'
			stdout, stderr, code := runCLI(t, "show", "--archive", dir, "--format", "json")
			if code != 0 {
				t.Fatalf("show: exit %d\n%s", code, stderr)
			}
			var rep struct {
				Evaluated int `json:"evaluated"`
			}
			if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
				t.Fatalf("show --format json: %v\n%s", err, stdout)
			}
			if rep.Evaluated != whole {
				t.Errorf("show reports %d results, the log has %d whole lines before offset %d", rep.Evaluated, whole, off)
			}
			warned := strings.Contains(stderr, "evotune: warning: ") && strings.Contains(stderr, "results.jsonl")
			if warned != torn {
				t.Errorf("torn line %v, but show warned %v: %q", torn, warned, stderr)
			}
			if torn && strings.Count(stderr, "\n") != 1 {
				t.Errorf("want one warning line for the one torn line, got %q", stderr)
			}
			// The table view says the same.
			if _, stderr, code := runCLI(t, "show", "--archive", dir); code != 0 {
				t.Errorf("show (table): exit %d\n%s", code, stderr)
			}
		})
	}
}

// copyArchive copies the archive files in src into a new directory.
func copyArchive(t *testing.T, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "archive")
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"meta.json", "results.jsonl", "state.json"} {
		b, err := os.ReadFile(filepath.Join(src, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// TestTuneDiskFull runs tune with a file size limit (RLIMIT_FSIZE, set by
// prlimit) that the log reaches part-way, as a full disk would stop it: the
// run fails with one clear line and exit 1, the archive opens with no torn
// line, and a run without the limit completes the same search as an
// uninterrupted one.
func TestTuneDiskFull(t *testing.T) {
	t.Parallel() // slow (subprocesses, replays or nvcc) and independent of the other tests
	if testing.Short() {
		t.Skip("three searches take about ten seconds; skipped with -short")
	}
	prlimit, err := exec.LookPath("prlimit")
	if err != nil {
		t.Skip("prlimit (util-linux) is not installed; elites' injected-writer tests cover write failures")
	}
	bin := evotuneBinary(t)
	refDir := filepath.Join(t.TempDir(), "reference")
	runBinary(t, bin, 0, faultArgs(refDir)...)
	ref := readArchive(t, refDir)

	for _, limit := range []int{40_000, 123_457} {
		t.Run(strconv.Itoa(limit), func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "archive")
			args := append([]string{"--fsize=" + strconv.Itoa(limit), bin}, faultArgs(dir)...)
			stderr := runBinary(t, prlimit, exitError, args...)
			if !strings.Contains(stderr, "file too large") || strings.Count(stderr, "\n") != 1 || !strings.HasPrefix(stderr, "evotune: ") {
				t.Errorf("stderr %q: want one line that says the file grew too large", stderr)
			}
			logData, err := os.ReadFile(filepath.Join(dir, "results.jsonl"))
			if err != nil {
				t.Fatal(err)
			}
			if len(logData) == 0 || logData[len(logData)-1] != '\n' || len(logData) > limit {
				t.Errorf("the log after the failure is %d bytes ending %q; want whole lines within the %d-byte limit",
					len(logData), logData[max(0, len(logData)-1):], limit)
			}
			a := openWritable(t, dir)
			if s := a.Skipped(); len(s) > 0 {
				t.Errorf("the archive has damaged lines after the failed write: %v", s)
			}
			a.Close()
			runBinary(t, bin, 0, faultArgs(dir)...)
			checkSameSearch(t, ref, readArchive(t, dir))
		})
	}
}

// TestTuneStaleLock checks that the lock of a SIGKILLed tune, still on disk
// with its pid, does not block the next run, while a live one does.
func TestTuneStaleLock(t *testing.T) {
	t.Parallel() // slow (subprocesses, replays or nvcc) and independent of the other tests
	bin := evotuneBinary(t)
	dir := filepath.Join(t.TempDir(), "archive")
	log := filepath.Join(dir, "results.jsonl")
	args := []string{"tune", "--replay", replayFile, "--archive", dir, "--evals", "30000", "--quiet"}
	p := startTune(t, bin, args)
	waitForLog(t, p, log, 1)

	// While it runs, a second tune refuses and names it.
	stderr := runBinary(t, bin, exitError, args...)
	if want := fmt.Sprintf("in use by process %d", p.Process.Pid); !strings.Contains(stderr, want) {
		t.Errorf("second tune while the first runs: %q, want it to contain %q", stderr, want)
	}

	p.Process.Kill()
	if err := <-p.done; !killedBy(err, syscall.SIGKILL) {
		t.Fatalf("the first run ended with %v before the kill", err)
	}
	lock, err := os.ReadFile(filepath.Join(dir, "lock"))
	if err != nil || strings.TrimSpace(string(lock)) != strconv.Itoa(p.Process.Pid) {
		t.Fatalf("lock file after the kill: %q (%v); want the killed pid left behind", lock, err)
	}
	// Resume for a few more evaluations: --evals counts the resumed ones.
	done := bytes.Count(completeLines(t, log), []byte("\n"))
	args[len(args)-2] = strconv.Itoa(done + 5)
	stderr = runBinary(t, bin, 0, args...)
	if strings.Contains(stderr, "in use") {
		t.Errorf("the stale lock blocked the resumed run: %q", stderr)
	}
}
