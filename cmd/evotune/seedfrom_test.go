package main

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestTuneSeedFrom starts a replay search from the elites of another
// archive: its first generation evaluates the family default and then those
// elites, best first. Running the same command again resumes the seeded
// archive instead of seeding it anew.
func TestTuneSeedFrom(t *testing.T) {
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	if _, stderr, code := runCLI(t, "tune", "--replay", replayFile, "--archive", src, "--evals", "96", "--parallel", "1", "--quiet"); code != 0 {
		t.Fatalf("tune of the source archive: exit %d\n%s", code, stderr)
	}
	args := []string{"tune", "--replay", replayFile, "--archive", dst, "--seed-from", src, "--seed", "3",
		"--population", "8", "--elites", "4", "--evals", "16", "--parallel", "1", "--quiet"}
	_, stderr, code := runCLI(t, args...)
	if code != 0 || !strings.Contains(stderr, "seeding from 4 of the 4 best configs of "+src) {
		t.Fatalf("seeded tune: exit %d, stderr %q", code, stderr)
	}
	var want []string
	for _, r := range readArchive(t, src).Top(4) {
		want = append(want, r.Key)
	}
	var got []string
	for _, r := range readArchive(t, dst).Results() {
		got = append(got, r.Key)
	}
	if len(got) != 16 || !slices.Equal(got[1:5], want) {
		t.Fatalf("seeded archive evaluated %v first (after the default), want the source's elites %v", got[:min(5, len(got))], want)
	}

	args[len(args)-4] = "24" // --evals: resume to a larger budget
	_, stderr, code = runCLI(t, args...)
	if code != 0 || !strings.Contains(stderr, "resuming it without seeds") {
		t.Fatalf("rerun of the seeded tune: exit %d, stderr %q", code, stderr)
	}
	if n := len(readArchive(t, dst).Results()); n != 24 {
		t.Errorf("resumed archive holds %d results, want 24", n)
	}
}

// TestTuneSeedConfig starts a replay search from configs given on the
// command line: the first generation evaluates the default and then them,
// in the order given. A config that is not a config of the space, or not
// valid for the problem, is a usage error.
func TestTuneSeedConfig(t *testing.T) {
	dir := t.TempDir()
	seeds := []string{"block_m=32,block_n=128", "block_m=16,warps=2"}
	args := []string{"tune", "--replay", replayFile, "--archive", filepath.Join(dir, "a"), "--population", "8",
		"--evals", "8", "--parallel", "1", "--quiet"}
	for _, s := range seeds {
		args = append(args, "--seed-config", s)
	}
	if _, stderr, code := runCLI(t, args...); code != 0 {
		t.Fatalf("seeded tune: exit %d\n%s", code, stderr)
	}
	got := readArchive(t, filepath.Join(dir, "a")).Results()
	if len(got) < 3 {
		t.Fatalf("archive holds %d results, want at least 3", len(got))
	}
	for i, s := range seeds {
		for item := range strings.SplitSeq(s, ",") {
			k, v, _ := strings.Cut(item, "=")
			if got[i+1].Config[k] != v {
				t.Errorf("result %d is %s, want the seed %s", i+1, got[i+1].Key, s)
				break
			}
		}
	}

	for _, bad := range []struct{ seed, want string }{
		{"block_m=33", `--seed-config "block_m=33": knob block_m: value "33" not in`},
		{"tiles=2", `--seed-config "tiles=2": unknown knob "tiles"`},
		{"ws=0,producer_warps=2", `--seed-config "ws=0,producer_warps=2": not valid for this problem`},
	} {
		_, stderr, code := runCLI(t, "tune", "--replay", replayFile, "--archive", filepath.Join(dir, "b"), "--evals", "4",
			"--quiet", "--seed-config", bad.seed)
		if code != exitUsage || !strings.Contains(stderr, bad.want) {
			t.Errorf("--seed-config %s: exit %d, stderr %q; want exit %d naming %q", bad.seed, code, stderr, exitUsage, bad.want)
		}
	}
}
