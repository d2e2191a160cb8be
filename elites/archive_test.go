package elites_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"evotune/elites"
	"evotune/evo"
	"evotune/space"
)

// The archive is the search's store.
var _ evo.Store = (*elites.Archive)(nil)

func TestRoundTrip(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "arch")
	a := mustCreate(t, dir)
	want := []space.Result{okResult("a", 12.5), rejected("b"), okResult("c", 9.75)}
	mustRecord(t, a, want...)
	for i := range want {
		want[i].Seq = i + 1
	}
	// Results hold no timing samples: WithSamples reads them from the log.
	if got := a.Results(); !reflect.DeepEqual(got, withoutSamples(want)) {
		t.Fatalf("Results before reopen:\n got %+v\nwant %+v", got, withoutSamples(want))
	}
	checkSamples(t, a, want)
	mustClose(t, a)

	b := mustOpen(t, dir)
	if got := b.Results(); !reflect.DeepEqual(got, withoutSamples(want)) {
		t.Fatalf("Results after reopen:\n got %+v\nwant %+v", got, withoutSamples(want))
	}
	checkSamples(t, b, want)
	if got := b.Meta(); !reflect.DeepEqual(got, testMeta()) {
		t.Errorf("Meta after reopen = %+v, want %+v", got, testMeta())
	}
	if w := b.Skipped(); len(w) != 0 {
		t.Errorf("Skipped = %v, want none", w)
	}
	r, ok := b.Lookup("b")
	if !ok || !reflect.DeepEqual(r, want[1]) {
		t.Errorf("Lookup(b) = %+v, %v; want %+v", r, ok, want[1])
	}
	if _, ok := b.Lookup("nope"); ok {
		t.Errorf("Lookup(nope) found a result")
	}
}

func TestReopenContinuesSeq(t *testing.T) {
	dir := t.TempDir()
	a := mustCreate(t, dir)
	mustRecord(t, a, okResult("a", 3), okResult("b", 2))
	mustClose(t, a)
	b := mustOpen(t, dir)
	mustRecord(t, b, okResult("c", 1))
	mustClose(t, b)
	c := mustOpen(t, dir)
	mustRecord(t, c, rejected("d"))
	if got, want := seqs(c.Results()), []int{1, 2, 3, 4}; !slices.Equal(got, want) {
		t.Errorf("seqs = %v, want %v", got, want)
	}
}

