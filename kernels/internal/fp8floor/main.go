// Command fp8floor measures, on the CPU, how close attention on quantised
// inputs can come to attention on the raw inputs: the floor under any
// kernel fed those inputs (kernels/NOTES.md, "What would lower the floor").
// For each input scheme it quantises Q, K and V the scheme's way
// (kernels/internal/fp8model), computes exact attention in float64 with P in
// the scheme's format, and compares with float64 attention on the raw
// inputs: cosine similarity, relative L1 and max abs error, as the worker
// reports them end to end.
//
//	go run ./kernels/internal/fp8floor > floor.md
//
// Inputs are N(0,1), or the stress cases' variants of it (inputCase),
// drawn per tensor and head from --seed, so the table depends only on the
// flags. Per-tensor scales take the amax of the whole B x H tensor, as the
// worker's quantiser does; the attention itself runs on --heads heads of
// each shape and --rows query rows of each (evenly spaced, so causal rows of
// every length), with all their keys.
package main

import (
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"evotune/kernels/internal/fp8model"
	"evotune/space"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "fp8floor:", err)
		os.Exit(1)
	}
}

// options are the command's flags.
type options struct {
	shapes      []string
	stressShape string
	heads, rows int
	seed        uint64
}

// benchShapes are the fp8 issue's bench shapes (#13).
var benchShapes = []string{"1x8x512x64", "4x16x2048x64", "4x16x2048x128", "8x16x4096x64:causal"}

func run(args []string, stdout, stderr io.Writer) error {
	opt := options{}
	flags := pflag.NewFlagSet("fp8floor", pflag.ContinueOnError)
	flags.SetOutput(stderr)
	flags.StringSliceVar(&opt.shapes, "shapes", benchShapes, "N(0,1) shapes, BxHxSxD[:causal]")
	flags.StringVar(&opt.stressShape, "stress-shape", "1x8x512x64", "shape of the stress cases (input scale 16, an outlier row, K channel offsets, a loud head)")
	flags.IntVar(&opt.heads, "heads", 8, "heads per shape the attention runs on, evenly spaced over B x H from the first")
	flags.IntVar(&opt.rows, "rows", 256, "query rows per head, evenly spaced from row 0 (all rows when S is smaller)")
	flags.Uint64Var(&opt.seed, "seed", 1, "seed of the inputs")
	if err := flags.Parse(args); err != nil {
		return err
	}
	if opt.heads < 1 || opt.rows < 1 {
		return fmt.Errorf("--heads %d and --rows %d must be at least 1", opt.heads, opt.rows)
	}
	var normal []inputCase
	for _, item := range opt.shapes {
		shape, causal, err := parseShape(item)
		if err != nil {
			return fmt.Errorf("--shapes: %w", err)
		}
		normal = append(normal, inputCase{title: item, shape: shape, causal: causal, sigma: 1})
	}
	stress, _, err := parseShape(opt.stressShape)
	if err != nil {
		return fmt.Errorf("--stress-shape: %w", err)
	}
	stressCases := []inputCase{
		{title: "N(0,16²)", shape: stress, sigma: 16},
		{title: "outlier row", shape: stress, sigma: 1, outlier: true},
		{title: "K channel offsets", shape: stress, sigma: 1, kOffsets: true},
		{title: "another head ×10³", shape: stress, sigma: 1, loudHead: 1e3},
		{title: "another head ×10⁵", shape: stress, sigma: 1, loudHead: 1e5},
	}

	start := time.Now()
	fmt.Fprintf(stdout, "%s: end to end against float64 attention on the raw inputs, cos / rel L1 / max abs; up to %d heads x %d rows per shape, seed %d\n\n",
		strings.Join(append([]string{"go run ./kernels/internal/fp8floor"}, args...), " "), opt.heads, opt.rows, opt.seed)
	fmt.Fprintln(stdout, "N(0,1) inputs:")
	fmt.Fprintln(stdout)
	if err := writeTable(stdout, normal, opt); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "\nStress cases at %s (%s):\n\n", opt.stressShape, stressNote(stress, opt.seed))
	if err := writeTable(stdout, stressCases, opt); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "fp8floor: %.1f s\n", time.Since(start).Seconds())
	return nil
}

