package runner

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"
	"text/tabwriter"
	"time"

	"golang.org/x/sync/errgroup"

	"evotune/kernels"
	"evotune/space"
)

// devOneByteRecord is one fp8 or int8 config through every check case of
// its problem.
type devOneByteRecord struct {
	Variant   string       `json:"variant"`
	Key       string       `json:"key"`
	Compile   string       `json:"compile_error,omitempty"`
	Ptxas     string       `json:"ptxas_reject,omitempty"` // refused at the ptxas gate, before the GPU (TestDeviceHopper)
	Cases     int          `json:"cases"`
	Pass      bool         `json:"pass"`
	Why       string       `json:"why,omitempty"`
	WorstMax  float64      `json:"worst_max_abs_err"`
	WorstRel  float64      `json:"worst_rel_l2"`
	WorstCos  float64      `json:"worst_e2e_cos_scale1"`
	WorstL1   float64      `json:"worst_e2e_rel_l1_scale1"`
	NaNInf    int          `json:"nan_inf"`
	Config    space.Config `json:"config"`
	FirstFail string       `json:"first_failing_case,omitempty"`
}

// devSweepN is the D=64 sample size of a one-byte sweep: EVOTUNE_SWEEP_N,
// default 40 (the other variants get a quarter).
func devSweepN() int {
	n := 40
	if s := os.Getenv("EVOTUNE_SWEEP_N"); s != "" {
		fmt.Sscan(s, &n)
	}
	return n
}

// A devOneByteVariant is one problem of a one-byte sweep: n configs of it.
type devOneByteVariant struct {
	name   string
	shape  string
	out    string
	causal bool
	n      int
	vt     bool // fp8: V given transposed (space.Problem.VTransposed)
}

