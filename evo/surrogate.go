package evo

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"

	"evotune/space"
)

// Surrogate screening. Each evaluation costs a compile and a timing, while
// breeding a child costs nothing, so with Options.Screen above 1 the search
// breeds several candidates for each child slot and proposes the one that a
// cheap model of the results absorbed so far rates best; the others stay
// unseen and may be bred again later.
//
// The model is a Bayesian ridge regression of log(objective) on one-hot
// knob values plus the products of every pair of macro knobs (the
// structural choices interact: tile shape, warps, split) and, with
// Options.Interact, one ordinal interaction for each other pair of knobs
// (the product of the two knobs' centred positions in their value lists:
// block size against tile size, say), fitted to the OK results, and a
// linear probability model of failure (any status but ok) on the same
// features, fitted to every result. A candidate's rating is its
// expected improvement in log objective over the best so far, under the
// regression's predictive normal, times its predicted chance of passing:
// a candidate far from anything measured has a wide predictive spread and
// so keeps a chance against one predicted slightly better, which is the
// exploration the screen needs.
//
// The model needs only sums over the absorbed results (counts of feature
// co-occurrences, sums of log objectives), which the saved state holds, so
// a restored search rates candidates exactly as the uninterrupted one. The
// sums of the ordinal interactions are over the raw position products,
// which are integers too; the fit centres and scales them by a linear map
// of the sums.
const (
	// surrogateRidge is the prior precision of each knob-value effect,
	// in units of one observation: a value seen k times keeps k/(k+1) of
	// its least-squares effect.
	surrogateRidge = 1.0
	// surrogateMinOK is how many OK results the model needs before it
	// screens: below it, children are proposed unscreened.
	surrogateMinOK = 4
	// surrogateMinVar is the least residual variance of log(objective),
	// (1%)²: timing noise alone is about that, so a perfect fit of few
	// points is not trusted beyond it.
	surrogateMinVar = 1e-4
)

// interactScale divides the ordinal interactions' fitted values, so that
// each one's prior precision is interactScale² that of a one-hot effect:
// with 1, a model of few results spread its predictions to the corners of
// the knob ranges and lost early evaluations (evo/NOTES.md, round 7).
const interactScale = 3.0

// features maps a config to the indices of its active features: 0 is the
// intercept, then one per knob value, then one per value pair of each pair
// of macro knobs; then, with interactions, one per other pair of knobs of
// two or more values, whose value is not 0 or 1 but a position product.
type features struct {
	knobs   []string         // knob names in declaration order
	index   []map[string]int // per knob: value → its position in the list
	offset  []int            // per knob: the feature index of its first value
	width   []int            // per knob: its number of values
	pairs   [][2]int         // knob positions of the interaction pairs
	pairOff []int            // per pair: the feature index of value pair (0, 0)
	// bilin are the knob pairs of the ordinal interactions, one feature
	// each from bilinOff on: in the sums, the product pa·pb of the two
	// knobs' positions in their value lists (bilinear); in the fit,
	// z = (pa − ma)(pb − mb)/(ma·mb·interactScale), with ma the middle
	// of a's list (interact).
	bilin    [][2]int
	bilinOff int
	// tcol holds, per ordinal interaction, its column of the linear map T
	// from raw to fitted features (z = T'x), which the one-hots give pa.
	tcol [][]term
	n    int // number of features
}

// A term is one nonzero coefficient of a linear map's column.
type term struct {
	i int
	c float64
}

