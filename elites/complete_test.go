package elites_test

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"evotune/elites"
	"evotune/space"
)

// pipeSpace is a space of two knobs, block_m and pipe, where pipe was added
// after configs were recorded without it: a config that does not name pipe
// means pipe=0.
func pipeSpace() *space.Space {
	return &space.Space{
		Family: "sdpa",
		Knobs: []space.Knob{
			{Name: "block_m", Macro: "SDPA_BLOCK_M", Values: []string{"64", "128"}, Default: "64"},
			{Name: "pipe", Macro: "SDPA_PIPE", Values: []string{"0", "1"}, Default: "1", Absent: "0"},
		},
	}
}

// configResult is okResult for config c, keyed by it.
func configResult(c space.Config, objective float64) space.Result {
	r := okResult(c.Key(), objective)
	r.Config = c
	return r
}

// TestComplete records results before and after the knob pipe existed,
// reopens the archive and completes it: the old results are found, listed
// and ranked by the keys of their completed configs, their samples still
// read from their lines, and the log and its index keep what was recorded.
func TestComplete(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "archive")
	a := mustCreate(t, dir)
	old := []space.Result{
		configResult(space.Config{"block_m": "64"}, 10),               // before pipe
		configResult(space.Config{"block_m": "128", "pipe": "1"}, 12), // after
		configResult(space.Config{"block_m": "128"}, 9),               // before pipe, the best
		configResult(space.Config{"pipe": "1"}, 30),                   // block_m missing: not completed
		configResult(space.Config{"block_m": "64", "tiles": "2"}, 40), // an unknown knob: not completed
		configResult(space.Config{"block_m": "128", "pipe": "7"}, 50), // a value off the list: kept
	}
	mustRecord(t, a, old...)
	mustClose(t, a)
	logBefore, err := os.ReadFile(filepath.Join(dir, "results.jsonl"))
	if err != nil {
		t.Fatal(err)
	}

	w := mustOpen(t, dir)
	done := w.Complete(pipeSpace())
	if want := (elites.Completion{Results: 2, Values: []string{"pipe=0"}}); !reflect.DeepEqual(done, want) {
		t.Fatalf("Complete = %+v, want %+v", done, want)
	}
	wantKeys := []string{"block_m=64,pipe=0", "block_m=128,pipe=1", "block_m=128,pipe=0", old[3].Key, old[4].Key, old[5].Key}
	if got := w.Keys(); !slices.Equal(got, wantKeys) {
		t.Errorf("Keys = %q, want %q", got, wantKeys)
	}
	r, ok := w.Lookup("block_m=64,pipe=0")
	if !ok || r.Seq != 1 || !reflect.DeepEqual(r.Config, space.Config{"block_m": "64", "pipe": "0"}) || !slices.Equal(r.Flags, old[0].Flags) {
		t.Errorf("Lookup of the completed config: %+v, %v; want result 1 with pipe=0 and its recorded flags", r, ok)
	}
	if _, ok := w.Lookup(old[0].Key); ok {
		t.Errorf("Lookup(%q) still answers: a completed result has one key", old[0].Key)
	}
	best, _ := w.Best()
	if best.Key != "block_m=128,pipe=0" || best.Config["pipe"] != "0" || best.Seq != 3 {
		t.Errorf("Best = %s (seq %d, config %v), want the completed block_m=128,pipe=0 (seq 3)", best.Key, best.Seq, best.Config)
	}
	if got := w.Seeds(1); len(got) != 1 || got[0]["pipe"] != "0" {
		t.Errorf("Seeds(1) = %v, want the completed best", got)
	}
	full, err := w.WithSamples(best)
	if err != nil || !slices.Equal(full.Timings[0].SamplesUS, old[2].Timings[0].SamplesUS) {
		t.Errorf("WithSamples of the completed best: %v, samples %v; want %v", err, full.Timings, old[2].Timings[0].SamplesUS)
	}
	if again := w.Complete(pipeSpace()); again.Results != 0 || again.Repeats != 0 {
		t.Errorf("a second Complete did %+v, want nothing", again)
	}
	// A config recorded now is taken as it comes, and a search of the
	// space proposes the completed configs by the keys the archive holds.
	mustRecord(t, w, configResult(space.Config{"block_m": "64", "pipe": "1"}, 11))
	if err := w.Record(configResult(space.Config{"block_m": "128", "pipe": "0"}, 8)); err == nil {
		t.Error("recording block_m=128,pipe=0 again was accepted: the completed result holds that config")
	}
	mustClose(t, w)

	// The log grew by the one new line; the old lines are what was
	// recorded, and a reader that does not complete reads them, from the
	// index and from the log alike.
	logAfter, err := os.ReadFile(filepath.Join(dir, "results.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(logAfter, logBefore) || bytes.Count(logAfter, []byte("\n")) != len(old)+1 {
		t.Error("the log's old lines changed, or more than the new result was appended")
	}
	v, err := elites.Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	if n := v.IndexNote(); n != "" {
		t.Errorf("the index did not match the log: %s", n)
	}
	fromLog, _ := readLogFile(t, dir)
	if got, want := keys(v.Results()), keys(fromLog); !slices.Equal(got, want) || got[0] != old[0].Key {
		t.Errorf("read without completing: keys %q, the log's %q", got, want)
	}
}

