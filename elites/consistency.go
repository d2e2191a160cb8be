package elites

import (
	"cmp"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"evotune/space"
)

// An IdentityError says that an archive's meta.json disagrees with the
// results its log holds: the file was edited, or copied from another
// archive. Every reader refuses such an archive, since a header or a table
// would state one problem above the figures of another.
type IdentityError struct {
	Dir      string
	Diffs    []Diff // Archive: what meta.json says; Run: what the results say
	Results  int    // results that disagree
	Total    int    // results in the log
	FirstSeq int    // the first of them
}

func (e *IdentityError) Error() string {
	parts := make([]string, len(e.Diffs))
	for i, d := range e.Diffs {
		parts[i] = fmt.Sprintf("meta.json says %s %s, the results %s", d.Field, d.Archive, d.Run)
	}
	return fmt.Sprintf("archive %s: meta.json disagrees with %d of its %d results (the first is seq %d): %s; restore the archive's own meta.json",
		e.Dir, e.Results, e.Total, e.FirstSeq, strings.Join(parts, "; "))
}

// checkIdentity refuses results whose problem or environment differs from
// the archive's identity (fields a result leaves empty are not compared).
// Results of one archive nearly always agree with each other, so each is
// compared with the last one checked before the identity is.
func checkIdentity(dir string, meta Meta, results []space.Result) error {
	var (
		err      *IdentityError
		last     *space.Result
		lastBad  bool
		badDiffs []Diff
	)
	for i := range results {
		r := &results[i]
		if last == nil || !sameProvenance(*r, *last) {
			badDiffs = identityDiffs(meta, provenanceOf(meta, *r))
			lastBad = len(badDiffs) > 0
			last = r
		}
		if !lastBad {
			continue
		}
		if err == nil {
			err = &IdentityError{Dir: dir, Diffs: badDiffs, FirstSeq: r.Seq, Total: len(results)}
		}
		err.Results++
	}
	if err != nil {
		return err
	}
	return nil
}

// provenanceOf is the identity that r was measured for and with: meta's,
// with the fields r records in their place.
func provenanceOf(meta Meta, r space.Result) Meta {
	got := meta
	if r.Problem != nil {
		got.Problem = *r.Problem
	}
	got.SourceHash = cmp.Or(r.Env.SourceHash, got.SourceHash)
	got.GPU = cmp.Or(r.Env.GPU, got.GPU)
	got.Arch = cmp.Or(r.Env.Arch, got.Arch)
	got.NVCC = cmp.Or(r.Env.NVCC, got.NVCC)
	return got
}

// sameProvenance reports whether a and b record the same identity fields.
func sameProvenance(a, b space.Result) bool {
	if a.Env.SourceHash != b.Env.SourceHash || a.Env.GPU != b.Env.GPU || a.Env.Arch != b.Env.Arch || a.Env.NVCC != b.Env.NVCC {
		return false
	}
	switch {
	case a.Problem == nil || b.Problem == nil:
		return a.Problem == b.Problem
	case a.Problem == b.Problem:
		return true
	}
	return sameProblem(*a.Problem, *b.Problem)
}

// sameProblem reports whether p and q are the same problem.
func sameProblem(p, q space.Problem) bool {
	return p.Family == q.Family && p.Dtype == q.Dtype && p.Causal == q.Causal && p.OutDtype == q.OutDtype && p.VTransposed == q.VTransposed &&
		slices.Equal(p.Shapes, q.Shapes) && slices.Equal(p.Weights, q.Weights)
}

// The fields salvage looks for in a damaged line; a result's own fields
// come before any nested one of the same name (timings have none).
var (
	salvageKey       = regexp.MustCompile(`"key":\s*"((?:[^"\\]|\\.)*)"`)
	salvageStatus    = regexp.MustCompile(`"status":\s*"([a-z_]+)"`)
	salvageObjective = regexp.MustCompile(`"objective_us":\s*([-+0-9.eE]+)`)
)

// salvage reads what it can of a line that does not decode as a result,
// even a line cut short: its key, status and objective, to tell whether it
// may have held a result better than those read. A field it cannot read
// stays empty (0 for the objective, and for one out of range).
func salvage(text []byte) (key string, status space.Status, objective float64) {
	if m := salvageKey.FindSubmatch(text); m != nil {
		if k, err := strconv.Unquote(`"` + string(m[1]) + `"`); err == nil {
			key = k
		}
	}
	if m := salvageStatus.FindSubmatch(text); m != nil {
		status = space.Status(m[1])
	}
	if m := salvageObjective.FindSubmatch(text); m != nil {
		if f, err := strconv.ParseFloat(string(m[1]), 64); err == nil && f > 0 && !math.IsInf(f, 0) {
			objective = f
		}
	}
	return key, status, objective
}

// Hidden returns the damaged lines of the log that may have held a result
// that passed every gate with an objective below than (math.Inf(1): any):
// lines written whole that do not read but still say they passed (status
// ok), whose objective is below than or unreadable, and whose config the log
// does not also hold in a line that reads (a later run evaluated it again;
// a config recorded before knobs existed is compared as Complete reads it).
// The tables and exports of the readable results may be missing them. A
// line too damaged to say its status is only reported as skipped.
func (a *Archive) Hidden(than float64) []LoadWarning {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []LoadWarning
	for _, w := range a.skipped {
		if !w.Damaged {
			continue
		}
		if _, ok := a.byKey[a.completedKey(w.Key)]; ok && w.Key != "" {
			continue
		}
		if w.Status != space.StatusOK {
			continue
		}
		if w.Objective > 0 && w.Objective >= than {
			continue
		}
		out = append(out, w)
	}
	return out
}
