package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"evotune/space"
)

// problemLine renders a problem for people: "sdpa 1x8x512x64 fp16".
func problemLine(p space.Problem) string {
	var shapes []string
	for i, s := range p.Shapes {
		if len(p.Weights) > 0 {
			shapes = append(shapes, fmt.Sprintf("%s:%g", s, p.Weight(i)))
		} else {
			shapes = append(shapes, s.String())
		}
	}
	line := p.Family + " " + strings.Join(shapes, ",") + " " + p.Dtype
	if p.OutDtype != "" {
		line += "->" + p.OutDtype
	}
	if p.Causal {
		line += " causal"
	}
	return line
}

// statusCounts renders the counts of a status table in a fixed order.
func statusCounts(by map[space.Status]int) string {
	order := []space.Status{space.StatusOK, space.StatusConstraint, space.StatusCompileError, space.StatusPtxasReject,
		space.StatusIncorrect, space.StatusFault, space.StatusTimeout}
	var b strings.Builder
	for _, s := range order {
		if n := by[s]; n > 0 {
			fmt.Fprintf(&b, ", %d %s", n, s)
		}
	}
	return b.String()
}

func us(v float64) string {
	switch {
	case v == 0:
		return "-"
	case v < 100:
		return strconv.FormatFloat(v, 'f', 2, 64)
	default:
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

func shortHash(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return orUnknown(h)
}

// human renders a duration for people: "4m10s", "6m", "2h5m", "800ms".
func human(d time.Duration) string {
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Hour:
		d = d.Round(time.Second)
	default:
		d = d.Round(time.Minute)
	}
	h, m, s := int(d/time.Hour), int(d%time.Hour/time.Minute), int(d%time.Minute/time.Second)
	var b strings.Builder
	if h > 0 {
		fmt.Fprintf(&b, "%dh", h)
	}
	if m > 0 {
		fmt.Fprintf(&b, "%dm", m)
	}
	if s > 0 || b.Len() == 0 {
		fmt.Fprintf(&b, "%ds", s)
	}
	return b.String()
}
