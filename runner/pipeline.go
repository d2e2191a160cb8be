package runner

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"sync"
	"time"

	"evotune/kernels"
	"evotune/space"
)

// A Device runs GPU requests, one at a time; a *Worker is one. A request
// that crashes or hangs the device's process returns an error (wrapping
// ErrWorkerDied or ErrWorkerTimeout); a request the GPU refused returns a
// Response with Error set.
type Device interface {
	Do(ctx context.Context, req kernels.Request, timeout time.Duration) (kernels.Response, error)
}

// A Compiler turns a candidate's -D flags into a cubin; a *CompilePool is
// one. A failed compile is a *CompileError.
type Compiler interface {
	Compile(ctx context.Context, flags []string) (*Cubin, error)
}

// A TelemetrySource reads a GPU's clocks, temperature, power and clock
// event reasons; *NVML is one.
type TelemetrySource interface {
	Sample(index int) (Telemetry, error)
}

// A GPU is one device the pipeline checks and times candidates on.
type GPU struct {
	Device Device
	// Env identifies the device: GPU, GPUUUID, ComputeCap and Driver.
	Env space.Env
	// NVMLIndex is the device's index for the TelemetrySource (NVML and
	// CUDA may number devices differently: match them by UUID); negative
	// means no telemetry for it.
	NVMLIndex int
}

// TimingOptions say how a candidate is timed (see kernels.Request).
type TimingOptions struct {
	Warmup      int
	Samples     int
	MinSampleUS float64
	NoRotate    bool
}

// DefaultTimingOptions returns 100 samples of at least 200 µs each after
// the worker's warm-up: enough for a tight confidence interval of the
// median of a 10 µs kernel in well under a second.
func DefaultTimingOptions() TimingOptions {
	return TimingOptions{Warmup: 10, Samples: 100, MinSampleUS: 200}
}

// A CheckCase is one correctness run: a shape, an input seed, an input
// scale and a softmax scale (0 means 1/sqrt(D)).
type CheckCase struct {
	Shape        space.Shape
	Seed         uint64
	InputScale   float64
	SoftmaxScale float64
}

func (c CheckCase) String() string {
	s := fmt.Sprintf("%s seed %d", c.Shape, c.Seed)
	if c.InputScale != 1 {
		s += fmt.Sprintf(" scale %g", c.InputScale)
	}
	if c.SoftmaxScale != 0 {
		s += fmt.Sprintf(" softmax scale %.4g", c.SoftmaxScale)
	}
	return s
}

// softmaxScales are the softmax scales of seeds 1, 2 and 3, as multiples of
// 1/sqrt(D): a kernel that ignores the caller's scale fails seeds 2 and 3.
var softmaxScales = [...]float64{1, 0.5, 2}

// CheckCases returns the correctness cases for a problem, smallest first so
// that a wrong candidate fails cheaply: every problem shape, plus tail
// shapes with the first shape's B, H and D and sequence lengths that no
// tile size divides (1, 77, 500), each with seeds 1, 2, 3 (softmax scales
// 1, 0.5 and 2 over sqrt(D)) and input scales 1 and 4 (larger inputs make
// softmax peakier, which stresses the running maximum and the
// exponentials). fp8 and int8 add S=512 and 4096 (one batch of at most two
// heads, unless a problem shape has that length) and input scale 16, where
// scores reach the hundreds: one-byte inputs quantised by their amax never
// overflow, but the row max and the exponentials must still hold.
func CheckCases(p space.Problem) []CheckCase {
	shapes := slices.Clone(p.Shapes)
	if len(shapes) == 0 {
		return nil
	}
	first := shapes[0]
	scales := []float64{1, 4}
	for _, s := range []int{1, 77, 500} {
		t := first
		t.S = s
		if !slices.Contains(shapes, t) {
			shapes = append(shapes, t)
		}
	}
	if space.Quantized(p.Dtype) {
		scales = append(scales, 16)
		// The long sequences test a row's length, not the batch: one batch
		// of at most two heads keeps a 4096-key case cheap (a problem of
		// 4x16 heads would otherwise check 64 of them, at 180 MB a case).
		for _, s := range []int{512, 4096} {
			if slices.ContainsFunc(p.Shapes, func(ps space.Shape) bool { return ps.S == s }) {
				continue
			}
			shapes = append(shapes, space.Shape{B: 1, H: min(first.H, 2), S: s, D: first.D})
		}
	}
	size := func(s space.Shape) int { return s.B * s.H * s.S * s.S }
	sort.SliceStable(shapes, func(i, j int) bool { return size(shapes[i]) < size(shapes[j]) })
	var cases []CheckCase
	for _, s := range shapes {
		for _, scale := range scales {
			for i, seed := range []uint64{1, 2, 3} {
				c := CheckCase{Shape: s, Seed: seed, InputScale: scale}
				if f := softmaxScales[i]; f != 1 {
					c.SoftmaxScale = f / math.Sqrt(float64(s.D))
				}
				cases = append(cases, c)
			}
		}
	}
	return cases
}

