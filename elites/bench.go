package elites

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"time"

	"evotune/internal/durable"
	"evotune/space"
)

// BenchName is the file in which evotune bench keeps a benchmark of an
// archive's best config beside the family default and PyTorch SDPA: in the
// bench's output directory, and in the archive, so that exports and
// reports can quote the speedup over PyTorch.
const BenchName = "bench.json"

// A Bench is what bench.json holds: one run of evotune bench, where it ran
// (Env: the GPU, driver, arch, nvcc and kernel source of every
// measurement) and one row per shape.
type Bench struct {
	space.Env
	Date         time.Time `json:"date"`
	Commit       string    `json:"commit"`
	Command      string    `json:"command"`
	TorchCommand []string  `json:"torch_command"`
	// Torch, TorchCUDA and CuDNN are the versions PyTorch reported;
	// TorchError says why the PyTorch comparison failed, when it did.
	Torch      string       `json:"torch"`
	TorchCUDA  string       `json:"torch_cuda"`
	CuDNN      int          `json:"cudnn"`
	TorchError string       `json:"torch_error,omitempty"`
	Dtype      string       `json:"dtype"`
	Archive    string       `json:"archive,omitempty"`
	Best       string       `json:"best"`
	BestConfig space.Config `json:"best_config"`
	// TunedFor is the problem the best configuration was tuned for, or
	// with Given the problem --config was timed for.
	TunedFor space.Problem `json:"tuned_for"`
	// Given says the configuration came from --config, not a search.
	Given bool `json:"config_given,omitempty"`
	// Baseline is --baseline-archive, its best and the problem it was tuned for.
	Baseline     string        `json:"baseline_archive,omitempty"`
	BaselineBest string        `json:"baseline_best,omitempty"`
	BaselineFor  space.Problem `json:"baseline_tuned_for,omitzero"`
	Rows         []BenchRow    `json:"rows"`

	// Path is the file the bench was read from; it is not part of the file.
	Path string `json:"-"`
}

// A BenchRow is one shape of a bench.
type BenchRow struct {
	Shape  string `json:"shape"`
	Causal bool   `json:"causal"`
	// Source says which configuration "ours" is: "best" (the archive's or
	// --config), or "default" when the archive's was compiled for another
	// head dimension or dtype; Note says why.
	Source  string                 `json:"source"`
	Note    string                 `json:"note,omitempty"`
	Ours    BenchMeasure           `json:"ours"`
	Default BenchMeasure           `json:"default"`
	Torch   map[string]TorchTiming `json:"torch,omitempty"`
	// Ratios of graph-replay times, ours over PyTorch's; 0 when either is
	// missing.
	OursOverCuDNN float64 `json:"ours_over_cudnn,omitempty"`
	OursOverFlash float64 `json:"ours_over_flash,omitempty"`
	// Baseline is the --baseline-archive's best (or its family default)
	// on this shape in its own dtype; OursOverBaseline is graph over graph.
	Baseline         *BenchMeasure `json:"baseline,omitempty"`
	OursOverBaseline float64       `json:"ours_over_baseline,omitempty"`
}

// A BenchMeasure is one configuration timed on one row's shape.
type BenchMeasure struct {
	Key    string       `json:"key"`
	Config space.Config `json:"config"`
	Status space.Status `json:"status"`
	Reason string       `json:"reason,omitempty"`
	// GraphUS is the median µs a call with CUDA-graph replay, with its 95%
	// CI; EagerUS with plain launches.
	GraphUS      float64 `json:"graph_us"`
	GraphCILowUS float64 `json:"graph_ci_low_us"`
	GraphCIHigh  float64 `json:"graph_ci_high_us"`
	EagerUS      float64 `json:"eager_us"`
	EagerError   string  `json:"eager_error,omitempty"`
	TFLOPs       float64 `json:"graph_tflops"`
	MaxAbsErr    float64 `json:"max_abs_err"`
	// fp8 and int8: the worst end-to-end error against fp32 attention on the
	// unquantised inputs over the check cases (cosine, relative L1).
	E2ECos    float64 `json:"e2e_cos,omitempty"`
	E2ERelL1  float64 `json:"e2e_rel_l1,omitempty"`
	Throttled bool    `json:"throttled,omitempty"`
}

