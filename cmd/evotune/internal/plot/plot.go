// Package plot draws the small charts of evotune's report as standalone SVG:
// line, step and scatter series over linear or logarithmic axes with nice
// ticks, and bar charts. It needs no external tool, so a report can be made
// on any machine.
package plot

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Scale is how an axis maps values to positions.
type Scale int

const (
	Linear Scale = iota
	Log          // base 10; every value must be positive
)

// An Axis is one axis of a chart.
type Axis struct {
	Label string
	Scale Scale
}

// Kind is how a series is drawn.
type Kind int

const (
	Line    Kind = iota // points joined in order
	Step                // a staircase: each value holds until the next x
	Scatter             // one dot a point
)

// A Series is one set of points of a chart, X and Y of the same length.
type Series struct {
	Name string // shown in the legend when not empty
	Kind Kind
	X, Y []float64
}

// A Chart is an x-y chart of one or more series.
type Chart struct {
	Title  string
	X, Y   Axis
	Series []Series
}

// Bars is a bar chart: one bar a label, in order.
type Bars struct {
	Title  string
	YLabel string
	Labels []string
	Values []float64
}

// The canvas: every chart has the same size, so a report reads evenly.
const (
	width        = 720.0
	height       = 400.0
	marginLeft   = 72.0
	marginRight  = 24.0
	marginTop    = 40.0
	marginBottom = 64.0
)

var palette = []string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"}

// A scale maps data values in [lo, hi] to pixel positions in [p0, p1].
type scale struct {
	kind   Scale
	lo, hi float64
	p0, p1 float64
}

func (s scale) pos(v float64) float64 {
	a, b, x := s.lo, s.hi, v
	if s.kind == Log {
		a, b, x = math.Log10(a), math.Log10(b), math.Log10(x)
	}
	return s.p0 + (x-a)/(b-a)*(s.p1-s.p0)
}

// span returns the range of the values, widened to ticks.
func span(kind Scale, values []float64) (lo, hi float64, ticks []float64, err error) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, v := range values {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return 0, 0, nil, fmt.Errorf("value %v cannot be drawn", v)
		}
		if kind == Log && v <= 0 {
			return 0, 0, nil, fmt.Errorf("value %v on a log axis: every value must be positive", v)
		}
		lo, hi = math.Min(lo, v), math.Max(hi, v)
	}
	if kind == Log {
		ticks = LogTicks(lo, hi)
	} else {
		ticks = NiceTicks(lo, hi, 6)
	}
	return math.Min(lo, ticks[0]), math.Max(hi, ticks[len(ticks)-1]), ticks, nil
}

// NiceTicks returns about n evenly spaced round values (steps of 1, 2 or 5
// times a power of ten) that cover [lo, hi].
func NiceTicks(lo, hi float64, n int) []float64 {
	if hi < lo {
		lo, hi = hi, lo
	}
	if hi == lo {
		d := math.Max(math.Abs(lo)/10, 1)
		lo, hi = lo-d, hi+d
	}
	step := niceStep((hi - lo) / float64(max(n-1, 1)))
	first := math.Floor(lo/step) * step
	last := math.Ceil(hi/step) * step
	var ticks []float64
	for i := 0; ; i++ {
		v := first + float64(i)*step
		if v > last+step/2 {
			break
		}
		ticks = append(ticks, roundTo(v, step))
	}
	return ticks
}

func niceStep(raw float64) float64 {
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	switch f := raw / p; {
	case f <= 1:
		return p
	case f <= 2:
		return 2 * p
	case f <= 5:
		return 5 * p
	default:
		return 10 * p
	}
}

// roundTo removes the floating-point dust of first + i*step.
func roundTo(v, step float64) float64 {
	d := max(0, -int(math.Floor(math.Log10(step))))
	r, _ := strconv.ParseFloat(strconv.FormatFloat(v, 'f', d, 64), 64)
	return r
}

// LogTicks returns ticks for a log axis covering [lo, hi] (both positive):
// the powers of ten over a wide range, 1, 2 and 5 times them up to two and
// a half decades, and finer steps within one.
func LogTicks(lo, hi float64) []float64 {
	if hi < lo {
		lo, hi = hi, lo
	}
	if hi == lo {
		lo, hi = lo/2, hi*2
	}
	a, b := math.Floor(math.Log10(lo)), math.Ceil(math.Log10(hi))
	var mults []float64
	switch decades := math.Log10(hi / lo); {
	case decades <= 1:
		mults = []float64{1, 1.5, 2, 3, 4, 5, 6, 8}
	case decades <= 2.5:
		mults = []float64{1, 2, 5}
	default:
		mults = []float64{1}
	}
	var all []float64
	for e := a; e <= b; e++ {
		for _, m := range mults {
			all = append(all, roundTo(m*math.Pow(10, e), math.Pow(10, e-1)))
		}
	}
	// Keep the ticks inside [lo, hi] and the nearest one on each side, so
	// that the axis covers every value.
	first, last := 0, len(all)-1
	for first+1 < len(all) && all[first+1] <= lo {
		first++
	}
	for last-1 >= 0 && all[last-1] >= hi {
		last--
	}
	return all[first : last+1]
}