// TestCompleteRepeats: a config recorded before pipe existed and evaluated
// again since under its full key keeps its own key, counted as a repeat;
// the later result stands for the config, and the repeat is not ranked,
// though it measured faster.
func TestCompleteRepeats(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "archive")
	a := mustCreate(t, dir)
	mustRecord(t, a,
		configResult(space.Config{"block_m": "64"}, 10),
		configResult(space.Config{"block_m": "128"}, 9),
		configResult(space.Config{"block_m": "64", "pipe": "0"}, 10.5))
	done := a.Complete(pipeSpace())
	if want := (elites.Completion{Results: 1, Values: []string{"pipe=0"}, Repeats: 1, FirstRepeat: 1}); !reflect.DeepEqual(done, want) {
		t.Fatalf("Complete = %+v, want %+v", done, want)
	}
	if r, ok := a.Lookup("block_m=64,pipe=0"); !ok || r.Seq != 3 {
		t.Errorf("Lookup(block_m=64,pipe=0) = seq %d, %v; want the later result, seq 3", r.Seq, ok)
	}
	if got, want := a.Keys(), []string{"block_m=64", "block_m=128,pipe=0", "block_m=64,pipe=0"}; !slices.Equal(got, want) {
		t.Errorf("Keys = %q, want %q", got, want)
	}
	if got, want := keys(a.Top(3)), []string{"block_m=128,pipe=0", "block_m=64,pipe=0"}; !slices.Equal(got, want) {
		t.Errorf("Top(3) = %q, want %q", got, want)
	}
	if n := len(a.Results()); n != 3 {
		t.Errorf("Results holds %d results, want all 3", n)
	}
}

// TestMergeCompletes merges an archive recorded before pipe existed into a
// completed one that has since evaluated one of its configs again: the
// other old results arrive completed, and the repeated one is not added.
func TestMergeCompletes(t *testing.T) {
	root := t.TempDir()
	src := mustCreate(t, filepath.Join(root, "src"))
	mustRecord(t, src,
		configResult(space.Config{"block_m": "64"}, 10),
		configResult(space.Config{"block_m": "128"}, 9))
	mustClose(t, src)
	dst := mustCreate(t, filepath.Join(root, "dst"))
	mustRecord(t, dst, configResult(space.Config{"block_m": "128", "pipe": "0"}, 8.5))
	dst.Complete(pipeSpace())
	added, err := elites.Merge(dst, filepath.Join(root, "src"))
	if err != nil || added != 1 {
		t.Fatalf("Merge = %d, %v; want 1 new result", added, err)
	}
	if got, want := dst.Keys(), []string{"block_m=128,pipe=0", "block_m=64,pipe=0"}; !slices.Equal(got, want) {
		t.Errorf("Keys = %q, want %q", got, want)
	}
	r, _ := dst.Lookup("block_m=64,pipe=0")
	if r, err := dst.WithSamples(r); err != nil || len(r.Timings) != 1 || len(r.Timings[0].SamplesUS) != 2 {
		t.Errorf("the merged result's samples: %v, %+v", err, r.Timings)
	}
}

// TestHiddenCompletes: a damaged line recorded before pipe existed hides
// nothing when a readable line holds its completed config.
func TestHiddenCompletes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "archive")
	a := mustCreate(t, dir)
	mustRecord(t, a,
		configResult(space.Config{"block_m": "64"}, 10),
		configResult(space.Config{"block_m": "64", "pipe": "0"}, 11))
	mustClose(t, a)
	path := filepath.Join(dir, "results.jsonl")
	data, _ := os.ReadFile(path)
	os.WriteFile(path, bytes.Replace(data, []byte(`"objective_us":10`), []byte(`"objective_us":10,"x"`), 1), 0o644)
	v, err := elites.Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	if h := v.Hidden(math.Inf(1)); len(h) != 1 {
		t.Fatalf("before Complete: Hidden = %+v, want the damaged line", h)
	}
	v.Complete(pipeSpace())
	if h := v.Hidden(math.Inf(1)); len(h) != 0 {
		t.Errorf("after Complete: Hidden = %+v, want none (line 2 holds its config)", h)
	}
}
