package elites

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"testing/iotest"
	"time"

	"evotune/internal/durable"
	"evotune/space"
)

// faultyLog passes writes to the real log until armed, then writes only the
// first n bytes of a line and fails, as a full disk would.
type faultyLog struct {
	appendFile
	armed       bool
	n           int   // bytes of the failing write that reach the file
	syncErr     error // when set, the next Sync fails (after the whole write)
	truncateErr error // when set, Truncate fails
}

func (f *faultyLog) Write(p []byte) (int, error) {
	if !f.armed || f.syncErr != nil {
		return f.appendFile.Write(p)
	}
	n, err := f.appendFile.Write(p[:min(f.n, len(p))])
	if err != nil {
		return n, err
	}
	return n, syscall.ENOSPC
}

func (f *faultyLog) Sync() error {
	if f.armed && f.syncErr != nil {
		err := f.syncErr
		f.syncErr = nil
		return err
	}
	return f.appendFile.Sync()
}

func (f *faultyLog) Truncate(size int64) error {
	if f.armed && f.truncateErr != nil {
		return f.truncateErr
	}
	return f.appendFile.Truncate(size)
}

func testArchive(t *testing.T) *Archive {
	t.Helper()
	meta := Meta{
		Problem: space.Problem{Family: "sdpa", Shapes: []space.Shape{{B: 1, H: 8, S: 512, D: 64}}, Dtype: "fp16"},
		Created: time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC),
	}
	a, err := Create(t.TempDir(), meta)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	return a
}

func result(key string) space.Result {
	return space.Result{Key: key, Config: space.Config{"k": key}, Status: space.StatusCompileError, Gate: space.GateCompile, Reason: "error: expected ';'"}
}

// readBack reads the archive's log file as a fresh process would.
func readBack(t *testing.T, a *Archive) ([]string, []LoadWarning) {
	t.Helper()
	f, err := os.Open(filepath.Join(a.dir, logName))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rs, ws := ReadLog(f)
	var keys []string
	for _, r := range rs {
		keys = append(keys, r.Key)
	}
	return keys, ws
}

// TestRecordDiskError makes appends fail part-way, as on a full disk: Record
// says so, the log reads back with exactly the earlier records, and once the
// disk has room again the next append lands on a clean line.
func TestRecordDiskError(t *testing.T) {
	tests := []struct {
		name  string
		fault faultyLog
	}{
		{"nothing written", faultyLog{n: 0}},
		{"half a line", faultyLog{n: 40}},
		{"all but the newline", faultyLog{n: 1 << 20}},
		{"fsync fails", faultyLog{syncErr: syscall.EIO}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := testArchive(t)
			if err := a.Record(result("a")); err != nil {
				t.Fatal(err)
			}
			fault := tt.fault
			fault.appendFile = a.log
			a.log = &fault
			lineLen := func() int { // all but the newline
				b, _ := os.ReadFile(filepath.Join(a.dir, logName))
				return len(b) - 1
			}()
			if fault.n > lineLen {
				fault.n = lineLen
			}

			fault.armed = true
			err := a.Record(result("lost"))
			if err == nil {
				t.Fatalf("Record on a failing disk succeeded")
			}
			wantErr := error(syscall.ENOSPC)
			if tt.fault.syncErr != nil {
				wantErr = tt.fault.syncErr
			}
			if !errors.Is(err, wantErr) || !strings.Contains(err.Error(), "appending result lost (seq 2) to results.jsonl") {
				t.Errorf("Record error %q: want %v and what was being done", err, wantErr)
			}
			if _, ok := a.Lookup("lost"); ok {
				t.Errorf("a failed record is in the archive")
			}
			if keys, ws := readBack(t, a); !slices.Equal(keys, []string{"a"}) || len(ws) != 0 {
				t.Errorf("log after the failure holds %v, warnings %v; want [a] and none", keys, ws)
			}

			fault.armed = false
			if err := a.Record(result("b")); err != nil {
				t.Fatalf("Record after the disk recovered: %v", err)
			}
			if keys, ws := readBack(t, a); !slices.Equal(keys, []string{"a", "b"}) || len(ws) != 0 {
				t.Errorf("log after recovery holds %v, warnings %v; want [a b] and none", keys, ws)
			}
			if r, _ := a.Lookup("b"); r.Seq != 2 {
				t.Errorf("seq after a failed append = %d, want 2", r.Seq)
			}
		})
	}
}

// TestRecordUndoFails: when even cutting the partial line off fails, the
// archive refuses further appends (they would be glued to the partial line),
// and reopening repairs it.
func TestRecordUndoFails(t *testing.T) {
	a := testArchive(t)
	if err := a.Record(result("a")); err != nil {
		t.Fatal(err)
	}
	a.log = &faultyLog{appendFile: a.log, armed: true, n: 10, truncateErr: syscall.EIO}
	if err := a.Record(result("lost")); !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), "undoing it") {
		t.Fatalf("Record: %v, want ENOSPC and the failed undo", err)
	}
	if err := a.Record(result("b")); err == nil || !strings.Contains(err.Error(), "reopen the archive") {
		t.Fatalf("Record on a broken archive: %v, want a refusal that says to reopen", err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := Open(a.dir, a.meta, OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if ws := b.Skipped(); len(ws) != 1 || !strings.Contains(ws[0].Reason, "torn") {
		t.Errorf("Skipped on reopen = %v, want the torn partial line", ws)
	}
	if err := b.Record(result("b")); err != nil {
		t.Fatal(err)
	}
	if keys, ws := readBack(t, b); !slices.Equal(keys, []string{"a", "b"}) || len(ws) != 0 {
		t.Errorf("log after repair holds %v, warnings %v; want [a b] and none", keys, ws)
	}
}

// failingTemp fails the write of an atomic replacement.
type failingTemp struct{ durable.File }

func (failingTemp) Write([]byte) (int, error) { return 0, syscall.ENOSPC }

func TestSaveStateDiskError(t *testing.T) {
	a := testArchive(t)
	if err := a.SaveState([]byte("old")); err != nil {
		t.Fatal(err)
	}
	a.files.CreateTemp = func(dir, pattern string) (durable.File, error) {
		f, err := os.CreateTemp(dir, pattern)
		return failingTemp{f}, err
	}
	err := a.SaveState([]byte("new"))
	if !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), "saving search state") {
		t.Fatalf("SaveState: %v, want ENOSPC while saving search state", err)
	}
	if got, err := a.State(); string(got) != "old" || err != nil {
		t.Errorf("State after a failed save = %q, %v; want old", got, err)
	}
	if left, _ := filepath.Glob(filepath.Join(a.dir, "*"+tmpSuffix)); len(left) > 0 {
		t.Errorf("temporary state file left behind: %v", left)
	}
}

// TestReadErrorIsNotTorn: a log whose reading fails part-way must not be
// taken for one with a torn end, or opening it would cut off the records
// that could not be read.
func TestReadErrorIsNotTorn(t *testing.T) {
	boom := errors.New("input/output error")
	l := readLog(io.MultiReader(strings.NewReader("{\"key\":\"a\"}\n{\"ke"), iotest.ErrReader(boom)))
	if !errors.Is(l.err, boom) || l.clean != 12 {
		t.Errorf("readLog: err %v clean %d; want %v at 12", l.err, l.clean, boom)
	}
	l = readLog(strings.NewReader("{\"key\":\"a\"}\n{\"ke"))
	if l.err != nil || l.clean != 12 {
		t.Errorf("readLog of a torn log: err %v clean %d; want nil at 12", l.err, l.clean)
	}
}
