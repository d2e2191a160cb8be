package main

import (
	"io"
	"time"

	"evotune/cmd/evotune/internal/textfmt"
	"evotune/space"
)

// The commands' short names for textfmt's renderings.

func problemLine(p space.Problem) string          { return textfmt.Problem(p) }
func statusCounts(by map[space.Status]int) string { return textfmt.StatusCounts(by) }
func us(v float64) string                         { return textfmt.US(v) }
func shortHash(h string) string                   { return textfmt.ShortHash(h) }
func configChanges(c, def space.Config, knobs []space.Knob) string {
	return textfmt.ConfigChanges(c, def, knobs)
}
func human(d time.Duration) string { return textfmt.Human(d) }
func writeTable(w io.Writer, format string, header []string, rows [][]string) error {
	return textfmt.Table(w, format, header, rows)
}
