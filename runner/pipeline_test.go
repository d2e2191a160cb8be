package runner

import (
	"context"
	"fmt"
	"math"
	"path"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"evotune/evo"
	"evotune/kernels"
	"evotune/space"
)

// The real parts fit the pipeline's interfaces.
var (
	_ evo.Evaluator   = (*Pipeline)(nil)
	_ Device          = (*Worker)(nil)
	_ Compiler        = (*CompilePool)(nil)
	_ TelemetrySource = (*NVML)(nil)
)

// The fakes below stand for nvcc and the GPU worker. A config's "mode"
// knob says how its candidate behaves; the fake compiler names the cubin
// after the mode, and the fake device answers by the cubin's name.

func testSpace() *space.Space {
	return &space.Space{
		Family: "test",
		Knobs: []space.Knob{
			{Name: "block", Macro: "BLOCK", Values: []string{"32", "64", "128"}, Default: "64"},
			{Name: "mode", Macro: "MODE", Default: "ok", Values: []string{
				"ok", "compile_error", "compile_timeout", "spill", "regs", "smem", "nokernel",
				"wrong", "nan", "norepeat", "constant", "gpu_error", "died", "hang", "time_died", "fp8e2e", "int8e2e"}},
		},
		Constraints: []space.Constraint{{Name: "no_128", Check: func(c space.Config) error {
			if c["block"] == "128" {
				return fmt.Errorf("block=128 is refused")
			}
			return nil
		}}},
	}
}

func cfg(mode string) space.Config { return space.Config{"block": "64", "mode": mode} }

// testFamily is a kernel family of testSpace's knobs, unknown to
// kernels.FamilyOf: the pipeline must take its entry kernel, its plan and
// its gate from it. One CTA per head of 128 threads; mode=regs asks for 512
// and mode=smem for 70000 bytes of shared memory. The gate is SDPA's.
func testFamily() kernels.Family {
	return kernels.Family{
		Name:    "test",
		Dtypes:  []string{"fp16", "fp8", "int8"},
		Archs:   []string{"sm_89"},
		Kernels: []string{"test_fwd"},
		Space: func(space.Problem, kernels.Target) (*space.Space, error) {
			return testSpace(), nil
		},
		Plan: func(c space.Config, s space.Shape, _ kernels.Target) (kernels.Plan, error) {
			l := kernels.Launch{Kernel: "test_fwd", Grid: [3]int{s.B * s.H, 1, 1}, Block: [3]int{128, 1, 1}}
			switch c["mode"] {
			case "regs":
				l.Block[0] = 512
			case "smem":
				l.SharedBytes = 70000
			}
			return kernels.Plan{Launches: []kernels.Launch{l}}, nil
		},
		Tolerance: kernels.ToleranceFor,
	}
}

// ptxasText renders a ptxas -v report for test_fwd.
func ptxasText(regs, spills, smem int) string {
	s := "ptxas info    : Compiling entry function 'test_fwd' for 'sm_89'\n" +
		"ptxas info    : Function properties for test_fwd\n" +
		fmt.Sprintf("    0 bytes stack frame, %d bytes spill stores, %d bytes spill loads\n", spills, spills) +
		fmt.Sprintf("ptxas info    : Used %d registers", regs)
	if smem > 0 {
		s += fmt.Sprintf(", %d bytes smem", smem)
	}
	return s + ", 384 bytes cmem[0]\n"
}

type fakeCompiler struct {
	delay time.Duration
	slots chan struct{} // bounds parallel compiles, as the pool does
	mu    sync.Mutex
	calls int
}

