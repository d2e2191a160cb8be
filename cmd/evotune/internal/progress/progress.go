// Package progress shows a running search on stderr: a bar on a terminal
// that never wraps, or plain lines at intervals and at each tenth of the
// budget in a log.
package progress

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/schollz/progressbar/v3"

	"evotune/cmd/evotune/internal/textfmt"
	"evotune/evo"
	"evotune/space"
)

// A Reporter shows a running search on stderr: a bar on a terminal, or
// plain lines at intervals in a log. Its methods are called one at a time
// (the search serialises OnProgress).
type Reporter struct {
	w        io.Writer
	terminal bool
	now      func() time.Time // wall time, for the interval between plain lines
	every    time.Duration
	// describe renders a config key for people (the knobs that differ from
	// the default).
	describe func(key string) string

	// Width is the terminal's width in columns (0: unknown, taken as 80):
	// a bar line longer than it would wrap, and every redraw would leave a
	// line behind.
	Width int
	// Replayed says the search's clock is virtual (a replay): its times are
	// labelled as replayed, not shown as if they were real.
	Replayed bool

	bar       *progressbar.ProgressBar
	barWidth  int
	lastLine  time.Time // when the last plain line, or the bar, was drawn
	lastTenth int       // the tenth of the budget reached at the last plain line
}

// New returns a Reporter writing to w: a bar when terminal, else a plain
// line every interval of now's time and at each tenth of the budget.
// describe renders a config key for people.
func New(w io.Writer, terminal bool, now func() time.Time, every time.Duration, describe func(string) string) *Reporter {
	r := &Reporter{w: w, terminal: terminal, now: now, every: every, describe: describe, lastLine: now()}
	if terminal {
		r.lastLine = time.Time{} // draw the bar at the first result
	}
	return r
}

// Update shows p.
func (r *Reporter) Update(p evo.Progress) {
	if r.terminal {
		r.updateBar(p)
		return
	}
	// A plain line every interval of wall time, and at each tenth of the
	// budget, so that a fast run (a replay) still leaves a trace in a log.
	tenth := int(math.Floor(budgetFraction(p) * 10))
	if r.now().Sub(r.lastLine) < r.every && tenth <= r.lastTenth {
		return
	}
	r.lastLine, r.lastTenth = r.now(), tenth
	fmt.Fprintf(r.w, "evotune: %s\n", r.line(p))
}

// budgetFraction is how much of the tightest budget p has used, in [0, 1];
// 0 when no budget is set.
func budgetFraction(p evo.Progress) float64 {
	f := 0.0
	if p.MaxEvals > 0 {
		f = max(f, float64(p.Evals)/float64(p.MaxEvals))
	}
	if p.MaxTime > 0 {
		f = max(f, float64(p.Elapsed)/float64(p.MaxTime))
	}
	return min(f, 1)
}

// line renders p as one line: counts, best, failures, elapsed time, ETA.
func (r *Reporter) line(p evo.Progress) string {
	var b strings.Builder
	if p.MaxEvals > 0 {
		fmt.Fprintf(&b, "%d/%d evals", p.Evals, p.MaxEvals)
	} else {
		fmt.Fprintf(&b, "%d evals", p.Evals)
	}
	if p.Best > 0 {
		fmt.Fprintf(&b, ", best %s µs (%s)", textfmt.US(p.Best), r.describe(p.BestKey))
	} else {
		b.WriteString(", no correct config yet")
	}
	b.WriteString(failureCounts(p.ByStatus))
	fmt.Fprintf(&b, ", elapsed %s", textfmt.Human(p.Elapsed))
	if p.ETA > 0 {
		fmt.Fprintf(&b, ", eta %s", textfmt.Human(p.ETA))
	}
	if r.Replayed {
		b.WriteString(" (replayed clock)")
	}
	return b.String()
}

// failureCounts renders the counts of the statuses other than ok.
func failureCounts(by map[space.Status]int) string {
	var b strings.Builder
	for _, s := range []space.Status{space.StatusIncorrect, space.StatusCompileError, space.StatusPtxasReject,
		space.StatusFault, space.StatusTimeout, space.StatusConstraint} {
		if n := by[s]; n > 0 {
			fmt.Fprintf(&b, ", %d %s", n, s)
		}
	}
	return b.String()
}

