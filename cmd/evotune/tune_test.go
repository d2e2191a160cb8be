package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"evotune/elites"
	"evotune/evo"
	"evotune/runner"
	"evotune/space"
)

// replayFile is the committed synthetic replay file: a latency model of
// the whole SDPA space at the mission shape.
const replayFile = "../../runner/testdata/replay/synthetic-1x8x512x64-fp16.jsonl.gz"

func TestTuneReplayReachesOptimum(t *testing.T) {
	rp, err := runner.LoadReplay(replayFile)
	if err != nil {
		t.Fatal(err)
	}
	optimum, ok := rp.Optimum()
	if !ok {
		t.Fatal("the replay file has no OK result")
	}
	dir := filepath.Join(t.TempDir(), "archive")
	stdout, stderr, code := runCLI(t, "tune", "--replay", replayFile, "--archive", dir, "--strategy", "evo", "--budget", "1h", "--quiet")
	if code != 0 {
		t.Fatalf("tune: exit %d\n%s", code, stderr)
	}
	if !strings.HasPrefix(stdout, "done: --budget 1h spent\n") {
		t.Errorf("summary does not say the time budget ended the search:\n%s", stdout)
	}
	a := readArchive(t, dir)
	best, ok := a.Best()
	if !ok || best.Key != optimum.Key {
		t.Fatalf("best after a 1h budget is %s (%.3f µs), want the replay's optimum %s (%.3f µs)",
			best.Key, best.Objective, optimum.Key, optimum.Objective)
	}
	if !strings.Contains(stdout, "best: "+us(optimum.Objective)+" µs") {
		t.Errorf("summary does not report the best objective %s µs:\n%s", us(optimum.Objective), stdout)
	}
	// The budget is virtual time charged from the recorded costs: the
	// recorded costs of what ran must add up to about the budget.
	var cost float64
	for _, r := range a.Results() {
		cost += r.Cost.Total()
	}
	if perSlot := cost / 4; perSlot < 3600 || perSlot > 3600*1.2 {
		t.Errorf("recorded costs add up to %.0f s over 4 parallel slots, want about the 3600 s budget", perSlot)
	}
	if n, all := len(a.Results()), rp.Len(); n > all/4 {
		t.Errorf("evaluated %d of %d configs: the search did little better than enumeration", n, all)
	}
}

// tuneArgs are the arguments of the resumable runs below: a replay search
// with a fixed seed, parallelism and evaluation budget.
func tuneArgs(archive string) []string {
	return []string{"tune", "--replay", replayFile, "--archive", archive, "--seed", "7", "--parallel", "4", "--evals", "400", "--quiet"}
}

// TestTuneResume interrupts a replay search (SIGKILL, then SIGINT), resumes
// it, and checks it against an uninterrupted run with the same seed.
func TestTuneResume(t *testing.T) {
	bin := evotuneBinary(t)
	refDir := filepath.Join(t.TempDir(), "reference")
	if _, stderr, code := runCLI(t, tuneArgs(refDir)...); code != 0 {
		t.Fatalf("reference run: exit %d\n%s", code, stderr)
	}
	ref := readArchive(t, refDir)

	t.Run("SIGKILL", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "archive")
		log := filepath.Join(dir, "results.jsonl")
		cmd := startTune(t, bin, tuneArgs(dir))
		waitForLog(t, cmd, log, 60_000)
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		if err := <-cmd.done; !killedBy(err, syscall.SIGKILL) {
			t.Fatalf("the run ended before the kill landed (%v); the test needs it mid-run", err)
		}
		before, err := os.ReadFile(log)
		if err != nil {
			t.Fatal(err)
		}
		before = before[:bytes.LastIndexByte(before, '\n')+1] // a torn last line is in flight
		t.Logf("killed after %d complete lines", bytes.Count(before, []byte("\n")))

		stderr := runBinary(t, bin, 0, tuneArgs(dir)...)
		if !strings.Contains(stderr, "evotune: resuming: ") {
			t.Errorf("the second run did not say it resumed:\n%s", stderr)
		}
		after, err := os.ReadFile(log)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(after, before) {
			t.Error("lines written before the kill were lost or changed")
		}
		checkSameSearch(t, ref, readArchive(t, dir))
	})

	t.Run("SIGINT", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "archive")
		log := filepath.Join(dir, "results.jsonl")
		cmd := startTune(t, bin, tuneArgs(dir))
		waitForLog(t, cmd, log, 60_000)
		if err := cmd.Process.Signal(os.Interrupt); err != nil {
			t.Fatal(err)
		}
		err := <-cmd.done
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != exitInterrupted {
			t.Fatalf("after SIGINT: %v, want exit status %d\n%s", err, exitInterrupted, cmd.stderr.String())
		}
		if !strings.HasPrefix(cmd.stdout.String(), "stopped: interrupted") {
			t.Errorf("stdout does not start with the stopped summary:\n%s", cmd.stdout.String())
		}
		data, err := os.ReadFile(log)
		if err != nil {
			t.Fatal(err)
		}
		if len(data) == 0 || data[len(data)-1] != '\n' {
			t.Error("after a clean stop the log ends with a torn line")
		}
		state, err := os.ReadFile(filepath.Join(dir, "state.json"))
		if err != nil || !json.Valid(state) {
			t.Errorf("after a clean stop state.json is not valid JSON (%v)", err)
		}
		if n := bytes.Count(data, []byte("\n")); n >= len(ref.Results()) {
			t.Fatalf("the run finished (%d lines) before SIGINT landed; the test needs it mid-run", n)
		}
		runBinary(t, bin, 0, tuneArgs(dir)...)
		after, _ := os.ReadFile(log)
		if !bytes.HasPrefix(after, data) {
			t.Error("lines written before SIGINT were lost or changed")
		}
		checkSameSearch(t, ref, readArchive(t, dir))
	})
}