func (f *fakeCompiler) Compile(ctx context.Context, flags []string) (*Cubin, error) {
	f.mu.Lock()
	f.calls++
	f.mu.Unlock()
	if f.slots != nil {
		f.slots <- struct{}{}
		defer func() { <-f.slots }()
	}
	mode := ""
	for _, fl := range flags {
		if m, ok := strings.CutPrefix(fl, "-DMODE="); ok {
			mode = m
		}
	}
	if f.delay > 0 {
		select {
		case <-time.After(f.delay):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	text := ptxasText(96, 0, 0)
	switch mode {
	case "compile_error":
		return nil, &CompileError{Reason: `sdpa.cu(7): error: identifier "oops" is undefined`}
	case "compile_timeout":
		return nil, &CompileError{Reason: "ran past its 2m0s limit", Timeout: true}
	case "spill":
		text = ptxasText(255, 48, 0)
	case "regs":
		text = ptxasText(168, 0, 0) // 168 × 512 threads > 65536
	case "smem":
		text = ptxasText(96, 0, 40000) // + 70000 dynamic > 101376
	case "nokernel":
		text = strings.ReplaceAll(text, "test_fwd", "other_kernel")
	}
	return &Cubin{Path: "/fake/" + mode + ".cubin", Ptxas: text}, nil
}

func (f *fakeCompiler) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

// span is one request's time on a fake device.
type span struct{ start, end time.Time }

type fakeDevice struct {
	checkDelay, timeDelay time.Duration
	sampleUS              func(s space.Shape) float64

	mu       sync.Mutex
	inFlight int
	overlap  bool // two requests at once: the pipeline broke its own rule
	reqs     []kernels.Request
	spans    []span
	timeDone int
}

func (d *fakeDevice) Do(ctx context.Context, req kernels.Request, timeout time.Duration) (kernels.Response, error) {
	d.mu.Lock()
	d.inFlight++
	if d.inFlight > 1 {
		d.overlap = true
	}
	d.reqs = append(d.reqs, req)
	d.mu.Unlock()
	start := time.Now()
	defer func() {
		d.mu.Lock()
		d.inFlight--
		d.spans = append(d.spans, span{start, time.Now()})
		if req.Op == kernels.OpTime {
			d.timeDone++
		}
		d.mu.Unlock()
	}()
	mode := strings.TrimSuffix(path.Base(req.Cubin), ".cubin")
	switch req.Op {
	case kernels.OpCheck:
		time.Sleep(d.checkDelay)
		return d.check(mode, req)
	case kernels.OpTime:
		time.Sleep(d.timeDelay)
		switch mode {
		case "time_died":
			return kernels.Response{}, fmt.Errorf("%w: time request 9: signal: segmentation fault", ErrWorkerDied)
		}
		v := 10.0
		if d.sampleUS != nil {
			v = d.sampleUS(req.Shape)
		}
		samples := make([]float64, 50)
		for i := range samples {
			samples[i] = v + float64(i%5)*0.01
		}
		return kernels.Response{ID: req.ID, SamplesUS: samples, LaunchesPerSample: 20}, nil
	}
	return kernels.Response{Error: "unknown op " + req.Op}, nil
}

func (d *fakeDevice) check(mode string, req kernels.Request) (kernels.Response, error) {
	good := kernels.Response{ID: req.ID, MaxAbsErr: 5e-4 * req.InputScale, MeanAbsErr: 1e-5, RelL2: 1e-3, Repeatable: true, OutStd: 0.3, RefStd: 0.3}
	switch mode {
	case "wrong":
		if req.Shape.S == 500 && req.Seed == 2 {
			good.MaxAbsErr = 0.031
		}
	case "fp8e2e":
		// End to end, larger inputs lose more to E4M3's rounding of Q and K.
		good.E2ECos, good.E2ERelL1 = 0.9987, 0.051
		if req.InputScale > 1 {
			good.E2ECos, good.E2ERelL1 = 0.945, 0.116
		}
	case "int8e2e":
		// INT8's finer scales lose less, but larger inputs still lose more.
		good.E2ECos, good.E2ERelL1 = 0.99993, 0.0118
		if req.InputScale > 1 {
			good.E2ECos, good.E2ERelL1 = 0.9951, 0.062
		}
	case "nan":
		good.NaN = 12
	case "norepeat":
		good.Repeatable = false
	case "constant":
		good.OutStd = 0.001
	case "gpu_error":
		return kernels.Response{ID: req.ID, Error: "CUDA error: an illegal memory access was encountered", Sticky: true}, nil
	case "died":
		return kernels.Response{}, fmt.Errorf("%w: check request 3: signal: killed", ErrWorkerDied)
	case "hang":
		return kernels.Response{}, fmt.Errorf("%w: check request 3: no answer after 60s (killed)", ErrWorkerTimeout)
	}
	return good, nil
}

func (d *fakeDevice) requests() []kernels.Request {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.reqs)
}

// fakeTelemetry reports throttling while the device has finished fewer
// than throttledTimings timings (or always, when always is set).
type fakeTelemetry struct {
	dev              *fakeDevice
	throttledTimings int
	always           bool
}

func (f *fakeTelemetry) Sample(int) (Telemetry, error) {
	f.dev.mu.Lock()
	done := f.dev.timeDone
	f.dev.mu.Unlock()
	t := Telemetry{SMClockMHz: 2040, MaxSMClockMHz: 2040, TempC: 60, PowerW: 70, EnergyMJ: uint64(time.Now().UnixMilli()) * 70, EnergyOK: true}
	if f.always || done < f.throttledTimings {
		t.SMClockMHz, t.TempC = 1500, 88
		t.ThrottleReasons, t.Throttled = DecodeClockReasons(nvmlHwThermal)
	}
	return t, nil
}

const nvmlHwThermal = 64

func testProblem() space.Problem {
	return space.Problem{Family: "test", Shapes: []space.Shape{{B: 2, H: 8, S: 512, D: 64}}, Dtype: "fp16"}
}

func newTestPipeline(t *testing.T, comp Compiler, devs []*fakeDevice, edit func(*PipelineOptions)) *Pipeline {
	t.Helper()
	o := PipelineOptions{
		Space:    testSpace(),
		Problem:  testProblem(),
		Target:   kernels.Target{Arch: "sm_89", SMs: 58, SharedPerBlock: 101376, RegsPerSM: 65536, MaxThreadsPerSM: 1536},
		Compiler: comp,
		Gate:     DefaultGateLimits(101376),
		Env:      space.Env{Arch: "sm_89", NVCC: "11.8.89", SourceHash: "abc"},
		Family:   testFamily(),
	}
	for i, d := range devs {
		o.GPUs = append(o.GPUs, GPU{Device: d, NVMLIndex: i, Env: space.Env{GPU: "NVIDIA L4", GPUUUID: fmt.Sprintf("GPU-%d", i), ComputeCap: "8.9", Driver: "550.54"}})
	}
	if edit != nil {
		edit(&o)
	}
	p, err := NewPipeline(o)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestPipelineUnknownFamily: a problem of a family this build does not
// carry, with none given, is refused by name.
func TestPipelineUnknownFamily(t *testing.T) {
	o := PipelineOptions{Space: testSpace(), Problem: testProblem(), Compiler: &fakeCompiler{},
		GPUs: []GPU{{Device: &fakeDevice{}, NVMLIndex: -1}}}
	_, err := NewPipeline(o)
	if err == nil || !strings.Contains(err.Error(), `"test"`) || !strings.Contains(err.Error(), kernels.DefaultFamily) {
		t.Errorf("NewPipeline for family %q = %v; want an error naming it and %s", o.Problem.Family, err, kernels.DefaultFamily)
	}
}

func TestPipelineGates(t *testing.T) {
	tests := []struct {
		mode     string
		config   space.Config
		gate     space.Gate
		status   space.Status
		reason   string // a substring of the reason
		compiles int
		gpuReqs  int // -1: do not count
	}{
		{"constraint", space.Config{"block": "128", "mode": "ok"}, space.GateConstraint, space.StatusConstraint, "no_128: block=128 is refused", 0, 0},
		{"unknown value", space.Config{"block": "48", "mode": "ok"}, space.GateConstraint, space.StatusConstraint, "block", 0, 0},
		{"compile_error", nil, space.GateCompile, space.StatusCompileError, `sdpa.cu(7): error: identifier "oops"`, 1, 0},
		{"compile_timeout", nil, space.GateCompile, space.StatusTimeout, "ran past", 1, 0},
		{"spill", nil, space.GatePtxas, space.StatusPtxasReject, "spill stores 48 B > 0 B", 1, 0},
		{"regs", nil, space.GatePtxas, space.StatusPtxasReject, "168 registers × 512 threads need 86016 registers, more than the 65536", 1, 0},
		{"smem", nil, space.GatePtxas, space.StatusPtxasReject, "shared memory 40000 B static + 70000 B dynamic > 101376 B", 1, 0},
		{"nokernel", nil, space.GatePtxas, space.StatusPtxasReject, "no entry function test_fwd", 1, 0},
		{"wrong", nil, space.GateCorrectness, space.StatusIncorrect, "2x8x500x64 seed 2 softmax scale 0.0625: max_abs_err 0.031 > 0.002", 1, -1},
		{"nan", nil, space.GateCorrectness, space.StatusIncorrect, "2x8x1x64 seed 1: 12 NaN outputs", 1, 1},
		{"norepeat", nil, space.GateCorrectness, space.StatusIncorrect, "not repeatable", 1, 1},
		{"constant", nil, space.GateCorrectness, space.StatusIncorrect, "output nearly constant", 1, 1},
		{"gpu_error", nil, space.GateCorrectness, space.StatusFault, "illegal memory access", 1, 1},
		{"died", nil, space.GateCorrectness, space.StatusFault, "GPU worker died", 1, 1},
		{"hang", nil, space.GateCorrectness, space.StatusTimeout, "GPU worker timed out", 1, 1},
		{"time_died", nil, space.GateTimed, space.StatusFault, "time 2x8x512x64: GPU worker died", 1, -1},
		{"ok", nil, space.GateTimed, space.StatusOK, "", 1, -1},
	}
	for _, tt := range tests {
		t.Run(tt.mode, func(t *testing.T) {
			comp := &fakeCompiler{}
			dev := &fakeDevice{}
			p := newTestPipeline(t, comp, []*fakeDevice{dev}, nil)
			c := tt.config
			if c == nil {
				c = cfg(tt.mode)
			}
			r := p.Evaluate(context.Background(), c)
			if r.Gate != tt.gate || r.Status != tt.status {
				t.Errorf("gate %s status %s (reason %q), want %s %s", r.Gate, r.Status, r.Reason, tt.gate, tt.status)
			}
			if tt.reason == "" && r.Reason != "" || !strings.Contains(r.Reason, tt.reason) {
				t.Errorf("reason %q, want it to contain %q", r.Reason, tt.reason)
			}
			if n := comp.count(); n != tt.compiles {
				t.Errorf("%d compiles, want %d", n, tt.compiles)
			}
			if n := len(dev.requests()); tt.gpuReqs >= 0 && n != tt.gpuReqs {
				t.Errorf("%d GPU requests, want %d", n, tt.gpuReqs)
			}
			if r.Key != c.Key() || r.Problem == nil || r.Finished.Before(r.Started) || r.Env.SourceHash != "abc" || r.Env.NVCC != "11.8.89" {
				t.Errorf("result lacks its identity: %+v", r)
			}
			if tt.gate != space.GateConstraint && len(r.Flags) == 0 {
				t.Error("flags not recorded")
			}
			reachedGPU := tt.gate == space.GateCorrectness || tt.gate == space.GateTimed
			if reachedGPU != (r.Env.GPUUUID != "") {
				t.Errorf("GPU UUID %q recorded for a result at gate %s", r.Env.GPUUUID, r.Gate)
			}
			if r.OK() != (tt.status == space.StatusOK) {
				t.Errorf("OK() = %v", r.OK())
			}
		})
	}
}

func TestPipelineOKResult(t *testing.T) {
	dev := &fakeDevice{}
	p := newTestPipeline(t, &fakeCompiler{}, []*fakeDevice{dev}, nil)
	r := p.Evaluate(context.Background(), cfg("ok"))
	if !r.OK() {
		t.Fatalf("not OK: %+v", r)
	}
	if r.Ptxas == nil || r.Ptxas.Registers != 96 {
		t.Errorf("ptxas = %+v", r.Ptxas)
	}
	cases := CheckCases(testProblem())
	if r.Accuracy == nil || r.Accuracy.Cases != len(cases) || r.Accuracy.MaxAbsErr != 5e-4*4 {
		t.Errorf("accuracy = %+v, want %d cases, worst max_abs_err at scale 4", r.Accuracy, len(cases))
	}
	// Every check request carries the case and the scaled tolerance.
	tol := kernels.ToleranceFor("fp16", "")
	var checks int
	for _, req := range dev.requests() {
		if req.Op != kernels.OpCheck {
			continue
		}
		cs := cases[checks]
		if req.Shape != cs.Shape || req.Seed != cs.Seed || req.InputScale != cs.InputScale || req.Dtype != "fp16" || req.Cubin != "/fake/ok.cubin" {
			t.Errorf("check %d = %+v, want case %v", checks, req, cs)
		}
		if req.Atol != tol.Atol*cs.InputScale || req.Rtol != tol.Rtol {
			t.Errorf("check %d tolerance atol %g rtol %g", checks, req.Atol, req.Rtol)
		}
		if len(req.Plan.Launches) != 1 {
			t.Errorf("check %d has no plan", checks)
		}
		checks++
	}
	if checks != len(cases) {
		t.Errorf("%d checks, want %d", checks, len(cases))
	}
	if len(r.Timings) != 1 || r.Timings[0].LaunchesPerSample != 20 || len(r.Timings[0].SamplesUS) != 50 {
		t.Fatalf("timings = %+v", r.Timings)
	}
	if r.Objective != r.Timings[0].P50US {
		t.Errorf("objective %g, p50 %g", r.Objective, r.Timings[0].P50US)
	}
	if r.Env.GPU != "NVIDIA L4" || r.Env.GPUUUID != "GPU-0" || r.Env.Arch != "sm_89" {
		t.Errorf("env = %+v", r.Env)
	}
}

func TestCheckCases(t *testing.T) {
	p := space.Problem{Shapes: []space.Shape{{B: 2, H: 8, S: 512, D: 64}, {B: 1, H: 8, S: 77, D: 64}}, Dtype: "fp16"}
	cases := CheckCases(p)
	var shapes []space.Shape
	for _, c := range cases {
		if !slices.Contains(shapes, c.Shape) {
			shapes = append(shapes, c.Shape)
		}
	}
	sh := func(b, s int) space.Shape { return space.Shape{B: b, H: 8, S: s, D: 64} }
	want := []space.Shape{sh(2, 1), sh(1, 77), sh(2, 77), sh(2, 500), sh(2, 512)}
	if !slices.Equal(shapes, want) {
		t.Errorf("shapes %v, want %v (smallest first)", shapes, want)
	}
	if len(cases) != len(want)*6 {
		t.Errorf("%d cases, want %d (3 seeds × 2 scales each)", len(cases), len(want)*6)
	}
	if got := (CheckCase{Shape: want[3], Seed: 2, InputScale: 4}).String(); got != "2x8x500x64 seed 2 scale 4" {
		t.Errorf("case name %q", got)
	}
}

func TestPipelineObjectiveWeights(t *testing.T) {
	dev := &fakeDevice{sampleUS: func(s space.Shape) float64 { return float64(s.S) / 100 }}
	p := newTestPipeline(t, &fakeCompiler{}, []*fakeDevice{dev}, func(o *PipelineOptions) {
		o.Problem.Shapes = []space.Shape{{B: 1, H: 8, S: 512, D: 64}, {B: 1, H: 8, S: 2048, D: 64}}
		o.Problem.Weights = []float64{1, 3}
		o.Cases = []CheckCase{{Shape: o.Problem.Shapes[0], Seed: 1, InputScale: 1}}
	})
	r := p.Evaluate(context.Background(), cfg("ok"))
	if !r.OK() || len(r.Timings) != 2 {
		t.Fatalf("result %+v", r)
	}
	want := 1*r.Timings[0].P50US + 3*r.Timings[1].P50US
	if math.Abs(r.Objective-want) > 1e-9 || math.Abs(r.Timings[1].P50US-20.48) > 0.05 {
		t.Errorf("objective %g, want %g (p50s %g, %g)", r.Objective, want, r.Timings[0].P50US, r.Timings[1].P50US)
	}
}

func TestPipelineThrottledTimingRemeasuredOnce(t *testing.T) {
	tests := []struct {
		name          string
		tel           func(*fakeDevice) *fakeTelemetry
		timings       int
		remeasured    bool
		stillThrottle bool
	}{
		{"cool", func(d *fakeDevice) *fakeTelemetry { return &fakeTelemetry{dev: d} }, 1, false, false},
		{"first throttled", func(d *fakeDevice) *fakeTelemetry { return &fakeTelemetry{dev: d, throttledTimings: 1} }, 2, true, false},
		{"always throttled", func(d *fakeDevice) *fakeTelemetry { return &fakeTelemetry{dev: d, always: true} }, 2, true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dev := &fakeDevice{timeDelay: 30 * time.Millisecond}
			p := newTestPipeline(t, &fakeCompiler{}, []*fakeDevice{dev}, func(o *PipelineOptions) {
				o.Telemetry = tt.tel(dev)
				o.TelemetryEvery = 5 * time.Millisecond
				o.Cases = CheckCases(o.Problem)[:1]
			})
			r := p.Evaluate(context.Background(), cfg("ok"))
			if !r.OK() {
				t.Fatalf("not OK: %+v", r)
			}
			var timings int
			for _, req := range dev.requests() {
				if req.Op == kernels.OpTime {
					timings++
				}
			}
			tm := r.Timings[0]
			if timings != tt.timings || tm.Remeasured != tt.remeasured || tm.Throttled != tt.stillThrottle {
				t.Errorf("%d timings, remeasured %v, throttled %v; want %d, %v, %v", timings, tm.Remeasured, tm.Throttled, tt.timings, tt.remeasured, tt.stillThrottle)
			}
			if tt.stillThrottle && (!slices.Contains(tm.ThrottleReasons, "hw_thermal_slowdown") || tm.SMClockMHz != 1500 || tm.TempC != 88) {
				t.Errorf("throttled telemetry not recorded: %+v", tm)
			}
			if !tt.stillThrottle && (tm.SMClockMHz != 2040 || tm.TempC != 60 || tm.PowerW != 70) {
				t.Errorf("telemetry = clock %d temp %d power %g", tm.SMClockMHz, tm.TempC, tm.PowerW)
			}
			// 70 W for p50 ≈ 10 µs is ≈ 700 µJ per call.
			if tm.EnergyPerCallUJ < 500 || tm.EnergyPerCallUJ > 900 {
				t.Errorf("energy per call %g µJ, want ≈ 700", tm.EnergyPerCallUJ)
			}
		})
	}
}

// TestPipelineOverlap runs 8 candidates at once through 4 compile slots
// and one GPU: compiles of later candidates must hide behind the GPU work
// of earlier ones, so the GPU works back-to-back once the first is ready.
func TestPipelineOverlap(t *testing.T) {
	const (
		n           = 8
		compileTime = 200 * time.Millisecond
		reqTime     = 50 * time.Millisecond // 2 requests a candidate: 100 ms
	)
	comp := &fakeCompiler{delay: compileTime, slots: make(chan struct{}, 4)}
	dev := &fakeDevice{checkDelay: reqTime, timeDelay: reqTime}
	p := newTestPipeline(t, comp, []*fakeDevice{dev}, func(o *PipelineOptions) {
		o.Cases = CheckCases(o.Problem)[:1]
	})
	start := time.Now()
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := cfg("ok")
			c["block"] = []string{"32", "64"}[i%2]
			if r := p.Evaluate(context.Background(), c); !r.OK() {
				t.Errorf("candidate %d: %s %s", i, r.Status, r.Reason)
			}
		}()
	}
	wg.Wait()
	wall := time.Since(start)
	if dev.overlap {
		t.Fatal("two requests ran on one GPU at once")
	}
	spans := slices.Clone(dev.spans)
	slices.SortFunc(spans, func(a, b span) int { return a.start.Compare(b.start) })
	var idle time.Duration
	for i := 1; i < len(spans); i++ {
		idle += spans[i].start.Sub(spans[i-1].end)
	}
	// Serial work would take 8 × 300 ms; overlapped, 200 ms of compiles
	// then 8 × 100 ms of GPU work.
	busy := time.Duration(n) * 2 * reqTime
	if idle > 60*time.Millisecond {
		t.Errorf("the GPU idled %v between requests while compiled candidates waited", idle)
	}
	if wall > compileTime+busy+300*time.Millisecond {
		t.Errorf("took %v; compiles did not overlap GPU work (ideal %v)", wall, compileTime+busy)
	}
}