// PipelineOptions configure a Pipeline.
type PipelineOptions struct {
	Space    *space.Space
	Problem  space.Problem
	Target   kernels.Target
	Compiler Compiler
	GPUs     []GPU
	Gate     GateLimits
	// Env holds what every result records whichever GPU measured it:
	// Arch, NVCC (release) and SourceHash.
	Env space.Env
	// Family plans the launches, names the entry function whose ptxas
	// figures a result reports, and sets the correctness gate; the zero
	// value means kernels.FamilyOf(Problem.Family).
	Family kernels.Family
	// Cases are the correctness cases; nil means CheckCases(Problem).
	Cases  []CheckCase
	Timing TimingOptions
	// Telemetry, when not nil, is read around and during each timing.
	Telemetry TelemetrySource
	// TelemetryEvery is the telemetry period during a timing; ≤ 0 means
	// 100 ms.
	TelemetryEvery time.Duration
	// CheckTimeout and TimeTimeout bound one check or time request; ≤ 0
	// means 60 s and 120 s.
	CheckTimeout, TimeTimeout time.Duration
	// Now is the clock for Started, Finished and costs; nil means time.Now.
	Now func() time.Time
}

// A Pipeline is the GPU evaluator: it takes a config through the gates in
// order, cheap before expensive (constraints, nvcc, ptxas, correctness,
// timing), and records where and why it stopped. Candidates compile in
// parallel (bounded by the Compiler) while others use the GPUs; a compiled
// candidate waits for the next free GPU, and each GPU serves one candidate
// at a time, so a timing never shares its GPU. It is safe for concurrent
// use and implements evo.Evaluator.
type Pipeline struct {
	o         PipelineOptions
	tolerance kernels.Tolerance // the family's gate for the problem's dtype at input scale 1
	free      chan int          // indexes of idle GPUs
}

// NewPipeline checks opts and fills its defaults.
func NewPipeline(o PipelineOptions) (*Pipeline, error) {
	switch {
	case o.Space == nil:
		return nil, errors.New("pipeline: no space")
	case o.Compiler == nil:
		return nil, errors.New("pipeline: no compiler")
	case len(o.GPUs) == 0:
		return nil, errors.New("pipeline: no GPU")
	}
	if err := o.Problem.Validate(); err != nil {
		return nil, fmt.Errorf("pipeline: %w", err)
	}
	for i, g := range o.GPUs {
		if g.Device == nil {
			return nil, fmt.Errorf("pipeline: GPU %d has no device", i)
		}
	}
	if o.Family.Name == "" {
		f, err := kernels.FamilyOf(o.Problem.Family)
		if err != nil {
			return nil, fmt.Errorf("pipeline: %w", err)
		}
		o.Family = f
	}
	if o.Cases == nil {
		o.Cases = CheckCases(o.Problem)
	}
	if o.Timing == (TimingOptions{}) {
		o.Timing = DefaultTimingOptions()
	}
	o.TelemetryEvery = cmp.Or(o.TelemetryEvery, 100*time.Millisecond)
	o.CheckTimeout = cmp.Or(o.CheckTimeout, 60*time.Second)
	o.TimeTimeout = cmp.Or(o.TimeTimeout, 120*time.Second)
	if o.Now == nil {
		o.Now = time.Now
	}
	p := &Pipeline{o: o, tolerance: o.Family.Tolerance(o.Problem.Dtype, o.Problem.OutDtype), free: make(chan int, len(o.GPUs))}
	for i := range o.GPUs {
		p.free <- i
	}
	return p, nil
}

