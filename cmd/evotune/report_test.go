package main

import (
	"bytes"
	"encoding/xml"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"evotune/cmd/evotune/internal/reportmd"
)

// svgCounts parses an SVG file as XML and counts what the report's plots
// draw: vertices of each series polyline, circles and bars.
type svgCounts struct {
	polylines []int
	circles   int
	bars      int
}

func readSVG(t *testing.T, path string) svgCounts {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := xml.NewDecoder(bytes.NewReader(data))
	var c svgCounts
	root := true
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("%s is not well-formed XML: %v", path, err)
		}
		se, ok := tok.(xml.StartElement)
		if !ok {
			continue
		}
		if root && se.Name.Local != "svg" {
			t.Fatalf("%s: root element %s, want svg", path, se.Name.Local)
		}
		root = false
		attr := func(name string) string {
			for _, a := range se.Attr {
				if a.Name.Local == name {
					return a.Value
				}
			}
			return ""
		}
		switch {
		case se.Name.Local == "polyline" && attr("class") == "series":
			c.polylines = append(c.polylines, len(strings.Fields(attr("points"))))
		case se.Name.Local == "circle":
			c.circles++
		case se.Name.Local == "rect" && attr("class") == "bar":
			c.bars++
		}
	}
	return c
}

func TestReportGolden(t *testing.T) {
	cases := []struct {
		name    string
		archive string
	}{
		{"single", testArchive},
		{"two-shapes", testArchive2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out := t.TempDir()
			stdout, stderr, code := runCLIAt(t, fixedNow, "report", "--archive", tc.archive, "--out", out)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			if want := "wrote " + filepath.Join(out, "report.md") + " and 4 plots\n"; !strings.HasSuffix(stdout, want) {
				t.Errorf("stdout %q, want it to end %q", stdout, want)
			}
			// The single-shape archive's line 6 is damaged past saying
			// whether it passed: it is reported as skipped on stderr, and
			// not in the report's own output as a possible elite
			// (TestReadersNameDamagedBest covers a line that says it passed).
			if skipped := strings.Contains(stderr, "results.jsonl: skipped line 6"); skipped != (tc.name == "single") {
				t.Errorf("stderr %q: reports line 6 skipped %v, want %v", stderr, skipped, tc.name == "single")
			}
			if strings.Contains(stdout, "is damaged") {
				t.Errorf("stdout %q names a damaged line that does not say it passed", stdout)
			}
			data, err := os.ReadFile(filepath.Join(out, "report.md"))
			if err != nil {
				t.Fatal(err)
			}
			goldenFile(t, filepath.Join("testdata", "report", tc.name+".md"), string(data))
		})
	}
}

// TestReportPlots checks each plot against the archive: one step vertex
// pair per evaluation from the first passing one, one bar per status seen,
// one dot per passing result.
func TestReportPlots(t *testing.T) {
	out := t.TempDir()
	if _, stderr, code := runCLI(t, "report", "--archive", testArchive, "--out", out); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	a := readArchive(t, testArchive)
	results := a.Results()
	firstOK := -1
	ok := 0
	statuses := map[string]bool{}
	for i, r := range results {
		if r.OK() {
			ok++
			if firstOK < 0 {
				firstOK = i
			}
		}
		statuses[string(r.Status)] = true
	}
	n := len(results) - firstOK // evaluations from the first passing one
	step := 2*n - 1
	cases := []struct {
		file string
		want svgCounts
	}{
		{reportmd.PlotEvals, svgCounts{polylines: []int{step}}},
		{reportmd.PlotTime, svgCounts{polylines: []int{step}}},
		{reportmd.PlotGates, svgCounts{bars: len(statuses)}},
		{reportmd.PlotRegisters, svgCounts{circles: ok}},
	}
	for _, tc := range cases {
		t.Run(tc.file, func(t *testing.T) {
			got := readSVG(t, filepath.Join(out, tc.file))
			if len(got.polylines) != len(tc.want.polylines) || (len(got.polylines) > 0 && got.polylines[0] != tc.want.polylines[0]) ||
				got.circles != tc.want.circles || got.bars != tc.want.bars {
				t.Errorf("%s draws %+v, want %+v", tc.file, got, tc.want)
			}
		})
	}
	md, err := os.ReadFile(filepath.Join(out, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{reportmd.PlotEvals, reportmd.PlotTime, reportmd.PlotGates, reportmd.PlotRegisters} {
		if !strings.Contains(string(md), "]("+f+")") {
			t.Errorf("report.md does not show %s", f)
		}
	}
}

// TestReportNoDefault checks that a report says there is no baseline when
// the archive lacks the family default, rather than inventing a speedup.
func TestReportNoDefault(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "archive")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	meta, err := os.ReadFile(filepath.Join(testArchive, "meta.json"))
	if err != nil {
		t.Fatal(err)
	}
	log, err := os.ReadFile(filepath.Join(testArchive, "results.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	a := readArchive(t, testArchive)
	def, _ := familyDefault(a.Meta().Problem, a.Meta().Arch)
	var kept []string
	for _, line := range strings.SplitAfter(string(log), "\n") {
		if !strings.Contains(line, `"key":"`+def.Key()+`"`) {
			kept = append(kept, line)
		}
	}
	if len(kept) == len(strings.SplitAfter(string(log), "\n")) {
		t.Fatal("the test archive lacks the default config")
	}
	os.WriteFile(filepath.Join(dir, "meta.json"), meta, 0o644)
	os.WriteFile(filepath.Join(dir, "results.jsonl"), []byte(strings.Join(kept, "")), 0o644)
	out := t.TempDir()
	if _, stderr, code := runCLI(t, "report", "--archive", dir, "--out", out); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	md, _ := os.ReadFile(filepath.Join(out, "report.md"))
	if !strings.Contains(string(md), "The family default has no passing result in this archive") || strings.Contains(string(md), "x |") {
		t.Errorf("report.md without the default:\n%s", md)
	}
}

func TestReportErrors(t *testing.T) {
	cases := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"report", "--top", "0"}, exitUsage, "evotune: report: --top must be positive"},
		{[]string{"report", "--out", ""}, exitUsage, "evotune: report: --out must name a directory"},
		{[]string{"report", "--archive", "testdata/nonexistent"}, exitError, "evotune: report --archive: testdata/nonexistent is not an archive"},
	}
	for _, tc := range cases {
		_, stderr, code := runCLI(t, tc.args...)
		if code != tc.code || !strings.HasPrefix(stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and %q", tc.args, code, stderr, tc.code, tc.want)
		}
	}
}
