package main

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"evotune/runner"
	"evotune/space"
)

// milo is a Kernel Tuner cache with failure strings and extra fields per
// entry (times, compile_time, timestamp).
const milo = "../../testdata/ktcache/convolution_milo_A100.json.gz"

func TestFixMilo(t *testing.T) {
	out := filepath.Join(t.TempDir(), "milo-bsy2.json.gz")
	var stdout, stderr bytes.Buffer
	if err := run([]string{"-in", milo, "-fix", "block_size_y=2", "-out", out}, &stdout, &stderr); err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	full, err := runner.LoadKTCache(milo)
	if err != nil {
		t.Fatal(err)
	}
	sub, err := runner.LoadKTCache(out)
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range sub.Params() {
		want := full.Params()[i]
		if p.Name == "block_size_y" {
			want.Values = []string{"2"}
		}
		if p.Name != want.Name || !slices.Equal(p.Values, want.Values) {
			t.Errorf("parameter %d: %s %v, want %s %v", i, p.Name, p.Values, want.Name, want.Values)
		}
	}
	if sub.Kernel() != full.Kernel() || sub.Device() != full.Device() {
		t.Errorf("kernel %q on %q, want %q on %q", sub.Kernel(), sub.Device(), full.Kernel(), full.Device())
	}
	sp, err := sub.Space(nil)
	if err != nil {
		t.Fatal(err)
	}
	if raw, _ := sp.Size(); raw != 10240/5 {
		t.Errorf("product of %d configs, want 2048 (a fifth of 10240)", raw)
	}
	// Every config of the subspace's product reads the same from the
	// subspace as from the whole file: timed, failed or absent.
	ctx := context.Background()
	timed, entries, opt := 0, 0, 0.0
	sp.Enumerate(func(c space.Config) bool {
		a, b := sub.Evaluate(ctx, c), full.Evaluate(ctx, c)
		if a.Status != b.Status || a.Objective != b.Objective || a.Reason != b.Reason {
			t.Errorf("%s: subspace says %s %v %q, whole file %s %v %q", c.Key(), a.Status, a.Objective, a.Reason, b.Status, b.Objective, b.Reason)
			return false
		}
		if !strings.Contains(b.Reason, "not in the Kernel Tuner cache") {
			entries++
		}
		if b.OK() {
			timed++
			if opt == 0 || b.Objective < opt {
				opt = b.Objective
			}
		}
		return true
	})
	if sub.Timed() != timed || sub.Entries() != entries || timed != 1137 {
		t.Errorf("subspace holds %d entries, %d timed; the whole file has %d and %d with block_size_y=2 (1137 timed)", sub.Entries(), sub.Timed(), entries, timed)
	}
	if entries == timed {
		t.Errorf("no failed entry with block_size_y=2: the test no longer covers failures")
	}
	if _, got := best(sub, sub.Valid()); got != opt || got > 594.8 || got < 594.6 {
		t.Errorf("subspace optimum %v µs, want the whole file's best with block_size_y=2, %v (594.7)", got, opt)
	}
	if !strings.Contains(stdout.String(), "2048 configs in the product, 1137 timed, optimum 594.7 µs") {
		t.Errorf("stdout %q does not describe the subspace", stdout.String())
	}
}

// tiny is a hand-made cache: string and boolean values, an entry that
// holds its config only in its key, a failure, and fields evotune does
// not read.
const tiny = `{
 "device_name": "Test GPU", "kernel_name": "k", "objective": "time", "note": "hand-made",
 "tune_params_keys": ["a", "kind", "on"],
 "tune_params": {"a": [1, 2, 3], "kind": ["x", "y"], "on": [true, false]},
 "cache": {
  "1,x,true": {"a": 1, "kind": "x", "on": true, "time": 4.0, "GFLOP/s": 10},
  "2,x,true": {"a": 2, "kind": "x", "on": true, "time": 1.0},
  "2,y,false": {"time": 3.0},
  "3,y,true": {"a": 3, "kind": "y", "on": true, "time": 2.0},
  "3,y,false": {"a": 3, "kind": "y", "on": false, "time": "RuntimeFailedConfig"},
  "1,y,false": {"a": 1, "kind": "y", "on": false, "time": 5.0}
 }
}`

