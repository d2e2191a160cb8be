package elites

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"evotune/space"
)

// BenchName is the file in an archive directory where a benchmark of the
// archive's best config beside PyTorch SDPA is kept, so that exports and
// reports can quote the speedup over PyTorch.
const BenchName = "bench.json"

// Evidence is what an archive says for its best configuration: the best
// result, the family default measured in the same archive (the honest
// baseline), the best config of each shape of a multi-shape problem, and
// where it was all measured. Export and report both read it, so the two
// never disagree.
type Evidence struct {
	Best space.Result `json:"best"`
	// Default is the family default's result when the archive holds it
	// and it passed every gate; Speedup is then Default's objective over
	// Best's.
	Default *space.Result `json:"default,omitempty"`
	Speedup float64       `json:"speedup_vs_default,omitempty"`
	// Shapes holds, for a problem of more than one shape, the best result
	// for each shape on its own (by that shape's p50); empty otherwise.
	Shapes     []ShapeBest `json:"shapes,omitempty"`
	Provenance Provenance  `json:"provenance"`
}

// A ShapeBest is the best result for one shape of a problem, by the p50 of
// that shape's timing alone.
type ShapeBest struct {
	Shape  space.Shape  `json:"shape"`
	Result space.Result `json:"-"`
	Key    string       `json:"key"`
	Timing space.Timing `json:"timing"`
}

// Provenance is where and when an archive's results were measured, and how
// many there are.
type Provenance struct {
	Problem    space.Problem `json:"problem"`
	GPU        string        `json:"gpu,omitempty"`
	GPUUUID    string        `json:"gpu_uuid,omitempty"`
	ComputeCap string        `json:"compute_cap,omitempty"`
	Driver     string        `json:"driver,omitempty"`
	Arch       string        `json:"arch,omitempty"`
	NVCC       string        `json:"nvcc,omitempty"`
	SourceHash string        `json:"source_hash,omitempty"`
	// Replay names the recorded file the results were answered from; the
	// times of a replayed archive are not measurements of any machine.
	Replay  string    `json:"replay,omitempty"`
	Created time.Time `json:"created"`
	// First and Last are the earliest start and the latest finish among the
	// results (zero when there are none).
	First     time.Time            `json:"first,omitempty"`
	Last      time.Time            `json:"last,omitempty"`
	Evaluated int                  `json:"evaluated"`
	ByStatus  map[space.Status]int `json:"by_status"`
	ByGate    map[space.Gate]int   `json:"by_gate"`
	// Skipped counts the log lines that could not be read.
	Skipped int `json:"skipped_lines,omitempty"`
}

// ErrNoBest is returned by Gather for an archive in which no configuration
// passed every gate.
var ErrNoBest = errors.New("no configuration passed every gate")

// Gather collects the evidence for the archive's best configuration. def is
// the kernel family's default config for the archive's problem (nil when
// unknown): the archive knows nothing about kernels, so the caller says
// which config is the baseline.
func Gather(a *Archive, def space.Config) (Evidence, error) {
	best, ok := a.Best()
	if !ok {
		return Evidence{}, fmt.Errorf("archive %s: %w", a.Dir(), ErrNoBest)
	}
	ev := Evidence{Best: best, Provenance: ProvenanceOf(a)}
	if d, ok := DefaultResult(a, def); ok {
		ev.Default = &d
		ev.Speedup = d.Objective / best.Objective
	}
	if len(a.Meta().Problem.Shapes) > 1 {
		ev.Shapes = ShapeBests(a)
	}
	return ev, nil
}

// DefaultResult returns the archive's result for config def when it passed
// every gate. A search evaluates the family default first, so it is
// normally there; when it is not, there is no baseline, and callers must
// say so rather than invent one.
func DefaultResult(a *Archive, def space.Config) (space.Result, bool) {
	if def == nil {
		return space.Result{}, false
	}
	r, ok := a.Lookup(def.Key())
	if !ok || !r.OK() {
		return space.Result{}, false
	}
	return r, true
}

// ShapeBests returns, for each shape of the archive's problem in order, the
// OK result with the lowest p50 on that shape alone (ties go to the earlier
// result). A shape that no OK result timed is left out.
func ShapeBests(a *Archive) []ShapeBest {
	results := a.Results()
	var out []ShapeBest
	for _, shape := range a.Meta().Problem.Shapes {
		var best *ShapeBest
		for _, r := range results {
			if !r.OK() {
				continue
			}
			t, ok := TimingOf(r, shape)
			if !ok || !(t.P50US > 0) {
				continue
			}
			if best == nil || t.P50US < best.Timing.P50US || (t.P50US == best.Timing.P50US && r.Seq < best.Result.Seq) {
				best = &ShapeBest{Shape: shape, Result: r, Key: r.Key, Timing: t}
			}
		}
		if best != nil {
			out = append(out, *best)
		}
	}
	return out
}

// TimingOf returns a result's timing of shape.
func TimingOf(r space.Result, shape space.Shape) (space.Timing, bool) {
	for _, t := range r.Timings {
		if t.Shape == shape {
			return t, true
		}
	}
	return space.Timing{}, false
}