func newFeatures(sp *space.Space, interact bool) *features {
	f := &features{n: 1}
	var macro []int
	for i, k := range sp.Knobs {
		m := make(map[string]int, len(k.Values))
		for j, v := range k.Values {
			m[v] = j
		}
		f.knobs = append(f.knobs, k.Name)
		f.index = append(f.index, m)
		f.offset = append(f.offset, f.n)
		f.width = append(f.width, len(k.Values))
		f.n += len(k.Values)
		if k.Layer == space.Macro {
			macro = append(macro, i)
		}
	}
	for a := range macro {
		for _, j := range macro[a+1:] {
			i := macro[a]
			f.pairs = append(f.pairs, [2]int{i, j})
			f.pairOff = append(f.pairOff, f.n)
			f.n += f.width[i] * f.width[j]
		}
	}
	f.bilinOff = f.n
	if interact {
		for i := range f.knobs {
			for j := i + 1; j < len(f.knobs); j++ {
				macroPair := sp.Knobs[i].Layer == space.Macro && sp.Knobs[j].Layer == space.Macro
				if f.width[i] > 1 && f.width[j] > 1 && !macroPair {
					f.bilin = append(f.bilin, [2]int{i, j})
				}
			}
		}
		for k, pr := range f.bilin {
			a, b := pr[0], pr[1]
			ma, mb := float64(f.width[a]-1)/2, float64(f.width[b]-1)/2
			sc := ma * mb * interactScale
			col := []term{{0, 1 / interactScale}}
			for v := 1; v < f.width[a]; v++ {
				col = append(col, term{f.offset[a] + v, -mb * float64(v) / sc})
			}
			for v := 1; v < f.width[b]; v++ {
				col = append(col, term{f.offset[b] + v, -ma * float64(v) / sc})
			}
			col = append(col, term{f.n + k, 1 / sc})
			f.tcol = append(f.tcol, col)
		}
		f.n += len(f.bilin)
	}
	return f
}

// dense returns the packed Gram of raw features, of order f.n, as a full
// symmetric matrix of the fitted features: T'·G·T.
func (f *features) dense(gram []int) []float64 {
	n := f.n
	g := make([]float64, n*n)
	for i := range n {
		for j := i; j < n; j++ {
			v := float64(gram[triIndex(n, i, j)])
			g[i*n+j], g[j*n+i] = v, v
		}
	}
	if len(f.tcol) == 0 {
		return g
	}
	tmp := make([]float64, n)
	// G·T, column by column: a column reads only columns T leaves alone
	// and its own.
	for k, col := range f.tcol {
		c := f.bilinOff + k
		for r := range n {
			sum := 0.0
			for _, t := range col {
				sum += float64(g[r*n+t.i] * t.c)
			}
			tmp[r] = sum
		}
		for r := range n {
			g[r*n+c] = tmp[r]
		}
	}
	// T'·(G·T), row by row.
	for k, col := range f.tcol {
		r := f.bilinOff + k
		for c := range n {
			sum := 0.0
			for _, t := range col {
				sum += float64(g[t.i*n+c] * t.c)
			}
			tmp[c] = sum
		}
		copy(g[r*n:r*n+n], tmp)
	}
	return g
}

// transform returns T'·b for a vector b of sums over raw features.
func (f *features) transform(b []float64) []float64 {
	out := slices.Clone(b)
	for k, col := range f.tcol {
		sum := 0.0
		for _, t := range col {
			sum += float64(b[t.i] * t.c)
		}
		out[f.bilinOff+k] = sum
	}
	return out
}

// interact returns the fitted values of c's ordinal interactions, in buf:
// T'x for c's raw features x, computed directly (a value not in its
// knob's list has no one-hot feature, so it counts as position 0, as in
// bilinear).
func (f *features) interact(c space.Config, buf []float64) []float64 {
	buf = buf[:0]
	for _, pr := range f.bilin {
		a, b := f.positions(c, pr)
		ma, mb := float64(f.width[pr[0]]-1)/2, float64(f.width[pr[1]]-1)/2
		buf = append(buf, float64((float64(a)-ma)*(float64(b)-mb))/(ma*mb*interactScale))
	}
	return buf
}

// positions returns the positions of c's values of the knob pair pr in
// their value lists (0 for a value not in its list).
func (f *features) positions(c space.Config, pr [2]int) (int, int) {
	return f.index[pr[0]][c[f.knobs[pr[0]]]], f.index[pr[1]][c[f.knobs[pr[1]]]]
}

// bilinear returns the raw values of c's ordinal interaction features, in
// buf: for each pair, the product of the two knobs' positions (a value not
// in its knob's list, never the case for a valid config, counts as 0).
func (f *features) bilinear(c space.Config, buf []int) []int {
	buf = buf[:0]
	for _, pr := range f.bilin {
		a, b := f.positions(c, pr)
		buf = append(buf, a*b)
	}
	return buf
}

