package runner

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/aclements/go-moremath/stats"

	"evotune/kernels"
	"evotune/space"
)

// A Measurement is one timing request's answer: per-call samples of one
// config on one shape.
type Measurement struct {
	Shape             space.Shape
	SamplesUS         []float64
	LaunchesPerSample int
}

// compiled is a config ready for the GPU: its cubin and its launch plans.
type compiled struct {
	key   string
	cubin *Cubin
	plans map[space.Shape]kernels.Plan
}

// compileFor renders c's flags, compiles it (a cache hit for a config the
// pipeline evaluated) and plans its launches on shapes.
func (p *Pipeline) compileFor(ctx context.Context, c space.Config, shapes []space.Shape) (*compiled, error) {
	key := c.Key()
	flags, err := p.o.Space.Flags(c)
	if err != nil {
		return nil, fmt.Errorf("%s: rendering flags: %w", key, err)
	}
	plans := map[space.Shape]kernels.Plan{}
	for _, s := range shapes {
		pl, err := p.o.Family.Plan(c, s, p.o.Target)
		if err != nil {
			return nil, fmt.Errorf("%s: launch plan for %s: %w", key, s, err)
		}
		plans[s] = pl
	}
	cub, err := p.o.Compiler.Compile(ctx, flags)
	if err != nil {
		return nil, fmt.Errorf("%s: compiling: %w", key, err)
	}
	return &compiled{key: key, cubin: cub, plans: plans}, nil
}

// takeGPU waits for a free GPU and returns its index; give it back with
// releaseGPU. While it is held no evaluation uses that GPU.
func (p *Pipeline) takeGPU(ctx context.Context) (int, error) {
	select {
	case gi := <-p.free:
		return gi, nil
	case <-ctx.Done():
		return 0, fmt.Errorf("waiting for a GPU: %w", ctx.Err())
	}
}

func (p *Pipeline) releaseGPU(gi int) { p.free <- gi }

// timeOn sends one timing request for cc on shape s to GPU gi.
func (p *Pipeline) timeOn(ctx context.Context, gi int, cc *compiled, s space.Shape, samples int, eager bool) (Measurement, error) {
	req := p.timeRequest(cc.cubin.Path, cc.plans[s], s, samples, eager)
	resp, err := p.o.GPUs[gi].Device.Do(ctx, req, p.o.TimeTimeout)
	if err != nil {
		return Measurement{}, fmt.Errorf("timing %s at %s: %w", cc.key, s, err)
	}
	if resp.Error != "" {
		return Measurement{}, fmt.Errorf("timing %s at %s: %s", cc.key, s, resp.Error)
	}
	if len(resp.SamplesUS) == 0 {
		return Measurement{}, fmt.Errorf("timing %s at %s: the worker returned no samples", cc.key, s)
	}
	return Measurement{Shape: s, SamplesUS: resp.SamplesUS, LaunchesPerSample: resp.LaunchesPerSample}, nil
}

// Measure times c on shape s of the pipeline's problem on the next free
// GPU, with the pipeline's timing options: graph replay, or plain launches
// when eager is set (the cost of launching from the host included). It
// runs no gate: c must be a config that the pipeline evaluated OK (it is
// then a compile cache hit).
func (p *Pipeline) Measure(ctx context.Context, c space.Config, s space.Shape, eager bool) (space.Timing, error) {
	cc, err := p.compileFor(ctx, c, []space.Shape{s})
	if err != nil {
		return space.Timing{}, err
	}
	defer cc.cubin.Release()
	gi, err := p.takeGPU(ctx)
	if err != nil {
		return space.Timing{}, err
	}
	defer p.releaseGPU(gi)
	m, err := p.timeOn(ctx, gi, cc, s, p.o.Timing.Samples, eager)
	if err != nil {
		return space.Timing{}, err
	}
	t := TimingOf(s, m.SamplesUS)
	t.LaunchesPerSample = m.LaunchesPerSample
	return t, nil
}

