package runner

import (
	"context"
	"strings"
	"testing"

	"evotune/space"
)

// The Kernel Tuner cache files of testdata/ktcache: two spaces of a public
// study of tuning strategies (only valid configs present) and a newer file
// with failure strings.
const (
	ktGEMM = "testdata/ktcache/GEMM_A100.json.gz"
	ktConv = "testdata/ktcache/convolution_A100.json.gz"
	ktMilo = "testdata/ktcache/convolution_milo_A100.json.gz"
)

func TestLoadKTCacheSpaces(t *testing.T) {
	for _, tc := range []struct {
		path          string
		kernel        string
		params        int
		product, good uint64
	}{
		{ktGEMM, "Xgemm", 15, 82944, 17956},
		{ktConv, "convolution_kernel", 8, 18432, 5776},
	} {
		t.Run(tc.kernel, func(t *testing.T) {
			k, err := LoadKTCache(tc.path)
			if err != nil {
				t.Fatal(err)
			}
			if k.Kernel() != tc.kernel || !strings.Contains(k.Device(), "A100") {
				t.Errorf("kernel %q on %q, want %s on an A100", k.Kernel(), k.Device(), tc.kernel)
			}
			if got := len(k.Params()); got != tc.params {
				t.Errorf("%d tune parameters, want %d", got, tc.params)
			}
			if uint64(k.Timed()) != tc.good || uint64(k.Entries()) != tc.good || k.Skipped() != 0 {
				t.Errorf("timed %d, entries %d, skipped %d; want %d, %d, 0", k.Timed(), k.Entries(), k.Skipped(), tc.good, tc.good)
			}
			sp, err := k.Space(nil)
			if err != nil {
				t.Fatal(err)
			}
			raw, valid := sp.Size()
			if raw != tc.product || valid != tc.product {
				t.Errorf("space holds %d raw, %d valid configs; want the full product %d", raw, valid, tc.product)
			}
			for i, kn := range sp.Knobs {
				if kn.Name != k.Params()[i].Name || kn.Layer != space.Micro || kn.Default != kn.Values[0] {
					t.Errorf("knob %d = %s (layer %d, default %s): want parameter %s, micro, its first value", i, kn.Name, kn.Layer, kn.Default, k.Params()[i].Name)
				}
			}
			if got := len(k.Valid()); uint64(got) != tc.good {
				t.Errorf("Valid lists %d configs, want %d", got, tc.good)
			}
			// The first values stand in for a default the file lacks, in
			// the restricted space too: a search does not start there.
			if !sp.PlaceholderDefaults || !sp.Restrict(k.Valid()).PlaceholderDefaults {
				t.Errorf("the space's first values are not marked as placeholder defaults")
			}
			// Restricted to the valid set, the space holds exactly those.
			if _, v := sp.Restrict(k.Valid()).Size(); v != tc.good {
				t.Errorf("restricted space holds %d configs, want %d", v, tc.good)
			}
		})
	}
}

func TestKTCacheEvaluate(t *testing.T) {
	k, err := LoadKTCache(ktGEMM)
	if err != nil {
		t.Fatal(err)
	}
	sp, err := k.Space(nil)
	if err != nil {
		t.Fatal(err)
	}
	// The file's first entry, 34.533312 ms.
	c, err := sp.Parse("MWG=16,NWG=16,KWG=32,MDIMC=8,NDIMC=8,MDIMA=8,NDIMB=8,KWI=2,VWM=1,VWN=1,STRM=0,STRN=0,SA=0,SB=0,PRECISION=32")
	if err != nil {
		t.Fatal(err)
	}
	r := k.Evaluate(context.Background(), c)
	if !r.OK() || r.Gate != space.GateTimed || r.Objective < 34533.31 || r.Objective > 34533.32 {
		t.Errorf("recorded config: status %s gate %s objective %v µs, want ok, timed, 34533.312", r.Status, r.Gate, r.Objective)
	}
	if len(r.Timings) != 1 || r.Timings[0].P50US != r.Objective || r.Env.Replay != "GEMM_A100.json.gz" || r.Env.GPU != k.Device() {
		t.Errorf("recorded config: timings %+v, env %+v", r.Timings, r.Env)
	}
	r.Config["MWG"] = "changed" // a copy: the cache is untouched
	if again := k.Evaluate(context.Background(), c); again.Config["MWG"] != "16" {
		t.Errorf("Evaluate returned the cache's own config map")
	}
	// MDIMC=32 with MWG=16 is not in the file (Kernel Tuner's
	// restrictions left it out), so it fails.
	absent := c.Clone()
	absent["MDIMC"] = "32"
	r = k.Evaluate(context.Background(), absent)
	if r.OK() || r.Status != space.StatusConstraint || r.Gate != space.GateConstraint || !strings.Contains(r.Reason, "not in the Kernel Tuner cache") {
		t.Errorf("absent config: status %s gate %s reason %q, want a constraint failure", r.Status, r.Gate, r.Reason)
	}
}