// active returns the indices of c's features, in buf. A value not in its
// knob's list (never the case for a valid config) has no feature, and
// neither have the pairs it is part of.
func (f *features) active(c space.Config, buf []int) []int {
	buf = append(buf[:0], 0)
	digits := make([]int, len(f.knobs))
	for i, name := range f.knobs {
		d, ok := f.index[i][c[name]]
		if !ok {
			digits[i] = -1
			continue
		}
		digits[i] = d
		buf = append(buf, f.offset[i]+d)
	}
	for p, pr := range f.pairs {
		a, b := digits[pr[0]], digits[pr[1]]
		if a >= 0 && b >= 0 {
			buf = append(buf, f.pairOff[p]+a*f.width[pr[1]]+b)
		}
	}
	return buf
}

// modelStats are the sums the surrogate is fitted from, over every result
// the search absorbed: the saved state holds them. Grams are packed upper
// triangles (row-major) of feature co-occurrence counts, so their entry
// (0, 0) is the number of results.
type modelStats struct {
	Features int       `json:"features"`
	OKGram   counts    `json:"ok_gram"`   // over OK results
	OKSum    []float64 `json:"ok_sum"`    // Σ features · log(objective), OK results
	OKSumSq  float64   `json:"ok_sum_sq"` // Σ log(objective)², OK results
	AllGram  counts    `json:"all_gram"`  // over every result
	Fail     counts    `json:"fail"`      // Σ features · [not OK]
}

func newModelStats(n int) *modelStats {
	t := n * (n + 1) / 2
	return &modelStats{
		Features: n,
		OKGram:   make(counts, t),
		OKSum:    make([]float64, n),
		AllGram:  make(counts, t),
		Fail:     make(counts, n),
	}
}

// check reports whether the stats fit a model of n features, and gives
// the decoded counts their full length.
func (m *modelStats) check(n int) error {
	t := n * (n + 1) / 2
	if m.Features != n {
		return fmt.Errorf("model of %d features, this space has %d", m.Features, n)
	}
	if len(m.OKSum) != n || len(m.OKGram) > t || len(m.AllGram) > t || len(m.Fail) > n {
		return fmt.Errorf("model sums of the wrong size for %d features", n)
	}
	m.OKGram = slices.Grow(m.OKGram, t-len(m.OKGram))[:t]
	m.AllGram = slices.Grow(m.AllGram, t-len(m.AllGram))[:t]
	m.Fail = slices.Grow(m.Fail, n-len(m.Fail))[:n]
	return nil
}

// counts are non-negative integers, most of them 0 (feature pairs that
// never occur together). In JSON they are a base64 string of unsigned
// varints, each nonzero count preceded by the number of zeros before it;
// zeros after the last nonzero count are left out, and modelStats.check
// restores the full length. A model's sums then take a few kilobytes of
// the state, not one number per feature pair.
type counts []int

// maxCounts bounds the length a decoded counts may claim, so that a
// damaged state cannot ask for a huge allocation; maxCount bounds a count,
// well above what the ordinal interactions' squared position products sum
// to (a run of a million results over knobs of 64 values stays under 2⁴⁴)
// and exact as a float64.
const (
	maxCounts = 1 << 24
	maxCount  = 1 << 50
)

func (c counts) MarshalJSON() ([]byte, error) {
	var buf []byte
	zeros := 0
	for _, v := range c {
		if v == 0 {
			zeros++
			continue
		}
		buf = binary.AppendUvarint(buf, uint64(zeros))
		buf = binary.AppendUvarint(buf, uint64(v))
		zeros = 0
	}
	return json.Marshal(buf)
}

func (c *counts) UnmarshalJSON(data []byte) error {
	var buf []byte
	if err := json.Unmarshal(data, &buf); err != nil {
		return err
	}
	var out counts
	for len(buf) > 0 {
		zeros, n := binary.Uvarint(buf)
		if n <= 0 {
			return errors.New("model counts: bad varint")
		}
		buf = buf[n:]
		v, n := binary.Uvarint(buf)
		if n <= 0 {
			return errors.New("model counts: bad varint")
		}
		buf = buf[n:]
		if zeros >= maxCounts-uint64(len(out)) || v > maxCount {
			return errors.New("model counts: out of range")
		}
		out = append(out, make(counts, zeros)...)
		out = append(out, int(v))
	}
	*c = out
	return nil
}

