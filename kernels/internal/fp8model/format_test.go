package fp8model

import (
	"math"
	"math/rand/v2"
	"testing"
)

// positiveE4M3 lists the codes 0x00..0x7e (+0 to 448) with their values.
func positiveE4M3() ([]E4M3, []float64) {
	var codes []E4M3
	var vals []float64
	for c := E4M3(0); c <= 0x7e; c++ {
		codes = append(codes, c)
		vals = append(vals, c.Float64())
	}
	return codes, vals
}

func TestE4M3DecodeMatchesDefinition(t *testing.T) {
	known := map[E4M3]float64{
		0x00: 0, 0x01: 0x1p-9, 0x07: 7 * 0x1p-9, 0x08: 0x1p-6, 0x0f: 1.875 * 0x1p-6,
		0x30: 0.5, 0x38: 1, 0x39: 1.125, 0x3c: 1.5, 0x40: 2, 0x77: 240, 0x78: 256, 0x7e: 448,
		0x81: -0x1p-9, 0xb8: -1, 0xfe: -448,
	}
	for c, want := range known {
		if got := c.Float64(); got != want {
			t.Errorf("E4M3 %#02x = %g, want %g", uint8(c), got, want)
		}
	}
	nans := 0
	for i := 0; i < 256; i++ {
		c := E4M3(i)
		v := c.Float64()
		if math.IsNaN(v) {
			nans++
			if c != 0x7f && c != 0xff {
				t.Errorf("E4M3 %#02x decodes to NaN; only 0x7f and 0xff are NaN", i)
			}
			continue
		}
		if math.IsInf(v, 0) {
			t.Errorf("E4M3 %#02x decodes to %g; the format has no infinities", i, v)
		}
		if neg := (c ^ 0x80).Float64(); neg != -v || math.Signbit(neg) == math.Signbit(v) {
			t.Errorf("E4M3 %#02x = %g but its sign flip %#02x = %g", i, v, uint8(c^0x80), neg)
		}
	}
	if nans != 2 {
		t.Errorf("%d NaN codes, want 2 (0x7f, 0xff)", nans)
	}
	// Positive codes increase with the value, by the binade's spacing:
	// 2^-9 through the subnormals and the first normal binade, 2^(e-3) in
	// the binade [2^e, 2^(e+1)).
	_, vals := positiveE4M3()
	for i := 1; i < len(vals); i++ {
		_, exp := math.Frexp(vals[i-1])
		want := math.Ldexp(1, max(exp-1, -6)-3)
		if vals[i-1] == 0 {
			want = 0x1p-9
		}
		if d := vals[i] - vals[i-1]; d != want {
			t.Errorf("E4M3 %#02x - %#02x = %g, want the spacing %g", i, i-1, d, want)
		}
	}
	if vals[len(vals)-1] != E4M3Max || vals[1] != 0x1p-9 {
		t.Errorf("max %g and min subnormal %g, want 448 and 2^-9", vals[len(vals)-1], vals[1])
	}
}

func TestE4M3EncodeDecodeIsIdentity(t *testing.T) {
	for i := 0; i < 256; i++ {
		c := E4M3(i)
		if math.IsNaN(c.Float64()) {
			// cvt gives the canonical NaN whatever the input's sign.
			if got := EncodeE4M3(c.Float64()); got != E4M3NaN {
				t.Errorf("EncodeE4M3(NaN) = %#02x, want %#02x", uint8(got), uint8(E4M3NaN))
			}
			continue
		}
		if got := EncodeE4M3(c.Float64()); got != c {
			t.Errorf("EncodeE4M3(%g) = %#02x, want %#02x", c.Float64(), uint8(got), i)
		}
	}
}

// nearestE4M3 finds the nearest code to x by search, ties to the even code,
// saturating at 448: the definition EncodeE4M3 must agree with.
func nearestE4M3(x float64) E4M3 {
	var sign E4M3
	if math.Signbit(x) {
		sign, x = 0x80, -x
	}
	codes, vals := positiveE4M3()
	best := codes[0]
	for i, v := range vals {
		d, bd := math.Abs(v-x), math.Abs(best.Float64()-x)
		if d < bd || d == bd && codes[i]&1 == 0 {
			best = codes[i]
		}
	}
	return sign | best
}

