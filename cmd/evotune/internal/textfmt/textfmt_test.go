package textfmt

import (
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"evotune/space"
)

func TestHuman(t *testing.T) {
	cases := []struct {
		d    time.Duration
		want string
	}{
		{0, "0s"},
		{800 * time.Millisecond, "800ms"},
		{time.Second, "1s"},
		{4*time.Minute + 10*time.Second, "4m10s"},
		{6 * time.Minute, "6m"},
		{2*time.Hour + 5*time.Minute + 40*time.Second, "2h6m"},
		{8 * time.Hour, "8h"},
	}
	for _, tc := range cases {
		if got := Human(tc.d); got != tc.want {
			t.Errorf("Human(%v) = %q, want %q", tc.d, got, tc.want)
		}
	}
}

func TestUS(t *testing.T) {
	for v, want := range map[float64]string{0: "-", 5.126: "5.13", 99.994: "99.99", 123.45: "123.5"} {
		if got := US(v); got != want {
			t.Errorf("US(%g) = %q, want %q", v, got, want)
		}
	}
}

func TestProblem(t *testing.T) {
	p := space.Problem{Family: "sdpa", Shapes: []space.Shape{{B: 1, H: 8, S: 512, D: 64}, {B: 2, H: 8, S: 512, D: 64}},
		Weights: []float64{1, 0.5}, Dtype: "fp8", OutDtype: "bf16", Causal: true}
	if got, want := Problem(p), "sdpa 1x8x512x64:1,2x8x512x64:0.5 fp8->bf16 causal"; got != want {
		t.Errorf("Problem = %q, want %q", got, want)
	}
	if got := StatusCounts(map[space.Status]int{space.StatusIncorrect: 2, space.StatusOK: 3}); got != ", 3 ok, 2 incorrect" {
		t.Errorf("StatusCounts = %q", got)
	}
	if ShortHash("0123456789abcdef") != "0123456789ab" || ShortHash("") != "unknown" {
		t.Error("ShortHash")
	}
}

// TestPtxas: each figure lands in its own place, so two swapped fields
// would show.
func TestPtxas(t *testing.T) {
	p := space.Ptxas{Registers: 168, SpillStores: 8, SpillLoads: 12, SharedBytes: 49152, StackBytes: 16}
	want := "168 registers, 8 B spill stores, 12 B spill loads, 49152 B static shared, 16 B stack"
	if got := Ptxas(p); got != want {
		t.Errorf("Ptxas = %q, want %q", got, want)
	}
}

func TestFixedAndPercent(t *testing.T) {
	for _, tc := range []struct{ got, want string }{
		{Fixed(0.12345, 3), "0.123"},
		{Fixed(math.NaN(), 2), "-"},
		{Fixed(math.Inf(1), 2), "-"},
		{Percent(0.05, 0), "5%"},
		{Percent(0.0123, 2), "1.23%"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}

func TestFit(t *testing.T) {
	header := []string{"#", "p50 µs", "95% CI µs", "p90 µs", "speedup", "regs", "spills", "changes from default"}
	rows := [][]string{
		{"1", "4.98", "4.97 – 4.98", "4.99", "1.59x", "153", "0", "stages=3 block_m=32 block_n=256 warps=8"},
		{"2", "5.02", "5.02 – 5.02", "5.03", "1.57x", "231", "0", "ws=1 producer_warps=2 stages=3 block_m=32 block_n=256 persistent=1 q_in_regs=0 min_blocks_per_sm=2"},
		{"3", "8518.1", "8518.1 – 8518.1", "8518.1", "-", "-", "0", "KWG=32,KWI=2,MDIMA=16,MDIMC=16,MWG=64,NDIMB=16,NDIMC=8,NWG=128,PRECISION=32,SA=1,SB=1"},
	}
	render := func(h []string, r [][]string) []string {
		var b strings.Builder
		if err := Table(&b, "table", h, r); err != nil {
			t.Fatal(err)
		}
		return strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	}
	widest := func(lines []string) int {
		n := 0
		for _, l := range lines {
			n = max(n, utf8.RuneCountInString(l))
		}
		return n
	}
	natural := widest(render(header, rows))
	for _, width := range []int{0, natural, 200} {
		h, r := Fit(header, rows, width, "p90 µs", "95% CI µs")
		if !slices.Equal(h, header) || !reflect.DeepEqual(r, rows) {
			t.Errorf("width %d (the table is %d wide): Fit changed the table", width, natural)
		}
	}
	for _, width := range []int{100, 80, 60} {
		h, r := Fit(header, rows, width, "p90 µs", "95% CI µs")
		lines := render(h, r)
		// At 60 the table cannot fit: both optional columns go and the
		// last is at its narrowest.
		if got := widest(lines); width == 60 && (len(h) != len(header)-2 || columnWidths(h, r)[len(h)-1] > minFitColumn) {
			t.Errorf("width 60: header %v, last column %d wide", h, columnWidths(h, r)[len(h)-1])
		} else if width > 60 && got > width {
			t.Errorf("width %d: the fitted table is %d wide:\n%s", width, got, strings.Join(lines, "\n"))
		}
		// Nothing of the last column is lost: its text, line breaks
		// aside, is what it was.
		for i := range rows {
			got := strings.ReplaceAll(r[i][len(h)-1], "\n", "")
			if strings.ReplaceAll(got, " ", "") != strings.ReplaceAll(rows[i][len(header)-1], " ", "") {
				t.Errorf("width %d, row %d: last column %q, was %q", width, i, r[i][len(h)-1], rows[i][len(header)-1])
			}
		}
		if width == 100 && len(h) != len(header) {
			t.Errorf("width 100: columns %v dropped; wrapping alone fits", h)
		}
	}
	// At 80 columns p90 goes first; the CI of times in µs stays.
	h, _ := Fit(header, rows[:2], 80, "p90 µs", "95% CI µs")
	if slices.Contains(h, "p90 µs") || !slices.Contains(h, "95% CI µs") {
		t.Errorf("width 80: header %v; want p90 dropped and the CI kept", h)
	}
}