// devOneByteSweep runs a sample of configs covering every knob value of
// each variant's space through every check case of dtype (fp8 or int8:
// input scales 1, 4, 16; S = 1, 77, 500, 512, 4096 and the problem's; three
// seeds with three softmax scales), judged by the pipeline's own gate; then
// the end-to-end accuracy on N(0,1) inputs and the default config's time
// beside fp16's at the bench shapes, in one run. It writes DTYPE.json and
// DTYPE.txt to the evidence directory, fails the test for every failing
// config, and returns the records.
func devOneByteSweep(t *testing.T, e *devEnv, dtype string, variants []devOneByteVariant) []devOneByteRecord {
	ctx := context.Background()
	pool := e.pool(t)
	fam, err := kernels.FamilyOf(kernels.DefaultFamily)
	if err != nil {
		t.Fatal(err)
	}
	records := e.devSweep(t, pool, fam, dtype, variants, func(sp *space.Space, n int) []space.Config {
		return devCoverSelect(sp.ValidConfigs(), n, 1)
	}, nil)

	// End to end on N(0,1) inputs and the same-run timing at the bench
	// shapes: the dtype's default config beside the fp16 default.
	type benchRow struct {
		Shape    string  `json:"shape"`
		US       float64 `json:"default_us"`
		FP16US   float64 `json:"fp16_default_us"`
		Speedup  float64 `json:"fp16_over_dtype"`
		E2ECos   float64 `json:"e2e_cos_normal"`
		E2ERelL1 float64 `json:"e2e_rel_l1_normal"`
		KernRel  float64 `json:"kernel_rel_l2_normal"`
		Error    string  `json:"error,omitempty"`
	}
	var bench []benchRow
	for _, bs := range []struct {
		shape  string
		causal bool
	}{{"1x8x512x64", false}, {"4x16x2048x64", false}, {"4x16x2048x128", false}, {"8x16x4096x64", true}} {
		shape := devShape(t, bs.shape)
		row := benchRow{Shape: bs.shape}
		if bs.causal {
			row.Shape += " causal"
		}
		run := func(dt string) (float64, kernels.Response, error) {
			sp, err := kernels.SDPASpace(space.Problem{Family: kernels.DefaultFamily, Shapes: []space.Shape{shape}, Dtype: dt, Causal: bs.causal}, e.target)
			if err != nil {
				return 0, kernels.Response{}, err
			}
			c := sp.Default()
			cubin, err := devCompile(ctx, pool, sp, c)
			if err != nil {
				return 0, kernels.Response{}, err
			}
			defer cubin.Release()
			us, _, err := e.devTime(ctx, cubin.Path, c, shape, dt, bs.causal)
			if err != nil || dt != dtype {
				return us, kernels.Response{}, err
			}
			plan, _ := kernels.SDPAPlan(c, shape, e.target)
			resp, err := e.worker.Do(ctx, kernels.Request{Op: kernels.OpCheck, Cubin: cubin.Path, Plan: plan, Shape: shape,
				Dtype: dtype, Causal: bs.causal, Seed: 1, InputScale: 1, InputDist: "normal"}, 5*time.Minute)
			if err == nil && resp.Error != "" {
				err = fmt.Errorf("%s", resp.Error)
			}
			return us, resp, err
		}
		var resp kernels.Response
		var err1, err16 error
		row.US, resp, err1 = run(dtype)
		row.FP16US, _, err16 = run("fp16")
		if err1 != nil || err16 != nil {
			row.Error = fmt.Sprint(err1, err16)
		} else {
			row.Speedup = row.FP16US / row.US
			row.E2ECos, row.E2ERelL1, row.KernRel = resp.E2ECos, resp.E2ERelL1, resp.RelL2
		}
		bench = append(bench, row)
	}

	var failed []string
	var tab bytes.Buffer
	tw := tabwriter.NewWriter(&tab, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "variant\tconfigs\tfailed\tcompile errors\tcases\tworst max abs/scale\tworst rel L2\tworst e2e cos\tworst e2e rel L1\tNaN+Inf")
	for _, v := range variants {
		var cfgs, bad, ko, cases, naninf int
		worstMax, worstRel, worstCos, worstL1 := 0.0, 0.0, 1.0, 0.0
		for _, r := range records {
			if r.Variant != v.name {
				continue
			}
			cfgs++
			cases += r.Cases
			naninf += r.NaNInf
			if r.Compile != "" {
				ko++
			}
			if !r.Pass {
				bad++
				failed = append(failed, fmt.Sprintf("%s %s: %s: %s", v.name, r.Key, r.FirstFail, r.Why))
			}
			worstMax, worstRel = math.Max(worstMax, r.WorstMax), math.Max(worstRel, r.WorstRel)
			if r.Cases > 0 {
				worstCos, worstL1 = math.Min(worstCos, r.WorstCos), math.Max(worstL1, r.WorstL1)
			}
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%.3g\t%.3g\t%.5f\t%.4f\t%d\n", v.name, cfgs, bad, ko, cases, worstMax, worstRel, worstCos, worstL1, naninf)
	}
	fmt.Fprintln(tw)
	fmt.Fprintf(tw, "shape\t%[1]s default µs\tfp16 default µs\tfp16/%[1]s\te2e cos N(0,1)\te2e rel L1 N(0,1)\tkernel rel L2\n", dtype)
	for _, b := range bench {
		fmt.Fprintf(tw, "%s\t%.2f\t%.2f\t%.2f\t%.5f\t%.4f\t%.4f\t%s\n", b.Shape, b.US, b.FP16US, b.Speedup, b.E2ECos, b.E2ERelL1, b.KernRel, b.Error)
	}
	tw.Flush()
	t.Logf("%s on %s:\n%s", dtype, e.info.Device, tab.String())
	dir := devEvidenceDir(t)
	devWriteJSON(t, filepath.Join(dir, dtype+".json"), map[string]any{"dtype": dtype,
		"gpu": e.info.Device, "compute_cap": e.info.ComputeCap, "driver": e.info.DriverVersion,
		"date": time.Now().UTC().Format(time.RFC3339), "commit": devCommit(), "nvcc": e.nvcc.Version, "arch": e.arch,
		"source_hash": kernels.SDPASource().Hash, "command": strings.Join(os.Args, " "),
		"tolerance": kernels.ToleranceFor(dtype, ""), "configs": records, "bench": bench, "failed": failed,
	})
	if err := os.WriteFile(filepath.Join(dir, dtype+".txt"), tab.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if len(failed) > 0 {
		t.Errorf("%d %s configs failed:\n%s", len(failed), dtype, strings.Join(failed, "\n"))
	}
	return records
}

// devRunCases runs a compiled config through every case on the worker and
// records the outcome in rec, judged as the pipeline judges: the tolerance
// scaled with the input scale, the end-to-end limits at input scale 1 only.
// plan gives the config's launches on a case's shape. It stops at the first
// case the worker cannot run; an accuracy failure is recorded and the other
// cases still run (their worst errors are reported).
func (e *devEnv) devRunCases(ctx context.Context, rec *devOneByteRecord, cubin string, cases []CheckCase,
	plan func(space.Shape) (kernels.Plan, error), prob space.Problem, tol kernels.Tolerance) {
	for _, cs := range cases {
		pl, err := plan(cs.Shape)
		if err != nil {
			rec.Pass, rec.Why = false, "plan: "+err.Error()
			return
		}
		tl := scaledTolerance(tol, cs.InputScale)
		if cs.InputScale != 1 {
			tl.E2ECos, tl.E2ERelL1 = 0, 0
		}
		req := kernels.RequestFor(kernels.OpCheck, prob)
		req.Cubin, req.Plan, req.Shape = cubin, pl, cs.Shape
		req.Scale, req.Seed, req.InputScale, req.Atol, req.Rtol = cs.SoftmaxScale, cs.Seed, cs.InputScale, tl.Atol, tl.Rtol
		resp, err := e.worker.Do(ctx, req, 2*time.Minute)
		if err == nil && resp.Error != "" {
			err = fmt.Errorf("%s", resp.Error)
		}
		if err != nil {
			rec.Pass, rec.Why, rec.FirstFail = false, err.Error(), cs.String()
			return
		}
		rec.Cases++
		rec.NaNInf += resp.NaN + resp.Inf
		rec.WorstMax = math.Max(rec.WorstMax, resp.MaxAbsErr/cs.InputScale)
		rec.WorstRel = math.Max(rec.WorstRel, resp.RelL2)
		if cs.InputScale == 1 {
			rec.WorstCos = math.Min(rec.WorstCos, resp.E2ECos)
			rec.WorstL1 = math.Max(rec.WorstL1, resp.E2ERelL1)
		}
		if why := accuracyFailure(resp, tl); why != "" && rec.Pass {
			rec.Pass, rec.Why, rec.FirstFail = false, why, cs.String()
		}
	}
}

// devSortRecords orders a sweep's records by variant, then config key.
func devSortRecords[T any](rs []T, vk func(T) (string, string)) {
	sort.Slice(rs, func(i, j int) bool {
		vi, ki := vk(rs[i])
		vj, kj := vk(rs[j])
		if vi != vj {
			return vi < vj
		}
		return ki < kj
	})
}

// devSweep compiles each variant's sample of configs of family fam with
// pool and runs each through every check case of dtype (devRunCases, the
// pipeline's gate), several at once. With gate set, a config whose ptxas
// figures exceed it is recorded as refused (Ptxas) and not run, as a tune
// refuses it. It returns the records sorted by variant and config key.
func (e *devEnv) devSweep(t *testing.T, pool *CompilePool, fam kernels.Family, dtype string, variants []devOneByteVariant,
	sample func(sp *space.Space, n int) []space.Config, gate *GateLimits) []devOneByteRecord {
	t.Helper()
	var mu sync.Mutex
	var records []devOneByteRecord
	g, gctx := errgroup.WithContext(context.Background())
	g.SetLimit(runtime.NumCPU())
	for _, v := range variants {
		prob := space.Problem{Family: fam.Name, Shapes: []space.Shape{devShape(t, v.shape)}, Dtype: dtype, OutDtype: v.out, Causal: v.causal, VTransposed: v.vt}
		sp, err := fam.SpaceFor(prob, e.target)
		if err != nil {
			t.Fatal(err)
		}
		configs := sample(sp, v.n)
		cases := CheckCases(prob)
		tol := fam.Tolerance(dtype, v.out)
		t.Logf("%s: %d configs x %d cases", v.name, len(configs), len(cases))
		for _, c := range configs {
			g.Go(func() error {
				rec := devOneByteRecord{Variant: v.name, Key: c.Key(), Config: c, Pass: true, WorstCos: 1}
				defer func() {
					mu.Lock()
					records = append(records, rec)
					mu.Unlock()
				}()
				cubin, err := devCompile(gctx, pool, sp, c)
				if err != nil {
					if gctx.Err() != nil {
						return gctx.Err()
					}
					rec.Compile, rec.Pass, rec.Why = err.Error(), false, err.Error()
					return nil
				}
				defer cubin.Release()
				if gate != nil {
					rep, err := ParsePtxas(cubin.Ptxas)
					if err != nil {
						rec.Compile, rec.Pass, rec.Why = "ptxas report: "+err.Error(), false, err.Error()
						return nil
					}
					if why := gate.Check(rep.Worst()); why != "" {
						rec.Ptxas = why
						return nil
					}
				}
				e.devRunCases(gctx, &rec, cubin.Path, cases, func(s space.Shape) (kernels.Plan, error) { return fam.Plan(c, s, e.target) },
					prob, tol)
				return nil
			})
		}
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	devSortRecords(records, func(r devOneByteRecord) (string, string) { return r.Variant, r.Key })
	return records
}
