package elites

import (
	"cmp"
	"errors"
	"fmt"
	"time"

	"evotune/space"
)

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
	Problem space.Problem `json:"problem"`
	// Env is the first of each field the results (then the archive's
	// identity) name; its Replay names the recorded file the results were
	// answered from, whose times are not measurements of any machine.
	space.Env
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
	// The evidence carries the timing samples, which the archive holds
	// in its log only.
	best, err := a.WithSamples(best)
	if err != nil {
		return Evidence{}, err
	}
	ev := Evidence{Best: best, Provenance: ProvenanceOf(a)}
	if d, ok := DefaultResult(a, def); ok {
		if d, err = a.WithSamples(d); err != nil {
			return Evidence{}, err
		}
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
// result), among those Top ranks. A shape that no OK result timed is left
// out.
func ShapeBests(a *Archive) []ShapeBest {
	var out []ShapeBest
	for _, shape := range a.Meta().Problem.Shapes {
		var best *ShapeBest
		a.eachStanding(func(r *space.Result) {
			if !r.OK() {
				return
			}
			t, ok := TimingOf(*r, shape)
			if !ok || !(t.P50US > 0) {
				return
			}
			if best == nil || t.P50US < best.Timing.P50US || (t.P50US == best.Timing.P50US && r.Seq < best.Result.Seq) {
				best = &ShapeBest{Shape: shape, Result: *r, Key: r.Key, Timing: t}
			}
		})
		if best != nil {
			best.Result = full(best.Result)
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
		Problem: m.Problem, Env: space.Env{GPU: m.GPU, Arch: m.Arch, NVCC: m.NVCC, SourceHash: m.SourceHash}, Created: m.Created,
		ByStatus: map[space.Status]int{}, ByGate: map[space.Gate]int{}, Skipped: len(a.Skipped()),
	}
	a.each(func(r *space.Result) {
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
	})
	return p
}
