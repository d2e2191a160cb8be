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

// devFP8Record is one fp8 config through every check case of its problem.
type devFP8Record struct {
	Variant   string       `json:"variant"`
	Key       string       `json:"key"`
	Compile   string       `json:"compile_error,omitempty"`
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

// TestDeviceFP8 checks the fp8 (E4M3) family on the GPU: a sample of
// configs covering every knob value at D=64 and D=128 through every fp8
// check case (input scales 1, 4, 16; S = 1, 77, 500, 512, 4096 and the
// problem's; three seeds with three softmax scales), judged by the
// pipeline's own gate; then the end-to-end accuracy on N(0,1) inputs and
// the default config's time beside fp16's at the bench shapes, in one run.
// EVOTUNE_SWEEP_N sets the D=64 sample size (default 40; D=128 gets a
// quarter).
func TestDeviceFP8(t *testing.T) {
	devRequireHeavy(t)
	e := devSetup(t)
	if !kernels.FP8Arch(e.arch) {
		t.Skipf("%s has no E4M3 tensor cores", e.arch)
	}
	if err := kernels.CheckNVCCFor("fp8", e.nvcc.Version); err != nil {
		t.Skip(err)
	}
	ctx := context.Background()
	n := 40
	if s := os.Getenv("EVOTUNE_SWEEP_N"); s != "" {
		fmt.Sscan(s, &n)
	}
	type variant struct {
		name   string
		shape  string
		out    string
		causal bool
		n      int
	}
	variants := []variant{
		{"d64-fp8", "1x8x512x64", "fp16", false, n},
		{"d64-fp8-causal-bf16out", "1x4x300x64", "bf16", true, max(n/4, 1)},
		{"d128-fp8", "1x3x77x128", "fp16", false, max(n/4, 1)},
	}
	pool := e.pool(t)
	var mu sync.Mutex
	var records []devFP8Record
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(runtime.NumCPU())
	for _, v := range variants {
		shape := devShape(t, v.shape)
		prob := space.Problem{Family: kernels.DefaultFamily, Shapes: []space.Shape{shape}, Dtype: "fp8", OutDtype: v.out, Causal: v.causal}
		sp, err := kernels.SDPASpace(prob, e.target)
		if err != nil {
			t.Fatal(err)
		}
		configs := devCoverSelect(sp.ValidConfigs(), v.n, 1)
		cases := CheckCases(prob)
		tol := kernels.ToleranceFor("fp8", v.out)
		t.Logf("%s: %d configs x %d cases", v.name, len(configs), len(cases))
		for _, c := range configs {
			g.Go(func() error {
				rec := devFP8Record{Variant: v.name, Key: c.Key(), Config: c, Pass: true, WorstCos: 1}
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
				for _, cs := range cases {
					plan, err := kernels.SDPAPlan(c, cs.Shape, e.target)
					if err != nil {
						rec.Pass, rec.Why = false, "plan: "+err.Error()
						return nil
					}
					tl := scaledTolerance(tol, cs.InputScale)
					if cs.InputScale != 1 {
						tl.E2ECos, tl.E2ERelL1 = 0, 0
					}
					resp, err := e.worker.Do(gctx, kernels.Request{Op: kernels.OpCheck, Cubin: cubin.Path, Plan: plan, Shape: cs.Shape,
						Dtype: "fp8", OutDtype: v.out, Causal: v.causal, Scale: cs.SoftmaxScale, Seed: cs.Seed,
						InputScale: cs.InputScale, Atol: tl.Atol, Rtol: tl.Rtol}, 2*time.Minute)
					if err == nil && resp.Error != "" {
						err = fmt.Errorf("%s", resp.Error)
					}
					if err != nil {
						rec.Pass, rec.Why, rec.FirstFail = false, err.Error(), cs.String()
						return nil
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
				return nil
			})
		}
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	sort.Slice(records, func(i, j int) bool {
		if records[i].Variant != records[j].Variant {
			return records[i].Variant < records[j].Variant
		}
		return records[i].Key < records[j].Key
	})

	// End to end on N(0,1) inputs and the same-run timing at the bench
	// shapes: the fp8 default config beside the fp16 default.
	type benchRow struct {
		Shape    string  `json:"shape"`
		FP8US    float64 `json:"fp8_default_us"`
		FP16US   float64 `json:"fp16_default_us"`
		Speedup  float64 `json:"fp16_over_fp8"`
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
		run := func(dtype string) (float64, kernels.Response, error) {
			sp, err := kernels.SDPASpace(space.Problem{Family: kernels.DefaultFamily, Shapes: []space.Shape{shape}, Dtype: dtype, Causal: bs.causal}, e.target)
			if err != nil {
				return 0, kernels.Response{}, err
			}
			c := sp.Default()
			cubin, err := devCompile(ctx, pool, sp, c)
			if err != nil {
				return 0, kernels.Response{}, err
			}
			defer cubin.Release()
			us, _, err := e.devTime(ctx, cubin.Path, c, shape, dtype, bs.causal)
			if err != nil || dtype != "fp8" {
				return us, kernels.Response{}, err
			}
			plan, _ := kernels.SDPAPlan(c, shape, e.target)
			resp, err := e.worker.Do(ctx, kernels.Request{Op: kernels.OpCheck, Cubin: cubin.Path, Plan: plan, Shape: shape,
				Dtype: "fp8", Causal: bs.causal, Seed: 1, InputScale: 1, InputDist: "normal"}, 5*time.Minute)
			if err == nil && resp.Error != "" {
				err = fmt.Errorf("%s", resp.Error)
			}
			return us, resp, err
		}
		var resp kernels.Response
		var err8, err16 error
		row.FP8US, resp, err8 = run("fp8")
		row.FP16US, _, err16 = run("fp16")
		if err8 != nil || err16 != nil {
			row.Error = fmt.Sprint(err8, err16)
		} else {
			row.Speedup = row.FP16US / row.FP8US
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
	fmt.Fprintln(tw, "shape\tfp8 default µs\tfp16 default µs\tfp16/fp8\te2e cos N(0,1)\te2e rel L1 N(0,1)\tkernel rel L2")
	for _, b := range bench {
		fmt.Fprintf(tw, "%s\t%.2f\t%.2f\t%.2f\t%.5f\t%.4f\t%.4f\t%s\n", b.Shape, b.FP8US, b.FP16US, b.Speedup, b.E2ECos, b.E2ERelL1, b.KernRel, b.Error)
	}
	tw.Flush()
	t.Logf("fp8 on %s:\n%s", e.info.Device, tab.String())
	dir := devEvidenceDir(t)
	devWriteJSON(t, filepath.Join(dir, "fp8.json"), map[string]any{
		"gpu": e.info.Device, "compute_cap": e.info.ComputeCap, "driver": e.info.DriverVersion,
		"date": time.Now().UTC().Format(time.RFC3339), "commit": devCommit(), "nvcc": e.nvcc.Version, "arch": e.arch,
		"source_hash": kernels.SDPASource().Hash, "command": strings.Join(os.Args, " "),
		"tolerance": kernels.ToleranceFor("fp8", ""), "configs": records, "bench": bench, "failed": failed,
	})
	if err := os.WriteFile(filepath.Join(dir, "fp8.txt"), tab.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if len(failed) > 0 {
		t.Errorf("%d fp8 configs failed:\n%s", len(failed), strings.Join(failed, "\n"))
	}
}