func TestPipelineSharesGPUs(t *testing.T) {
	devs := []*fakeDevice{{checkDelay: 20 * time.Millisecond, timeDelay: 20 * time.Millisecond}, {checkDelay: 20 * time.Millisecond, timeDelay: 20 * time.Millisecond}}
	p := newTestPipeline(t, &fakeCompiler{}, devs, func(o *PipelineOptions) { o.Cases = CheckCases(o.Problem)[:1] })
	var wg sync.WaitGroup
	uuids := make([]string, 6)
	for i := range uuids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := p.Evaluate(context.Background(), cfg("ok"))
			uuids[i] = r.Env.GPUUUID
		}()
	}
	wg.Wait()
	for i, d := range devs {
		if d.overlap {
			t.Errorf("GPU %d ran two requests at once", i)
		}
		if len(d.requests()) == 0 {
			t.Errorf("GPU %d was never used", i)
		}
	}
	if !slices.Contains(uuids, "GPU-0") || !slices.Contains(uuids, "GPU-1") {
		t.Errorf("results name GPUs %v", uuids)
	}
}

func TestPipelineCancelWhileWaitingForGPU(t *testing.T) {
	dev := &fakeDevice{checkDelay: 300 * time.Millisecond}
	p := newTestPipeline(t, &fakeCompiler{}, []*fakeDevice{dev}, func(o *PipelineOptions) { o.Cases = CheckCases(o.Problem)[:1] })
	go p.Evaluate(context.Background(), cfg("ok")) // holds the only GPU
	time.Sleep(50 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	r := p.Evaluate(ctx, cfg("ok"))
	if d := time.Since(start); d > 200*time.Millisecond {
		t.Errorf("Evaluate took %v after cancellation", d)
	}
	if r.Status != space.StatusTimeout || !strings.Contains(r.Reason, "waiting for a GPU") {
		t.Errorf("status %s reason %q", r.Status, r.Reason)
	}
}

func TestTimingOf(t *testing.T) {
	samples := make([]float64, 101)
	for i := range samples {
		samples[len(samples)-1-i] = float64(i + 1) // reversed: TimingOf must sort
	}
	tm := TimingOf(space.Shape{B: 1}, samples)
	if tm.P50US != 51 || tm.P90US != 91 || tm.P99US != 100 {
		t.Errorf("p50/p90/p99 = %g/%g/%g, want 51/91/100", tm.P50US, tm.P90US, tm.P99US)
	}
	if tm.CILowUS > tm.P50US || tm.CIHighUS < tm.P50US {
		t.Errorf("CI [%g, %g] does not hold the median", tm.CILowUS, tm.CIHighUS)
	}
	if samples[0] != 101 {
		t.Error("TimingOf sorted the caller's slice")
	}
}

func TestMedianCI(t *testing.T) {
	seq := func(n int) []float64 {
		s := make([]float64, n)
		for i := range s {
			s[i] = float64(i + 1)
		}
		return s
	}
	tests := []struct {
		n      int
		lo, hi float64 // 1-based order statistics, as tables give them
	}{
		{100, 40, 61}, // the textbook n=100 interval, coverage 96.5%
		{30, 10, 21},
		{10, 2, 9},
		{6, 1, 6},
		{5, 1, 5}, // too few for 95%: the whole range
		{1, 1, 1},
	}
	for _, tt := range tests {
		lo, hi := MedianCI(seq(tt.n), 0.95)
		if lo != tt.lo || hi != tt.hi {
			t.Errorf("n=%d: CI [x(%g), x(%g)], want [x(%g), x(%g)]", tt.n, lo, hi, tt.lo, tt.hi)
		}
	}
	if lo, hi := MedianCI(nil, 0.95); lo != 0 || hi != 0 {
		t.Errorf("empty: %g, %g", lo, hi)
	}
	// Large n must not underflow: the interval narrows around the middle.
	lo, hi := MedianCI(seq(10000), 0.95)
	if lo < 4890 || lo > 4910 || hi < 5090 || hi > 5110 {
		t.Errorf("n=10000: [%g, %g]", lo, hi)
	}
}

func TestBlockRegisters(t *testing.T) {
	tests := []struct{ regs, threads, want int }{
		{32, 128, 4096},
		{33, 32, 1280}, // 33×32 = 1056 rounds up to 1280 per warp
		{255, 256, 65536},
		{168, 512, 86016},
	}
	for _, tt := range tests {
		if got := blockRegisters(tt.regs, tt.threads); got != tt.want {
			t.Errorf("blockRegisters(%d, %d) = %d, want %d", tt.regs, tt.threads, got, tt.want)
		}
	}
}

type infoDevice struct{ resp kernels.Response }

func (d infoDevice) Do(_ context.Context, req kernels.Request, _ time.Duration) (kernels.Response, error) {
	if req.Op != kernels.OpInfo {
		return kernels.Response{Error: "unexpected " + req.Op}, nil
	}
	return d.resp, nil
}

func TestProbeTarget(t *testing.T) {
	l4 := kernels.Response{Device: "NVIDIA L4", ComputeCap: "8.9", SMs: 58, SharedPerBlock: 101376}
	h100 := kernels.Response{Device: "NVIDIA H100 80GB HBM3", ComputeCap: "9.0", SMs: 132, SharedPerBlock: 232448}
	small := kernels.Response{Device: "NVIDIA RTX 4060", ComputeCap: "8.9", SMs: 24, SharedPerBlock: 101376}
	tests := []struct {
		name string
		resp kernels.Response
		arch string
		sms  int
		err  string
	}{
		{"L4", l4, "sm_89", 58, ""},
		{"H100", h100, "sm_90", 132, ""},
		{"device figures win", small, "sm_89", 24, ""},
		{"arch mismatch", h100, "sm_89", 0, "compute capability \"9.0\", not sm_89"},
		{"worker error", kernels.Response{Error: "no CUDA device"}, "sm_89", 0, "no CUDA device"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tg, _, err := ProbeTarget(context.Background(), infoDevice{tt.resp}, tt.arch, time.Second)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Errorf("err = %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tg.SMs != tt.sms || tg.Arch != tt.arch || tg.RegsPerSM == 0 {
				t.Errorf("target %+v", tg)
			}
		})
	}
}