func TestCreate(t *testing.T) {
	tests := []struct {
		name    string
		files   map[string]string // present in the directory before Create
		meta    func(*elites.Meta)
		wantErr string // empty: Create succeeds
	}{
		{name: "new directory"},
		{name: "left by an interrupted create", files: map[string]string{"lock": "123\n", "meta.json.tmp": "{"}},
		{name: "foreign file", files: map[string]string{"notes.txt": "hi"}, wantErr: `not empty and is not an archive (it holds "notes.txt")`},
		{name: "already an archive", files: map[string]string{"meta.json": "{}"}, wantErr: "is already an archive"},
		{name: "invalid problem", meta: func(m *elites.Meta) { m.Problem.Dtype = "fp4" }, wantErr: `dtype "fp4"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "arch")
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			for name, text := range tt.files {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			meta := testMeta()
			if tt.meta != nil {
				tt.meta(&meta)
			}
			a, err := elites.Create(dir, meta)
			if tt.wantErr != "" {
				if err == nil {
					a.Close()
					t.Fatalf("Create succeeded, want error containing %q", tt.wantErr)
				}
				if !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Create error %q does not contain %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Create: %v", err)
			}
			mustClose(t, a)
			if ok, err := elites.Exists(dir); !ok || err != nil {
				t.Errorf("Exists after Create = %v, %v", ok, err)
			}
			if _, err := os.Stat(filepath.Join(dir, "meta.json.tmp")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("temporary file left behind: %v", err)
			}
		})
	}
}

func TestOpenNotAnArchive(t *testing.T) {
	dir := t.TempDir()
	_, err := elites.Open(dir, testMeta(), elites.OpenOptions{})
	if err == nil || !strings.Contains(err.Error(), "is not an archive") {
		t.Fatalf("Open of an empty directory: %v, want 'is not an archive'", err)
	}
	if ok, err := elites.Exists(dir); ok || err != nil {
		t.Errorf("Exists(empty dir) = %v, %v", ok, err)
	}
}

// TestTornLastLine cuts a good log at every byte offset within its last line,
// as a kill -9 in the middle of an append would: every earlier record is
// kept, exactly the torn one is lost, and the next append starts on a clean
// line. (TestReadLogTorn does the same for ReadLog alone, with a longer
// record; here every cut costs a few fsyncs.)
func TestTornLastLine(t *testing.T) {
	src := t.TempDir()
	a := mustCreate(t, src)
	mustRecord(t, a, okResult("a", 3), rejected("b"), rejected("torn"))
	mustClose(t, a)
	full, err := os.ReadFile(filepath.Join(src, "results.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	meta, err := os.ReadFile(filepath.Join(src, "meta.json"))
	if err != nil {
		t.Fatal(err)
	}
	start := bytes.LastIndexByte(full[:len(full)-1], '\n') + 1
	for cut := start; cut < len(full); cut++ {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "meta.json"), meta, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "results.jsonl"), full[:cut], 0o644); err != nil {
			t.Fatal(err)
		}

		// A read-only view skips the torn line and leaves the file alone.
		ro, err := elites.Read(dir)
		if err != nil {
			t.Fatalf("cut %d: Read: %v", cut, err)
		}
		if got := keys(ro.Results()); !slices.Equal(got, []string{"a", "b"}) {
			t.Fatalf("cut %d: Read kept %v, want [a b]", cut, got)
		}
		if fi, err := os.Stat(filepath.Join(dir, "results.jsonl")); err != nil || fi.Size() != int64(cut) {
			t.Fatalf("cut %d: Read changed the log: %v, %v", cut, fi.Size(), err)
		}

		b, err := elites.Open(dir, testMeta(), elites.OpenOptions{})
		if err != nil {
			t.Fatalf("cut %d: Open: %v", cut, err)
		}
		if got := keys(b.Results()); !slices.Equal(got, []string{"a", "b"}) {
			t.Fatalf("cut %d: kept %v, want [a b]", cut, got)
		}
		skipped := b.Skipped()
		if cut == start {
			if len(skipped) != 0 {
				t.Fatalf("cut %d (a clean end): Skipped = %v, want none", cut, skipped)
			}
		} else if len(skipped) != 1 || skipped[0].Line != 3 || skipped[0].Offset != int64(start) || !strings.Contains(skipped[0].Reason, "torn") {
			t.Fatalf("cut %d: Skipped = %v, want one torn line 3 at byte %d", cut, skipped, start)
		}
		mustRecord(t, b, okResult("next", 2))
		mustClose(t, b)

		got, warnings := readLogFile(t, dir)
		if len(warnings) != 0 {
			t.Fatalf("cut %d: log after append has warnings %v", cut, warnings)
		}
		if !slices.Equal(keys(got), []string{"a", "b", "next"}) || !slices.Equal(seqs(got), []int{1, 2, 3}) {
			t.Fatalf("cut %d: log after append holds %v seqs %v, want [a b next] [1 2 3]", cut, keys(got), seqs(got))
		}
	}
}

func TestDamagedLogOnOpen(t *testing.T) {
	dir := t.TempDir()
	a := mustCreate(t, dir)
	mustRecord(t, a, okResult("a", 3))
	mustClose(t, a)
	f, err := os.OpenFile(filepath.Join(dir, "results.jsonl"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(f, `{"seq": 7, "key": "b", "status": "ok", "objective_us": 2}`)
	fmt.Fprintln(f, `garbage`)
	fmt.Fprintln(f, `{"seq": 9, "key": "a", "status": "ok", "objective_us": 1}`)
	f.Close()

	b := mustOpen(t, dir)
	if got := keys(b.Results()); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("kept %v, want [a b]", got)
	}
	var lines []int
	for _, w := range b.Skipped() {
		lines = append(lines, w.Line)
	}
	if !slices.Equal(lines, []int{3, 4}) {
		t.Fatalf("skipped lines %v (%v), want [3 4]", lines, b.Skipped())
	}
	if r, _ := b.Lookup("a"); r.Objective != 3 {
		t.Errorf("Lookup(a) objective %v: a duplicate replaced the first record", r.Objective)
	}
	// Seq continues after the highest seen, even one from a skipped line's
	// neighbour.
	mustRecord(t, b, okResult("c", 1))
	if r, _ := b.Lookup("c"); r.Seq != 8 {
		t.Errorf("seq after damaged log = %d, want 8", r.Seq)
	}
}

func TestIdentityMismatch(t *testing.T) {
	dir := t.TempDir()
	mustClose(t, mustCreate(t, dir))

	tests := []struct {
		name   string
		change func(*elites.Meta)
		want   []string // every one must be in the message; none: Open succeeds
	}{
		{"same", func(*elites.Meta) {}, nil},
		{"not identity", func(m *elites.Meta) {
			m.Strategy, m.Seed, m.Version, m.Created = "random", 7, "v9", m.Created.AddDate(1, 0, 0)
		}, nil},
		{"explicit unit weights", func(m *elites.Meta) { m.Problem.Weights = []float64{1, 1} }, nil},
		{"dtype", func(m *elites.Meta) { m.Problem.Dtype = "fp16" }, []string{
			"archive " + dir + " was made for dtype bf16, this run is fp16 (use --seed-from to start a new search from it)"}},
		{"family", func(m *elites.Meta) { m.Problem.Family = "other" }, []string{"family sdpa, this run is other"}},
		{"source hash", func(m *elites.Meta) { m.SourceHash = "beef" }, []string{"kernel source hash c0ffee, this run is beef"}},
		{"shapes", func(m *elites.Meta) { m.Problem.Shapes = m.Problem.Shapes[:1] }, []string{
			"shapes 1x8x512x64,2x8x512x64, this run is 1x8x512x64"}},
		{"weights", func(m *elites.Meta) { m.Problem.Weights = []float64{1, 3} }, []string{"weights 1,1, this run is 1,3"}},
		{"causal", func(m *elites.Meta) { m.Problem.Causal = true }, []string{"causal false, this run is true"}},
		{"GPU", func(m *elites.Meta) { m.GPU = "NVIDIA H100 80GB HBM3" }, []string{"GPU NVIDIA L4, this run is NVIDIA H100 80GB HBM3"}},
		{"arch", func(m *elites.Meta) { m.Arch = "sm_90" }, []string{"arch sm_89, this run is sm_90"}},
		{"nvcc", func(m *elites.Meta) { m.NVCC = "" }, []string{"nvcc version 13.0.88, this run is (none)"}},
		{"several", func(m *elites.Meta) { m.Problem.Dtype, m.Arch = "fp16", "sm_90" }, []string{
			"dtype bf16, this run is fp16", "; for arch sm_89, this run is sm_90"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := testMeta()
			tt.change(&want)
			a, err := elites.Open(dir, want, elites.OpenOptions{})
			if tt.want == nil {
				if err != nil {
					t.Fatalf("Open: %v", err)
				}
				mustClose(t, a)
				return
			}
			if err == nil {
				a.Close()
				t.Fatalf("Open succeeded, want a mismatch")
			}
			var mismatch *elites.MismatchError
			if !errors.As(err, &mismatch) {
				t.Fatalf("error %v is not a *MismatchError", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\ndoes not contain %q", err, w)
				}
			}
		})
	}
	// A refused Open released the lock.
	mustClose(t, mustOpen(t, dir))
}

func TestSeedOpen(t *testing.T) {
	dir := t.TempDir()
	a := mustCreate(t, dir)
	mustRecord(t, a, okResult("slow", 9), rejected("bad"), okResult("fast", 4), okResult("mid", 6))
	// a stays open: seeding needs no lock.

	want := testMeta()
	want.Problem.Dtype, want.GPU = "fp16", "NVIDIA H100 80GB HBM3"
	s, err := elites.Open(dir, want, elites.OpenOptions{Seed: true})
	if err != nil {
		t.Fatalf("Open as seed: %v", err)
	}
	defer s.Close()
	if _, ok := s.Lookup("fast"); ok {
		t.Errorf("a seed archive answered Lookup: its timings are another problem's")
	}
	seeds := s.Seeds(2)
	if len(seeds) != 2 || seeds[0]["name"] != "fast" || seeds[1]["name"] != "mid" {
		t.Errorf("Seeds(2) = %v, want the configs of fast, mid", seeds)
	}
	if err := s.Record(okResult("new", 1)); err == nil || !strings.Contains(err.Error(), "read-only") {
		t.Errorf("Record on a seed archive: %v, want a read-only error", err)
	}
	if err := s.SaveState([]byte("x")); err == nil {
		t.Errorf("SaveState on a seed archive succeeded")
	}

	want.Problem.Family = "other"
	if _, err := elites.Open(dir, want, elites.OpenOptions{Seed: true}); err == nil || !strings.Contains(err.Error(), "family sdpa, this run is other") {
		t.Errorf("seeding across families: %v, want a family error", err)
	}
}

func TestLockInProcess(t *testing.T) {
	dir := t.TempDir()
	a := mustCreate(t, dir)
	_, err := elites.Open(dir, testMeta(), elites.OpenOptions{})
	wantMsg := fmt.Sprintf("in use by process %d (this process)", os.Getpid())
	if err == nil || !strings.Contains(err.Error(), wantMsg) {
		t.Fatalf("second Open: %v, want an error containing %q", err, wantMsg)
	}
	// The refused Open closed its own lock file: that must not drop a's lock.
	if _, err := elites.Open(dir, testMeta(), elites.OpenOptions{}); err == nil {
		t.Fatalf("third Open succeeded while the archive is held")
	}
	// Readers need no lock.
	r, err := elites.Read(dir)
	if err != nil {
		t.Fatalf("Read beside a writer: %v", err)
	}
	r.Close()
	mustClose(t, a)
	mustClose(t, mustOpen(t, dir))
}

func TestTop(t *testing.T) {
	a := mustCreate(t, t.TempDir())
	timeout := okResult("timeout", 1)
	timeout.Status = space.StatusTimeout
	mustRecord(t, a, okResult("b", 5), rejected("r"), okResult("tie1", 2), timeout, okResult("c", 7), okResult("tie2", 2))
	tests := []struct {
		k    int
		want []string
	}{
		{-1, []string{}},
		{0, []string{}},
		{1, []string{"tie1"}},
		{3, []string{"tie1", "tie2", "b"}},
		{10, []string{"tie1", "tie2", "b", "c"}},
	}
	for _, tt := range tests {
		if got := keys(a.Top(tt.k)); !slices.Equal(got, tt.want) {
			t.Errorf("Top(%d) = %v, want %v", tt.k, got, tt.want)
		}
	}
	if best, ok := a.Best(); !ok || best.Key != "tie1" {
		t.Errorf("Best = %v, %v; want tie1", best.Key, ok)
	}
	empty := mustCreate(t, t.TempDir())
	mustRecord(t, empty, rejected("r"))
	if _, ok := empty.Best(); ok {
		t.Errorf("Best of an archive with no OK result reported one")
	}
}

func TestRecordRefuses(t *testing.T) {
	dir := t.TempDir()
	a := mustCreate(t, dir)
	mustRecord(t, a, okResult("a", 1))

	otherGPU := okResult("g", 1)
	otherGPU.Env.GPU = "NVIDIA H100"
	otherDtype := okResult("d", 1)
	p := testMeta().Problem
	p.Dtype = "fp16"
	otherDtype.Problem = &p
	sameProblem := okResult("p", 1)
	p2 := testMeta().Problem
	sameProblem.Problem = &p2

	tests := []struct {
		name    string
		r       space.Result
		wantErr string
		is      error
	}{
		{"no key", space.Result{Status: space.StatusOK}, "no key", nil},
		{"duplicate", okResult("a", 2), "seq 1", elites.ErrDuplicate},
		{"other GPU", otherGPU, `its GPU is NVIDIA H100, the archive's is NVIDIA L4`, nil},
		{"other dtype", otherDtype, `its dtype is fp16, the archive's is bf16`, nil},
		{"same problem", sameProblem, "", nil},
		{"empty env", rejected("x"), "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := a.Record(tt.r)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Record: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Record: %v, want an error containing %q", err, tt.wantErr)
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("error %v is not %v", err, tt.is)
			}
		})
	}
	if got := keys(a.Results()); !slices.Equal(got, []string{"a", "p", "x"}) {
		t.Errorf("recorded %v, want [a p x]", got)
	}
	mustClose(t, a)
	if err := a.Record(okResult("late", 1)); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("Record after Close: %v, want a closed error", err)
	}
	ro, err := elites.Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := ro.Record(okResult("ro", 1)); err == nil || !strings.Contains(err.Error(), "read-only") {
		t.Errorf("Record on Read archive: %v, want a read-only error", err)
	}
}

