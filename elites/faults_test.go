package elites

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
)

// TestResumeAtEveryCut cuts a log at every byte offset, as a kill or a
// power loss may leave it, and resumes: the archive opens for writing, keeps
// exactly the whole lines before the cut, and the next record lands on a
// clean line that a fresh reader sees with no warning.
func TestResumeAtEveryCut(t *testing.T) {
	src := testArchive(t)
	var all []string
	for i := range 4 {
		key := fmt.Sprintf("r%d", i)
		all = append(all, key)
		if err := src.Record(result(key)); err != nil {
			t.Fatal(err)
		}
	}
	full, err := os.ReadFile(filepath.Join(src.dir, logName))
	if err != nil {
		t.Fatal(err)
	}
	meta, err := os.ReadFile(filepath.Join(src.dir, metaName))
	if err != nil {
		t.Fatal(err)
	}
	for cut := 0; cut <= len(full); cut++ {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, metaName), meta, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, logName), full[:cut], 0o644); err != nil {
			t.Fatal(err)
		}
		a, err := Open(dir, src.Meta(), OpenOptions{})
		if err != nil {
			t.Fatalf("cut at %d: Open: %v", cut, err)
		}
		whole := bytes.Count(full[:cut], []byte("\n"))
		if got := len(a.Results()); got != whole {
			t.Errorf("cut at %d: %d results, want the %d whole lines", cut, got, whole)
		}
		if err := a.Record(result("next")); err != nil {
			t.Fatalf("cut at %d: Record after resume: %v", cut, err)
		}
		if r, _ := a.Lookup("next"); r.Seq != whole+1 {
			t.Errorf("cut at %d: the next record has seq %d, want %d", cut, r.Seq, whole+1)
		}
		a.Close()
		keys, warnings := readBack(t, a)
		want := append(slices.Clone(all[:whole]), "next")
		if !slices.Equal(keys, want) || len(warnings) != 0 {
			t.Errorf("cut at %d: the log reads back %v with warnings %v, want %v and none", cut, keys, warnings, want)
		}
	}
}

// TestDiskErrorsAtRandom fails a seeded random share of appends part-way,
// as a disk that fills and frees again would: every Record that returned
// nil is in the log, in order, every one that failed is not, and a fresh
// process opens the archive with no damaged line.
func TestDiskErrorsAtRandom(t *testing.T) {
	a := testArchive(t)
	fault := &faultyLog{appendFile: a.log}
	a.log = fault
	rng := rand.New(rand.NewPCG(7, 11))
	var kept []string
	for i := range 200 {
		key := fmt.Sprintf("k%03d", i)
		fault.armed = rng.IntN(3) == 0
		fault.n = rng.IntN(300)
		fault.syncErr = nil
		if fault.armed && rng.IntN(4) == 0 {
			fault.syncErr = syscall.EIO
		}
		err := a.Record(result(key))
		if fault.armed && err == nil {
			t.Fatalf("record %s: a failing write was reported as recorded", key)
		}
		if !fault.armed && err != nil {
			t.Fatalf("record %s on a healthy disk: %v", key, err)
		}
		if err == nil {
			kept = append(kept, key)
		}
	}
	fault.armed = false
	if err := a.SaveState([]byte(`{"after":"faults"}`)); err != nil {
		t.Fatalf("SaveState after the faults: %v", err)
	}
	keys, warnings := readBack(t, a)
	if !slices.Equal(keys, kept) || len(warnings) != 0 {
		t.Errorf("log holds %d results (warnings %v), want the %d acknowledged ones in order", len(keys), warnings, len(kept))
	}
	dir, meta := a.dir, a.Meta()
	a.Close()
	b, err := Open(dir, meta, OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if len(b.Skipped()) != 0 || len(b.Results()) != len(kept) {
		t.Errorf("reopened: %d results, skipped %v; want %d and none", len(b.Results()), b.Skipped(), len(kept))
	}
	for i, r := range b.Results() {
		if r.Seq != i+1 {
			t.Errorf("result %s has seq %d, want %d: a failed append left a gap", r.Key, r.Seq, i+1)
			break
		}
	}
}
