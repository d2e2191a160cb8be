package main

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"strings"

	"evotune/elites"
	"evotune/kernels"
	"evotune/space"
)

// warnSkipped prints, on stderr, why the index was rebuilt (if it was) and
// the result-log lines that loading skipped:
// the user should know that a damaged log hides results.
func warnSkipped(stderr io.Writer, a *elites.Archive) {
	if n := a.IndexNote(); n != "" {
		fmt.Fprintf(stderr, "evotune: %s\n", n)
	}
	for _, w := range a.Skipped() {
		fmt.Fprintf(stderr, "evotune: warning: %s/results.jsonl: skipped %s\n", a.Dir(), w)
	}
}

// archiveSpace returns the space of the archive's problem on the
// architecture it was measured for, or nil when this build does not know
// that problem.
func archiveSpace(a *elites.Archive) *space.Space {
	meta := a.Meta()
	if meta.Problem.Family == "" {
		return nil
	}
	sp, err := familySpace("", meta.Problem, cmp.Or(meta.Arch, kernels.DefaultArchOf(meta.Problem.Family)))
	if err != nil {
		return nil
	}
	return sp
}

// completeConfigs reads the results of a as configs of sp
// (elites.Archive.Complete), so that results recorded before knobs of sp
// existed are the configs a search of sp proposes, shown and exported as
// such. It says on stderr, in one line each, how many it completed and with
// which values, and how many repeat a config evaluated since. A nil sp (a
// problem this build does not know) does nothing.
func completeConfigs(stderr io.Writer, a *elites.Archive, sp *space.Space) {
	if sp == nil {
		return
	}
	done := a.Complete(sp)
	if done.Results > 0 {
		fmt.Fprintf(stderr, "evotune: %s/results.jsonl: %d results were recorded before knobs of this evotune existed: read with %s, the code they compiled\n",
			a.Dir(), done.Results, strings.Join(done.Values, ", "))
	}
	if done.Repeats > 0 {
		fmt.Fprintf(stderr, "evotune: warning: %s/results.jsonl: %d results recorded before knobs of this evotune existed repeat a config evaluated since, whose result stands (first: result %d)\n",
			a.Dir(), done.Repeats, done.FirstRepeat)
	}
}

// warnForeign prints, on stderr, how many results of the archive hold a
// config that is not one of sp's (an unknown knob, a value off a knob's
// list, a missing knob that declares no Absent value): a log edited by hand
// or made by another build. The search never proposes such a config and
// export refuses it, but they are loaded and shown, so the user is told.
// Constraint rejections are ordinary results, and so are results that
// Complete left as they were because a later result holds their config
// (completeConfigs names those): call it after completeConfigs.
func warnForeign(stderr io.Writer, a *elites.Archive, sp *space.Space) {
	n, first := 0, ""
	// The keys, not Results: at 100,000 results a copy of every result
	// is most of what opening costs.
	scratch := space.Config{}
	for _, key := range a.Keys() {
		cfg := scratch
		if !scratch.SetKey(key) {
			r, _ := a.Lookup(key) // a config its key does not give back
			cfg = r.Config
		}
		err := valuesError(sp, cfg)
		if err == nil {
			continue
		}
		if done, ok := sp.Complete(cfg); ok {
			if derr := valuesError(sp, done); derr != nil {
				err = derr // what completing cannot mend
			} else if _, repeat := a.Lookup(done.Key()); repeat {
				continue
			}
		}
		if n == 0 {
			r, _ := a.Lookup(key)
			first = fmt.Sprintf("result %d: %v", r.Seq, err)
		}
		n++
	}
	if n > 0 {
		fmt.Fprintf(stderr, "evotune: warning: %s/results.jsonl: %d results hold configs outside the knob space (first: %s)\n", a.Dir(), n, first)
	}
}

// valuesError is sp.Check's error for c unless it is a constraint's
// rejection: whether c is a config of sp at all.
func valuesError(sp *space.Space, c space.Config) error {
	var rej *space.Rejection
	if err := sp.Check(c); err != nil && !errors.As(err, &rej) {
		return err
	}
	return nil
}
