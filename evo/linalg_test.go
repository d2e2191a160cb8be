package evo

import (
	"math"
	"math/rand/v2"
	"testing"
)

// choleskyRef and traceInverseRef are the textbook loops that cholesky and
// traceInverse must match to the last bit: a restored search rates its
// candidates exactly as the uninterrupted one only if the model's fit is
// the same arithmetic in the same order.
func choleskyRef(n int, gram []float64) ([]float64, bool) {
	l := make([]float64, n*n)
	for i := range n {
		for j := 0; j <= i; j++ {
			a := gram[j*n+i]
			if i == j && i > 0 {
				a += surrogateRidge
			}
			sum := a
			ri, rj := l[i*n:i*n+j], l[j*n:j*n+j]
			for k := range ri {
				sum -= float64(ri[k] * rj[k])
			}
			if i == j {
				if !(sum > 0) {
					return nil, false
				}
				l[i*n+i] = math.Sqrt(sum)
			} else {
				l[i*n+j] = sum / l[j*n+j]
			}
		}
	}
	return l, true
}

func traceInverseRef(n int, l []float64, from int) float64 {
	z := make([]float64, n)
	tr := 0.0
	for j := from; j < n; j++ {
		z[j] = 1 / l[j*n+j]
		norm := float64(z[j] * z[j])
		for i := j + 1; i < n; i++ {
			sum := 0.0
			for k := j; k < i; k++ {
				sum -= float64(l[i*n+k] * z[k])
			}
			z[i] = sum / l[i*n+i]
			norm += float64(z[i] * z[i])
		}
		tr += norm
	}
	return tr
}

// randomGram returns the Gram of m random sparse 0/1 rows of n features
// (feature 0 always set, as the intercept is), with some real-valued
// columns, as the model's fitted features are.
func randomGram(rng *rand.Rand, n, m int) []float64 {
	g := make([]float64, n*n)
	x := make([]float64, n)
	for range m {
		x[0] = 1
		for f := 1; f < n; f++ {
			switch {
			case f%7 == 6:
				x[f] = rng.NormFloat64() / 3
			case rng.IntN(4) == 0:
				x[f] = 1
			default:
				x[f] = 0
			}
		}
		for a := range n {
			for b := range n {
				g[a*n+b] += x[a] * x[b]
			}
		}
	}
	return g
}

// TestLinalgMatchesTheTextbookBitForBit checks cholesky and traceInverse
// against the textbook loops on random Grams of every order from 1 to 40
// (every remainder of the four-wide blocks) and from several columns on.
func TestLinalgMatchesTheTextbookBitForBit(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for n := 1; n <= 40; n++ {
		for _, m := range []int{1, 3, 2 * n} {
			g := randomGram(rng, n, m)
			want, wok := choleskyRef(n, g)
			got, ok := cholesky(n, g)
			if ok != wok {
				t.Fatalf("n=%d m=%d: positive definite %v, textbook %v", n, m, ok, wok)
			}
			if !ok {
				continue
			}
			for i := range want {
				if math.Float64bits(got[i]) != math.Float64bits(want[i]) {
					t.Fatalf("n=%d m=%d: L[%d][%d] = %v, textbook %v", n, m, i/n, i%n, got[i], want[i])
				}
			}
			for _, from := range []int{0, 1, min(2, n), n / 2, n - 1} {
				if a, b := traceInverse(n, want, from), traceInverseRef(n, want, from); math.Float64bits(a) != math.Float64bits(b) {
					t.Fatalf("n=%d m=%d from=%d: trace %v, textbook %v", n, m, from, a, b)
				}
			}
		}
	}
}

// BenchmarkFit times the model's linear algebra at the order of the
// screening model of evotune's recordings (a few hundred features).
func BenchmarkFit(b *testing.B) {
	const n = 240
	g := randomGram(rand.New(rand.NewPCG(1, 2)), n, 400)
	for b.Loop() {
		l, ok := cholesky(n, g)
		if !ok {
			b.Fatal("not positive definite")
		}
		traceInverse(n, l, 1)
	}
}