func TestKTCacheFailureStrings(t *testing.T) {
	k, err := LoadKTCache(ktMilo)
	if err != nil {
		t.Fatal(err)
	}
	if k.Entries() != 4362 || k.Timed() != 4201 {
		t.Errorf("entries %d, timed %d; want 4362 and 4201", k.Entries(), k.Timed())
	}
	sp, err := k.Space([]string{"block_size_x", "block_size_y"})
	if err != nil {
		t.Fatal(err)
	}
	if raw, _ := sp.Size(); raw != 10240 {
		t.Errorf("product of %d configs, want 10240", raw)
	}
	for _, kn := range sp.Knobs {
		want := space.Micro
		if kn.Name == "block_size_x" || kn.Name == "block_size_y" {
			want = space.Macro
		}
		if kn.Layer != want {
			t.Errorf("knob %s in layer %d, want %d", kn.Name, kn.Layer, want)
		}
	}
	by := map[space.Status]int{}
	samples := 0
	sp.Enumerate(func(c space.Config) bool {
		r := k.Evaluate(context.Background(), c)
		by[r.Status]++
		if r.OK() && len(r.Timings[0].SamplesUS) == 32 {
			samples++
		}
		if r.Status == space.StatusCompileError && r.Reason != "Kernel Tuner: CompilationFailedConfig" {
			t.Errorf("compile failure with reason %q", r.Reason)
		}
		return true
	})
	want := map[space.Status]int{space.StatusOK: 4201, space.StatusFault: 155, space.StatusCompileError: 6,
		space.StatusConstraint: 10240 - 4362}
	for s, n := range want {
		if by[s] != n {
			t.Errorf("%d configs with status %s, want %d (all: %v)", by[s], s, n, by)
		}
	}
	if samples != 4201 {
		t.Errorf("%d timed configs carry their 32 timing runs, want 4201", samples)
	}
	if _, err := k.Space([]string{"block_size_z"}); err == nil || !strings.Contains(err.Error(), "block_size_z is not a tune parameter") {
		t.Errorf("unknown macro knob: err = %v", err)
	}
}

func TestReadKTCache(t *testing.T) {
	const head = `{"kernel_name": "k", "tune_params_keys": ["a", "b"], "tune_params": {"a": [1, 2], "b": ["x", "y"]}, "cache": `
	for _, tc := range []struct {
		name, text string
		wantErr    string
		ok, failed int
		skipped    int
	}{
		{name: "plain", text: head + `{"1,x": {"a": 1, "b": "x", "time": 2.5}, "2,x": {"a": 2, "b": "x", "time": "RuntimeFailedConfig"}}}`, ok: 1, failed: 1},
		{name: "values from the key", text: head + `{"1,y": {"time": 1.5}, "2,y": {"time": 3}}}`, ok: 2},
		{name: "old failure mark", text: head + `{"1,x": {"time": 1e20}, "2,x": {"time": 1}}}`, ok: 1, failed: 1},
		{name: "value outside the parameters", text: head + `{"3,x": {"time": 1}, "2,x": {"time": 1}}}`, ok: 1, skipped: 1},
		{name: "no parameters", text: `{"cache": {}}`, wantErr: "no tune_params_keys"},
		{name: "value twice", text: `{"tune_params_keys": ["a"], "tune_params": {"a": [1, 1]}, "cache": {}}`, wantErr: "value 1 listed twice"},
		{name: "parameter without values", text: `{"tune_params_keys": ["a"], "tune_params": {}, "cache": {}}`, wantErr: "a has no values"},
		{name: "time of another kind", text: head + `{"1,x": {"time": [1]}}}`, wantErr: `"1,x": time [1] is neither`},
		{name: "no time", text: head + `{"1,x": {"a": 1}}}`, wantErr: `"1,x": no time`},
		{name: "nothing timed", text: head + `{"1,x": {"time": "CompilationFailedConfig"}}}`, wantErr: "no config of the Kernel Tuner cache has a time"},
		{name: "not JSON", text: `{"tune_params_keys": [`, wantErr: "decoding Kernel Tuner cache"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k, err := ReadKTCache(strings.NewReader(tc.text), "f.json")
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.HasPrefix(err.Error(), "f.json: ") {
					t.Fatalf("err = %v, want one naming the file and containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if k.Timed() != tc.ok || k.Entries()-k.Timed() != tc.failed || k.Skipped() != tc.skipped {
				t.Errorf("timed %d, failed %d, skipped %d; want %d, %d, %d", k.Timed(), k.Entries()-k.Timed(), k.Skipped(), tc.ok, tc.failed, tc.skipped)
			}
		})
	}
}