// triIndex is the position of (i, j), i ≤ j, in a packed upper triangle of
// order n.
func triIndex(n, i, j int) int { return i*n - i*(i-1)/2 + (j - i) }

// add absorbs one result whose active features are x and whose ordinal
// interaction features (from off on) have the raw values xb.
func (m *modelStats) add(x []int, off int, xb []int, r space.Result) {
	n := m.Features
	grams := [][]int{m.AllGram}
	if r.OK() {
		grams = append(grams, m.OKGram)
	}
	for _, g := range grams {
		for a, i := range x {
			for _, j := range x[a:] {
				g[triIndex(n, i, j)]++
			}
			for k, v := range xb {
				if v != 0 {
					g[triIndex(n, i, off+k)] += v
				}
			}
		}
		for k, v := range xb {
			if v == 0 {
				continue
			}
			for l := k; l < len(xb); l++ {
				g[triIndex(n, off+k, off+l)] += v * xb[l]
			}
		}
	}
	if !r.OK() {
		for _, i := range x {
			m.Fail[i]++
		}
		for k, v := range xb {
			m.Fail[off+k] += v
		}
		return
	}
	y := math.Log(r.Objective)
	for _, i := range x {
		m.OKSum[i] += y
	}
	for k, v := range xb {
		m.OKSum[off+k] += float64(float64(v) * y)
	}
	m.OKSumSq += float64(y * y)
}

// A surrogate is the model fitted to a search's stats at one moment.
type surrogate struct {
	f      *features
	n      int
	okL    []float64 // Cholesky factor of the OK regression's matrix, row-major n×n
	w      []float64 // regression weights
	sigma2 float64   // residual variance of log(objective)
	wf     []float64 // failure weights; nil when nothing failed
	best   float64   // log of the best objective so far
	x      []int     // scratch: active features
	z      []float64 // scratch: ordinal interaction values
	v      []float64 // scratch: a dense feature vector
}

// fitSurrogate fits the model to the stats; best is the best objective
// so far. It returns nil when there is too little to fit (fewer than
// surrogateMinOK OK results) or the sums are not a valid fit (a hand-edited
// state): the search then proposes unscreened children.
func fitSurrogate(f *features, m *modelStats, best float64) *surrogate {
	n := f.n
	nOK := m.OKGram[0]
	if nOK < surrogateMinOK || !(best > 0) {
		return nil
	}
	s := &surrogate{f: f, n: n, best: math.Log(best), v: make([]float64, n)}
	var ok bool
	s.okL, ok = cholesky(n, f.dense(m.OKGram))
	if !ok {
		return nil
	}
	okSum := f.transform(m.OKSum)
	s.w = cholSolve(n, s.okL, okSum)
	// Residual sum of squares of the ridge fit: y'y − w'b − λ·|w₁..|², and
	// the effective degrees of freedom tr(G·A⁻¹) = n − λ·Σᵢ₌₁ (A⁻¹)ᵢᵢ.
	rss := m.OKSumSq
	for i, wi := range s.w {
		rss -= float64(wi * okSum[i])
		if i > 0 {
			rss -= float64(surrogateRidge * wi * wi)
		}
	}
	dof := float64(n) - surrogateRidge*traceInverse(n, s.okL, 1)
	s.sigma2 = max(rss/max(float64(nOK)-dof, 1), surrogateMinVar)
	if nOK < m.AllGram[0] {
		allL, ok := cholesky(n, f.dense(m.AllGram))
		if !ok {
			return nil
		}
		b := make([]float64, f.n)
		for i, v := range m.Fail {
			b[i] = float64(v)
		}
		s.wf = cholSolve(n, allL, f.transform(b))
	}
	if slices.ContainsFunc(s.w, notFinite) || slices.ContainsFunc(s.wf, notFinite) || notFinite(s.sigma2) {
		return nil
	}
	return s
}

func notFinite(v float64) bool { return math.IsNaN(v) || math.IsInf(v, 0) }