// baseEnv is the provenance of a result that has not reached a GPU: the
// build's, plus the GPU model when every GPU is the same model.
func (p *Pipeline) baseEnv() space.Env {
	env := p.o.Env
	g := p.o.GPUs[0].Env
	for _, other := range p.o.GPUs[1:] {
		if other.Env.GPU != g.GPU || other.Env.ComputeCap != g.ComputeCap || other.Env.Driver != g.Driver {
			return env
		}
	}
	env.GPU, env.ComputeCap, env.Driver = g.GPU, g.ComputeCap, g.Driver
	return env
}

// Evaluate takes c through the gates. It implements evo.Evaluator.
func (p *Pipeline) Evaluate(ctx context.Context, c space.Config) (r space.Result) {
	prob := p.o.Problem
	prob.Shapes, prob.Weights = slices.Clone(prob.Shapes), slices.Clone(prob.Weights) // each result owns its copy
	r = space.Result{Key: c.Key(), Config: c.Clone(), Problem: &prob, Env: p.baseEnv(), Started: p.o.Now()}
	defer func() { r.Finished = p.o.Now() }()
	stop := func(g space.Gate, s space.Status, reason string) space.Result {
		r.Gate, r.Status, r.Reason = g, s, reason
		return r
	}

	// Constraints: no compile for a config the space refuses.
	if err := p.o.Space.Check(c); err != nil {
		return stop(space.GateConstraint, space.StatusConstraint, err.Error())
	}
	flags, err := p.o.Space.Flags(c)
	if err != nil {
		return stop(space.GateConstraint, space.StatusConstraint, err.Error())
	}
	r.Flags = flags
	plans := map[space.Shape]kernels.Plan{}
	for _, s := range p.shapes() {
		pl, err := p.o.Family.Plan(c, s, p.o.Target)
		if err != nil {
			return stop(space.GateConstraint, space.StatusConstraint, fmt.Sprintf("launch plan for %s: %v", s, err))
		}
		plans[s] = pl
	}

	// nvcc.
	start := p.o.Now()
	cub, err := p.o.Compiler.Compile(ctx, flags)
	r.Cost.CompileSec = p.o.Now().Sub(start).Seconds()
	if err != nil {
		var ce *CompileError
		switch {
		case errors.As(err, &ce) && ce.Timeout:
			return stop(space.GateCompile, space.StatusTimeout, ce.Error())
		case ctx.Err() != nil:
			return stop(space.GateCompile, space.StatusTimeout, "canceled: "+err.Error())
		default:
			return stop(space.GateCompile, space.StatusCompileError, err.Error())
		}
	}
	defer cub.Release()

	// ptxas.
	if reason := p.ptxasGate(&r, cub, plans); reason != "" {
		return stop(space.GatePtxas, space.StatusPtxasReject, reason)
	}

	// The GPU: wait for a free one, keep it for the check and the timing.
	var gi int
	select {
	case gi = <-p.free:
	case <-ctx.Done():
		return stop(space.GatePtxas, space.StatusTimeout, "canceled while waiting for a GPU: "+ctx.Err().Error())
	}
	defer func() { p.free <- gi }()
	gpu := p.o.GPUs[gi]
	r.Env.GPU, r.Env.GPUUUID, r.Env.ComputeCap, r.Env.Driver = gpu.Env.GPU, gpu.Env.GPUUUID, gpu.Env.ComputeCap, gpu.Env.Driver

	start = p.o.Now()
	status, reason := p.check(ctx, &r, gpu, cub.Path, plans)
	r.Cost.CheckSec = p.o.Now().Sub(start).Seconds()
	if status != "" {
		return stop(space.GateCorrectness, status, reason)
	}

	start = p.o.Now()
	status, reason = p.time(ctx, &r, gpu, cub.Path, plans)
	r.Cost.TimeSec = p.o.Now().Sub(start).Seconds()
	if status != "" {
		return stop(space.GateTimed, status, reason)
	}
	for i, t := range r.Timings {
		r.Objective += p.o.Problem.Weight(i) * t.P50US
	}
	return stop(space.GateTimed, space.StatusOK, "")
}

