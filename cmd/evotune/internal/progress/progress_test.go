package progress

import (
	"bytes"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"evotune/evo"
	"evotune/space"
)

// TestProgressLines checks the plain progress lines: one per interval of
// wall time or tenth of the budget, in the documented format.
func TestProgressLines(t *testing.T) {
	var out bytes.Buffer
	now := time.Unix(0, 0)
	r := New(&out, false, func() time.Time { return now }, 10*time.Second, func(key string) string { return "d(" + key + ")" })
	p := evo.Progress{Evals: 1, MaxEvals: 300, Elapsed: time.Second, ByStatus: map[space.Status]int{}}
	r.Update(p) // neither an interval nor a tenth: silent
	if out.Len() != 0 {
		t.Fatalf("printed %q before an interval passed", out.String())
	}
	p.Evals, p.Best, p.BestKey = 30, 5.8213, "k"
	p.ByStatus = map[space.Status]int{space.StatusOK: 25, space.StatusIncorrect: 3, space.StatusPtxasReject: 2}
	p.Elapsed, p.ETA = 4*time.Minute+10*time.Second, 6*time.Minute
	r.Update(p) // a tenth of the evaluation budget
	want := "evotune: 30/300 evals, best 5.82 µs (d(k)), 3 incorrect, 2 ptxas_reject, elapsed 4m10s, eta 6m\n"
	if out.String() != want {
		t.Fatalf("got %q\nwant %q", out.String(), want)
	}
	out.Reset()
	p.Evals = 31
	r.Update(p)
	if out.Len() != 0 {
		t.Fatalf("printed %q twice within one tenth and one interval", out.String())
	}
	now = now.Add(10 * time.Second)
	p.MaxEvals, p.ETA = 0, 0
	r.Update(p) // the wall-time interval
	if got := out.String(); got != "evotune: 31 evals, best 5.82 µs (d(k)), 3 incorrect, 2 ptxas_reject, elapsed 4m10s\n" {
		t.Errorf("after the interval: %q", got)
	}
}

// TestProgressBar checks that the terminal bar draws the count and the
// best, and that finish leaves the line clean.
func TestProgressBar(t *testing.T) {
	var out bytes.Buffer
	now := time.Unix(0, 0)
	r := New(&out, true, func() time.Time { return now }, time.Second, func(string) string { return "" })
	r.Update(evo.Progress{Evals: 12, MaxEvals: 100, Best: 6.5, BestKey: "k", ETA: time.Minute, ByStatus: map[space.Status]int{}})
	if !strings.Contains(out.String(), "(12/100)") {
		t.Errorf("the first result did not draw the bar: %q", out.String())
	}
	r.Update(evo.Progress{Evals: 13, MaxEvals: 100, Best: 6.4, ByStatus: map[space.Status]int{}})
	if strings.Contains(out.String(), "13/100") {
		t.Errorf("the bar was drawn twice within %v", barEvery)
	}
	now = now.Add(barEvery)
	r.Update(evo.Progress{Evals: 14, MaxEvals: 100, Best: 6.5, BestKey: "k", ETA: time.Minute, ByStatus: map[space.Status]int{space.StatusFault: 1}})
	r.Finish()
	s := out.String()
	for _, want := range []string{"(14/100)", "best 6.50 µs, 1 fault, eta 1m"} {
		if !strings.Contains(s, want) {
			t.Errorf("bar output lacks %q: %q", want, s)
		}
	}
}

// TestProgressBarFitsWidth draws the bar through the progress library at
// several terminal widths, with every field at its longest: no drawn line
// is wider than the terminal (a wider one wraps, and each redraw leaves a
// line behind), fields are dropped as the width shrinks, and a replay's
// ETA says it is replayed.
func TestProgressBarFitsWidth(t *testing.T) {
	for _, width := range []int{120, 80, 60, 40} {
		for _, budget := range []string{"evals", "time", "none"} {
			var out bytes.Buffer
			now := time.Unix(0, 0)
			r := New(&out, true, func() time.Time { return now }, time.Second, func(string) string { return "" })
			r.Width, r.Replayed = width, true
			for i := 1; i <= 50; i++ {
				p := evo.Progress{Evals: i * 2000, Best: 17.153, BestKey: "k", ETA: 10*time.Hour + 28*time.Minute,
					Elapsed:  time.Duration(i) * time.Minute,
					ByStatus: map[space.Status]int{space.StatusIncorrect: 3, space.StatusPtxasReject: 5}}
				switch budget {
				case "evals":
					p.MaxEvals = 100000
				case "time":
					p.MaxTime = 8 * time.Hour
				}
				r.Update(p)
				now = now.Add(barEvery)
			}
			r.Finish()
			frames := strings.Split(strings.ReplaceAll(out.String(), "\033[0K", ""), "\r")
			widest := ""
			for _, f := range frames {
				if utf8.RuneCountInString(f) > utf8.RuneCountInString(widest) {
					widest = f
				}
			}
			if n := utf8.RuneCountInString(widest); n >= width {
				t.Errorf("width %d, %s budget: a line of %d columns: %q", width, budget, n, widest)
			}
			if strings.Contains(out.String(), "\n") {
				t.Errorf("width %d, %s budget: the bar wrote a newline", width, budget)
			}
			last := "" // the last drawing, before finish clears it
			for _, f := range frames {
				if strings.TrimSpace(f) != "" {
					last = f
				}
			}
			switch {
			case width >= 120 && !strings.Contains(last, "3 incorrect, 5 ptxas_reject"):
				t.Errorf("width %d, %s budget: the failures were dropped with room to spare: %q", width, budget, last)
			case width >= 80 && !strings.Contains(last, "eta 10h28m replayed"):
				t.Errorf("width %d, %s budget: the ETA is missing or not labelled replayed: %q", width, budget, last)
			case width >= 60 && !strings.Contains(last, "best 17.15 µs"):
				t.Errorf("width %d, %s budget: the best was dropped: %q", width, budget, last)
			}
		}
	}
}