func TestMerge(t *testing.T) {
	dstDir, srcDir, otherDir := t.TempDir(), t.TempDir(), t.TempDir()
	dst := mustCreate(t, dstDir)
	mustRecord(t, dst, okResult("a", 3), okResult("b", 2))
	src := mustCreate(t, srcDir)
	mustRecord(t, src, okResult("b", 99), rejected("c"), okResult("d", 1))
	mustClose(t, src)

	added, err := elites.Merge(dst, srcDir)
	if err != nil || added != 2 {
		t.Fatalf("Merge = %d, %v; want 2, nil", added, err)
	}
	got := dst.Results()
	if !slices.Equal(keys(got), []string{"a", "b", "c", "d"}) || !slices.Equal(seqs(got), []int{1, 2, 3, 4}) {
		t.Fatalf("after merge: %v seqs %v, want [a b c d] [1 2 3 4]", keys(got), seqs(got))
	}
	if r, _ := dst.Lookup("b"); r.Objective != 2 {
		t.Errorf("merge replaced b: objective %v, want 2", r.Objective)
	}
	// The merged results keep their timing samples.
	want := []space.Result{okResult("a", 3), okResult("b", 2), rejected("c"), okResult("d", 1)}
	for i := range want {
		want[i].Seq = i + 1
	}
	checkSamples(t, dst, want)
	if added, err := elites.Merge(dst, srcDir); err != nil || added != 0 {
		t.Errorf("second Merge = %d, %v; want 0, nil", added, err)
	}

	meta := testMeta()
	meta.Arch = "sm_90"
	other, err := elites.Create(otherDir, meta)
	if err != nil {
		t.Fatal(err)
	}
	mustClose(t, other)
	var mismatch *elites.MismatchError
	if _, err := elites.Merge(dst, otherDir); !errors.As(err, &mismatch) || !strings.Contains(err.Error(), "archive "+otherDir+" was made for arch sm_90, the destination "+dstDir+" is sm_89") {
		t.Errorf("Merge of another arch: %v, want a mismatch naming arch", err)
	}
	mustClose(t, dst)
	got, warnings := readLogFile(t, dstDir)
	if len(warnings) != 0 || len(got) != 4 {
		t.Errorf("merged log: %d results, warnings %v", len(got), warnings)
	}
}

