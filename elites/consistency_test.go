package elites_test

import (
	"bytes"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"evotune/elites"
)

// TestOpenRefusesEditedMeta: an archive whose meta.json disagrees with the
// results of its log is refused by every way of opening it, the fields and
// both values named.
func TestOpenRefusesEditedMeta(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "archive")
	a := mustCreate(t, dir)
	r := okResult("a", 10)
	p := testMeta().Problem
	r.Problem = &p
	mustRecord(t, a, r, okResult("b", 12))
	mustClose(t, a)
	path := filepath.Join(dir, "meta.json")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	data = bytes.Replace(data, []byte(`"NVIDIA L4"`), []byte(`"NVIDIA H100"`), 1)
	data = bytes.Replace(data, []byte(`"bf16"`), []byte(`"fp16"`), 1)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	edited := testMeta()
	edited.GPU, edited.Problem.Dtype = "NVIDIA H100", "fp16"
	opens := map[string]func() (*elites.Archive, error){
		"Read": func() (*elites.Archive, error) { return elites.Read(dir) },
		"Open": func() (*elites.Archive, error) { return elites.Open(dir, edited, elites.OpenOptions{}) },
		"Seed": func() (*elites.Archive, error) { return elites.Open(dir, edited, elites.OpenOptions{Seed: true}) },
	}
	for name, open := range opens {
		_, err := open()
		var ie *elites.IdentityError
		if !errors.As(err, &ie) {
			t.Fatalf("%s: %v, want an IdentityError", name, err)
		}
		for _, want := range []string{"meta.json says dtype fp16, the results bf16", "meta.json says GPU NVIDIA H100, the results NVIDIA L4", "disagrees with 2 of its 2 results (the first is seq 1)", dir} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: %q does not say %q", name, err, want)
			}
		}
	}
}

// TestHidden: a damaged line is hidden when it may have held a result
// better than the bound, and not when what can still be read of it says it
// could not, or when a later line holds its config.
func TestHidden(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "archive")
	a := mustCreate(t, dir)
	mustRecord(t, a, okResult("a", 10), okResult("b", 20), rejected("c"), okResult("d", 30))
	mustClose(t, a)
	path := filepath.Join(dir, "results.jsonl")
	data, _ := os.ReadFile(path)
	lines := bytes.SplitAfter(data, []byte("\n"))
	damage := func(i int, old, new string) {
		lines[i] = bytes.Replace(lines[i], []byte(old), []byte(new), 1)
	}
	damage(0, `"objective_us":10`, `"objective_us":1e999`)   // a: objective unreadable
	damage(1, `"status":"ok"`, `"status":"ok","config":7`)   // b: not a config, but reads as ok at 20
	damage(2, `"gate":`, `"gate":{`)                         // c: not JSON, but reads as ptxas_reject
	damage(3, `"objective_us":30`, `"objective_us":-30,"x"`) // d: not JSON, ok, objective unreadable
	os.WriteFile(path, bytes.Join(lines, nil), 0o644)
	v, err := elites.Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	lineNos := func(ws []elites.LoadWarning) []int {
		var out []int
		for _, w := range ws {
			out = append(out, w.Line)
		}
		return out
	}
	for _, tt := range []struct {
		than float64
		want []int
	}{
		{math.Inf(1), []int{1, 2, 4}},
		{15, []int{1, 4}}, // b read as 20: not better than 15
	} {
		if got := lineNos(v.Hidden(tt.than)); !equalInts(got, tt.want) {
			t.Errorf("Hidden(%v) = lines %v, want %v", tt.than, got, tt.want)
		}
	}
	// A later run evaluated a again: its damaged line hides nothing.
	w, err := elites.Open(dir, testMeta(), elites.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	mustRecord(t, w, okResult("a", 10))
	mustClose(t, w)
	v, err = elites.Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := lineNos(v.Hidden(math.Inf(1))); !equalInts(got, []int{2, 4}) {
		t.Errorf("after a was recorded again: Hidden = lines %v, want [2 4]", got)
	}
	// A line cut short still says what it can.
	os.WriteFile(path, append(data, []byte(`{"seq":9,"key":"e,f=\"1\"","config":{},"status":"ok","gate":"timed","objective_us":3`+"\n")...), 0o644)
	v, err = elites.Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	if h := v.Hidden(4); len(h) != 1 || h[0].Key != `e,f="1"` || h[0].Objective != 3 {
		t.Errorf("a line cut short: Hidden(4) = %+v, want its key and objective 3", h)
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