// TestCheckCasesFP8 checks the cases of fp8 and int8: input scale 16
// besides 1 and 4, and the long sequences 512 and 4096 in one batch of at
// most two heads (cheap beside a large problem), skipped where a problem
// shape has that length.
func TestCheckCasesFP8(t *testing.T) {
	for _, dtype := range []string{"fp8", "int8"} {
		t.Run(dtype, func(t *testing.T) { checkCasesOneByte(t, dtype) })
	}
}

func checkCasesOneByte(t *testing.T, dtype string) {
	p := space.Problem{Shapes: []space.Shape{{B: 4, H: 16, S: 2048, D: 64}}, Dtype: dtype}
	var shapes []space.Shape
	scales := map[float64]bool{}
	for _, c := range CheckCases(p) {
		if !slices.Contains(shapes, c.Shape) {
			shapes = append(shapes, c.Shape)
		}
		scales[c.InputScale] = true
	}
	want := []space.Shape{{B: 4, H: 16, S: 1, D: 64}, {B: 4, H: 16, S: 77, D: 64}, {B: 1, H: 2, S: 512, D: 64},
		{B: 4, H: 16, S: 500, D: 64}, {B: 1, H: 2, S: 4096, D: 64}, {B: 4, H: 16, S: 2048, D: 64}}
	if !slices.Equal(shapes, want) {
		t.Errorf("shapes %v, want %v (smallest first)", shapes, want)
	}
	if len(scales) != 3 || !scales[16] {
		t.Errorf("input scales %v, want 1, 4 and 16", scales)
	}
	p.Shapes = []space.Shape{{B: 1, H: 8, S: 512, D: 64}}
	for _, c := range CheckCases(p) {
		if c.Shape.S == 512 && c.Shape != p.Shapes[0] {
			t.Errorf("a 512-key tail %v beside the problem's own 512-key shape", c.Shape)
		}
	}
}