func TestSaveState(t *testing.T) {
	dir := t.TempDir()
	a := mustCreate(t, dir)
	if s, err := a.State(); s != nil || err != nil {
		t.Fatalf("State of a new archive = %q, %v; want nil", s, err)
	}
	for _, s := range []string{"population-1", "population-2 longer than the first", "p3"} {
		if err := a.SaveState([]byte(s)); err != nil {
			t.Fatalf("SaveState: %v", err)
		}
		if got, err := a.State(); string(got) != s || err != nil {
			t.Fatalf("State = %q, %v; want %q", got, err, s)
		}
	}
	// A crash between writing the temporary file and the rename leaves it
	// behind: it does not count, and the next save replaces it.
	tmp := filepath.Join(dir, "state.json.tmp")
	if err := os.WriteFile(tmp, []byte("half-writ"), 0o644); err != nil {
		t.Fatal(err)
	}
	mustClose(t, a)
	b := mustOpen(t, dir)
	if got, _ := b.State(); string(got) != "p3" {
		t.Fatalf("State after reopen = %q, want p3", got)
	}
	if err := b.SaveState([]byte("p4")); err != nil {
		t.Fatal(err)
	}
	if got, _ := b.State(); string(got) != "p4" {
		t.Fatalf("State = %q, want p4", got)
	}
	if _, err := os.Stat(tmp); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("temporary state file still there: %v", err)
	}
}

// TestConcurrentRecord records from many goroutines at once: the log must
// come out well-formed, in Seq order, with every Seq once.
func TestConcurrentRecord(t *testing.T) {
	dir := t.TempDir()
	a := mustCreate(t, dir)
	const workers, each = 16, 25
	var wg sync.WaitGroup
	errs := make(chan error, workers*each)
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				errs <- a.Record(okResult(fmt.Sprintf("w%d-%d", w, i), float64(1+i)))
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("Record: %v", err)
		}
	}
	mustClose(t, a)
	got, warnings := readLogFile(t, dir)
	if len(warnings) != 0 {
		t.Fatalf("log has warnings: %v", warnings)
	}
	if len(got) != workers*each {
		t.Fatalf("log holds %d results, want %d", len(got), workers*each)
	}
	for i, r := range got {
		if r.Seq != i+1 {
			t.Fatalf("line %d has seq %d, want %d", i+1, r.Seq, i+1)
		}
	}
}
