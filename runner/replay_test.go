package runner

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"evotune/kernels"
	"evotune/space"
)

const syntheticReplay = "testdata/replay/synthetic-1x8x512x64-fp16.jsonl.gz"

// writeReplayFile writes lines to a file called name in a fresh directory,
// gzip-compressed when name ends in .gz, and returns its path.
func writeReplayFile(t *testing.T, name string, lines ...string) string {
	t.Helper()
	var buf bytes.Buffer
	data := []byte(strings.Join(lines, "\n"))
	if strings.HasSuffix(name, ".gz") {
		zw := gzip.NewWriter(&buf)
		if _, err := zw.Write(data); err != nil {
			t.Fatal(err)
		}
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
		data = buf.Bytes()
	}
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// replayLine renders one recorded result for config text "k=v,k=v".
func replayLine(t *testing.T, config string, status space.Status, objective float64) string {
	t.Helper()
	c := space.Config{}
	for kv := range strings.SplitSeq(config, ",") {
		k, v, _ := strings.Cut(kv, "=")
		c[k] = v
	}
	r := space.Result{Seq: 9, Key: c.Key(), Config: c, Status: status, Objective: objective,
		Cost: space.Cost{CompileSec: 5, CheckSec: 0.3, TimeSec: 0.5}}
	if status == space.StatusOK {
		r.Gate = space.GateTimed
		r.Timings = []space.Timing{{P50US: objective, SamplesUS: []float64{objective}}}
		r.Accuracy = &space.Accuracy{MaxAbsErr: 1e-4}
	}
	data, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

const replayTestHeader = `{"replay_header": {"recorded": "by hand", "env": {"gpu": "test"}}}`

func TestLoadReplayErrors(t *testing.T) {
	tests := []struct {
		name  string
		file  string
		lines []string
		err   string
	}{
		{"duplicate key", "d.jsonl", []string{replayTestHeader, replayLine(t, "a=1,b=2", space.StatusOK, 3), "", replayLine(t, "b=2,a=1", space.StatusFault, 0)},
			`d.jsonl:4: config a=1,b=2 recorded twice (first on line 2)`},
		{"torn line", "t.jsonl", []string{replayLine(t, "a=1", space.StatusOK, 3), replayLine(t, "a=2", space.StatusOK, 3)[:40]},
			"t.jsonl:2: decoding result: unexpected end of JSON input"},
		{"torn line gz", "t.jsonl.gz", []string{replayTestHeader, replayLine(t, "a=1", space.StatusOK, 3)[:20]},
			"t.jsonl.gz:2: decoding result:"},
		{"not json", "n.jsonl", []string{"hello"}, "n.jsonl:1: decoding result: invalid character"},
		{"trailing garbage", "g.jsonl", []string{replayLine(t, "a=1", space.StatusOK, 3) + " x"}, "g.jsonl:1: decoding result: invalid character 'x'"},
		{"number value", "v.jsonl", []string{`{"config": {"a": 1}, "status": "ok"}`}, `v.jsonl:1: decoding result: decoding config: knob "a": value must be a string`},
		{"key mismatch", "k.jsonl", []string{`{"key": "a=2", "config": {"a": "1"}, "status": "ok"}`}, `k.jsonl:1: key "a=2" does not match config "a=1"`},
		{"no config", "c.jsonl", []string{`{"key": "a=1", "status": "ok"}`}, "c.jsonl:1: result has no config"},
		{"unknown status", "s.jsonl", []string{`{"config": {"a": "1"}, "status": "great"}`}, `s.jsonl:1: unknown status "great"`},
		{"late header", "h.jsonl", []string{replayLine(t, "a=1", space.StatusOK, 3), replayTestHeader}, "h.jsonl:2: a replay header is only allowed on the first line"},
		{"header without provenance", "p.jsonl", []string{`{"replay_header": {"env": {}}}`, replayLine(t, "a=1", space.StatusOK, 3)},
			"p.jsonl:1: replay header does not say how the results were recorded"},
		{"empty", "e.jsonl", []string{"", "  "}, "e.jsonl: replay file holds no results"},
		{"header only", "o.jsonl", []string{replayTestHeader}, "o.jsonl: replay file holds no results"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := LoadReplay(writeReplayFile(t, tt.file, tt.lines...))
			if err == nil {
				t.Fatalf("LoadReplay accepted the file (%d results)", r.Len())
			}
			if !strings.Contains(err.Error(), tt.err) {
				t.Fatalf("error %q does not contain %q", err, tt.err)
			}
		})
	}
}

func TestLoadReplayTruncatedGzip(t *testing.T) {
	path := writeReplayFile(t, "z.jsonl.gz", replayTestHeader, replayLine(t, "a=1", space.StatusOK, 3), replayLine(t, "a=2", space.StatusOK, 4))
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data[:len(data)-12], 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadReplay(path); err == nil || !strings.Contains(err.Error(), "z.jsonl.gz") {
		t.Fatalf("LoadReplay of a truncated gzip file: %v, want an error naming the file", err)
	}
	if _, err := LoadReplay(filepath.Join(t.TempDir(), "missing.jsonl")); err == nil || !strings.Contains(err.Error(), "missing.jsonl") {
		t.Fatalf("LoadReplay of a missing file: %v", err)
	}
}

func TestReplayEvaluate(t *testing.T) {
	for _, name := range []string{"small.jsonl", "small.jsonl.gz"} {
		t.Run(name, func(t *testing.T) {
			r, err := LoadReplay(writeReplayFile(t, name, replayTestHeader,
				replayLine(t, "a=1,b=1", space.StatusOK, 12.5),
				replayLine(t, "a=1,b=2", space.StatusOK, 9.25),
				replayLine(t, "a=2,b=1", space.StatusIncorrect, 0),
				"",
				replayLine(t, "a=2,b=2", space.StatusOK, 9.25),
			))
			if err != nil {
				t.Fatal(err)
			}
			if r.Len() != 4 {
				t.Fatalf("Len() = %d, want 4", r.Len())
			}
			if h := r.Header(); h.Recorded != "by hand" || h.Env.GPU != "test" {
				t.Fatalf("Header() = %+v", h)
			}
			ctx := context.Background()

			hit := r.Evaluate(ctx, space.Config{"b": "2", "a": "1"})
			if hit.Status != space.StatusOK || hit.Objective != 9.25 || hit.Key != "a=1,b=2" {
				t.Fatalf("hit = %+v", hit)
			}
			if hit.Env.Replay != name || hit.Seq != 0 {
				t.Fatalf("hit: Env.Replay = %q, Seq = %d; want %q, 0", hit.Env.Replay, hit.Seq, name)
			}
			if hit.Cost.Total() != 5.8 {
				t.Fatalf("hit cost %v, want the recorded 5.8 s", hit.Cost.Total())
			}
			// What Evaluate returns is the caller's to change.
			hit.Config["a"] = "9"
			hit.Timings[0].SamplesUS[0] = -1
			hit.Accuracy.MaxAbsErr = 7
			again := r.Evaluate(ctx, space.Config{"a": "1", "b": "2"})
			if again.Config["a"] != "1" || again.Timings[0].SamplesUS[0] != 9.25 || again.Accuracy.MaxAbsErr != 1e-4 {
				t.Fatalf("changing a returned result changed the replay: %+v", again)
			}

			if got := r.Evaluate(ctx, space.Config{"a": "2", "b": "1"}); got.Status != space.StatusIncorrect {
				t.Fatalf("recorded failure came back as %q", got.Status)
			}

			miss := r.Evaluate(ctx, space.Config{"a": "3", "b": "1"})
			if miss.Status != space.StatusConstraint || miss.Gate != space.GateConstraint ||
				miss.Reason != "recorded: not in replay file" || miss.Key != "a=3,b=1" ||
				miss.Cost.Total() != 0 || miss.Env.Replay != name {
				t.Fatalf("miss = %+v", miss)
			}

			// Ties on the objective go to the smaller key.
			best, ok := r.Optimum()
			if !ok || best.Key != "a=1,b=2" || best.Objective != 9.25 || best.Env.Replay != name {
				t.Fatalf("Optimum() = %+v, %v", best, ok)
			}

			con := r.Constraint()
			if con.Name != "recorded" {
				t.Fatalf("constraint name %q", con.Name)
			}
			if err := con.Check(space.Config{"b": "1", "a": "2"}); err != nil {
				t.Fatalf("recorded config refused: %v", err)
			}
			if err := con.Check(space.Config{"a": "3", "b": "1"}); err == nil || err.Error() != "not in replay file" {
				t.Fatalf("unrecorded config: %v", err)
			}
		})
	}
}

func TestReplayWithoutOKResult(t *testing.T) {
	r, err := LoadReplay(writeReplayFile(t, "f.jsonl", replayLine(t, "a=1", space.StatusFault, 0), replayLine(t, "a=2", space.StatusPtxasReject, 0)))
	if err != nil {
		t.Fatal(err)
	}
	if best, ok := r.Optimum(); ok {
		t.Fatalf("Optimum() = %+v with no OK result", best)
	}
	if h := r.Header(); h.Recorded != "" {
		t.Fatalf("header of a file without one: %+v", h)
	}
}

// TestSyntheticReplay checks the committed synthetic file against the SDPA
// space it models: it covers exactly the valid configs, every answer is
// consistent with the space, and Optimum is the best of them.
func TestSyntheticReplay(t *testing.T) {
	r, err := LoadReplay(syntheticReplay)
	if err != nil {
		t.Fatal(err)
	}
	h := r.Header()
	if !h.Synthetic || !strings.HasPrefix(h.Recorded, "synthetic") || h.Env.GPU != "synthetic" {
		t.Fatalf("header does not say the file is synthetic: %+v", h)
	}
	if h.Problem == nil || len(h.Problem.Shapes) != 1 || h.Problem.Shapes[0].String() != "1x8x512x64" || h.Problem.Dtype != "fp16" {
		t.Fatalf("header problem %+v, want 1x8x512x64 fp16", h.Problem)
	}
	if h.Configs != r.Len() {
		t.Fatalf("header says %d configs, file has %d", h.Configs, r.Len())
	}
	target, err := kernels.TargetFor(h.Env.Arch)
	if err != nil {
		t.Fatal(err)
	}
	s, err := kernels.SDPASpace(*h.Problem, target)
	if err != nil {
		t.Fatal(err)
	}
	_, valid := s.Size()
	if uint64(r.Len()) != valid {
		t.Fatalf("file has %d configs, the space %d valid ones", r.Len(), valid)
	}
	ctx := context.Background()
	counts := make(map[space.Status]int)
	var best space.Result
	s.Enumerate(func(c space.Config) bool {
		res := r.Evaluate(ctx, c)
		counts[res.Status]++
		if res.Status == space.StatusConstraint {
			t.Fatalf("valid config %s not recorded", c.Key())
		}
		flags, err := s.Flags(c)
		if err != nil || strings.Join(flags, " ") != strings.Join(res.Flags, " ") {
			t.Fatalf("config %s: recorded flags %q, the space renders %q (%v)", c.Key(), res.Flags, flags, err)
		}
		if res.Cost.CompileSec < 4 || res.Cost.CompileSec > 12 {
			t.Fatalf("config %s: compile cost %v s outside [4, 12]", c.Key(), res.Cost.CompileSec)
		}
		if res.OK() && (best.Key == "" || res.Objective < best.Objective) {
			best = res
		}
		return true
	})
	opt, ok := r.Optimum()
	if !ok || opt.Key != best.Key {
		t.Fatalf("Optimum() = %s, %v; the best by enumeration is %s", opt.Key, ok, best.Key)
	}
	// A plausible model: most configs pass, and every failing gate occurs.
	for _, st := range []space.Status{space.StatusOK, space.StatusPtxasReject, space.StatusIncorrect, space.StatusFault} {
		if counts[st] == 0 {
			t.Errorf("no %s result in the synthetic file", st)
		}
	}
	if counts[space.StatusOK] < r.Len()/2 {
		t.Errorf("only %d of %d configs pass: %v", counts[space.StatusOK], r.Len(), counts)
	}
	// The default config is not the optimum, so there is something to find.
	def := r.Evaluate(ctx, s.Default())
	if !def.OK() || def.Objective < 1.2*opt.Objective {
		t.Errorf("default %v µs, optimum %v µs: want the optimum at least 1.2x faster", def.Objective, opt.Objective)
	}

	// The "recorded" constraint leaves exactly the recorded configs.
	s.Constraints = append(s.Constraints, r.Constraint())
	if _, v := s.Size(); v != valid {
		t.Fatalf("with the recorded constraint the space has %d valid configs, want %d", v, valid)
	}
}

func TestReplayConcurrentEvaluate(t *testing.T) {
	r, err := LoadReplay(writeReplayFile(t, "c.jsonl", replayLine(t, "a=1", space.StatusOK, 2), replayLine(t, "a=2", space.StatusOK, 3)))
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for range 100 {
				c := space.Config{"a": []string{"1", "2", "3"}[i%3]}
				res := r.Evaluate(context.Background(), c)
				res.Config["a"] = "x"
				if len(res.Timings) > 0 {
					res.Timings[0].P50US = -1
				}
			}
		})
	}
	wg.Wait()
	if got := r.Evaluate(context.Background(), space.Config{"a": "1"}); got.Timings[0].P50US != 2 {
		t.Fatalf("concurrent callers changed the replay: %+v", got.Timings)
	}
}

