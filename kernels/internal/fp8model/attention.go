package fp8model

import "math"

// PBias is the factor pv_fp8 puts on P before rounding it to E4M3: P =
// exp(s - m) * 2^8 lies in (0, 256], clear of the subnormals and under 448
// (kernels/sdpa.cu, kPBias). It cancels in O = sum(P V) / sum(P).
const PBias = 256.0

// Attention returns softmax(Q K^T / sqrt(D)) V in float64 for the query rows
// listed (causal: row i sees keys 0..i), one output row per entry of rows.
//
// pFormat is the format of P in the P V product, the kernel's way: FP8 is
// E4M3(2^8 exp(s - m)) (pv_fp8=1), FP16 is fp16(exp(s - m)) (pv_fp8=0), Exact
// leaves P alone. The row sum l adds the unrounded p, as the kernel keeps it
// in fp32. m is the row's max; the kernel's is the running max of the tiles so
// far, which moves no p's relative rounding and only decides which of the
// smallest p (below 2^-18 of the max) fall under E4M3's subnormals.
func Attention(q, k, v Matrix, rows []int, causal bool, pFormat Format) Matrix {
	out := NewMatrix(len(rows), v.Cols)
	scale := 1 / math.Sqrt(float64(q.Cols))
	s := make([]float64, k.Rows)
	for n, i := range rows {
		keys := k.Rows
		if causal {
			keys = min(i+1, k.Rows)
		}
		qi := q.Row(i)
		mx := math.Inf(-1)
		for j := 0; j < keys; j++ {
			dot := 0.0
			for c, x := range k.Row(j) {
				dot += qi[c] * x
			}
			s[j] = dot * scale
			mx = math.Max(mx, s[j])
		}
		o := out.Row(n)
		l := 0.0
		for j := 0; j < keys; j++ {
			p := math.Exp(s[j] - mx)
			l += p
			switch pFormat {
			case FP8:
				p = RoundE4M3(p*PBias) / PBias
			case FP16:
				p = RoundFP16(p)
			}
			for c, x := range v.Row(j) {
				o[c] += p * x
			}
		}
		for c := range o {
			o[c] /= l
		}
	}
	return out
}

// Errors accumulates an end-to-end comparison of outputs with a reference
// the way the worker reports it (kernels/worker.cu, e2e_cos, e2e_rel_l1,
// e2e_max_abs): one cosine and one relative L1 over every element compared,
// and the largest absolute error. Elements that are NaN or infinite are
// counted apart and left out of the sums.
type Errors struct {
	dot, out2, ref2, absErr, absRef, maxAbs float64
	Elements, NonFinite                     int
}

// Add compares out with ref element by element.
func (e *Errors) Add(out, ref []float64) {
	for i, o := range out {
		r := ref[i]
		if math.IsNaN(o) || math.IsInf(o, 0) {
			e.NonFinite++
			continue
		}
		e.Elements++
		e.dot += o * r
		e.out2 += o * o
		e.ref2 += r * r
		d := math.Abs(o - r)
		e.absErr += d
		e.absRef += math.Abs(r)
		e.maxAbs = math.Max(e.maxAbs, d)
	}
}

// Cos is the cosine similarity of the outputs and the reference.
func (e Errors) Cos() float64 { return e.dot / math.Sqrt(e.out2*e.ref2) }

// RelL1 is sum |out - ref| / sum |ref|.
func (e Errors) RelL1() float64 { return e.absErr / e.absRef }

// MaxAbs is the largest |out - ref|.
func (e Errors) MaxAbs() float64 { return e.maxAbs }
