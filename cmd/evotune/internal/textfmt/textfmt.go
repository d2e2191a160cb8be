// Package textfmt renders evotune's figures for people, the same way in
// every command's output: problems, microseconds, hashes, durations,
// status counts, ptxas figures and tables.
package textfmt

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/renderer"
	"github.com/olekukonko/tablewriter/tw"

	"evotune/space"
)

// Problem renders a problem for people: "sdpa 1x8x512x64 fp16".
func Problem(p space.Problem) string {
	if len(p.Shapes) == 0 {
		return p.Family // a Kernel Tuner space: the file fixes the rest
	}
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
	if p.VTransposed {
		line += " V^T"
	}
	return line
}

// StatusCounts renders the counts of a status table in a fixed order:
// ", 3 ok, 1 incorrect".
func StatusCounts(by map[space.Status]int) string {
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

// US renders microseconds: two decimals below 100, one above, "-" for none.
func US(v float64) string {
	switch {
	case v == 0:
		return "-"
	case v < 100:
		return strconv.FormatFloat(v, 'f', 2, 64)
	default:
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
}

// Ptxas renders ptxas's figures for a kernel: "96 registers, 0 B spill
// stores, 0 B spill loads, 0 B static shared, 0 B stack".
func Ptxas(p space.Ptxas) string {
	return fmt.Sprintf("%d registers, %d B spill stores, %d B spill loads, %d B static shared, %d B stack",
		p.Registers, p.SpillStores, p.SpillLoads, p.SharedBytes, p.StackBytes)
}

// OrUnknown is s, or "unknown" when s is empty.
func OrUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

// ShortHash is the first twelve characters of a hash.
func ShortHash(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return OrUnknown(h)
}

// Human renders a duration for people: "4m10s", "6m", "2h5m", "800ms".
func Human(d time.Duration) string {
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

// Table renders a table as text (format "table") or as a markdown table
// (format "markdown"). Headers are printed as given: units such as µs must
// not be upper-cased.
func Table(w io.Writer, format string, header []string, rows [][]string) error {
	opts := []tablewriter.Option{
		tablewriter.WithHeaderAutoFormat(tw.Off),
		tablewriter.WithHeaderAlignment(tw.AlignLeft),
		tablewriter.WithRowAutoWrap(tw.WrapNone),
	}
	if format == "markdown" {
		opts = append(opts, tablewriter.WithRenderer(renderer.NewMarkdown()))
	} else {
		opts = append(opts, tablewriter.WithRenderer(renderer.NewBlueprint(tw.Rendition{
			Symbols: tw.NewSymbols(tw.StyleLight),
		})))
	}
	t := tablewriter.NewTable(w, opts...)
	t.Header(header)
	if err := t.Bulk(rows); err != nil {
		return fmt.Errorf("rendering table: %w", err)
	}
	if err := t.Render(); err != nil {
		return fmt.Errorf("rendering table: %w", err)
	}
	return nil
}

// ConfigChanges renders the knobs of c that differ from def, in the order
// of knobs, "(default)" when none does, or c's whole key when the default
// is unknown (def nil).
func ConfigChanges(c, def space.Config, knobs []space.Knob) string {
	if def == nil {
		return c.Key()
	}
	var changes []string
	for _, k := range knobs {
		if v, ok := c[k.Name]; ok && v != def[k.Name] {
			changes = append(changes, k.Name+"="+v)
		}
	}
	if len(changes) == 0 {
		return "(default)"
	}
	return strings.Join(changes, " ")
}

// Fixed renders v with prec decimals, "-" for NaN or an infinity.
func Fixed(v float64, prec int) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "-"
	}
	return strconv.FormatFloat(v, 'f', prec, 64)
}

// Percent renders a fraction as a percentage with prec decimals.
func Percent(v float64, prec int) string {
	return strconv.FormatFloat(100*v, 'f', prec, 64) + "%"
}

// minFitColumn is the narrowest the last column of a fitted table gets:
// narrower, its text would be a column of fragments.
const minFitColumn = 20

// Fit returns header and rows made to render (by Table, format "table") in
// at most width columns: the last column's text is wrapped at spaces (then
// commas); if that is not enough, the columns named in optional are left
// out, in that order, until it is. With width 0 (unknown) they are returned
// as given. A table that cannot fit even so is returned as narrow as it got.
func Fit(header []string, rows [][]string, width int, optional ...string) ([]string, [][]string) {
	if width <= 0 || len(header) == 0 {
		return header, rows
	}
	for {
		widths := columnWidths(header, rows)
		total := 3*len(widths) + 1 // "│ " before each cell, " " after, the last "│"
		for _, w := range widths {
			total += w
		}
		last := len(header) - 1
		avail := width - (total - widths[last])
		if total <= width {
			return header, rows
		}
		if avail >= max(minFitColumn, displayLen(header[last])) || len(optional) == 0 {
			avail = max(avail, minFitColumn, displayLen(header[last]))
			wrapped := make([][]string, len(rows))
			for i, row := range rows {
				wrapped[i] = slices.Clone(row)
				if len(row) == len(header) {
					wrapped[i][last] = wrapText(row[last], avail)
				}
			}
			return header, wrapped
		}
		drop := slices.Index(header, optional[0])
		optional = optional[1:]
		if drop < 0 || drop == last {
			continue
		}
		header = slices.Delete(slices.Clone(header), drop, drop+1)
		kept := make([][]string, len(rows))
		for i, row := range rows {
			kept[i] = row
			if len(row) > drop {
				kept[i] = slices.Delete(slices.Clone(row), drop, drop+1)
			}
		}
		rows = kept
	}
}

// columnWidths returns each column's width: its widest line of text.
func columnWidths(header []string, rows [][]string) []int {
	widths := make([]int, len(header))
	for _, row := range append([][]string{header}, rows...) {
		for i, cell := range row {
			if i < len(widths) {
				for line := range strings.SplitSeq(cell, "\n") {
					widths[i] = max(widths[i], displayLen(line))
				}
			}
		}
	}
	return widths
}

func displayLen(s string) int { return utf8.RuneCountInString(s) }

// wrapText breaks text into lines of at most width runes, at spaces where
// it can, else after commas, else anywhere.
func wrapText(text string, width int) string {
	var lines []string
	line := ""
	put := func(word, sep string) {
		switch {
		case line == "":
			line = word
		case displayLen(line)+len(sep)+displayLen(word) <= width:
			line += sep + word
		default:
			lines = append(lines, line)
			line = word
		}
	}
	for word := range strings.FieldsSeq(text) {
		if displayLen(word) <= width {
			put(word, " ")
			continue
		}
		parts := strings.SplitAfter(word, ",")
		for i, part := range parts {
			sep := ""
			if i == 0 {
				sep = " "
			}
			for displayLen(part) > width {
				r := []rune(part)
				put(string(r[:width]), sep)
				part, sep = string(r[width:]), ""
			}
			put(part, sep)
		}
	}
	if line != "" {
		lines = append(lines, line)
	}
	return strings.Join(lines, "\n")
}