// A TorchTiming is PyTorch SDPA's time for one shape and backend, as
// bench/torch_sdpa.py --json reports it; Error says why a backend did not
// run.
type TorchTiming struct {
	Shape     string  `json:"shape"`
	Backend   string  `json:"backend"`
	Dtype     string  `json:"dtype"`
	Causal    bool    `json:"causal"`
	InputSets int     `json:"input_sets"`
	GraphUS   float64 `json:"graph_us"`
	EagerUS   float64 `json:"eager_us"`
	Launches  int     `json:"launches_per_sample"`
	TFLOPs    float64 `json:"graph_tflops,omitempty"`
	Error     string  `json:"error"`
}

// Fastest returns PyTorch's fastest backend on shape by CUDA-graph time,
// over the rows of that shape.
func (b Bench) Fastest(shape space.Shape) (TorchTiming, bool) {
	var best TorchTiming
	found := false
	for _, r := range b.Rows {
		if r.Shape != shape.String() {
			continue
		}
		for _, name := range slices.Sorted(maps.Keys(r.Torch)) { // map order is random; ties must not be
			t := r.Torch[name]
			if t.Error == "" && t.GraphUS > 0 && (!found || t.GraphUS < best.GraphUS) {
				best, found = t, true
			}
		}
	}
	return best, found
}

// OursOn returns the bench's own timing of config key on shape, measured
// in the same run as PyTorch's.
func (b Bench) OursOn(shape space.Shape, key string) (BenchMeasure, bool) {
	for _, r := range b.Rows {
		if r.Shape == shape.String() && r.Ours.Key == key && r.Ours.GraphUS > 0 {
			return r.Ours, true
		}
	}
	return BenchMeasure{}, false
}

// Complete reads the best config of b, and ours in each row, as configs of
// sp, the space of the archive's problem (space.Space.Complete): a bench
// run before knobs of sp existed then names the archive's best by the key
// that the archive, completed with sp, holds it under (OursOn).
func (b *Bench) Complete(sp *space.Space) {
	if c, ok := sp.Complete(b.BestConfig); ok && b.BestConfig != nil {
		b.BestConfig, b.Best = c, c.Key()
	}
	for i := range b.Rows {
		o := &b.Rows[i].Ours
		if c, ok := sp.Complete(o.Config); ok && o.Config != nil {
			o.Config, o.Key = c, c.Key()
		}
	}
}

// Encode returns the content of bench.json for b.
func (b Bench) Encode() ([]byte, error) {
	data, err := json.MarshalIndent(b, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encoding %s: %w", BenchName, err)
	}
	return append(data, '\n'), nil
}

// SaveBench keeps b in the archive in dir as bench.json: durably, and
// under the archive's lock, so that it never lands in an archive that a
// search is writing.
func SaveBench(dir string, b Bench) error {
	if _, err := readMeta(dir); err != nil {
		return err
	}
	data, err := b.Encode()
	if err != nil {
		return err
	}
	lock, err := lockDir(dir)
	if err != nil {
		return err
	}
	defer lock.Close()
	return durable.WriteFile(filepath.Join(dir, BenchName), data, 0o644)
}

// ReadBench reads dir/bench.json, the file evotune bench leaves in an
// archive (and in its output directory). ok is false when there is none.
func ReadBench(dir string) (b Bench, ok bool, err error) {
	path := filepath.Join(dir, BenchName)
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return Bench{}, false, nil
	}
	if err != nil {
		return Bench{}, false, fmt.Errorf("reading the PyTorch benchmark: %w", err)
	}
	if t := bytes.TrimSpace(data); len(t) > 0 && t[0] != '{' {
		return Bench{}, false, fmt.Errorf("reading the PyTorch benchmark %s: want a JSON object", path)
	}
	if err := json.Unmarshal(data, &b); err != nil {
		return Bench{}, false, fmt.Errorf("reading the PyTorch benchmark %s: %w", path, err)
	}
	b.Path = path
	return b, true, nil
}