// TestSyntheticFP8Replay checks the committed fp8 synthetic file: an fp8
// problem, a subset of the fp8 space's valid configs rendered as that space
// renders them (SDPA_FP8 and the fp8 knobs included), both values of each
// fp8 knob among the passing results, and end-to-end accuracy recorded.
func TestSyntheticFP8Replay(t *testing.T) {
	r, err := LoadReplay("testdata/replay/synthetic-1x8x512x64-fp8.jsonl.gz")
	if err != nil {
		t.Fatal(err)
	}
	h := r.Header()
	if !h.Synthetic || h.Problem == nil || h.Problem.Dtype != "fp8" || h.Configs != r.Len() {
		t.Fatalf("header %+v (problem %+v), %d configs: want a synthetic fp8 file", h, h.Problem, r.Len())
	}
	target, err := kernels.TargetFor(h.Env.Arch)
	if err != nil {
		t.Fatal(err)
	}
	s, err := kernels.SDPASpace(*h.Problem, target)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	ok := 0
	for _, c := range r.Configs() {
		res := r.Evaluate(context.Background(), c)
		if err := s.Check(res.Config); err != nil {
			t.Fatalf("recorded config %s is not valid in the fp8 space: %v", res.Key, err)
		}
		flags, _ := s.Flags(res.Config)
		if got, want := strings.Join(res.Flags, " "), strings.Join(flags, " "); got != want || !strings.Contains(got, "-DSDPA_FP8=1") {
			t.Fatalf("config %s: recorded flags %q, the space renders %q", res.Key, got, want)
		}
		if res.OK() {
			ok++
			seen["pv_fp8="+res.Config["pv_fp8"]] = true
			seen["pv_accum="+res.Config["pv_accum"]] = true
			if res.Accuracy == nil || !(res.Accuracy.E2ECos > 0.99) || !(res.Accuracy.E2ERelL1 > 0) {
				t.Fatalf("config %s: accuracy %+v lacks the end-to-end figures", res.Key, res.Accuracy)
			}
		}
	}
	if ok < r.Len()/2 || len(seen) != 4 {
		t.Errorf("%d of %d pass, fp8 knob values among them %v: want most to pass with every value", ok, r.Len(), seen)
	}
}
