package fp8model

import (
	"math"
	"math/rand/v2"
	"testing"
)

func normalMatrix(rng *rand.Rand, rows, cols int, sigma float64) Matrix {
	m := NewMatrix(rows, cols)
	for i := range m.Data {
		m.Data[i] = sigma * rng.NormFloat64()
	}
	return m
}

// TestQuantizerScales checks that each granularity takes its scale from
// its own block: every element is within the format's error of its block's
// scale, and a block a thousand times larger changes no other block.
func TestQuantizerScales(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	m := normalMatrix(rng, 96, 16, 1)
	big := NewMatrix(m.Rows, m.Cols)
	copy(big.Data, m.Data)
	for i := 32 * m.Cols; i < 64*m.Cols; i++ { // rows 32..63: the second block of 32
		big.Data[i] *= 1000
	}
	for _, q := range []Quantizer{{Format: FP8, Scale: PerBlock, Block: 32}, {Format: Int8, Scale: PerBlock, Block: 32}} {
		a, b := q.Apply(m, 0), q.Apply(big, 0)
		for i := range a.Data {
			if row := i / m.Cols; (row < 32 || row >= 64) && a.Data[i] != b.Data[i] {
				t.Fatalf("%v: element %d of an unchanged block moved from %g to %g", q, i, a.Data[i], b.Data[i])
			}
		}
		for r0 := 0; r0 < m.Rows; r0 += 32 {
			blk := m.Data[r0*m.Cols : (r0+32)*m.Cols]
			checkBound(t, q, blk, a.Data[r0*m.Cols:(r0+32)*m.Cols], Amax(blk))
		}
	}
	// Per channel: column 3 scaled up changes no other column.
	wide := NewMatrix(m.Rows, m.Cols)
	copy(wide.Data, m.Data)
	for r := 0; r < m.Rows; r++ {
		wide.Data[r*m.Cols+3] *= 1000
	}
	q := Quantizer{Format: FP8, Scale: PerChannel}
	a, b := q.Apply(m, 0), q.Apply(wide, 0)
	for i := range a.Data {
		if i%m.Cols != 3 && a.Data[i] != b.Data[i] {
			t.Fatalf("per channel: element %d of an unchanged column moved from %g to %g", i, a.Data[i], b.Data[i])
		}
	}
	// Per tensor: the caller's amax, not the head's. With an amax of 10^8,
	// values under 218 (2^-10 of the scale 10^8/448, half the smallest
	// subnormal) round to 0.
	q = Quantizer{Format: FP8, Scale: PerTensor}
	checkBound(t, q, m.Data, q.Apply(m, Amax(m.Data)).Data, Amax(m.Data))
	if got := Amax(q.Apply(m, 1e8).Data); got != 0 {
		t.Errorf("per tensor with amax 1e8: largest output %g, want 0 (everything under 218)", got)
	}
}

// checkBound asserts the format's error bound for one scale: INT8 is off
// by at most half a step (amax/254), E4M3 by 2^-4 of the value above the
// subnormals and half the subnormal spacing (2^-10 of the scale) below.
func checkBound(t *testing.T, q Quantizer, xs, got []float64, amax float64) {
	t.Helper()
	for i, x := range xs {
		var bound float64
		if q.Format == Int8 {
			bound = amax / 254
		} else {
			bound = math.Max(math.Abs(x)*0x1p-4, amax/E4M3Max*0x1p-10)
		}
		if d := math.Abs(got[i] - x); d > bound*(1+1e-12) {
			t.Fatalf("%v: %g became %g, off by %g, above the bound %g (amax %g)", q, x, got[i], d, bound, amax)
		}
	}
}

func TestSmoothLeavesAttentionUnchanged(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	q, k, v := normalMatrix(rng, 40, 8, 1), normalMatrix(rng, 40, 8, 1), normalMatrix(rng, 40, 8, 1)
	for i := range k.Data {
		k.Data[i] += float64(i%k.Cols) - 3 // channel offsets -3..4
	}
	ks := Smooth(k)
	for c := 0; c < ks.Cols; c++ {
		sum := 0.0
		for r := 0; r < ks.Rows; r++ {
			sum += ks.Data[r*ks.Cols+c]
		}
		if math.Abs(sum) > 1e-12 {
			t.Errorf("smoothed channel %d sums to %g, want 0", c, sum)
		}
	}
	rows := []int{0, 7, 39}
	for _, causal := range []bool{false, true} {
		a, b := Attention(q, k, v, rows, causal, Exact), Attention(q, ks, v, rows, causal, Exact)
		for i := range a.Data {
			if math.Abs(a.Data[i]-b.Data[i]) > 1e-12 {
				t.Fatalf("causal=%v: output %d is %g with K, %g with K smoothed", causal, i, a.Data[i], b.Data[i])
			}
		}
	}
	if Amax(ks.Data) >= Amax(k.Data) {
		t.Errorf("smoothing K with channel offsets left amax %g (was %g)", Amax(ks.Data), Amax(k.Data))
	}
}