// shapes lists every shape a candidate runs on: the problem's, then the
// correctness cases' others.
func (p *Pipeline) shapes() []space.Shape {
	shapes := slices.Clone(p.o.Problem.Shapes)
	for _, c := range p.o.Cases {
		if !slices.Contains(shapes, c.Shape) {
			shapes = append(shapes, c.Shape)
		}
	}
	return shapes
}

// ptxasGate reads the ptxas report into r and returns why the candidate is
// refused, or "". Beyond the limits on the worst entry function, each
// launch must fit an SM: its registers for all its threads, and its static
// plus dynamic shared memory.
func (p *Pipeline) ptxasGate(r *space.Result, cub *Cubin, plans map[space.Shape]kernels.Plan) string {
	rep, err := ParsePtxas(cub.Ptxas)
	if err != nil {
		return err.Error()
	}
	k, ok := rep.Kernel(p.o.Family.Entry())
	if !ok {
		return fmt.Sprintf("ptxas reports no entry function %s", p.o.Family.Entry())
	}
	r.Ptxas = &k.Ptxas
	if reason := p.o.Gate.Check(rep.Worst()); reason != "" {
		return reason
	}
	for _, s := range p.shapes() {
		for _, l := range plans[s].Launches {
			f, ok := rep.Kernel(l.Kernel)
			if !ok {
				return fmt.Sprintf("the plan launches %s, which ptxas does not report", l.Kernel)
			}
			threads := l.Block[0] * max(l.Block[1], 1) * max(l.Block[2], 1)
			if need := blockRegisters(f.Registers, threads); p.o.Target.RegsPerSM > 0 && need > p.o.Target.RegsPerSM {
				return fmt.Sprintf("%s: %d registers × %d threads need %d registers, more than the %d of an SM",
					l.Kernel, f.Registers, threads, need, p.o.Target.RegsPerSM)
			}
			if smem := f.SharedBytes + l.SharedBytes; p.o.Gate.MaxSharedBytes >= 0 && smem > p.o.Gate.MaxSharedBytes {
				return fmt.Sprintf("%s: shared memory %d B static + %d B dynamic > %d B",
					l.Kernel, f.SharedBytes, l.SharedBytes, p.o.Gate.MaxSharedBytes)
			}
		}
	}
	return ""
}

// blockRegisters is what a block of threads takes from the SM's register
// file: registers are allocated per warp, in units of 256.
func blockRegisters(regsPerThread, threads int) int {
	perWarp := (regsPerThread*32 + 255) / 256 * 256
	return perWarp * ((threads + 31) / 32)
}

// classify turns a failed device request into a status and reason.
func classify(ctx context.Context, what string, err error) (space.Status, string) {
	switch {
	case errors.Is(err, ErrWorkerTimeout):
		return space.StatusTimeout, what + ": " + err.Error()
	case ctx.Err() != nil:
		return space.StatusTimeout, what + ": canceled: " + err.Error()
	default:
		return space.StatusFault, what + ": " + err.Error()
	}
}

// check runs every correctness case, stopping at the first failure, and
// records the worst accuracy seen in r. It returns "" when all passed.
func (p *Pipeline) check(ctx context.Context, r *space.Result, gpu GPU, cubin string, plans map[space.Shape]kernels.Plan) (space.Status, string) {
	acc := &space.Accuracy{}
	r.Accuracy = acc
	for _, cs := range p.o.Cases {
		tol := scaledTolerance(p.tolerance, cs.InputScale)
		req := kernels.RequestFor(kernels.OpCheck, p.o.Problem)
		req.Cubin, req.Plan, req.Shape = cubin, plans[cs.Shape], cs.Shape
		req.Scale, req.Seed, req.InputScale, req.Atol, req.Rtol = cs.SoftmaxScale, cs.Seed, cs.InputScale, tol.Atol, tol.Rtol
		resp, err := gpu.Device.Do(ctx, req, p.o.CheckTimeout)
		if err != nil {
			return classify(ctx, cs.String(), err)
		}
		if resp.Error != "" {
			return space.StatusFault, cs.String() + ": " + resp.Error
		}
		acc.Cases++
		acc.MaxAbsErr = max(acc.MaxAbsErr, resp.MaxAbsErr)
		acc.MeanAbsErr = max(acc.MeanAbsErr, resp.MeanAbsErr)
		acc.RelL2 = max(acc.RelL2, resp.RelL2)
		acc.BadFrac = max(acc.BadFrac, resp.BadFrac)
		acc.NaN = max(acc.NaN, resp.NaN)
		acc.Inf = max(acc.Inf, resp.Inf)
		if space.Quantized(p.o.Problem.Dtype) && cs.InputScale == 1 {
			// Recorded where it is gated: at input scale 1 (below).
			if acc.E2ECos == 0 || resp.E2ECos < acc.E2ECos {
				acc.E2ECos = resp.E2ECos
			}
			acc.E2ERelL1 = max(acc.E2ERelL1, resp.E2ERelL1)
		}
		if cs.InputScale != 1 {
			// End-to-end limits are for inputs at scale 1: larger inputs
			// make scores large enough that the one-byte rounding of Q
			// and K reorders near ties, which no kernel can undo.
			tol.E2ECos, tol.E2ERelL1 = 0, 0
		}
		if why := accuracyFailure(resp, tol); why != "" {
			return space.StatusIncorrect, cs.String() + ": " + why
		}
	}
	return "", ""
}

