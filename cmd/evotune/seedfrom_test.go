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