// ProvenanceOf summarises where and when the archive's results were
// measured. The GPU identity comes from the results themselves (the
// archive's identity has no UUID or driver), falling back to the identity.
func ProvenanceOf(a *Archive) Provenance {
	m := a.Meta()
	p := Provenance{
		Problem: m.Problem, GPU: m.GPU, Arch: m.Arch, NVCC: m.NVCC, SourceHash: m.SourceHash, Created: m.Created,
		ByStatus: map[space.Status]int{}, ByGate: map[space.Gate]int{}, Skipped: len(a.Skipped()),
	}
	for _, r := range a.Results() {
		p.Evaluated++
		p.ByStatus[r.Status]++
		p.ByGate[r.Gate]++
		e := r.Env
		p.GPU = cmp.Or(p.GPU, e.GPU)
		p.GPUUUID = cmp.Or(p.GPUUUID, e.GPUUUID)
		p.ComputeCap = cmp.Or(p.ComputeCap, e.ComputeCap)
		p.Driver = cmp.Or(p.Driver, e.Driver)
		p.Arch = cmp.Or(p.Arch, e.Arch)
		p.NVCC = cmp.Or(p.NVCC, e.NVCC)
		p.SourceHash = cmp.Or(p.SourceHash, e.SourceHash)
		p.Replay = cmp.Or(p.Replay, e.Replay)
		if !r.Started.IsZero() && (p.First.IsZero() || r.Started.Before(p.First)) {
			p.First = r.Started
		}
		if r.Finished.After(p.Last) {
			p.Last = r.Finished
		}
	}
	return p
}

// A TorchTiming is PyTorch SDPA's time for one shape and backend, as
// bench/torch_sdpa.py --json reports it.
type TorchTiming struct {
	Shape   string  `json:"shape"`
	Backend string  `json:"backend"`
	GraphUS float64 `json:"graph_us"`
	EagerUS float64 `json:"eager_us,omitempty"`
}

// A TorchBench is what a bench file says about PyTorch SDPA, and about
// the configs it timed beside it in the same run.
type TorchBench struct {
	Path    string        `json:"path"`
	Version string        `json:"torch,omitempty"` // PyTorch's version, when the file says
	Timings []TorchTiming `json:"timings"`
	// Ours holds the bench's own timings of configs, by shape.
	Ours []BenchTiming `json:"ours,omitempty"`
}

// A BenchTiming is the bench's CUDA-graph time of one config on one shape.
type BenchTiming struct {
	Shape   string  `json:"shape"`
	Key     string  `json:"key"`
	GraphUS float64 `json:"graph_us"`
}

// OursOn returns the bench's time of config key on shape, measured in the
// same run as PyTorch's.
func (b TorchBench) OursOn(shape space.Shape, key string) (BenchTiming, bool) {
	for _, t := range b.Ours {
		if t.Shape == shape.String() && t.Key == key && t.GraphUS > 0 {
			return t, true
		}
	}
	return BenchTiming{}, false
}

// Fastest returns PyTorch's fastest backend on shape by CUDA-graph time.
func (b TorchBench) Fastest(shape space.Shape) (TorchTiming, bool) {
	var best TorchTiming
	found := false
	for _, t := range b.Timings {
		if t.Shape == shape.String() && t.GraphUS > 0 && (!found || t.GraphUS < best.GraphUS) {
			best, found = t, true
		}
	}
	return best, found
}

// ReadTorchBench reads dir/bench.json, the file evotune bench leaves in an
// archive, and returns its PyTorch timings. ok is false when there is no
// such file or it holds no PyTorch timing (PyTorch could not run). Every
// object in the file with a string "shape", a string "backend", a positive
// "graph_us" and no "error" is a PyTorch timing, wherever it sits (the
// list torch_sdpa.py --json prints, or one map per shape row), so the
// reader does not depend on how the bench groups them. A row's "ours"
// object (a "key" and a "graph_us") is the bench's own timing of a config
// on the row's "shape".
func ReadTorchBench(dir string) (b TorchBench, ok bool, err error) {
	path := filepath.Join(dir, BenchName)
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return TorchBench{}, false, nil
	}
	if err != nil {
		return TorchBench{}, false, fmt.Errorf("reading the PyTorch benchmark: %w", err)
	}
	var tree any
	if err := json.Unmarshal(data, &tree); err != nil {
		return TorchBench{}, false, fmt.Errorf("reading the PyTorch benchmark %s: %w", path, err)
	}
	if _, isObject := tree.(map[string]any); !isObject {
		return TorchBench{}, false, fmt.Errorf("reading the PyTorch benchmark %s: want a JSON object", path)
	}
	b = TorchBench{Path: path}
	collectTorch(tree, &b)
	if len(b.Timings) == 0 {
		return TorchBench{}, false, nil
	}
	slices.SortStableFunc(b.Timings, func(x, y TorchTiming) int {
		return cmp.Or(cmp.Compare(x.Shape, y.Shape), cmp.Compare(x.Backend, y.Backend))
	})
	return b, true, nil
}

// collectTorch walks a decoded JSON value, adding every timing it finds.
func collectTorch(v any, b *TorchBench) {
	switch v := v.(type) {
	case []any:
		for _, e := range v {
			collectTorch(e, b)
		}
	case map[string]any:
		if version, ok := v["torch"].(string); ok && b.Version == "" {
			b.Version = version
		}
		shape, hasShape := v["shape"].(string)
		backend, ok2 := v["backend"].(string)
		graph, ok3 := v["graph_us"].(float64)
		errText, _ := v["error"].(string)
		if hasShape && ok2 && ok3 && graph > 0 && errText == "" {
			eager, _ := v["eager_us"].(float64)
			b.Timings = append(b.Timings, TorchTiming{Shape: shape, Backend: backend, GraphUS: graph, EagerUS: eager})
			return
		}
		if ours, ok := v["ours"].(map[string]any); ok && hasShape {
			key, _ := ours["key"].(string)
			if g, _ := ours["graph_us"].(float64); key != "" && g > 0 {
				b.Ours = append(b.Ours, BenchTiming{Shape: shape, Key: key, GraphUS: g})
			}
		}
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys) // map order is random; the result must not be
		for _, k := range keys {
			collectTorch(v[k], b)
		}
	}
}
