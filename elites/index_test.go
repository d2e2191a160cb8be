package elites

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"evotune/space"
)

// indexedArchive returns the directory of a closed archive of four results
// whose index covers its whole log, and the log's bytes.
func indexedArchive(t *testing.T) (string, []byte) {
	t.Helper()
	a := testArchive(t)
	for _, k := range []string{"r0", "r1", "r2", "r3"} {
		if err := a.Record(result(k)); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	log, err := os.ReadFile(filepath.Join(a.dir, logName))
	if err != nil {
		t.Fatal(err)
	}
	ix := checkIndex(t, a.dir)
	if ix.Covered != int64(len(log)) || len(ix.Results) != 4 {
		t.Fatalf("the index written on Close covers %d bytes and %d results, want %d and 4", ix.Covered, len(ix.Results), len(log))
	}
	return a.dir, log
}

// checkIndex reads dir's index, failing the test unless it matches the log.
func checkIndex(t *testing.T, dir string) logIndex {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, logName))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	ix, err := readIndex(dir, f, fi.Size())
	if err != nil {
		t.Fatalf("index: %v", err)
	}
	return ix
}

// mustRead reads dir as show does and checks its results against a fresh
// read of the log, which is the truth.
func mustRead(t *testing.T, dir string) *Archive {
	t.Helper()
	a, err := Read(dir)
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	f, err := os.Open(filepath.Join(dir, logName))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	l := readLogFrom(f, loadedLog{stripped: true})
	if !reflect.DeepEqual(a.Results(), l.results) {
		t.Errorf("Results:\n got %+v\nwant the log's %+v", a.Results(), l.results)
	}
	if !slices.Equal(a.Skipped(), l.warnings) {
		t.Errorf("Skipped = %v, want the log's %v", a.Skipped(), l.warnings)
	}
	return a
}

func TestIndexRebuilt(t *testing.T) {
	for _, tc := range []struct {
		name  string
		spoil func(t *testing.T, dir string, log []byte)
		note  string // in the one line said on stderr; "" for none
	}{
		{"missing", func(t *testing.T, dir string, _ []byte) {
			os.Remove(filepath.Join(dir, indexName))
		}, ""},
		{"garbage", func(t *testing.T, dir string, _ []byte) {
			os.WriteFile(filepath.Join(dir, indexName), []byte("{not an index}\n"), 0o644)
		}, "not an index"},
		{"flipped byte", func(t *testing.T, dir string, _ []byte) {
			path := filepath.Join(dir, indexName)
			data, _ := os.ReadFile(path)
			data[len(data)/2] ^= 0x40
			os.WriteFile(path, data, 0o644)
		}, "checksum"},
		{"cut short", func(t *testing.T, dir string, _ []byte) {
			path := filepath.Join(dir, indexName)
			data, _ := os.ReadFile(path)
			os.WriteFile(path, data[:len(data)-9], 0o644)
		}, "index damaged"},
		{"log truncated below it", func(t *testing.T, dir string, log []byte) {
			os.WriteFile(filepath.Join(dir, logName), log[:len(log)/2], 0o644)
		}, "shorter than the index covers"},
		{"log rewritten, same length", func(t *testing.T, dir string, log []byte) {
			changed := []byte(strings.Replace(string(log), `"r1"`, `"x1"`, 2))
			os.WriteFile(filepath.Join(dir, logName), changed, 0o644)
		}, "differs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, log := indexedArchive(t)
			tc.spoil(t, dir, log)
			a := mustRead(t, dir)
			if tc.note == "" && a.indexNote != "" || !strings.Contains(a.indexNote, tc.note) {
				t.Errorf("the note on stderr is %q, want one with %q", a.indexNote, tc.note)
			}
			checkIndex(t, dir) // written again, matching the log
			if b := mustRead(t, dir); b.indexNote != "" {
				t.Errorf("the rebuilt index was rebuilt again: %s", b.indexNote)
			}
			// The writer opens it too, and goes on from the log's last result.
			w, err := Open(dir, a.Meta(), OpenOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			if err := w.Record(result("next")); err != nil {
				t.Fatal(err)
			}
			if r, _ := w.Lookup("next"); r.Seq != len(a.Results())+1 {
				t.Errorf("next has seq %d, want %d", r.Seq, len(a.Results())+1)
			}
		})
	}
}