// parseShape reads BxHxSxD[:causal], the syntax of evotune torch's --shapes.
func parseShape(text string) (space.Shape, bool, error) {
	shapeText, mask, causal := strings.Cut(strings.TrimSpace(text), ":")
	if causal && mask != "causal" {
		return space.Shape{}, false, fmt.Errorf("%q: the only suffix is :causal", text)
	}
	s, err := space.ParseShape(shapeText)
	return s, causal, err
}

// A scheme is one way of feeding the kernel: a quantiser per operand and
// P's format in P V.
type scheme struct {
	name    string
	q, k, v fp8model.Quantizer
	p       fp8model.Format
}

var (
	exact      = fp8model.Quantizer{Format: fp8model.Exact}
	fp16       = fp8model.Quantizer{Format: fp8model.FP16}
	e4m3Tensor = fp8model.Quantizer{Format: fp8model.FP8, Scale: fp8model.PerTensor}
	e4m3Chan   = fp8model.Quantizer{Format: fp8model.FP8, Scale: fp8model.PerChannel}
	int8Chan   = fp8model.Quantizer{Format: fp8model.Int8, Scale: fp8model.PerChannel}
)

func block(f fp8model.Format, rows int, smooth bool) fp8model.Quantizer {
	return fp8model.Quantizer{Format: f, Scale: fp8model.PerBlock, Block: rows, Smooth: smooth}
}

func smoothed(q fp8model.Quantizer) fp8model.Quantizer { q.Smooth = true; return q }

// schemes lists the rows of the table, grouped as kernels/NOTES.md
// discusses them: each operand alone, what the kernel does, per-block E4M3
// scales, K smoothing, INT8 Q and K.
func schemes() []scheme {
	var s []scheme
	add := func(name string, q, k, v fp8model.Quantizer, p fp8model.Format) {
		s = append(s, scheme{name: name, q: q, k: k, v: v, p: p})
	}
	add("fp16 Q, K, V; P fp16 (the fp16 kernel)", fp16, fp16, fp16, fp8model.FP16)
	add("Q alone E4M3 tensor", e4m3Tensor, exact, exact, fp8model.Exact)
	add("K alone E4M3 tensor", exact, e4m3Tensor, exact, fp8model.Exact)
	add("V alone E4M3 tensor", exact, exact, e4m3Tensor, fp8model.Exact)
	add("P alone E4M3 (2^8 bias)", exact, exact, exact, fp8model.FP8)
	add("Q, K E4M3 tensor", e4m3Tensor, e4m3Tensor, exact, fp8model.Exact)
	add("kernel: Q, K, V E4M3 tensor; P fp16 (pv_fp8=0)", e4m3Tensor, e4m3Tensor, e4m3Tensor, fp8model.FP16)
	add("kernel: Q, K, V E4M3 tensor; P E4M3 (pv_fp8=1)", e4m3Tensor, e4m3Tensor, e4m3Tensor, fp8model.FP8)
	for _, b := range []int{64, 128} {
		qk := block(fp8model.FP8, b, false)
		add(fmt.Sprintf("E4M3 Q, K b%d; V tensor", b), qk, qk, e4m3Tensor, fp8model.FP16)
		add(fmt.Sprintf("E4M3 Q, K b%d; V b%d keys", b, b), qk, qk, qk, fp8model.FP16)
	}
	add("E4M3 Q, K b64; V channel", block(fp8model.FP8, 64, false), block(fp8model.FP8, 64, false), e4m3Chan, fp8model.FP16)
	add("E4M3 tensor, K smoothed", e4m3Tensor, smoothed(e4m3Tensor), e4m3Tensor, fp8model.FP16)
	add("E4M3 Q, K b64, K smoothed; V channel", block(fp8model.FP8, 64, false), block(fp8model.FP8, 64, true), e4m3Chan, fp8model.FP16)
	for _, v := range []struct {
		name string
		q    fp8model.Quantizer
	}{{"V E4M3 tensor", e4m3Tensor}, {"V E4M3 channel", e4m3Chan}, {"V fp16", fp16}} {
		for _, b := range []int{64, 128} {
			for _, smooth := range []bool{false, true} {
				name := fmt.Sprintf("INT8 Q, K b%d", b)
				if smooth {
					name += ", K smoothed"
				}
				add(name+"; "+v.name, block(fp8model.Int8, b, false), block(fp8model.Int8, b, smooth), v.q, fp8model.FP16)
			}
		}
	}
	add("INT8 Q, K b64, K smoothed; V INT8 channel", block(fp8model.Int8, 64, false), block(fp8model.Int8, 64, true), int8Chan, fp8model.FP16)
	int8Tensor := fp8model.Quantizer{Format: fp8model.Int8, Scale: fp8model.PerTensor}
	int8Row := block(fp8model.Int8, 1, false)
	add("INT8 Q, K, V tensor; P fp16", int8Tensor, int8Tensor, int8Tensor, fp8model.FP16)
	add("INT8 Q, K tensor; V INT8 channel", int8Tensor, int8Tensor, int8Chan, fp8model.FP16)
	add("INT8 Q, K row; V INT8 tensor", int8Row, int8Row, int8Tensor, fp8model.FP16)
	add("INT8 Q, K row; V INT8 row", int8Row, int8Row, int8Row, fp8model.FP16)
	add("int8 kernel: Q, K row; V INT8 channel; P fp16", int8Row, int8Row, int8Chan, fp8model.FP16)
	add("INT8 Q, K b64, K smoothed; V fp16; P E4M3", block(fp8model.Int8, 64, false), block(fp8model.Int8, 64, true), fp16, fp8model.FP8)
	return s
}