// ConfirmOptions say how a Confirmer re-measures and what difference
// counts.
type ConfirmOptions struct {
	// Rounds is the number of interleaved rounds; each round times both
	// configs on every shape, the order alternating between rounds so that
	// a drift of the GPU's clocks or temperature hits both alike.
	Rounds int
	// Samples is the number of samples of each timing request (the worker
	// takes at least 30).
	Samples int
	// Alpha is the significance level of the one-sided Mann-Whitney U test.
	Alpha float64
	// MinRelDiff is the smallest relative difference of the medians that
	// counts, however significant: below it a swap buys nothing.
	MinRelDiff float64
}

// DefaultConfirmOptions returns 4 rounds of 30 samples, alpha 0.01 and a
// 0.5% threshold: 120 samples of each config, about half a second of GPU
// time for a 10 µs kernel.
func DefaultConfirmOptions() ConfirmOptions {
	return ConfirmOptions{Rounds: 4, Samples: 30, Alpha: 0.01, MinRelDiff: 0.005}
}

// A Confirmation is the outcome of re-measuring a challenger beside an
// incumbent.
type Confirmation struct {
	// Faster says the challenger is faster beyond the noise; ties and
	// doubt favour the incumbent.
	Faster bool
	// ChallengerUS and IncumbentUS are the medians of the re-measured
	// per-call objective (the weighted sum over the problem's shapes).
	ChallengerUS, IncumbentUS float64
	// PValue is the one-sided Mann-Whitney U test's p-value for "the
	// challenger's calls are shorter".
	PValue float64
	// Samples is the number of samples of each side.
	Samples int
	// Reason says why, for people.
	Reason string
}

// A Confirmer re-measures a challenger and an incumbent on one GPU of a
// pipeline, interleaved, and says whether the challenger is faster beyond
// the noise. It is safe for concurrent use (each call holds one GPU).
type Confirmer struct {
	p *Pipeline
	o ConfirmOptions
}

// NewConfirmer returns a confirmer on p's GPUs; zero fields of o take
// their defaults.
func NewConfirmer(p *Pipeline, o ConfirmOptions) (*Confirmer, error) {
	if p == nil {
		return nil, errors.New("confirmer: no pipeline")
	}
	d := DefaultConfirmOptions()
	if o.Rounds <= 0 {
		o.Rounds = d.Rounds
	}
	if o.Samples <= 0 {
		o.Samples = d.Samples
	}
	if o.Alpha == 0 {
		o.Alpha = d.Alpha
	}
	if o.MinRelDiff == 0 {
		o.MinRelDiff = d.MinRelDiff
	}
	if !(o.Alpha > 0 && o.Alpha < 1) || !(o.MinRelDiff >= 0 && o.MinRelDiff < 1) {
		return nil, fmt.Errorf("confirmer: alpha %v must be in (0, 1) and the relative threshold %v in [0, 1)", o.Alpha, o.MinRelDiff)
	}
	return &Confirmer{p: p, o: o}, nil
}

// Confirm re-measures challenger and incumbent (OK results of the
// pipeline's problem) on one GPU held for the whole comparison, and
// compares them.
func (c *Confirmer) Confirm(ctx context.Context, challenger, incumbent space.Result) (Confirmation, error) {
	shapes := c.p.o.Problem.Shapes
	a, err := c.p.compileFor(ctx, challenger.Config, shapes)
	if err != nil {
		return Confirmation{}, fmt.Errorf("confirming the challenger: %w", err)
	}
	defer a.cubin.Release()
	b, err := c.p.compileFor(ctx, incumbent.Config, shapes)
	if err != nil {
		return Confirmation{}, fmt.Errorf("confirming the incumbent: %w", err)
	}
	defer b.cubin.Release()
	gi, err := c.p.takeGPU(ctx)
	if err != nil {
		return Confirmation{}, fmt.Errorf("confirming %s against %s: %w", a.key, b.key, err)
	}
	defer c.p.releaseGPU(gi)

	// samples[side][shape] accumulates per-call samples over the rounds.
	samples := [2][][]float64{make([][]float64, len(shapes)), make([][]float64, len(shapes))}
	sides := [2]*compiled{a, b}
	for round := range c.o.Rounds {
		order := [2]int{0, 1}
		if round%2 == 1 {
			order = [2]int{1, 0}
		}
		for si, s := range shapes {
			for _, side := range order {
				m, err := c.p.timeOn(ctx, gi, sides[side], s, c.o.Samples, false)
				if err != nil {
					return Confirmation{}, fmt.Errorf("confirming %s against %s: %w", a.key, b.key, err)
				}
				samples[side][si] = append(samples[side][si], m.SamplesUS...)
			}
		}
	}
	weights := make([]float64, len(shapes))
	for i := range shapes {
		weights[i] = c.p.o.Problem.Weight(i)
	}
	return UTest(objectiveSamples(samples[0], weights), objectiveSamples(samples[1], weights), c.o), nil
}