// TestIndexStale: a log appended by a writer that does not keep the index
// (an older evotune, or one killed -9 between its append and its Close) is
// read from the index and then the new tail, and the index is extended.
func TestIndexStale(t *testing.T) {
	dir, log := indexedArchive(t)
	line, err := json.Marshal(result("older"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(filepath.Join(dir, logName), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write(append(line, '\n'))
	f.Write([]byte(`{"key":"r2","config":{}}` + "\n")) // a duplicate of a key the index holds
	f.Write([]byte(`{"key":"torn"`))                   // and a torn last line
	f.Close()
	a := mustRead(t, dir)
	if a.indexNote != "" {
		t.Errorf("a longer log rebuilt the index: %s", a.indexNote)
	}
	if got := len(a.Results()); got != 5 {
		t.Errorf("%d results, want 5", got)
	}
	ws := a.Skipped()
	if len(ws) != 2 || !strings.Contains(ws[0].Reason, "already recorded on line 3") || ws[0].Line != 6 || !strings.Contains(ws[1].Reason, "torn") {
		t.Errorf("Skipped = %v, want the duplicate on line 6 (of line 3) and the torn line", ws)
	}
	ix := checkIndex(t, dir)
	if want := int64(len(log) + len(line) + 1 + len(`{"key":"r2","config":{}}`) + 1); ix.Covered != want || len(ix.Results) != 5 || len(ix.Warnings) != 1 {
		t.Errorf("the extended index covers %d bytes, %d results and %d warnings; want %d, 5 and 1 (the torn line is not covered)",
			ix.Covered, len(ix.Results), len(ix.Warnings), want)
	}
}

// TestIndexDamagedLine: a damaged line inside the prefix the index covers
// is still reported, where it is and what could be read of it, when the
// archive opens from the index.
func TestIndexDamagedLine(t *testing.T) {
	dir, log := indexedArchive(t)
	lines := strings.SplitAfter(string(log), "\n")
	lines[1] = `{"seq":2,"key":"r1","status":"ok","objective_us":3.5,"gate":}` + "\n"
	os.WriteFile(filepath.Join(dir, logName), []byte(strings.Join(lines, "")), 0o644)
	first := mustRead(t, dir) // rebuilds the index from the log
	second := mustRead(t, dir)
	if second.indexNote != "" {
		t.Fatalf("the second read rebuilt the index: %s", second.indexNote)
	}
	ws := second.Skipped()
	if !slices.Equal(ws, first.Skipped()) || len(ws) != 1 || ws[0].Line != 2 || ws[0].Offset != int64(len(lines[0])) ||
		!ws[0].Damaged || ws[0].Key != "r1" || ws[0].Objective != 3.5 {
		t.Errorf("Skipped from the index = %+v, want the damaged line 2 as read from the log (%+v)", ws, first.Skipped())
	}
}

// TestIndexKilledBeforeUpdate: a writer killed -9 after appending results
// but before updating the index (it does so on Close) leaves a log longer
// than the index covers, perhaps with a torn line: the archive opens with
// every whole line, and the next append starts on a clean line.
func TestIndexKilledBeforeUpdate(t *testing.T) {
	dir, _ := indexedArchive(t)
	w, err := Open(dir, testArchive(t).Meta(), OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"a", "b"} {
		if err := w.Record(result(k)); err != nil {
			t.Fatal(err)
		}
	}
	// What a kill leaves: the files as they are now, with no Close.
	killed := t.TempDir()
	for _, name := range []string{metaName, logName, indexName} {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if name == logName {
			data = append(data, `{"seq":7,"key":"c","con`...)
		}
		os.WriteFile(filepath.Join(killed, name), data, 0o644)
	}
	w.Close()
	if ix := checkIndex(t, killed); len(ix.Results) != 4 {
		t.Fatalf("the index left by the kill holds %d results, want the 4 of before", len(ix.Results))
	}
	a, err := Open(killed, w.Meta(), OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := len(a.Results()); got != 6 || a.indexNote != "" {
		t.Errorf("%d results (index note %q), want 6 and no rebuild", got, a.indexNote)
	}
	if err := a.Record(result("c")); err != nil {
		t.Fatal(err)
	}
	a.Close()
	keys, ws := readBack(t, a)
	if want := []string{"r0", "r1", "r2", "r3", "a", "b", "c"}; !slices.Equal(keys, want) || len(ws) != 0 {
		t.Errorf("the log reads back %v with warnings %v, want %v and none", keys, ws, want)
	}
	if ix := checkIndex(t, killed); len(ix.Results) != 7 {
		t.Errorf("the index after Close holds %d results, want 7", len(ix.Results))
	}
	mustRead(t, killed)
}

// TestIndexElitesVerified: an elite's line changed in place, at the same
// length (an edit by hand, a flipped digit on disk), is what the log says
// from the next open on: the index's checksum of that line no longer
// matches, so the index is rebuilt from the log, and the note says why.
func TestIndexElitesVerified(t *testing.T) {
	a := testArchive(t)
	// The best line lies more than indexCheck bytes from both ends of the
	// log, where the index's checks of its ends do not see it.
	record := func(key string, objective float64) {
		r := space.Result{Key: key, Config: space.Config{"k": key}, Status: space.StatusOK, Gate: space.GateTimed, Objective: objective}
		if err := a.Record(r); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 2000 {
		record(fmt.Sprintf("a%04d", i), 100+float64(i))
	}
	record("r0", 5.25)
	for i := range 2000 {
		record(fmt.Sprintf("b%04d", i), 100+float64(i))
	}
	record("r1", 6.25)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(a.dir, logName)
	log, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if b := mustRead(t, a.dir); b.indexNote != "" {
		t.Fatalf("an untouched log rebuilt the index: %s", b.indexNote)
	}
	if bytes.Index(log, []byte(`"key":"r0"`)) < indexCheck || len(log)-bytes.Index(log, []byte(`"key":"r0"`)) < indexCheck {
		t.Fatalf("the log (%d bytes) is too short for the test", len(log))
	}
	// r0 (5.25) is the best; make it 9.25 in place.
	edited := bytes.Replace(log, []byte(`"objective_us":5.25`), []byte(`"objective_us":9.25`), 1)
	if bytes.Equal(edited, log) || len(edited) != len(log) {
		t.Fatal("the test's edit did not apply")
	}
	if err := os.WriteFile(path, edited, 0o644); err != nil {
		t.Fatal(err)
	}
	b := mustRead(t, a.dir) // checks every result against the log
	if !strings.Contains(b.indexNote, "line 2001 of the log (result r0, among the best)") {
		t.Errorf("index note %q; want it to name the changed elite line", b.indexNote)
	}
	if best, _ := b.Best(); best.Key != "r1" {
		t.Errorf("best is %s (%g): the index's old figure for r0 is still in use", best.Key, best.Objective)
	}
}