// checkSameSearch checks that a resumed search evaluated no config twice
// and ended as the reference did: the same configs evaluated and the same
// elites.
func checkSameSearch(t *testing.T, ref, got *elites.Archive) {
	t.Helper()
	keys := map[string]bool{}
	for _, r := range got.Results() {
		if keys[r.Key] {
			t.Errorf("config %s evaluated twice", r.Key)
		}
		keys[r.Key] = true
	}
	if s := got.Skipped(); len(s) > 0 {
		t.Errorf("the resumed archive has damaged lines: %v", s)
	}
	refKeys := map[string]bool{}
	for _, r := range ref.Results() {
		refKeys[r.Key] = true
	}
	if len(keys) != len(refKeys) {
		t.Errorf("resumed search evaluated %d configs, the uninterrupted one %d", len(keys), len(refKeys))
	}
	for k := range refKeys {
		if !keys[k] {
			t.Errorf("the uninterrupted search evaluated %s, the resumed one did not", k)
			break
		}
	}
	if a, b := eliteKeys(ref.Top(8)), eliteKeys(got.Top(8)); !slices.Equal(a, b) {
		t.Errorf("elites differ from the uninterrupted run:\n got %v\nwant %v", b, a)
	}
}

func eliteKeys(rs []space.Result) []string {
	var out []string
	for _, r := range rs {
		out = append(out, fmt.Sprintf("%s %.3f", r.Key, r.Objective))
	}
	return out
}

// TestTuneLock checks that a second tune on an archive in use refuses.
func TestTuneLock(t *testing.T) {
	bin := evotuneBinary(t)
	dir := filepath.Join(t.TempDir(), "archive")
	args := []string{"tune", "--replay", replayFile, "--archive", dir, "--evals", "30000", "--quiet"}
	first := startTune(t, bin, args)
	waitForLog(t, first, filepath.Join(dir, "results.jsonl"), 1)
	stderr := runBinary(t, bin, exitError, args...)
	want := fmt.Sprintf("archive %s is in use by process %d", dir, first.Process.Pid)
	if !strings.Contains(stderr, want) || strings.Count(stderr, "\n") != 1 {
		t.Errorf("second tune: stderr %q, want one line containing %q", stderr, want)
	}
	first.Process.Kill()
	<-first.done
}

// TestTuneArchiveOfAnotherProblem checks that tune refuses an archive made
// for another problem, naming the field and suggesting --seed-from.
func TestTuneArchiveOfAnotherProblem(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "archive")
	p := space.Problem{Family: "sdpa", Shapes: []space.Shape{{B: 1, H: 8, S: 512, D: 64}}, Dtype: "bf16"}
	a, err := elites.Create(dir, elites.NewMeta(p, space.Env{GPU: "synthetic", Arch: "sm_89", ComputeCap: "8.9", SourceHash: "synthetic"}))
	if err != nil {
		t.Fatal(err)
	}
	a.Close()
	_, stderr, code := runCLI(t, "tune", "--replay", replayFile, "--archive", dir, "--quiet")
	if code != exitError || !strings.Contains(stderr, "dtype bf16, this run is fp16") || !strings.Contains(stderr, "--seed-from") {
		t.Errorf("exit %d, stderr %q; want exit 1 naming the dtype and suggesting --seed-from", code, stderr)
	}
}