// predict returns the predicted log objective of c, its predictive
// standard deviation and its predicted chance of failing.
func (s *surrogate) predict(c space.Config) (mean, sd, fail float64) {
	s.x = s.f.active(c, s.x)
	s.z = s.f.interact(c, s.z)
	for _, i := range s.x {
		mean += s.w[i]
		if s.wf != nil {
			fail += s.wf[i]
		}
	}
	off := s.f.bilinOff
	for k, z := range s.z {
		mean += float64(s.w[off+k] * z)
		if s.wf != nil {
			fail += float64(s.wf[off+k] * z)
		}
	}
	// x'A⁻¹x = |L⁻¹x|² by forward substitution.
	clear(s.v)
	for _, i := range s.x {
		s.v[i] = 1
	}
	if len(s.z) > 0 {
		copy(s.v[off:], s.z)
	}
	q := 0.0
	for i := range s.n {
		sum := s.v[i]
		row := s.okL[i*s.n : i*s.n+i]
		for k, l := range row {
			sum -= float64(l * s.v[k])
		}
		s.v[i] = sum / s.okL[i*s.n+i]
		q += float64(s.v[i] * s.v[i])
	}
	return mean, math.Sqrt(s.sigma2 * (1 + q)), min(max(fail, 0), 1)
}

// rate is the candidate's expected improvement of log objective over the
// best so far, times its predicted chance of passing every gate.
func (s *surrogate) rate(c space.Config) float64 {
	mean, sd, fail := s.predict(c)
	z := (s.best - mean) / sd
	// Each product rounded on its own (float64 stops fused multiply-adds),
	// so the rating does not depend on the compiler's choice.
	gain := float64((s.best - mean) * 0.5 * math.Erfc(-z/math.Sqrt2))
	spread := float64(sd * math.Exp(-0.5*z*z) / math.Sqrt(2*math.Pi))
	return float64((1 - fail) * max(gain+spread, 0))
}

// cholesky factors the ridge matrix of a Gram of order n (full,
// row-major), G + λ·D (D: the identity without the intercept), as L·L' and
// returns L, row-major n×n. It reports false when the matrix is not
// positive definite, which a Gram with at least one result never is.
//
// Each entry is the sum of its terms in ascending order, as the textbook
// loop (choleskyRef in the tests) adds them, so the factor is the same to
// the last bit. The loop is bound by the latency of that chain of
// additions, not by arithmetic, so four entries of a row are summed side
// by side: their chains are independent up to the terms that need the
// entries before them, which are then added in order.
func cholesky(n int, gram []float64) ([]float64, bool) {
	l := make([]float64, n*n)
	ridge := func(i, j int) float64 {
		a := gram[j*n+i]
		if i == j && i > 0 {
			a += surrogateRidge
		}
		return a
	}
	for i := range n {
		ri := l[i*n : i*n+i+1]
		j := 0
		// Four entries j..j+3 of row i, all left of the diagonal.
		for ; j+3 < i; j += 4 {
			r0, r1, r2, r3 := l[j*n:j*n+j+3], l[(j+1)*n:(j+1)*n+j+3], l[(j+2)*n:(j+2)*n+j+3], l[(j+3)*n:(j+3)*n+j+3]
			s0, s1, s2, s3 := ridge(i, j), ridge(i, j+1), ridge(i, j+2), ridge(i, j+3)
			for k, v := range ri[:j] {
				s0 -= float64(v * r0[k])
				s1 -= float64(v * r1[k])
				s2 -= float64(v * r2[k])
				s3 -= float64(v * r3[k])
			}
			ri[j] = s0 / r0[j]
			s1 -= float64(ri[j] * r1[j])
			ri[j+1] = s1 / l[(j+1)*n+j+1]
			s2 -= float64(ri[j] * r2[j])
			s2 -= float64(ri[j+1] * r2[j+1])
			ri[j+2] = s2 / l[(j+2)*n+j+2]
			s3 -= float64(ri[j] * r3[j])
			s3 -= float64(ri[j+1] * r3[j+1])
			s3 -= float64(ri[j+2] * r3[j+2])
			ri[j+3] = s3 / l[(j+3)*n+j+3]
		}
		for ; j <= i; j++ {
			sum := ridge(i, j)
			rj := l[j*n : j*n+j]
			for k, v := range ri[:j] {
				sum -= float64(v * rj[k])
			}
			if i == j {
				if !(sum > 0) {
					return nil, false
				}
				ri[i] = math.Sqrt(sum)
			} else {
				ri[j] = sum / l[j*n+j]
			}
		}
	}
	return l, true
}