// scaledTolerance adapts the scale-1 tolerance to inputs drawn from
// ±scale: the output is a convex combination of rows of V, so its size and
// its absolute rounding errors grow with the scale; relative figures do not.
func scaledTolerance(t kernels.Tolerance, scale float64) kernels.Tolerance {
	if scale <= 0 {
		scale = 1
	}
	t.Atol *= scale
	t.MaxAbs *= scale
	t.MeanAbs *= scale
	return t
}

// accuracyFailure returns why a check response fails tol, or "".
func accuracyFailure(resp kernels.Response, tol kernels.Tolerance) string {
	switch {
	case resp.NaN > 0:
		return fmt.Sprintf("%d NaN outputs", resp.NaN)
	case resp.Inf > 0:
		return fmt.Sprintf("%d Inf outputs", resp.Inf)
	case resp.MaxAbsErr > tol.MaxAbs:
		return fmt.Sprintf("max_abs_err %.3g > %.3g", resp.MaxAbsErr, tol.MaxAbs)
	case resp.MeanAbsErr > tol.MeanAbs:
		return fmt.Sprintf("mean_abs_err %.3g > %.3g", resp.MeanAbsErr, tol.MeanAbs)
	case resp.RelL2 > tol.RelL2:
		return fmt.Sprintf("rel_l2 %.3g > %.3g", resp.RelL2, tol.RelL2)
	case resp.BadFrac > tol.BadFrac:
		return fmt.Sprintf("bad_frac %.3g > %.3g", resp.BadFrac, tol.BadFrac)
	case tol.E2ECos > 0 && !(resp.E2ECos >= tol.E2ECos):
		return fmt.Sprintf("end-to-end cosine similarity %.5g < %.5g", resp.E2ECos, tol.E2ECos)
	case tol.E2ERelL1 > 0 && !(resp.E2ERelL1 <= tol.E2ERelL1):
		return fmt.Sprintf("end-to-end relative L1 %.3g > %.3g", resp.E2ERelL1, tol.E2ERelL1)
	case !resp.Repeatable:
		return "not repeatable: a second run gave different output"
	case !(resp.OutStd > 0.1*resp.RefStd):
		// An output that barely varies while the reference does is a
		// kernel that wrote (nearly) nothing, even if errors look small.
		return fmt.Sprintf("output nearly constant: out_std %.3g ≤ 0.1 × ref_std %.3g", resp.OutStd, resp.RefStd)
	}
	return ""
}

// time measures every problem shape into r.Timings; a measurement taken
// while the GPU was power or thermally throttled is taken again, once.
func (p *Pipeline) time(ctx context.Context, r *space.Result, gpu GPU, cubin string, plans map[space.Shape]kernels.Plan) (space.Status, string) {
	for _, s := range p.o.Problem.Shapes {
		t, status, reason := p.timeShape(ctx, gpu, cubin, plans[s], s)
		if status == "" && t.Throttled {
			again, st, why := p.timeShape(ctx, gpu, cubin, plans[s], s)
			if st != "" {
				status, reason = st, why
			} else {
				t = again
				t.Remeasured = true
			}
		}
		if status != "" {
			return status, reason
		}
		r.Timings = append(r.Timings, t)
	}
	return "", ""
}

