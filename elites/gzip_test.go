package elites_test

import (
	"compress/gzip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"evotune/elites"
	"evotune/space"
)

// gzipLog replaces dir's results.jsonl by results.jsonl.gz, as the archives
// committed under results/ keep it.
func gzipLog(t *testing.T, dir string) {
	t.Helper()
	plain := filepath.Join(dir, "results.jsonl")
	data, err := os.ReadFile(plain)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(plain + ".gz")
	if err != nil {
		t.Fatal(err)
	}
	zw := gzip.NewWriter(f)
	if _, err := zw.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(plain); err != nil {
		t.Fatal(err)
	}
}

func TestReadCompressedLog(t *testing.T) {
	dir := t.TempDir()
	a := mustCreate(t, dir)
	want := []space.Result{okResult("a", 12.5), rejected("b"), okResult("c", 9.75)}
	mustRecord(t, a, want...)
	want = a.Results()
	mustClose(t, a)
	gzipLog(t, dir)

	r, err := elites.Read(dir)
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	defer r.Close()
	// A compressed log is read whole: its results keep their samples.
	if got := r.Results(); !reflect.DeepEqual(withoutSamples(got), want) || len(got[0].Timings[0].SamplesUS) != 2 {
		t.Fatalf("Results of the compressed log:\n got %+v\nwant %+v with samples", got, want)
	}
	if best, ok := r.Best(); !ok || best.Key != "c" {
		t.Errorf("Best = %s, %v; want c", best.Key, ok)
	}

	// A merge reads its sources the same way.
	dst := mustCreate(t, filepath.Join(t.TempDir(), "dst"))
	if n, err := elites.Merge(dst, dir); err != nil || n != len(want) {
		t.Errorf("Merge from the compressed archive = %d, %v; want %d, nil", n, err, len(want))
	}
}

func TestOpenRefusesCompressedLog(t *testing.T) {
	dir := t.TempDir()
	a := mustCreate(t, dir)
	mustRecord(t, a, okResult("a", 12.5))
	mustClose(t, a)
	gzipLog(t, dir)

	_, err := elites.Open(dir, testMeta(), elites.OpenOptions{})
	if err == nil || !strings.Contains(err.Error(), "results.jsonl.gz") {
		t.Fatalf("Open of an archive with a compressed log = %v, want a refusal naming results.jsonl.gz", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "results.jsonl")); !os.IsNotExist(err) {
		t.Errorf("Open left a fresh results.jsonl beside the compressed one (stat: %v)", err)
	}
}

func TestReadDamagedCompressedLog(t *testing.T) {
	dir := t.TempDir()
	a := mustCreate(t, dir)
	mustClose(t, a)
	if err := os.Remove(filepath.Join(dir, "results.jsonl")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "results.jsonl.gz"), []byte("not gzip"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := elites.Read(dir); err == nil || !strings.Contains(err.Error(), "results.jsonl.gz") {
		t.Fatalf("Read of a log that is not gzip = %v, want an error naming the file", err)
	}
}