// TestPipelineFP8EndToEndAtScaleOne checks that an fp8 or int8 result
// records its end-to-end accuracy where it is gated, over the input-scale-1
// cases: the larger input scales' worse figures (no kernel can undo the
// one-byte rounding of large scores) are neither gated nor reported as the
// kernel's accuracy. int8's figures at scale 16 would fail its own gate.
func TestPipelineFP8EndToEndAtScaleOne(t *testing.T) {
	for _, c := range []struct {
		dtype, mode string
		cos, relL1  float64
	}{{"fp8", "fp8e2e", 0.9987, 0.051}, {"int8", "int8e2e", 0.99993, 0.0118}} {
		t.Run(c.dtype, func(t *testing.T) {
			p := newTestPipeline(t, &fakeCompiler{}, []*fakeDevice{{}}, func(o *PipelineOptions) {
				o.Problem.Dtype = c.dtype
				o.Problem.Shapes = []space.Shape{{B: 1, H: 2, S: 128, D: 64}}
				o.Cases = CheckCases(o.Problem)
			})
			r := p.Evaluate(context.Background(), cfg(c.mode))
			if !r.OK() || r.Accuracy == nil {
				t.Fatalf("result %s: %s (%+v)", r.Status, r.Reason, r.Accuracy)
			}
			if r.Accuracy.E2ECos != c.cos || r.Accuracy.E2ERelL1 != c.relL1 {
				t.Errorf("e2e cos %g, rel L1 %g; want the scale-1 figures %g and %g", r.Accuracy.E2ECos, r.Accuracy.E2ERelL1, c.cos, c.relL1)
			}
		})
	}
}