func TestE4M3EncodeRoundsToNearestEven(t *testing.T) {
	_, vals := positiveE4M3()
	var sweep []float64
	// Every midpoint between neighbours (a tie) and the values just either
	// side of it.
	for i := 1; i < len(vals); i++ {
		mid := (vals[i-1] + vals[i]) / 2
		sweep = append(sweep, mid, math.Nextafter(mid, 0), math.Nextafter(mid, 1000))
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		sweep = append(sweep, math.Exp2(-12+21*rng.Float64())) // 2^-12 .. 2^9
	}
	for _, x := range sweep {
		for _, x := range []float64{x, -x} {
			if got, want := EncodeE4M3(x), nearestE4M3(x); got != want {
				t.Fatalf("EncodeE4M3(%v) = %#02x (%g), want %#02x (%g)", x, uint8(got), got.Float64(), uint8(want), want.Float64())
			}
		}
	}
	// Saturation as cvt.rn.satfinite: beyond 448 (infinities too) gives the
	// largest finite code, NaN stays NaN.
	for _, c := range []struct {
		x    float64
		want E4M3
	}{
		{448.5, 0x7e}, {464, 0x7e}, {1e30, 0x7e}, {math.Inf(1), 0x7e}, {math.Inf(-1), 0xfe},
		{-500, 0xfe}, {math.NaN(), 0x7f}, {0x1p-10, 0x00}, {math.Nextafter(0x1p-10, 1), 0x01},
		{3 * 0x1p-10, 0x02}, {math.Copysign(0, -1), 0x80},
	} {
		if got := EncodeE4M3(c.x); got != c.want {
			t.Errorf("EncodeE4M3(%g) = %#02x, want %#02x", c.x, uint8(got), uint8(c.want))
		}
	}
}

func TestE4M3RelativeErrorOnNormals(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	worst := 0.0
	for range 100000 {
		x := math.Exp2(-6 + (math.Log2(E4M3Max)+6)*rng.Float64()) // normals 2^-6 .. 448
		rel := math.Abs(RoundE4M3(x)-x) / x
		if rel > 0x1p-4 {
			t.Fatalf("E4M3 rounds %v to %v: relative error %g above 2^-4", x, RoundE4M3(x), rel)
		}
		worst = math.Max(worst, rel)
	}
	// Half the spacing over the binade's bottom is the bound; a sweep this
	// long comes near it.
	if worst < 0.9*0x1p-4 {
		t.Errorf("worst relative error %g, expected near 2^-4 = %g", worst, 0x1p-4)
	}
}

func TestRoundFP16(t *testing.T) {
	for _, c := range []struct{ x, want float64 }{
		{1, 1}, {1 + 0x1p-11, 1}, {1 + 3*0x1p-11, 1 + 0x1p-9}, {1 + 0x1p-10, 1 + 0x1p-10},
		{65504, 65504}, {65519, 65504}, {65520, math.Inf(1)}, {-1e6, math.Inf(-1)},
		{0x1p-24, 0x1p-24}, {0x1p-25, 0}, {1.5 * 0x1p-25, 0x1p-24}, {0x1p-14, 0x1p-14},
		{-0.1, -0.0999755859375},
	} {
		if got := RoundFP16(c.x); got != c.want {
			t.Errorf("RoundFP16(%v) = %v, want %v", c.x, got, c.want)
		}
	}
}

func TestQuantizeInt8(t *testing.T) {
	for _, c := range []struct {
		x, scale float64
		want     int8
	}{
		{2.5, 1, 2}, {3.5, 1, 4}, {-2.5, 1, -2}, {127.4, 1, 127}, {200, 1, 127}, {-200, 1, -127},
		{1, 1.0 / 127, 127}, {-0.4, 1, 0}, {0.75, 0.5, 2},
	} {
		if got := QuantizeInt8(c.x, c.scale); got != c.want {
			t.Errorf("QuantizeInt8(%v, %v) = %d, want %d", c.x, c.scale, got, c.want)
		}
	}
}