// cholSolve solves L·L'·x = b.
func cholSolve(n int, l, b []float64) []float64 {
	x := slices.Clone(b)
	for i := range n {
		sum := x[i]
		for k := range i {
			sum -= float64(l[i*n+k] * x[k])
		}
		x[i] = sum / l[i*n+i]
	}
	for i := n - 1; i >= 0; i-- {
		sum := x[i]
		for k := i + 1; k < n; k++ {
			sum -= float64(l[k*n+i] * x[k])
		}
		x[i] = sum / l[i*n+i]
	}
	return x
}

// traceInverse returns Σᵢ (A⁻¹)ᵢᵢ over i ≥ from, A = L·L'. (A⁻¹)ᵢᵢ is the
// squared norm of column i of L⁻¹, which solving L·z = eᵢ gives.
//
// As in cholesky, every sum adds its terms in the textbook order
// (traceInverseRef in the tests), to the last bit, and four columns are
// solved side by side so that their independent chains of additions
// overlap.
func traceInverse(n int, l []float64, from int) float64 {
	var z [4][]float64
	for c := range z {
		z[c] = make([]float64, n)
	}
	var norm [4]float64
	tr := 0.0
	j := from
	for ; j+3 < n; j += 4 {
		// Rows j..j+3: the columns that have started, one at a time.
		startColumns(n, l, &z, &norm, j, 4, j+4)
		// Rows below: every column's head terms, then the shared range.
		z0, z1, z2, z3 := z[0], z[1], z[2], z[3]
		for i := j + 4; i < n; i++ {
			row := l[i*n : i*n+i]
			s0 := 0.0
			s0 -= float64(row[j] * z0[j])
			s0 -= float64(row[j+1] * z0[j+1])
			s0 -= float64(row[j+2] * z0[j+2])
			s1 := 0.0
			s1 -= float64(row[j+1] * z1[j+1])
			s1 -= float64(row[j+2] * z1[j+2])
			s2 := 0.0
			s2 -= float64(row[j+2] * z2[j+2])
			s3 := 0.0
			for k := j + 3; k < i; k++ {
				v := row[k]
				s0 -= float64(v * z0[k])
				s1 -= float64(v * z1[k])
				s2 -= float64(v * z2[k])
				s3 -= float64(v * z3[k])
			}
			d := l[i*n+i]
			z0[i], z1[i], z2[i], z3[i] = s0/d, s1/d, s2/d, s3/d
			norm[0] += float64(z0[i] * z0[i])
			norm[1] += float64(z1[i] * z1[i])
			norm[2] += float64(z2[i] * z2[i])
			norm[3] += float64(z3[i] * z3[i])
		}
		for c := range 4 {
			tr += norm[c]
		}
	}
	// The last columns, fewer than four, to the bottom row.
	startColumns(n, l, &z, &norm, j, n-j, n)
	for c := range n - j {
		tr += norm[c]
	}
	return tr
}

// startColumns starts the w columns j..j+w−1 of L⁻¹ (w ≤ 4) in z, their
// squared norms in norm, and solves rows j+1..end−1 of the columns that
// have started by then, each sum in the textbook order.
func startColumns(n int, l []float64, z *[4][]float64, norm *[4]float64, j, w, end int) {
	for c := range w {
		z[c][j+c] = 1 / l[(j+c)*n+j+c]
		norm[c] = float64(z[c][j+c] * z[c][j+c])
	}
	for i := j + 1; i < end; i++ {
		for c := range min(i-j, w) {
			sum := 0.0
			for k := j + c; k < i; k++ {
				sum -= float64(l[i*n+k] * z[c][k])
			}
			z[c][i] = sum / l[i*n+i]
			norm[c] += float64(z[c][i] * z[c][i])
		}
	}
}
