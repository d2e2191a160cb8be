package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"evotune/runner"
)

// TestCommittedFileIsGenerated regenerates the committed replay files
// (those of runner/replay.go's go:generate lines) and compares bytes: each
// file is what the generator writes, and the generator is deterministic.
func TestCommittedFileIsGenerated(t *testing.T) {
	for _, tt := range []struct {
		file string
		opt  options
	}{
		{"../../testdata/replay/synthetic-1x8x512x64-fp16.jsonl.gz", options{seed: 1, dtype: "fp16"}},
		{"../../testdata/replay/synthetic-1x8x512x64-fp8.jsonl.gz", options{seed: 1, dtype: "fp8", configs: 16000}},
	} {
		var buf bytes.Buffer
		if err := write(&buf, tt.opt); err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile(tt.file)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(buf.Bytes(), want) {
			t.Errorf("the generator writes %d bytes that differ from the %d committed in %s; run go generate replay.go in runner/",
				buf.Len(), len(want), tt.file)
		}
	}
}

func TestSubset(t *testing.T) {
	path := filepath.Join(t.TempDir(), "subset.jsonl.gz")
	if err := run([]string{"-o", path, "--configs", "300", "--seed", "7"}, os.Stderr); err != nil {
		t.Fatal(err)
	}
	r, err := runner.LoadReplay(path)
	if err != nil {
		t.Fatal(err)
	}
	h := r.Header()
	if r.Len() != 300 || h.Configs != 300 || !h.Synthetic || h.Seed != 7 {
		t.Fatalf("got %d results, header %+v; want 300 synthetic results of seed 7", r.Len(), h)
	}
	if !strings.HasPrefix(h.Recorded, "synthetic") || h.Env.GPU != "synthetic" {
		t.Fatalf("header does not say the file is synthetic: %+v", h)
	}
}

func TestFlagErrors(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{nil, "-o (--out) is required"},
		{[]string{"-o", "x", "--configs", "-1"}, "--configs must be 0 (all) or positive"},
		{[]string{"-o", filepath.Join(t.TempDir(), "no", "such", "dir", "f.gz")}, "creating -o"},
	}
	for _, tt := range tests {
		err := run(tt.args, new(bytes.Buffer))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("run(%q) = %v, want an error containing %q", tt.args, err, tt.want)
		}
	}
}