// updateBar draws p on the terminal bar, created on first use: its length
// is the evaluation budget when there is one (the bar shows the count), the
// time budget in seconds otherwise, or unknown (a spinner). The line never
// exceeds the terminal's width: the bar is shorter on a narrow terminal,
// and the description drops the failure counts, then the ETA, then the
// best, as the width shrinks.
func (r *Reporter) updateBar(p evo.Progress) {
	if r.bar == nil {
		length, showCount := int64(-1), true
		switch {
		case p.MaxEvals > 0:
			length = int64(p.MaxEvals)
		case p.MaxTime > 0:
			length, showCount = int64(p.MaxTime/time.Second), false
		}
		r.barWidth = min(max(r.columns()/6, 8), 30)
		opts := []progressbar.Option{
			progressbar.OptionSetWriter(r.w),
			progressbar.OptionSetWidth(r.barWidth),
			progressbar.OptionSetPredictTime(false),
			progressbar.OptionSetElapsedTime(false),
			progressbar.OptionShowDescriptionAtLineEnd(),
		}
		if showCount {
			opts = append(opts, progressbar.OptionShowCount())
		}
		r.bar = progressbar.NewOptions64(length, opts...)
	}
	// Describe draws at once, so the value is set first; and the bar is
	// drawn at most every barEvery, since a replay reports thousands of
	// results a second.
	if now := r.now(); now.Sub(r.lastLine) >= barEvery {
		r.lastLine = now
		if p.MaxEvals == 0 && p.MaxTime > 0 {
			r.bar.Set64(int64(min(p.Elapsed, p.MaxTime) / time.Second))
		} else {
			r.bar.Set64(int64(p.Evals))
		}
		r.bar.Describe(r.barText(p))
	}
}

// barText is the description drawn after the bar, as much of it as fits.
func (r *Reporter) barText(p evo.Progress) string {
	// What the library draws besides the description, as it draws it:
	// " 100% |", the bar, "| ", then the count "(N/M)" and a space, or for a
	// time budget a space, or for no budget a spinner, a space and "(N/-)";
	// a space before and after the description; one column is kept free so
	// that the cursor never wraps.
	var used int
	switch {
	case p.MaxEvals > 0:
		used = 7 + r.barWidth + 2 + len(fmt.Sprintf("(%d/%d)", p.MaxEvals, p.MaxEvals)) + 3
	case p.MaxTime > 0:
		used = 7 + r.barWidth + 2 + 3
	default:
		used = 2 + len(fmt.Sprintf("(%d/-)", p.Evals)) + 3 + 2
	}
	room := r.columns() - used
	var fields []string
	if p.MaxEvals == 0 {
		fields = append(fields, fmt.Sprintf("%d evals", p.Evals))
	}
	best, eta := "", ""
	if p.Best > 0 {
		best = fmt.Sprintf("best %s µs", textfmt.US(p.Best))
	}
	if p.ETA > 0 {
		eta = "eta " + textfmt.Human(p.ETA)
		if r.Replayed {
			eta += " replayed"
		}
	}
	fails := strings.TrimPrefix(failureCounts(p.ByStatus), ", ")
	for _, candidate := range [][]string{{best, fails, eta}, {best, eta}, {best}, {}} {
		text := joinNonEmpty(append(slices.Clone(fields), candidate...))
		if displayWidth(text) <= room || len(candidate) == 0 {
			if displayWidth(text) > room {
				return ""
			}
			return text
		}
	}
	return ""
}

// columns is the terminal's width, 80 when unknown.
func (r *Reporter) columns() int {
	if r.Width > 0 {
		return r.Width
	}
	return 80
}

// joinNonEmpty joins the non-empty parts with ", ".
func joinNonEmpty(parts []string) string {
	return strings.Join(slices.DeleteFunc(parts, func(s string) bool { return s == "" }), ", ")
}

// displayWidth is the columns text takes on a terminal: one a rune (the
// text here has no wide or combining characters).
func displayWidth(text string) int { return utf8.RuneCountInString(text) }

// barEvery is the shortest interval between two drawings of the bar.
const barEvery = 100 * time.Millisecond

// Finish clears the bar so that the summary that follows starts on a
// clean line.
func (r *Reporter) Finish() {
	if r.bar != nil {
		r.bar.Clear()
		fmt.Fprint(r.w, "\r")
		r.bar = nil
	}
}
