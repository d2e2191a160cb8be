// Command mkreplay writes a synthetic replay file for the SDPA family: one
// plausible result for every valid config of the space (or a fixed random
// subset of them), produced by a latency model instead of a GPU, so that
// searches can be tested and compared with no GPU at all. Nothing in the
// file is a measurement, and its header says so.
//
// Regenerate the committed file from the runner directory with
//
//	go generate replay.go    (or)
//	go run ./internal/mkreplay -o testdata/replay/synthetic-1x8x512x64-fp16.jsonl.gz
//
// The output depends only on --seed, --configs and the SDPA space: the same
// inputs write the same bytes.
//
// The model, per config, for a 58-SM sm_89 target (an L4's figures):
//   - registers from the warp tile (accumulators, Q fragments, ring
//     addressing per stage), capped by min_blocks_per_sm; a config that needs
//     more than its cap spills and is rejected at the ptxas gate, which is
//     where big tiles with deep rings end up;
//   - residency per SM from threads, shared memory and registers, and an
//     SM utilisation that grows with the warps resident on it;
//   - per tile, tensor-core work at an efficiency set by the warp tile,
//     block_n, the K/V layout (padding costs bank conflicts), fast_exp and
//     q_in_regs, overlapped with the K/V traffic by the cp.async ring
//     (stages=1 serialises them); warp specialisation pays off only with a
//     ring of three or more stages;
//   - tiles are spread over the SMs in rounds, so a grid smaller than the GPU
//     leaves SMs idle and split_kv helps, at the price of a combine launch;
//     persistent CTAs save a little on a grid of several waves;
//   - with --dtype fp8 the inputs are one byte, Q K^T runs at the L4's E4M3
//     rate (twice fp16's) and so does P V with pv_fp8=1 (fp16's with
//     pv_fp8=0, after widening V); two-level accumulation (pv_accum=1)
//     costs registers, not time; qk_accum=1 costs 2% of the tile's tensor
//     time, and at D=128 a second score accumulator's registers; qk_f16=1
//     runs Q K^T at fp16's rate with Q's fragments in fp16 registers;
//   - --dtype int8 is fp8 with pv_fp8=0: one-byte inputs, Q K^T at the
//     L4's IMMA rate (twice fp16's), P V in fp16; its kernel error is
//     fp16's and its end-to-end error INT8's floor (kernels.ToleranceFor);
//   - a few configs fail correctness (two producer warps on a 32-row ring
//     race) or fault at random, and timing noise is multiplicative.
package main

import (
	"bufio"
	"compress/gzip"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"time"

	"github.com/spf13/pflag"

	"evotune/kernels"
	"evotune/runner"
	"evotune/space"
)

func main() {
	if err := run(os.Args[1:], os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "mkreplay:", err)
		os.Exit(1)
	}
}

// options are the generator's flags.
type options struct {
	out     string
	seed    uint64
	configs int
	dtype   string
}