// An inputCase is one column of a table: a shape and how its inputs are
// drawn.
type inputCase struct {
	title  string
	shape  space.Shape
	causal bool
	sigma  float64 // inputs are N(0, sigma²)
	// outlier sets query row 0 of head 0 to 12 sign(k_5): its score with key 5
	// before the softmax scale is 12 sum |k_5| (about 600, over 448) and Q's
	// amax rises from about 5 to 12.
	outlier bool
	// kOffsets adds to each channel of K an offset drawn from N(0, 3²) per
	// head, as model activations have: smoothing removes it.
	kOffsets bool
	// loudHead multiplies Q, K and V of the last head, which is left out of
	// the heads measured, so that the per-tensor amax is that many times
	// theirs (heads of a layer differ in range; one scale covers them all).
	loudHead float64
}

// Tensor tags of the input streams.
const (
	tagQ = iota + 1
	tagK
	tagV
	tagKOffset
)

const outlierQ, outlierKey = 12.0, 5

// head draws head bh's Q, K and V for c.
func (c inputCase) head(seed uint64, bh int) (q, k, v fp8model.Matrix) {
	draw := func(tag int) fp8model.Matrix {
		rng := rand.New(rand.NewPCG(seed, uint64(tag)<<32|uint64(bh)))
		m := fp8model.NewMatrix(c.shape.S, c.shape.D)
		for i := range m.Data {
			m.Data[i] = c.sigma * rng.NormFloat64()
		}
		return m
	}
	q, k, v = draw(tagQ), draw(tagK), draw(tagV)
	if c.loudHead != 0 && bh == c.shape.B*c.shape.H-1 {
		for _, m := range []fp8model.Matrix{q, k, v} {
			for i := range m.Data {
				m.Data[i] *= c.loudHead
			}
		}
	}
	if c.kOffsets {
		rng := rand.New(rand.NewPCG(seed, uint64(tagKOffset)<<32|uint64(bh)))
		for ch := 0; ch < k.Cols; ch++ {
			off := 3 * rng.NormFloat64()
			for r := 0; r < k.Rows; r++ {
				k.Data[r*k.Cols+ch] += off
			}
		}
	}
	if c.outlier && bh == 0 {
		for ch, x := range k.Row(outlierKey) {
			q.Data[ch] = math.Copysign(outlierQ, x)
		}
	}
	return q, k, v
}