// label formats a tick value briefly.
func label(v float64) string {
	switch a := math.Abs(v); {
	case a >= 1e6 || (a > 0 && a < 1e-3):
		return strconv.FormatFloat(v, 'g', 3, 64)
	default:
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
}

// svg accumulates an SVG document.
type svg struct{ b bytes.Buffer }

func newSVG(title string) *svg {
	s := &svg{}
	fmt.Fprintf(&s.b, `<svg xmlns="http://www.w3.org/2000/svg" width="%g" height="%g" viewBox="0 0 %g %g" font-family="sans-serif" font-size="12">`+"\n", width, height, width, height)
	fmt.Fprintf(&s.b, "<title>%s</title>\n", esc(title))
	fmt.Fprintf(&s.b, `<rect width="%g" height="%g" fill="white"/>`+"\n", width, height)
	s.text(width/2, 22, "middle", "font-size=\"15\"", title)
	return s
}

func (s *svg) text(x, y float64, anchor, attrs, text string) {
	fmt.Fprintf(&s.b, `<text x="%s" y="%s" text-anchor="%s" %s>%s</text>`+"\n", num(x), num(y), anchor, attrs, esc(text))
}

func (s *svg) line(x1, y1, x2, y2 float64, attrs string) {
	fmt.Fprintf(&s.b, `<line x1="%s" y1="%s" x2="%s" y2="%s" %s/>`+"\n", num(x1), num(y1), num(x2), num(y2), attrs)
}

func (s *svg) bytes() []byte {
	s.b.WriteString("</svg>\n")
	return s.b.Bytes()
}

func num(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }

func esc(text string) string {
	var b strings.Builder
	xml.EscapeText(&b, []byte(text))
	return b.String()
}

// The plot area.
const (
	left   = marginLeft
	right  = width - marginRight
	top    = marginTop
	bottom = height - marginBottom
)

// axes draws the frame, the ticks with grid lines, and the axis labels.
func (s *svg) axes(xs, ys scale, xticks, yticks []float64, xlabel, ylabel string) {
	for _, v := range yticks {
		y := ys.pos(v)
		s.line(left, y, right, y, `stroke="#e0e0e0"`)
		s.text(left-6, y+4, "end", `class="tick"`, label(v))
	}
	for _, v := range xticks {
		x := xs.pos(v)
		s.line(x, top, x, bottom, `stroke="#e0e0e0"`)
		s.text(x, bottom+16, "middle", `class="tick"`, label(v))
	}
	fmt.Fprintf(&s.b, `<rect x="%s" y="%s" width="%s" height="%s" fill="none" stroke="black"/>`+"\n",
		num(left), num(top), num(right-left), num(bottom-top))
	s.text((left+right)/2, height-18, "middle", `class="axis-label"`, xlabel)
	fmt.Fprintf(&s.b, `<text transform="translate(16 %s) rotate(-90)" text-anchor="middle" class="axis-label">%s</text>`+"\n",
		num((top+bottom)/2), esc(ylabel))
}

// SVG draws the chart as a standalone SVG document. Each line or step
// series is one <polyline class="series">, each scatter series one
// <g class="series"> of <circle> elements, one a point.
func (c Chart) SVG() ([]byte, error) {
	var xv, yv []float64
	for _, sr := range c.Series {
		if len(sr.X) != len(sr.Y) {
			return nil, fmt.Errorf("plot %q: series %q has %d x values and %d y values", c.Title, sr.Name, len(sr.X), len(sr.Y))
		}
		xv = append(xv, sr.X...)
		yv = append(yv, sr.Y...)
	}
	if len(xv) == 0 {
		return nil, fmt.Errorf("plot %q: no points to draw", c.Title)
	}
	xlo, xhi, xticks, err := span(c.X.Scale, xv)
	if err != nil {
		return nil, fmt.Errorf("plot %q: x axis: %w", c.Title, err)
	}
	ylo, yhi, yticks, err := span(c.Y.Scale, yv)
	if err != nil {
		return nil, fmt.Errorf("plot %q: y axis: %w", c.Title, err)
	}
	xs := scale{kind: c.X.Scale, lo: xlo, hi: xhi, p0: left, p1: right}
	ys := scale{kind: c.Y.Scale, lo: ylo, hi: yhi, p0: bottom, p1: top}
	s := newSVG(c.Title)
	s.axes(xs, ys, xticks, yticks, c.X.Label, c.Y.Label)
	for i, sr := range c.Series {
		color := palette[i%len(palette)]
		switch sr.Kind {
		case Scatter:
			fmt.Fprintf(&s.b, `<g class="series" data-name="%s" fill="%s" fill-opacity="0.7">`+"\n", esc(sr.Name), color)
			for j := range sr.X {
				fmt.Fprintf(&s.b, `<circle cx="%s" cy="%s" r="3"/>`+"\n", num(xs.pos(sr.X[j])), num(ys.pos(sr.Y[j])))
			}
			s.b.WriteString("</g>\n")
		default:
			var pts []string
			for j := range sr.X {
				x, y := xs.pos(sr.X[j]), ys.pos(sr.Y[j])
				if sr.Kind == Step && j > 0 {
					pts = append(pts, num(x)+","+num(ys.pos(sr.Y[j-1])))
				}
				pts = append(pts, num(x)+","+num(y))
			}
			fmt.Fprintf(&s.b, `<polyline class="series" data-name="%s" fill="none" stroke="%s" stroke-width="2" points="%s"/>`+"\n",
				esc(sr.Name), color, strings.Join(pts, " "))
		}
	}
	s.legend(c.Series)
	return s.bytes(), nil
}

// legend lists the named series in the top right corner of the plot area.
func (s *svg) legend(series []Series) {
	y := top + 16
	for i, sr := range series {
		if sr.Name == "" {
			continue
		}
		color := palette[i%len(palette)]
		x := right - 180
		if sr.Kind == Scatter {
			fmt.Fprintf(&s.b, `<circle cx="%s" cy="%s" r="4" fill="%s"/>`+"\n", num(x+10), num(y-4), color)
		} else {
			s.line(x, y-4, x+20, y-4, `stroke="`+color+`" stroke-width="2"`)
		}
		s.text(x+26, y, "start", `class="legend"`, sr.Name)
		y += 16
	}
}

// SVG draws the bar chart as a standalone SVG document, one
// <rect class="bar"> a bar, its value written above it.
func (b Bars) SVG() ([]byte, error) {
	if len(b.Labels) != len(b.Values) {
		return nil, fmt.Errorf("plot %q: %d labels for %d bars", b.Title, len(b.Labels), len(b.Values))
	}
	if len(b.Values) == 0 {
		return nil, fmt.Errorf("plot %q: no bars to draw", b.Title)
	}
	for _, v := range b.Values {
		if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("plot %q: bar value %v: want a finite value, not negative", b.Title, v)
		}
	}
	_, hi, yticks, err := span(Linear, append([]float64{0}, b.Values...))
	if err != nil {
		return nil, errors.New("plot: " + err.Error())
	}
	ys := scale{kind: Linear, lo: 0, hi: hi, p0: bottom, p1: top}
	s := newSVG(b.Title)
	for _, v := range yticks {
		y := ys.pos(v)
		s.line(left, y, right, y, `stroke="#e0e0e0"`)
		s.text(left-6, y+4, "end", `class="tick"`, label(v))
	}
	slot := (right - left) / float64(len(b.Values))
	for i, v := range b.Values {
		x := left + float64(i)*slot
		y := ys.pos(v)
		fmt.Fprintf(&s.b, `<rect class="bar" x="%s" y="%s" width="%s" height="%s" fill="%s"><title>%s: %s</title></rect>`+"\n",
			num(x+slot*0.15), num(y), num(slot*0.7), num(bottom-y), palette[0], esc(b.Labels[i]), label(v))
		s.text(x+slot/2, y-4, "middle", `class="value"`, label(v))
		s.text(x+slot/2, bottom+16, "middle", `class="tick"`, b.Labels[i])
	}
	fmt.Fprintf(&s.b, `<rect x="%s" y="%s" width="%s" height="%s" fill="none" stroke="black"/>`+"\n",
		num(left), num(top), num(right-left), num(bottom-top))
	fmt.Fprintf(&s.b, `<text transform="translate(16 %s) rotate(-90)" text-anchor="middle" class="axis-label">%s</text>`+"\n",
		num((top+bottom)/2), esc(b.YLabel))
	return s.bytes(), nil
}
