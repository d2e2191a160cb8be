package textfmt

import (
	"math"
	"testing"
	"time"

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