func TestAttention(t *testing.T) {
	v := Matrix{Rows: 3, Cols: 2, Data: []float64{1, 2, 3, 4, 5, 9}}
	// Equal scores average V; causal row 0 sees key 0 only.
	zeros := NewMatrix(3, 2)
	got := Attention(zeros, zeros, v, []int{2, 0}, false, Exact)
	want := []float64{3, 5, 3, 5}
	for i := range want {
		if math.Abs(got.Data[i]-want[i]) > 1e-15 {
			t.Errorf("uniform attention: %v, want %v", got.Data, want)
			break
		}
	}
	got = Attention(zeros, zeros, v, []int{0, 1}, true, FP8)
	if want := []float64{1, 2, 2, 3}; !near(got.Data, want, 1e-15) {
		t.Errorf("causal rows 0 and 1: %v, want %v", got.Data, want)
	}
	// Scores 0 and -12 ln 2 (D=1, scale 1): p = 1 and 2^-12. P in E4M3
	// keeps 2^-12 only through pv_fp8's 2^8 (2^-12 alone would round to 0,
	// below half the smallest subnormal); fp16 keeps it as it is.
	q1 := Matrix{Rows: 1, Cols: 1, Data: []float64{1}}
	k1 := Matrix{Rows: 2, Cols: 1, Data: []float64{0, -12 * math.Ln2}}
	v1 := Matrix{Rows: 2, Cols: 1, Data: []float64{0, 1}}
	exact := Attention(q1, k1, v1, []int{0}, false, Exact).Data[0]
	for _, f := range []Format{FP8, FP16} {
		if got := Attention(q1, k1, v1, []int{0}, false, f).Data[0]; math.Abs(got-exact) > 1e-12*exact {
			t.Errorf("P in %v: %g, want %g (2^-12 / (1 + 2^-12))", f, got, exact)
		}
	}
	// P in E4M3 on random scores: each p is off by at most 2^-4 of itself,
	// so an output is off by at most 2^-4 max |V|.
	rng := rand.New(rand.NewPCG(9, 10))
	q, k, vr := normalMatrix(rng, 64, 16, 1), normalMatrix(rng, 64, 16, 1), normalMatrix(rng, 64, 16, 1)
	rows := []int{0, 31, 63}
	a, b := Attention(q, k, vr, rows, false, Exact), Attention(q, k, vr, rows, false, FP8)
	var e Errors
	e.Add(b.Data, a.Data)
	if e.MaxAbs() > 0x1p-4*Amax(vr.Data) || e.MaxAbs() == 0 {
		t.Errorf("P in E4M3: max error %g, want in (0, %g]", e.MaxAbs(), 0x1p-4*Amax(vr.Data))
	}
}

func near(a, b []float64, tol float64) bool {
	for i := range a {
		if math.Abs(a[i]-b[i]) > tol {
			return false
		}
	}
	return len(a) == len(b)
}

func TestErrors(t *testing.T) {
	var e Errors
	e.Add([]float64{1, 0, math.NaN(), math.Inf(1)}, []float64{1, 1, 1, 1})
	e.Add([]float64{-2}, []float64{-1})
	if e.Elements != 3 || e.NonFinite != 2 {
		t.Errorf("counted %d elements and %d non-finite, want 3 and 2", e.Elements, e.NonFinite)
	}
	// out (1, 0, -2), ref (1, 1, -1): dot 3, |out| sqrt 5, |ref| sqrt 3.
	if got, want := e.Cos(), 3/math.Sqrt(15); math.Abs(got-want) > 1e-15 {
		t.Errorf("Cos = %g, want %g", got, want)
	}
	if e.RelL1() != 2.0/3 || e.MaxAbs() != 1 {
		t.Errorf("RelL1 %g and MaxAbs %g, want 2/3 and 1", e.RelL1(), e.MaxAbs())
	}
}
