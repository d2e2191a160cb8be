package plot

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
)

func TestNiceTicks(t *testing.T) {
	cases := []struct {
		lo, hi float64
		n      int
		want   []float64
	}{
		{0, 10, 6, []float64{0, 2, 4, 6, 8, 10}},
		{0.3, 9.2, 6, []float64{0, 2, 4, 6, 8, 10}},
		{23.1, 35.9, 6, []float64{20, 25, 30, 35, 40}},
		{0, 1, 6, []float64{0, 0.2, 0.4, 0.6, 0.8, 1}},
		{5, 5, 6, []float64{4, 4.5, 5, 5.5, 6}},
		{-3, 7, 3, []float64{-5, 0, 5, 10}},
		{0, 24, 6, []float64{0, 5, 10, 15, 20, 25}},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%g..%g", tc.lo, tc.hi), func(t *testing.T) {
			got := NiceTicks(tc.lo, tc.hi, tc.n)
			if !slices.Equal(got, tc.want) {
				t.Errorf("NiceTicks(%g, %g, %d) = %v, want %v", tc.lo, tc.hi, tc.n, got, tc.want)
			}
			if got[0] > tc.lo || got[len(got)-1] < tc.hi {
				t.Errorf("ticks %v do not cover [%g, %g]", got, tc.lo, tc.hi)
			}
		})
	}
}

func TestLogTicks(t *testing.T) {
	cases := []struct {
		lo, hi float64
		want   []float64
	}{
		{20, 45, []float64{20, 30, 40, 50}},
		{7, 130, []float64{5, 10, 20, 50, 100, 200}},
		{7, 1300, []float64{5, 10, 20, 50, 100, 200, 500, 1000, 2000}},
		{0.5, 3000, []float64{0.1, 1, 10, 100, 1000, 10000}},
		{10, 10, []float64{5, 6, 8, 10, 15, 20}},
		{0.031, 0.047, []float64{0.03, 0.04, 0.05}},
		{0.012, 0.019, []float64{0.01, 0.015, 0.02}},
	}
	for _, tc := range cases {
		got := LogTicks(tc.lo, tc.hi)
		if !slices.Equal(got, tc.want) {
			t.Errorf("LogTicks(%g, %g) = %v, want %v", tc.lo, tc.hi, got, tc.want)
		}
	}
}

// element is what the tests need of a drawn SVG element.
type element struct {
	name  string
	attrs map[string]string
}

// parseSVG checks that data is well-formed XML with an <svg> root and
// returns its elements in document order.
func parseSVG(t *testing.T, data []byte) []element {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(data))
	var out []element
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("SVG is not well-formed XML: %v\n%s", err, data)
		}
		if se, ok := tok.(xml.StartElement); ok {
			e := element{name: se.Name.Local, attrs: map[string]string{}}
			for _, a := range se.Attr {
				e.attrs[a.Name.Local] = a.Value
			}
			if len(out) == 0 && (e.name != "svg" || se.Name.Space != "http://www.w3.org/2000/svg") {
				t.Fatalf("root element is %s in %q, want svg in the SVG namespace", e.name, se.Name.Space)
			}
			out = append(out, e)
		}
	}
	return out
}

func TestChartSVG(t *testing.T) {
	c := Chart{
		Title: "best <p50> & co",
		X:     Axis{Label: "evaluations"},
		Y:     Axis{Label: "µs", Scale: Log},
		Series: []Series{
			{Name: "best", Kind: Step, X: []float64{1, 2, 3, 4}, Y: []float64{40, 30, 30, 21}},
			{Name: "all", Kind: Scatter, X: []float64{1, 2, 3, 4, 5}, Y: []float64{40, 30, 33, 21, 50}},
			{Kind: Line, X: []float64{1, 5}, Y: []float64{25, 25}},
		},
	}
	data, err := c.SVG()
	if err != nil {
		t.Fatal(err)
	}
	var polylines []int
	circles := 0
	for _, e := range parseSVG(t, data) {
		switch {
		case e.name == "polyline" && e.attrs["class"] == "series":
			polylines = append(polylines, len(strings.Fields(e.attrs["points"])))
		case e.name == "circle":
			circles++
		}
	}
	// A step series of n points draws 2n-1 vertices; the legend has one
	// dot for the scatter series and none for the unnamed line.
	if want := []int{7, 2}; !slices.Equal(polylines, want) {
		t.Errorf("polyline vertex counts %v, want %v", polylines, want)
	}
	if circles != 5+1 {
		t.Errorf("%d circles, want 5 points and 1 legend dot", circles)
	}
	if !bytes.Contains(data, []byte("best &lt;p50&gt; &amp; co")) {
		t.Error("the title is not escaped")
	}
}

func TestChartSVGErrors(t *testing.T) {
	cases := []struct {
		name  string
		chart Chart
		want  string
	}{
		{"empty", Chart{Title: "t"}, `plot "t": no points to draw`},
		{"ragged", Chart{Title: "t", Series: []Series{{Name: "s", X: []float64{1}, Y: nil}}}, "1 x values and 0 y values"},
		{"log of zero", Chart{Title: "t", Y: Axis{Scale: Log}, Series: []Series{{X: []float64{1}, Y: []float64{0}}}}, "y axis: value 0 on a log axis"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.chart.SVG()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestBarsSVG(t *testing.T) {
	b := Bars{Title: "gates", YLabel: "results", Labels: []string{"ok", "ptxas", "timeout"}, Values: []float64{12, 0, 3}}
	data, err := b.SVG()
	if err != nil {
		t.Fatal(err)
	}
	var heights []string
	for _, e := range parseSVG(t, data) {
		if e.name == "rect" && e.attrs["class"] == "bar" {
			heights = append(heights, e.attrs["height"])
		}
	}
	if len(heights) != 3 {
		t.Fatalf("%d bars, want 3", len(heights))
	}
	if heights[1] != "0.0" || heights[0] == "0.0" {
		t.Errorf("bar heights %v: want the zero bar flat and the others not", heights)
	}
	if _, err := (Bars{Title: "x", Labels: []string{"a"}, Values: []float64{-1}}).SVG(); err == nil {
		t.Error("a negative bar was drawn")
	}
}