func writeTiny(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tiny.json")
	if err := os.WriteFile(path, []byte(tiny), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestFixTiny(t *testing.T) {
	in := writeTiny(t)
	for _, tc := range []struct {
		fix         string
		keys        []string
		timed       int
		optimumUS   float64
		fixedParam  string
		fixedValues []string
	}{
		{"kind=y", []string{"1,y,false", "2,y,false", "3,y,false", "3,y,true"}, 3, 2000, "kind", []string{"y"}},
		{"on=false", []string{"1,y,false", "2,y,false", "3,y,false"}, 2, 3000, "on", []string{"false"}},
		{"a=1", []string{"1,x,true", "1,y,false"}, 2, 4000, "a", []string{"1"}},
	} {
		t.Run(tc.fix, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "sub.json")
			var stdout bytes.Buffer
			if err := run([]string{"-in", in, "-fix", tc.fix, "-out", out}, &stdout, &stdout); err != nil {
				t.Fatal(err)
			}
			data, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			var raw struct {
				Note   string                    `json:"note"`
				Params map[string][]any          `json:"tune_params"`
				Cache  map[string]map[string]any `json:"cache"`
			}
			if err := json.Unmarshal(data, &raw); err != nil {
				t.Fatal(err)
			}
			if got := slices.Sorted(maps.Keys(raw.Cache)); !slices.Equal(got, tc.keys) {
				t.Errorf("cache keys %v, want %v (unchanged in format)", got, tc.keys)
			}
			for name, n := range map[string]int{"a": 3, "kind": 2, "on": 2} {
				if name == tc.fixedParam {
					n = 1
				}
				if len(raw.Params[name]) != n {
					t.Errorf("tune_params %s = %v, want %d values", name, raw.Params[name], n)
				}
			}
			if e, ok := raw.Cache["1,x,true"]; raw.Note != "hand-made" || ok && e["GFLOP/s"] != 10.0 {
				t.Errorf("note %q, entry 1,x,true %v: want the fields evotune does not read kept", raw.Note, e)
			}
			k, err := runner.LoadKTCache(out)
			if err != nil {
				t.Fatal(err)
			}
			if k.Timed() != tc.timed {
				t.Errorf("%d timed configs, want %d", k.Timed(), tc.timed)
			}
			if _, opt := best(k, k.Valid()); opt != tc.optimumUS {
				t.Errorf("optimum %v µs, want %v", opt, tc.optimumUS)
			}
			for _, p := range k.Params() {
				if p.Name == tc.fixedParam && !slices.Equal(p.Values, tc.fixedValues) {
					t.Errorf("%s has values %v, want %v", p.Name, p.Values, tc.fixedValues)
				}
			}
		})
	}
}

func TestFixErrors(t *testing.T) {
	in := writeTiny(t)
	out := filepath.Join(t.TempDir(), "sub.json")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-in", in, "-fix", "kind=z", "-out", out}, "kind has no value z (its values: x, y)"},
		{[]string{"-in", in, "-fix", "b=1", "-out", out}, "b is not a tune parameter (a, kind, on)"},
		{[]string{"-in", in, "-fix", "kind", "-out", out}, `-fix "kind": want KNOB=VALUE`},
		{[]string{"-in", in, "-fix", "kind=x"}, "-fix needs -out FILE"},
		{[]string{"-in", in}, "give either -fix KNOB=VALUE with -out FILE, or -split DIR"},
		{[]string{"-fix", "kind=x", "-out", out}, "-in is required"},
		{[]string{"-in", in + ".missing", "-fix", "kind=x", "-out", out}, "no such file"},
	} {
		var stderr bytes.Buffer
		err := run(tc.args, &stderr, &stderr)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want one containing %q", tc.args, err, tc.want)
		}
	}
}

func TestSplitTiny(t *testing.T) {
	in := writeTiny(t)
	// The optimum is 2,x,true: the subspaces a=1, a=3, kind=y and on=false
	// leave it out; a=1 holds 2 timed configs, a=3 one (and a failure).
	for _, tc := range []struct {
		args  []string
		files []string
	}{
		{nil, []string{"tiny-a-1.json.gz", "tiny-a-3.json.gz", "tiny-kind-y.json.gz", "tiny-on-false.json.gz"}},
		{[]string{"-largest"}, []string{"tiny-a-1.json.gz", "tiny-kind-y.json.gz", "tiny-on-false.json.gz"}},
		{[]string{"-min-valid", "3"}, []string{"tiny-kind-y.json.gz"}},
		{[]string{"-min-product", "5"}, []string{"tiny-kind-y.json.gz", "tiny-on-false.json.gz"}},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			dir := t.TempDir()
			var stdout bytes.Buffer
			args := append([]string{"-in", in, "-split", dir, "-min-valid", "1"}, tc.args...)
			if err := run(args, &stdout, &stdout); err != nil {
				t.Fatal(err)
			}
			entries, err := os.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, e := range entries {
				got = append(got, e.Name())
				if _, err := runner.LoadKTCache(filepath.Join(dir, e.Name())); err != nil {
					t.Error(err)
				}
			}
			if !slices.Equal(got, tc.files) {
				t.Errorf("wrote %v, want %v\n%s", got, tc.files, stdout.String())
			}
		})
	}
}

func TestDropTiny(t *testing.T) {
	in := writeTiny(t)
	dir := t.TempDir()
	var stdout bytes.Buffer
	// The optimum is 2,x,true: a is the one parameter of three values, so
	// one file, without a=2, holding a=1's two timed configs and a=3's one.
	if err := run([]string{"-in", in, "-drop", dir}, &stdout, &stdout); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Name() != "tiny-without-a-2.json.gz" {
		t.Fatalf("wrote %v, want tiny-without-a-2.json.gz\n%s", entries, stdout.String())
	}
	k, err := runner.LoadKTCache(filepath.Join(dir, entries[0].Name()))
	if err != nil {
		t.Fatal(err)
	}
	if k.Timed() != 3 {
		t.Errorf("%d timed configs, want 3", k.Timed())
	}
	for _, p := range k.Params() {
		if p.Name == "a" && !slices.Equal(p.Values, []string{"1", "3"}) {
			t.Errorf("a has values %v, want [1 3]", p.Values)
		}
	}
	if err := run([]string{"-in", in, "-drop", dir, "-split", dir}, &stdout, &stdout); err == nil {
		t.Error("-drop with -split: no error")
	}
}