func run(args []string, stderr io.Writer) error {
	var opt options
	flags := pflag.NewFlagSet("mkreplay", pflag.ContinueOnError)
	flags.SetOutput(stderr)
	flags.StringVarP(&opt.out, "out", "o", "", "replay file to write (.gz: gzip-compressed)")
	flags.Uint64Var(&opt.seed, "seed", 1, "seed of the model's noise and of the subset drawn by --configs")
	flags.IntVar(&opt.configs, "configs", 0, "record a fixed random subset of this many valid configs (0: all)")
	flags.StringVar(&opt.dtype, "dtype", "fp16", "the recorded problem's dtype: fp16, fp8 or int8")
	if err := flags.Parse(args); err != nil {
		return err
	}
	if opt.out == "" {
		return errors.New("-o (--out) is required")
	}
	if opt.dtype != "fp16" && !space.Quantized(opt.dtype) {
		return fmt.Errorf("--dtype %q: want fp16, fp8 or int8", opt.dtype)
	}
	if opt.configs < 0 {
		return fmt.Errorf("--configs must be 0 (all) or positive, got %d", opt.configs)
	}
	f, err := os.Create(opt.out)
	if err != nil {
		return fmt.Errorf("creating -o: %w", err)
	}
	if err := write(f, opt); err != nil {
		f.Close()
		return fmt.Errorf("writing %s: %w", opt.out, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", opt.out, err)
	}
	return nil
}

// arch is the recorded target: an L4's architecture.
const arch = kernels.DefaultArch

// problem is the recorded problem: one 1x8x512x64 shape of dtype.
func problem(dtype string) space.Problem {
	shape := space.Shape{B: 1, H: 8, S: 512, D: 64}
	return space.Problem{Family: kernels.DefaultFamily, Shapes: []space.Shape{shape}, Dtype: dtype}
}

// write writes the replay file for opt to w, gzip-compressed.
func write(w io.Writer, opt options) error {
	target, err := kernels.TargetFor(arch)
	if err != nil {
		return err
	}
	p := problem(opt.dtype)
	family, err := kernels.FamilyOf(p.Family)
	if err != nil {
		return err
	}
	s, err := family.SpaceFor(p, target)
	if err != nil {
		return err
	}
	if err := s.Validate(); err != nil {
		return err
	}
	configs := s.ValidConfigs()
	if opt.configs > 0 && opt.configs < len(configs) {
		rng := rand.New(rand.NewPCG(opt.seed, 0x5eed))
		rng.Shuffle(len(configs), func(i, j int) { configs[i], configs[j] = configs[j], configs[i] })
		configs = configs[:opt.configs]
	}

	env := space.Env{GPU: "synthetic", ComputeCap: "8.9", Arch: arch, SourceHash: "synthetic"}
	header := runner.ReplayHeader{
		Problem:   &p,
		Env:       env,
		Recorded:  "synthetic: a latency model of the SDPA space (runner/internal/mkreplay), not a measurement",
		Synthetic: true,
		Seed:      opt.seed,
		Configs:   len(configs),
	}
	zw, err := gzip.NewWriterLevel(w, gzip.BestCompression)
	if err != nil {
		return err
	}
	bw := bufio.NewWriter(zw)
	enc := json.NewEncoder(bw)
	if err := enc.Encode(map[string]any{"replay_header": header}); err != nil {
		return err
	}
	m := model{family: family, target: target, s: s, env: env, problem: p}
	clock := time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)
	for _, c := range configs {
		r, err := m.result(c, opt.seed, clock)
		if err != nil {
			return err
		}
		clock = r.Finished.Add(50 * time.Millisecond)
		if err := enc.Encode(r); err != nil {
			return err
		}
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	return zw.Close()
}

// model turns a config into a plausible result.
type model struct {
	family  kernels.Family
	target  kernels.Target
	s       *space.Space
	env     space.Env
	problem space.Problem
}

// Figures of the modelled GPU.
const (
	peakPerSM     = 2.09e6 // fp16 tensor-core flop/µs per SM (121 TFLOP/s over 58 SMs)
	l2PerSM       = 40e3   // bytes/µs of L2 bandwidth one SM gets
	sharedPerSM   = 102400 // bytes of shared memory per SM
	maxBlocksSM   = 24
	launchUS      = 2.2 // one launch inside a CUDA graph
	noiseSigma    = 0.03
	compileMinSec = 4.0
	compileMaxSec = 12.0
)

// geometry is what the model reads from a config.
type geometry struct {
	shape             space.Shape
	ws                bool
	producers, stages int
	blockM, blockN    int
	warps, threads    int
	warpsM, warpsN    int
	fastExp, qInRegs  bool
	persistent        bool
	swizzle           bool
	minBlocks, split  int
	grid, smem        int
	// fp8 and int8: one-byte inputs; P V in E4M3 (fp8's pv_fp8=1) or
	// fp16; two-level accumulation.
	oneByte, pvFP8, pvAccum bool
	// fp8's two-level Q K^T accumulation.
	qkAccum bool
	qkF16   bool
}

func (m model) geometry(c space.Config) (geometry, error) {
	shape := m.problem.Shapes[0]
	plan, err := m.family.Plan(c, shape, m.target)
	if err != nil {
		return geometry{}, err
	}
	g := geometry{
		shape: shape,
		ws:    c.Int("ws") == 1, producers: c.Int("producer_warps"), stages: c.Int("stages"),
		blockM: c.Int("block_m"), blockN: c.Int("block_n"), warps: c.Int("warps"),
		fastExp: c.Int("fast_exp") == 1, qInRegs: c.Int("q_in_regs") == 1,
		persistent: c.Int("persistent") == 1, swizzle: c["kv_layout"] == "swizzle",
		minBlocks: c.Int("min_blocks_per_sm"), split: c.Int("split_kv"),
		grid: plan.Launches[0].Grid[0], threads: plan.Launches[0].Block[0],
		smem: plan.Launches[0].SharedBytes,
	}
	if space.Quantized(m.problem.Dtype) {
		g.oneByte, g.pvAccum = true, c.Int("pv_accum") == 1
		g.pvFP8 = m.problem.Dtype == "fp8" && c.Int("pv_fp8") == 1
		g.qkAccum = m.problem.Dtype == "fp8" && c.Int("qk_accum") == 1
		g.qkF16 = m.problem.Dtype == "fp8" && c["qk_f16"] == "1"
	}
	g.warpsM = min(g.warps, max(g.blockM/16, 1))
	g.warpsN = g.warps / g.warpsM
	return g, nil
}

// registers returns the registers per thread the kernel needs and the cap
// that __launch_bounds__ sets.
func (g geometry) registers(rng *rand.Rand) (need, limit int) {
	mt := g.blockM / g.warpsM / 16
	cols := g.blockN / g.warpsN
	d := g.shape.D
	est := float64(mt*d/2 + mt*cols/2 + 4*mt + 24)
	if g.qInRegs {
		est += float64(mt * d / 4)
		if g.oneByte && !g.qkF16 {
			est -= float64(mt * d / 8) // one-byte Q fragments (qk_f16 widens them)
		}
	}
	if g.oneByte && g.pvAccum {
		est += float64(mt * d / 2)
	}
	if g.qkAccum && d >= 128 {
		est += float64(mt * cols / 2) // a second score accumulator over four k32 steps
	}
	// The unrolled cp.async ring keeps addresses and predicates per stage
	// and per 32-key chunk: deep rings of long tiles are what spills.
	est = est*1.2 + float64(3*g.stages*g.blockN/32) + 10
	if g.ws {
		est += 8
	}
	need = int(math.Round(est * (1 + 0.04*rng.NormFloat64())))
	limit = min(255, 65536/(g.threads*g.minBlocks)) &^ 7
	return need, limit
}

// result models config c; its noise comes from a generator seeded by seed
// and the config's key, so a config's result does not depend on which other
// configs are recorded.
func (m model) result(c space.Config, seed uint64, started time.Time) (space.Result, error) {
	sum := sha256.Sum256([]byte(c.Key()))
	rng := rand.New(rand.NewPCG(seed, binary.LittleEndian.Uint64(sum[:8])))
	flags, err := m.s.Flags(c)
	if err != nil {
		return space.Result{}, err
	}
	g, err := m.geometry(c)
	if err != nil {
		return space.Result{}, fmt.Errorf("config %s: %w", c.Key(), err)
	}
	p := m.problem
	r := space.Result{
		Key: c.Key(), Config: c, Flags: flags, Env: m.env, Problem: &p, Started: started,
	}
	r.Cost.CompileSec = round(compileSec(g, rng), 2)

	need, limit := g.registers(rng)
	r.Ptxas = &space.Ptxas{Registers: min(need, limit)}
	if need > limit {
		spill := 4 * (need - limit) * (1 + rng.IntN(3))
		r.Ptxas.SpillStores, r.Ptxas.SpillLoads, r.Ptxas.StackBytes = spill, spill, spill+8
		r.Status, r.Gate = space.StatusPtxasReject, space.GatePtxas
		r.Reason = fmt.Sprintf("%d bytes of spill stores (limit 0) at %d registers", spill, limit)
		return finish(r), nil
	}

	r.Cost.CheckSec = round(0.3*(1+0.1*rng.NormFloat64()), 3)
	acc := accuracy(g, rng)
	r.Accuracy = &acc
	switch u := rng.Float64(); {
	case u < 0.0015:
		r.Status, r.Gate = space.StatusFault, space.GateCorrectness
		r.Reason = "CUDA error: an illegal memory access was encountered (sticky; worker restarted)"
		r.Accuracy = nil
		r.Cost.CheckSec += 1.5
		return finish(r), nil
	case u < 0.002:
		r.Status, r.Gate = space.StatusTimeout, space.GateCorrectness
		r.Reason = "check request outlived its 10 s limit (worker killed)"
		r.Accuracy = nil
		r.Cost.CheckSec = 10
		return finish(r), nil
	}
	tol := m.family.Tolerance(m.problem.Dtype, m.problem.OutDtype)
	switch m.problem.Dtype {
	case "fp8":
		// E4M3's rounding of P, and of the inputs end to end
		// (kernels/NOTES.md, "fp8").
		scale := 1.0
		if !g.pvFP8 {
			scale = 0.05
		}
		acc.MaxAbsErr = round(acc.MaxAbsErr/4e-4*0.012*scale, 6)
		acc.MeanAbsErr = round(acc.MeanAbsErr/1.5e-5*1.5e-3*scale, 7)
		acc.RelL2 = round(acc.RelL2/3e-4*0.02*scale, 6)
		acc.E2ECos = round(0.999-0.0004*rng.Float64(), 5)
		acc.E2ERelL1 = round(0.045+0.005*rng.Float64(), 4)
	case "int8":
		// The kernel errs as fp16's; end to end, INT8's rounding of the
		// inputs with per-row and per-column scales (the floor model's
		// cosine 0.99993, relative L1 0.0115 at 1x1x512x64).
		acc.E2ECos = round(0.99995-0.00004*rng.Float64(), 6)
		acc.E2ERelL1 = round(0.0110+0.0015*rng.Float64(), 5)
	}
	if acc.MaxAbsErr > tol.MaxAbs || acc.BadFrac > tol.BadFrac {
		r.Status, r.Gate = space.StatusIncorrect, space.GateCorrectness
		r.Reason = fmt.Sprintf("max_abs_err %.3g > %.3g or bad_frac %.3g > %.3g", acc.MaxAbsErr, tol.MaxAbs, acc.BadFrac, tol.BadFrac)
		return finish(r), nil
	}

	p50 := latencyUS(g, need) * math.Exp(noiseSigma*rng.NormFloat64())
	r.Cost.TimeSec = round(0.5*(1+0.1*rng.NormFloat64()), 3)
	r.Timings = []space.Timing{timing(g.shape, p50, rng)}
	r.Objective = r.Timings[0].P50US
	r.Status, r.Gate = space.StatusOK, space.GateTimed
	return finish(r), nil
}

// finish sets the end time from the cost.
func finish(r space.Result) space.Result {
	r.Finished = r.Started.Add(time.Duration(r.Cost.Total() * float64(time.Second))).Round(time.Millisecond)
	return r
}

// compileSec grows with the code nvcc has to unroll.
func compileSec(g geometry, rng *rand.Rand) float64 {
	x := 0.3*float64(g.stages-1)/3 + 0.4*float64(g.blockM*g.blockN)/(128*128)
	if g.ws {
		x += 0.15
	}
	if g.split > 1 {
		x += 0.1
	}
	x += 0.05 * rng.NormFloat64()
	return compileMinSec + (compileMaxSec-compileMinSec)*min(max(x, 0), 1)
}

// accuracy returns the worst-case errors against the fp32 reference.
func accuracy(g geometry, rng *rand.Rand) space.Accuracy {
	a := space.Accuracy{
		MaxAbsErr:  4e-4 * math.Exp(0.3*rng.NormFloat64()),
		MeanAbsErr: 1.5e-5 * math.Exp(0.1*rng.NormFloat64()),
		RelL2:      3e-4 * math.Exp(0.1*rng.NormFloat64()),
		Cases:      12,
	}
	if g.fastExp {
		a.MaxAbsErr *= 1.3
		a.MeanAbsErr *= 1.1
	}
	racy := g.ws && g.producers == 2 && g.blockN == 32
	if racy || rng.Float64() < 0.004 {
		a.MaxAbsErr = 0.05 + 0.5*rng.Float64()
		a.MeanAbsErr = 1e-3 * (1 + rng.Float64())
		a.RelL2 = 2e-2 * (1 + rng.Float64())
		a.BadFrac = 0.002 + 0.02*rng.Float64()
	}
	a.MaxAbsErr, a.MeanAbsErr, a.RelL2, a.BadFrac = round(a.MaxAbsErr, 7), round(a.MeanAbsErr, 8), round(a.RelL2, 7), round(a.BadFrac, 5)
	return a
}

// latencyUS is the noiseless time of one call, in microseconds.
func latencyUS(g geometry, regs int) float64 {
	const sms = 58
	resident := min(1536/g.threads, sharedPerSM/max(g.smem, 1), 65536/(regs*g.threads), maxBlocksSM)
	resident = max(resident, 1)

	shape := g.shape
	tiles := shape.B * shape.H * ceilDiv(shape.S, g.blockM) * g.split
	keys := ceilDiv(shape.S, g.split)
	rounds := ceilDiv(tiles, sms)
	active := min(resident, rounds)
	util := 1 - math.Exp(-float64(active*g.warps)/4)

	// Tensor-core efficiency: taller warp tiles reuse fragments better,
	// splitting key columns across warps costs a combine, 32-key tiles are
	// too short and 128- and 256-key tiles press on registers.
	mt := g.blockM / g.warpsM / 16
	eff := 0.7 * pick(mt, at(1, 0.8), at(2, 0.95), at(3, 0.97), at(4, 1))
	eff *= 1 - 0.06*float64(g.warpsN-1)
	eff *= pick(g.blockN, at(32, 0.85), at(64, 1), at(128, 0.96), at(256, 0.9))
	if !g.swizzle {
		eff *= 0.93 // bank conflicts on padded rows
	}
	if !g.fastExp {
		eff *= 0.9
	}
	if !g.qInRegs {
		eff *= 0.94
	}
	compute := 4 * float64(g.blockM*keys*shape.D) / (peakPerSM * eff)
	if g.oneByte {
		// Q K^T at E4M3's or IMMA's rate (twice fp16's; fp16's with
		// qk_f16=1), P V too with pv_fp8=1.
		qk, pv := 0.5, 0.5
		if g.qkF16 {
			qk = 1
		}
		if !g.pvFP8 {
			pv = 1
		}
		compute *= (qk + pv) / 2
		if g.qkAccum {
			compute *= 1.02 // an FADD per score and k32 step after the first
		}
	}
	esz := 2
	if g.oneByte {
		esz = 1
	}
	memory := float64(2*keys*shape.D*esz+2*g.blockM*shape.D*esz) / l2PerSM

	var tile float64
	switch {
	case g.ws:
		// Producers take the loads off the consumers; a two-stage ring is
		// too short for them to run ahead.
		overlap := pick(g.stages, at(2, 1.03), at(3, 0.92), at(4, 0.9))
		if g.producers == 2 && g.blockN == 128 {
			overlap *= 0.97
		}
		tile = max(compute*overlap, memory) + pick(g.stages, at(2, 0.25), at(3, 0.05), at(4, 0.05))*min(compute, memory)
	case g.stages == 1:
		tile = compute + memory
	default:
		tile = max(compute, memory) + pick(g.stages, at(2, 0.25), at(3, 0.1), at(4, 0.08))*min(compute, memory)
	}
	t := launchUS + float64(rounds)*tile/util
	if g.persistent {
		if tiles > g.grid {
			t -= 0.03 * float64(rounds) * tile / util
		} else {
			t += 0.3
		}
	}
	if g.split > 1 {
		t += launchUS + 0.7*float64(g.split)
	}
	return t
}

// timing returns a measurement around a median of p50.
func timing(shape space.Shape, p50 float64, rng *rand.Rand) space.Timing {
	spread := math.Abs(rng.NormFloat64())
	p90 := p50 * (1.01 + 0.02*spread)
	return space.Timing{
		Shape:             shape,
		P50US:             round(p50, 3),
		P90US:             round(p90, 3),
		P99US:             round(p90*(1.02+0.05*spread), 3),
		CILowUS:           round(p50*(1-0.004*(1+spread)), 3),
		CIHighUS:          round(p50*(1+0.004*(1+spread)), 3),
		LaunchesPerSample: 50,
		SMClockMHz:        2040 - 15*rng.IntN(4),
		TempC:             58 + rng.IntN(12),
		PowerW:            round(60+10*rng.Float64(), 1),
	}
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

// An entry maps a knob value to a factor of the model.
type entry struct {
	value  int
	factor float64
}

func at(value int, factor float64) entry { return entry{value, factor} }

// pick returns the factor of value among entries; values the model does
// not list count as 1.
func pick(value int, entries ...entry) float64 {
	for _, e := range entries {
		if e.value == value {
			return e.factor
		}
	}
	return 1
}

// round rounds x to n decimals, which keeps the file small.
func round(x float64, n int) float64 {
	p := math.Pow(10, float64(n))
	return math.Round(x*p) / p
}
