package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"evotune/evo"
	"evotune/space"
)

// TestProgressLines checks the plain progress lines: one per interval of
// wall time or tenth of the budget, in the documented format.
func TestProgressLines(t *testing.T) {
	var out bytes.Buffer
	now := time.Unix(0, 0)
	r := newProgressReporter(&out, false, func() time.Time { return now }, 10*time.Second, func(key string) string { return "d(" + key + ")" })
	p := evo.Progress{Evals: 1, MaxEvals: 300, Elapsed: time.Second, ByStatus: map[space.Status]int{}}
	r.update(p) // neither an interval nor a tenth: silent
	if out.Len() != 0 {
		t.Fatalf("printed %q before an interval passed", out.String())
	}
	p.Evals, p.Best, p.BestKey = 30, 5.8213, "k"
	p.ByStatus = map[space.Status]int{space.StatusOK: 25, space.StatusIncorrect: 3, space.StatusPtxasReject: 2}
	p.Elapsed, p.ETA = 4*time.Minute+10*time.Second, 6*time.Minute
	r.update(p) // a tenth of the evaluation budget
	want := "evotune: 30/300 evals, best 5.82 µs (d(k)), 3 incorrect, 2 ptxas_reject, elapsed 4m10s, eta 6m\n"
	if out.String() != want {
		t.Fatalf("got %q\nwant %q", out.String(), want)
	}
	out.Reset()
	p.Evals = 31
	r.update(p)
	if out.Len() != 0 {
		t.Fatalf("printed %q twice within one tenth and one interval", out.String())
	}
	now = now.Add(10 * time.Second)
	p.MaxEvals, p.ETA = 0, 0
	r.update(p) // the wall-time interval
	if got := out.String(); got != "evotune: 31 evals, best 5.82 µs (d(k)), 3 incorrect, 2 ptxas_reject, elapsed 4m10s\n" {
		t.Errorf("after the interval: %q", got)
	}
}

// TestProgressBar checks that the terminal bar draws the count and the
// best, and that finish leaves the line clean.
func TestProgressBar(t *testing.T) {
	var out bytes.Buffer
	now := time.Unix(0, 0)
	r := newProgressReporter(&out, true, func() time.Time { return now }, time.Second, func(string) string { return "" })
	r.update(evo.Progress{Evals: 12, MaxEvals: 100, Best: 6.5, BestKey: "k", ETA: time.Minute, ByStatus: map[space.Status]int{}})
	if !strings.Contains(out.String(), "(12/100)") {
		t.Errorf("the first result did not draw the bar: %q", out.String())
	}
	r.update(evo.Progress{Evals: 13, MaxEvals: 100, Best: 6.4, ByStatus: map[space.Status]int{}})
	if strings.Contains(out.String(), "13/100") {
		t.Errorf("the bar was drawn twice within %v", barEvery)
	}
	now = now.Add(barEvery)
	r.update(evo.Progress{Evals: 14, MaxEvals: 100, Best: 6.5, BestKey: "k", ETA: time.Minute, ByStatus: map[space.Status]int{space.StatusFault: 1}})
	r.finish()
	s := out.String()
	for _, want := range []string{"(14/100)", "best 6.50 µs, 1 fault, eta 1m"} {
		if !strings.Contains(s, want) {
			t.Errorf("bar output lacks %q: %q", want, s)
		}
	}
}