// timeRequest is a timing request of cubin's plan on shape s with the run's
// timing options: samples samples, by graph or (eager) plain launches.
func (p *Pipeline) timeRequest(cubin string, plan kernels.Plan, s space.Shape, samples int, eager bool) kernels.Request {
	req := kernels.RequestFor(kernels.OpTime, p.o.Problem)
	req.Cubin, req.Plan, req.Shape = cubin, plan, s
	req.Warmup, req.Samples, req.MinSampleUS = p.o.Timing.Warmup, samples, p.o.Timing.MinSampleUS
	req.NoRotate, req.Eager = p.o.Timing.NoRotate, eager
	return req
}

// timeShape takes one timing of shape s, with the telemetry seen around it.
func (p *Pipeline) timeShape(ctx context.Context, gpu GPU, cubin string, plan kernels.Plan, s space.Shape) (space.Timing, space.Status, string) {
	req := p.timeRequest(cubin, plan, s, p.o.Timing.Samples, false)
	what := "time " + s.String()
	var mon *telemetryMonitor
	if p.o.Telemetry != nil && gpu.NVMLIndex >= 0 {
		mon = startTelemetry(p.o.Telemetry, gpu.NVMLIndex, p.o.TelemetryEvery)
	}
	resp, err := gpu.Device.Do(ctx, req, p.o.TimeTimeout)
	seen := mon.stop()
	if err != nil {
		st, why := classify(ctx, what, err)
		return space.Timing{}, st, why
	}
	if resp.Error != "" {
		return space.Timing{}, space.StatusFault, what + ": " + resp.Error
	}
	if len(resp.SamplesUS) == 0 {
		return space.Timing{}, space.StatusFault, what + ": the worker returned no samples"
	}
	t := TimingOf(s, resp.SamplesUS)
	t.LaunchesPerSample = resp.LaunchesPerSample
	seen.apply(&t)
	return t, "", ""
}

// TimingOf summarises per-call samples (µs) of shape s: percentiles by
// linear interpolation and the 95% confidence interval of the median.
func TimingOf(s space.Shape, samplesUS []float64) space.Timing {
	sorted := slices.Clone(samplesUS)
	slices.Sort(sorted)
	lo, hi := MedianCI(sorted, 0.95)
	return space.Timing{
		Shape:     s,
		P50US:     quantile(sorted, 0.50),
		P90US:     quantile(sorted, 0.90),
		P99US:     quantile(sorted, 0.99),
		CILowUS:   lo,
		CIHighUS:  hi,
		SamplesUS: slices.Clone(samplesUS),
	}
}

// quantile interpolates linearly between the order statistics of sorted.
func quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	pos := q * float64(len(sorted)-1)
	i := int(pos)
	if i >= len(sorted)-1 {
		return sorted[len(sorted)-1]
	}
	frac := pos - float64(i)
	return sorted[i] + frac*(sorted[i+1]-sorted[i])
}

// MedianCI returns a confidence interval of the median from order
// statistics: [x(k), x(n+1-k)] (1-based) with the largest k whose coverage
// 1 - 2·P(Binomial(n, ½) < k) is at least conf. It makes no assumption on
// the distribution (timings are skewed). For samples too few for conf it
// returns the whole range.
func MedianCI(sorted []float64, conf float64) (lo, hi float64) {
	n := len(sorted)
	if n == 0 {
		return 0, 0
	}
	alpha := (1 - conf) / 2
	// cdf accumulates P(B ≤ j) in log space so that large n do not
	// underflow 2^-n.
	k, cdf := 0, 0.0
	lnHalfN := float64(n) * math.Log(0.5)
	lnFactN, _ := math.Lgamma(float64(n + 1))
	for j := 0; j <= n/2; j++ {
		lnFactJ, _ := math.Lgamma(float64(j + 1))
		lnFactNJ, _ := math.Lgamma(float64(n - j + 1))
		cdf += math.Exp(lnFactN - lnFactJ - lnFactNJ + lnHalfN)
		if cdf > alpha {
			break
		}
		k = j + 1 // P(B ≤ j) ≤ alpha, so x(j+1) is a valid lower bound
	}
	if k < 1 {
		return sorted[0], sorted[n-1]
	}
	return sorted[k-1], sorted[n-k]
}

// A telemetryMonitor samples a GPU while a timing runs.
type telemetryMonitor struct {
	done chan struct{}
	wg   sync.WaitGroup
	mu   sync.Mutex
	seen telemetrySeen
}