// objectiveSamples turns per-shape per-call samples into per-call samples
// of the weighted objective: the i-th sample of each shape are summed, each
// with its weight. Samples of different shapes are independent draws, so a
// sum of one of each is a draw of the objective; extra samples of a shape
// with more than the fewest are dropped.
func objectiveSamples(perShape [][]float64, weights []float64) []float64 {
	if len(perShape) == 0 {
		return nil
	}
	n := len(perShape[0])
	for _, s := range perShape[1:] {
		n = min(n, len(s))
	}
	out := make([]float64, n)
	for si, s := range perShape {
		for i := range n {
			out[i] += weights[si] * s[i]
		}
	}
	return out
}

// UTest decides whether challenger samples are shorter than incumbent
// samples beyond the noise: either the one-sided Mann-Whitney U test
// rejects "not shorter" at o.Alpha and the challenger's median is more than
// o.MinRelDiff below the incumbent's, or the 95% confidence intervals of
// the two medians do not overlap (challenger's entirely below).
func UTest(challenger, incumbent []float64, o ConfirmOptions) Confirmation {
	ca, ib := slices.Clone(challenger), slices.Clone(incumbent)
	slices.Sort(ca)
	slices.Sort(ib)
	cmpn := Confirmation{
		ChallengerUS: quantile(ca, 0.5), IncumbentUS: quantile(ib, 0.5),
		Samples: min(len(ca), len(ib)), PValue: 1,
	}
	if len(ca) == 0 || len(ib) == 0 {
		cmpn.Reason = "no samples to compare: the incumbent stays"
		return cmpn
	}
	if res, err := stats.MannWhitneyUTest(ca, ib, stats.LocationLess); err == nil {
		cmpn.PValue = res.P
	}
	rel := 1 - cmpn.ChallengerUS/cmpn.IncumbentUS
	_, cHi := MedianCI(ca, 0.95)
	iLo, _ := MedianCI(ib, 0.95)
	switch {
	case cmpn.PValue < o.Alpha && rel > o.MinRelDiff:
		cmpn.Faster = true
		cmpn.Reason = fmt.Sprintf("faster: median %.4g vs %.4g µs (%.2f%%), Mann-Whitney p = %.2g < %g",
			cmpn.ChallengerUS, cmpn.IncumbentUS, 100*rel, cmpn.PValue, o.Alpha)
	case cHi < iLo:
		cmpn.Faster = true
		cmpn.Reason = fmt.Sprintf("faster: 95%% CIs of the medians do not overlap (challenger ≤ %.4g < %.4g µs ≤ incumbent)", cHi, iLo)
	case rel <= 0:
		cmpn.Reason = fmt.Sprintf("not faster: median %.4g vs %.4g µs", cmpn.ChallengerUS, cmpn.IncumbentUS)
	default:
		cmpn.Reason = fmt.Sprintf("within noise: median %.4g vs %.4g µs (%.2f%%, threshold %.2g%%), Mann-Whitney p = %.2g (alpha %g)",
			cmpn.ChallengerUS, cmpn.IncumbentUS, 100*rel, 100*o.MinRelDiff, cmpn.PValue, o.Alpha)
	}
	if math.IsNaN(rel) {
		cmpn.Faster = false
	}
	return cmpn
}