// TestTuneWithoutGPU checks that tune with no --replay on a machine with no
// GPU fails clearly and leaves no archive behind.
func TestTuneWithoutGPU(t *testing.T) {
	if n, err := runner.OpenNVML(); err == nil {
		n.Close()
		t.Skip("this machine has a GPU: tune without --replay would really tune")
	}
	dir := filepath.Join(t.TempDir(), "archive")
	_, stderr, code := runCLI(t, "tune", "--archive", dir, "--evals", "1")
	if code != exitError || !strings.Contains(stderr, "GPU") || strings.Count(stderr, "\n") != 1 {
		t.Errorf("exit %d, stderr %q; want exit 1 and one line about the GPU", code, stderr)
	}
	if _, err := os.Stat(dir); err == nil {
		t.Error("a failed tune created the archive directory")
	}
}

// A tuneProcess is an evotune running in the background.
type tuneProcess struct {
	*exec.Cmd
	stdout, stderr bytes.Buffer
	done           chan error // receives Wait's result
}

func startTune(t *testing.T, bin string, args []string) *tuneProcess {
	t.Helper()
	p := &tuneProcess{Cmd: exec.Command(bin, args...), done: make(chan error, 1)}
	p.Stdout, p.Stderr = &p.stdout, &p.stderr
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- p.Wait() }()
	t.Cleanup(func() {
		p.Process.Kill()
	})
	return p
}

// waitForLog waits until the log at path holds at least size bytes while
// p still runs.
func waitForLog(t *testing.T, p *tuneProcess, path string, size int64) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if fi, err := os.Stat(path); err == nil && fi.Size() >= size {
			return
		}
		select {
		case err := <-p.done:
			p.done <- err
			t.Fatalf("evotune ended (%v) before its log reached %d bytes\n%s", err, size, p.stderr.String())
		case <-time.After(time.Millisecond):
		}
	}
	t.Fatalf("the log %s did not reach %d bytes in 60 s", path, size)
}

// runBinary runs bin to completion, checks its exit code, and returns its
// stderr.
func runBinary(t *testing.T, bin string, wantCode int, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	code := 0
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		code = exit.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	if code != wantCode {
		t.Fatalf("evotune %s: exit %d, want %d\n%s", strings.Join(args, " "), code, wantCode, stderr.String())
	}
	return stderr.String()
}

func killedBy(err error, sig syscall.Signal) bool {
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		return false
	}
	ws, ok := exit.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == sig
}

func readArchive(t *testing.T, dir string) *elites.Archive {
	t.Helper()
	a, err := elites.Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestTunePopulationFollowsParallel: with several candidates in flight,
// tune breeds whole generations of at least that many, with the tournament
// and screen chosen for them; with one, the search's own defaults (each
// child bred from every result before it). Explicit flags are kept.
func TestTunePopulationFollowsParallel(t *testing.T) {
	def := evo.DefaultOptions()
	tests := []struct {
		parallel, population, screen        int
		wantPop, wantBatch, wantTour, wantS int
	}{
		{ktParallel, 0, 0, def.Population, 1, def.Tournament, def.Screen},    // a Kernel Tuner cache: the search's own defaults
		{replayParallel, 0, 0, max(def.Population, replayParallel), 0, 3, 8}, // replay: whole generations
		{def.Population + 10, 0, 0, def.Population + 10, 0, 3, 8},            // a GPU machine keeping more in flight
		{def.Population + 10, 12, 0, 12, 0, 3, 8},                            // an explicit --population is kept
		{def.Population + 10, 0, 5, def.Population + 10, 0, 3, 5},            // and an explicit --screen
		{1, 12, 2, 12, 1, def.Tournament, 2},                                 // one at a time, whatever the population
	}
	for _, tt := range tests {
		o := defaultTuneOptions()
		o.Parallel, o.Population, o.Screen = tt.parallel, tt.population, tt.screen
		eo := o.evoOptions(evo.WallClock{}, nil)
		if eo.Population != tt.wantPop || eo.Batch != tt.wantBatch || eo.Tournament != tt.wantTour || eo.Screen != tt.wantS {
			t.Errorf("--parallel %d --population %d --screen %d: population %d, batch %d, tournament %d, screen %d; want %d, %d, %d, %d",
				tt.parallel, tt.population, tt.screen, eo.Population, eo.Batch, eo.Tournament, eo.Screen, tt.wantPop, tt.wantBatch, tt.wantTour, tt.wantS)
		}
		if err := eo.Validate(); err != nil {
			t.Errorf("--parallel %d --population %d: %v", tt.parallel, tt.population, err)
		}
	}
}