// stressNote says what the stress cases are, with the outlier row's raw
// score.
func stressNote(shape space.Shape, seed uint64) string {
	c := inputCase{shape: shape, sigma: 1, outlier: true}
	q, k, _ := c.head(seed, 0)
	dot := 0.0
	for ch, x := range k.Row(outlierKey) {
		dot += q.Data[ch] * x
	}
	return fmt.Sprintf("inputs N(0,16²); N(0,1) with query row 0 of head 0 set to %g sign(k_%d), raw score %.0f before the 1/sqrt(D) scale; N(0,1) with K channel offsets from N(0,3²); N(0,1) with Q, K and V of the last head, not measured, 10³ and 10⁵ times larger",
		outlierQ, outlierKey, dot)
}

// amaxes are the per-tensor amaxes of one input case, over every head.
type amaxes struct{ q, k, kSmooth, v float64 }

func tensorAmaxes(c inputCase, seed uint64) amaxes {
	var a amaxes
	for bh := 0; bh < c.shape.B*c.shape.H; bh++ {
		q, k, v := c.head(seed, bh)
		a.q = math.Max(a.q, fp8model.Amax(q.Data))
		a.k = math.Max(a.k, fp8model.Amax(k.Data))
		a.kSmooth = math.Max(a.kSmooth, fp8model.Amax(fp8model.Smooth(k).Data))
		a.v = math.Max(a.v, fp8model.Amax(v.Data))
	}
	return a
}

// measure returns each scheme's errors on input case c.
func measure(c inputCase, all []scheme, opt options) []fp8model.Errors {
	amax := tensorAmaxes(c, opt.seed)
	var rows []int
	for i := 0; i < min(opt.rows, c.shape.S); i++ {
		rows = append(rows, i*c.shape.S/min(opt.rows, c.shape.S))
	}
	errs := make([]fp8model.Errors, len(all))
	heads := c.shape.B * c.shape.H
	if c.loudHead != 0 && heads > 1 {
		heads-- // the loud head sets the amax; the others are measured
	}
	n := min(opt.heads, heads)
	for i := 0; i < n; i++ {
		q, k, v := c.head(opt.seed, i*heads/n)
		ref := fp8model.Attention(q, k, v, rows, c.causal, fp8model.Exact)
		for n, s := range all {
			kAmax := amax.k
			if s.k.Smooth {
				kAmax = amax.kSmooth
			}
			out := fp8model.Attention(s.q.Apply(q, amax.q), s.k.Apply(k, kAmax), s.v.Apply(v, amax.v), rows, c.causal, s.p)
			errs[n].Add(out.Data, ref.Data)
		}
	}
	return errs
}

// writeTable writes one markdown table: a row per scheme, a column per
// input case.
func writeTable(w io.Writer, cases []inputCase, opt options) error {
	all := schemes()
	cells := make([][]fp8model.Errors, len(cases))
	for i, c := range cases {
		cells[i] = measure(c, all, opt)
	}
	header := "| scheme |"
	rule := "|---|"
	for _, c := range cases {
		header += " " + c.title + " |"
		rule += "---|"
	}
	var b strings.Builder
	fmt.Fprintln(&b, header)
	fmt.Fprintln(&b, rule)
	for n, s := range all {
		fmt.Fprintf(&b, "| %s |", s.name)
		for i := range cases {
			e := cells[i][n]
			fmt.Fprintf(&b, " %.5f / %.4f / %.3f", e.Cos(), e.RelL1(), e.MaxAbs())
			if e.NonFinite > 0 {
				fmt.Fprintf(&b, " (%d non-finite)", e.NonFinite)
			}
			fmt.Fprint(&b, " |")
		}
		fmt.Fprintln(&b)
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("writing the table: %w", err)
	}
	return nil
}
