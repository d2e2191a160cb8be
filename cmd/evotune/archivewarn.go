package main

import (
	"errors"
	"fmt"
	"io"

	"evotune/elites"
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

// warnForeign prints, on stderr, how many results of the archive hold a
// config that is not one of sp's (an unknown knob, a value off a knob's
// list): a log edited by hand or made by another build. The search never
// proposes such a config and export refuses it, but they are loaded and
// shown, so the user is told. Constraint rejections are ordinary results.
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
		var rej *space.Rejection
		if err := sp.Check(cfg); err != nil && !errors.As(err, &rej) {
			if n == 0 {
				r, _ := a.Lookup(key)
				first = fmt.Sprintf("result %d: %v", r.Seq, err)
			}
			n++
		}
	}
	if n > 0 {
		fmt.Fprintf(stderr, "evotune: warning: %s/results.jsonl: %d results hold configs outside the knob space (first: %s)\n", a.Dir(), n, first)
	}
}
