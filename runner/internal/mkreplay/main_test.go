package main

import (
	"bytes"
	"context"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"evotune/kernels"
	"evotune/runner"
	"evotune/space"
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

// TestInt8Model checks the int8 model: its configs are the int8 space's,
// each timed as fp8's with pv_fp8=0 would be (one-byte inputs, P V in fp16)
// and faster than fp16's, and its passing results carry end-to-end errors
// within int8's gate.
func TestInt8Model(t *testing.T) {
	path := filepath.Join(t.TempDir(), "int8.jsonl.gz")
	if err := run([]string{"-o", path, "--dtype", "int8", "--configs", "400"}, os.Stderr); err != nil {
		t.Fatal(err)
	}
	r, err := runner.LoadReplay(path)
	if err != nil {
		t.Fatal(err)
	}
	if h := r.Header(); h.Problem == nil || h.Problem.Dtype != "int8" || r.Len() != 400 {
		t.Fatalf("header %+v with %d results: want 400 int8 results", h, r.Len())
	}
	gate := kernels.ToleranceFor("int8", "")
	passed := 0
	for _, c := range r.Configs() {
		res := r.Evaluate(context.Background(), c)
		if _, ok := res.Config["pv_fp8"]; ok {
			t.Fatalf("int8 config %s has fp8's knob pv_fp8", res.Key)
		}
		if res.OK() {
			passed++
			if a := res.Accuracy; a == nil || a.E2ECos < gate.E2ECos || a.E2ERelL1 > gate.E2ERelL1 || a.MaxAbsErr > gate.MaxAbs {
				t.Errorf("%s passed with accuracy %+v outside the int8 gate %+v", res.Key, res.Accuracy, gate)
			}
		}
	}
	if passed < 200 {
		t.Errorf("%d of 400 int8 configs pass, want most", passed)
	}

	models := map[string]model{}
	for _, dtype := range []string{"fp16", "fp8", "int8"} {
		target, err := kernels.TargetFor(arch)
		if err != nil {
			t.Fatal(err)
		}
		p := problem(dtype)
		family, err := kernels.FamilyOf(p.Family)
		if err != nil {
			t.Fatal(err)
		}
		s, err := family.SpaceFor(p, target)
		if err != nil {
			t.Fatal(err)
		}
		models[dtype] = model{family: family, target: target, s: s, problem: p}
	}
	latency := func(dtype string, c space.Config) float64 {
		t.Helper()
		g, err := models[dtype].geometry(c)
		if err != nil {
			t.Fatal(err)
		}
		return latencyUS(g, 128)
	}
	for _, c := range models["int8"].s.ValidConfigs()[:50] {
		fp8 := maps.Clone(c)
		fp8["pv_fp8"] = "0"
		fp8["qk_accum"] = "0" // int8's Q K^T is exact in int32: no second accumulator
		fp16 := maps.Clone(c)
		delete(fp16, "pv_accum")
		i8, f8, f16 := latency("int8", c), latency("fp8", fp8), latency("fp16", fp16)
		split := maps.Clone(fp8)
		split["qk_accum"] = "1"
		if !(latency("fp8", split) > f8) {
			t.Errorf("%s: fp8's qk_accum=1 costs no time in the model", c.Key())
		}
		if c["q_in_regs"] == "1" {
			widened := maps.Clone(fp8)
			widened["qk_f16"] = "1"
			if !(latency("fp8", widened) > f8) {
				t.Errorf("%s: fp8's qk_f16=1 (Q K^T at fp16's rate on the L4) costs no time in the model", c.Key())
			}
		}
		if i8 != f8 || !(i8 < f16) {
			t.Errorf("%s: int8 %.3f µs, fp8 with pv_fp8=0 and qk_accum=0 %.3f µs, fp16 %.3f µs: want int8 = fp8 < fp16", c.Key(), i8, f8, f16)
		}
	}
}