// telemetrySeen is what a monitor saw: the lowest SM clock (a drop is what
// matters), the highest temperature and power, every clock event reason,
// and the first and last energy counters.
type telemetrySeen struct {
	samples          int
	minClock, maxTmp int
	maxPower         float64
	reasons          []string
	throttled        bool
	e0, e1           uint64
	t0, t1           time.Time
	energyOK         bool
}

func startTelemetry(src TelemetrySource, index int, every time.Duration) *telemetryMonitor {
	m := &telemetryMonitor{done: make(chan struct{})}
	m.read(src, index) // before the request
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-m.done:
				m.read(src, index) // after the request
				return
			case <-tick.C:
				m.read(src, index)
			}
		}
	}()
	return m
}

func (m *telemetryMonitor) read(src TelemetrySource, index int) {
	t, err := src.Sample(index)
	now := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	s := &m.seen
	if err != nil && t.MaxSMClockMHz == 0 && t.SMClockMHz == 0 {
		return // nothing read; telemetry is best effort
	}
	s.samples++
	if t.SMClockMHz > 0 && (s.minClock == 0 || t.SMClockMHz < s.minClock) {
		s.minClock = t.SMClockMHz
	}
	s.maxTmp = max(s.maxTmp, t.TempC)
	s.maxPower = max(s.maxPower, t.PowerW)
	for _, r := range t.ThrottleReasons {
		if !slices.Contains(s.reasons, r) {
			s.reasons = append(s.reasons, r)
		}
	}
	s.throttled = s.throttled || t.Throttled
	if t.EnergyOK {
		if !s.energyOK {
			s.e0, s.t0, s.energyOK = t.EnergyMJ, now, true
		}
		s.e1, s.t1 = t.EnergyMJ, now
	}
}

// stop ends the monitor and returns what it saw; nil-safe.
func (m *telemetryMonitor) stop() telemetrySeen {
	if m == nil {
		return telemetrySeen{}
	}
	close(m.done)
	m.wg.Wait()
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.seen
}

// apply records the telemetry in t. Energy per call is the mean power over
// the request (from the energy counter) times the median call time: the
// worker's warm-up and calibration length vary, so the number of launches
// in the counter's interval is not known.
func (s telemetrySeen) apply(t *space.Timing) {
	if s.samples == 0 {
		return
	}
	t.SMClockMHz, t.TempC, t.PowerW = s.minClock, s.maxTmp, s.maxPower
	t.ThrottleReasons = slices.Clone(s.reasons)
	t.Throttled = s.throttled
	if dt := s.t1.Sub(s.t0).Seconds(); s.energyOK && dt > 0 && s.e1 >= s.e0 {
		watts := float64(s.e1-s.e0) / 1000 / dt
		t.EnergyPerCallUJ = watts * t.P50US
	}
	sort.Strings(t.ThrottleReasons)
}

// ProbeTarget asks dev for its figures (the worker's info request) and
// returns arch's target with the device's own SM count and per-block shared
// memory, with the response for its identity. A device whose compute
// capability is not arch is refused: its cubins would not load.
func ProbeTarget(ctx context.Context, dev Device, arch string, timeout time.Duration) (kernels.Target, kernels.Response, error) {
	t, err := kernels.TargetFor(arch)
	if err != nil {
		return kernels.Target{}, kernels.Response{}, err
	}
	resp, err := dev.Do(ctx, kernels.Request{Op: kernels.OpInfo}, timeout)
	if err != nil {
		return kernels.Target{}, kernels.Response{}, fmt.Errorf("asking the GPU worker for device info: %w", err)
	}
	if resp.Error != "" {
		return kernels.Target{}, resp, fmt.Errorf("GPU worker info: %s", resp.Error)
	}
	if _, err := ArchForComputeCap(resp.ComputeCap, []string{arch}); err != nil {
		return kernels.Target{}, resp, fmt.Errorf("GPU %s has compute capability %q, not %s", resp.Device, resp.ComputeCap, arch)
	}
	if resp.SMs > 0 {
		t.SMs = resp.SMs
	}
	if resp.SharedPerBlock > 0 {
		t.SharedPerBlock = resp.SharedPerBlock
	}
	return t, resp, nil
}
