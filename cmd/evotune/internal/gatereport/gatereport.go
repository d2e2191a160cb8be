// Package gatereport renders what each gate said about one evaluated
// configuration, in gate order, as evotune check prints it: the
// environment, then constraint, compile, ptxas, correctness and timing, as
// far as the configuration got and why it stopped there.
package gatereport

import (
	"fmt"
	"io"
	"strings"

	"evotune/cmd/evotune/internal/textfmt"
	"evotune/space"
)

// Write prints what each gate said about r, in gate order, as far as r
// got.
func Write(w io.Writer, r space.Result) {
	orUnknown, us := textfmt.OrUnknown, textfmt.US
	fmt.Fprintf(w, "config:      %s\n", r.Key)
	fmt.Fprintf(w, "environment: %s (%s), driver %s, nvcc %s, source %s\n", orUnknown(r.Env.GPU), orUnknown(r.Env.Arch),
		orUnknown(r.Env.Driver), orUnknown(r.Env.NVCC), textfmt.ShortHash(r.Env.SourceHash))
	gates := []space.Gate{space.GateConstraint, space.GateCompile, space.GatePtxas, space.GateCorrectness, space.GateTimed}
	for _, g := range gates {
		if g == r.Gate && !r.OK() {
			fmt.Fprintf(w, "%-12s %s: %s\n", string(g)+":", r.Status, r.Reason)
			return
		}
		switch g {
		case space.GateConstraint:
			fmt.Fprintln(w, "constraint:  ok")
		case space.GateCompile:
			fmt.Fprintf(w, "compile:     ok, %.1f s\n", r.Cost.CompileSec)
		case space.GatePtxas:
			if r.Ptxas != nil {
				fmt.Fprintf(w, "ptxas:       ok, %s\n", textfmt.Ptxas(*r.Ptxas))
			}
		case space.GateCorrectness:
			if a := r.Accuracy; a != nil {
				fmt.Fprintf(w, "correctness: ok over %d cases, max abs err %.3g, mean abs err %.3g, rel L2 %.3g, bad %.3g%%\n",
					a.Cases, a.MaxAbsErr, a.MeanAbsErr, a.RelL2, 100*a.BadFrac)
			}
		case space.GateTimed:
			for _, t := range r.Timings {
				fmt.Fprintf(w, "timed:       %s: p50 %s µs (95%% CI %s – %s), p90 %s, p99 %s µs, SM clock %d MHz, %d °C%s\n",
					t.Shape, us(t.P50US), us(t.CILowUS), us(t.CIHighUS), us(t.P90US), us(t.P99US), t.SMClockMHz, t.TempC, throttled(t))
			}
			fmt.Fprintf(w, "objective:   %s µs\n", us(r.Objective))
		}
	}
}

// throttled says which clock event reasons disturbed a timing, if any did.
func throttled(t space.Timing) string {
	if !t.Throttled {
		return ""
	}
	return ", throttled: " + strings.Join(t.ThrottleReasons, " ")
}
