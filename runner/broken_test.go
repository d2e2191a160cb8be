package runner

// The broken-kernel suite: every file in testdata/broken is a whole SDPA
// candidate source (the entry points and SdpaParams of kernels/sdpa.cu)
// with one defect, and the gates must give each its class. Without a GPU
// the nvcc and ptxas gates run for real; on a GPU the whole pipeline runs,
// with the worker restarted after faults and hangs.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"evotune/kernels"
	"evotune/space"
)

// A brokenKernel is one source of testdata/broken and what the gates must
// say about it.
type brokenKernel struct {
	file   string
	want   space.Status
	reason string // a substring the reason must hold; "" checks none
}

// brokenKernels lists the suite; TestBrokenKernelsListed keeps it in step
// with the directory.
func brokenKernels() []brokenKernel {
	return []brokenKernel{
		{"good.cu", space.StatusOK, ""},
		{"oob_write.cu", space.StatusFault, ""},
		{"infinite_loop.cu", space.StatusTimeout, ""},
		{"nan_output.cu", space.StatusIncorrect, "NaN"},
		{"tail_wrong.cu", space.StatusIncorrect, ""},
		{"seed_wrong.cu", space.StatusIncorrect, "seed 1"},
		{"race.cu", space.StatusIncorrect, ""},
		{"partial_write.cu", space.StatusIncorrect, "NaN"},
		{"constant_output.cu", space.StatusIncorrect, ""},
		{"register_spill.cu", space.StatusPtxasReject, "spill"},
		{"compile_error.cu", space.StatusCompileError, "output_bias"},
		{"huge_shared.cu", space.StatusCompileError, "too much shared data"},
	}
}

// reachesGPU reports whether a candidate of this class passes the nvcc
// and ptxas gates.
func (k brokenKernel) reachesGPU() bool {
	return k.want != space.StatusCompileError && k.want != space.StatusPtxasReject
}

// brokenSource returns the embedded SDPA source with sdpa.cu replaced by
// testdata/broken/file, as evotune --kernel-source builds it.
func brokenSource(t *testing.T, file string) kernels.Source {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "broken", file))
	if err != nil {
		t.Fatal(err)
	}
	src := kernels.SDPASource()
	files := map[string][]byte{}
	for name, content := range src.Files {
		files[name] = content
	}
	files[src.Name] = b
	sum := sha256.Sum256(b)
	return kernels.Source{Name: src.Name, Files: files, Hash: hex.EncodeToString(sum[:])}
}

func TestBrokenKernelsListed(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join("testdata", "broken", "*.cu"))
	if err != nil {
		t.Fatal(err)
	}
	var onDisk, listed []string
	for _, p := range paths {
		onDisk = append(onDisk, filepath.Base(p))
	}
	for _, k := range brokenKernels() {
		listed = append(listed, k.file)
	}
	slices.Sort(onDisk)
	slices.Sort(listed)
	if !slices.Equal(onDisk, listed) {
		t.Errorf("testdata/broken holds %v, the suite lists %v", onDisk, listed)
	}
	for _, k := range brokenKernels() {
		b, err := os.ReadFile(filepath.Join("testdata", "broken", k.file))
		if err != nil {
			t.Fatal(err)
		}
		// Every candidate keeps the family's entry points, so that only its
		// defect can explain its class.
		for _, entry := range []string{`extern "C" __global__`, "sdpa_fwd(const SdpaParams p)", "sdpa_combine(const SdpaParams p)", "Expected: "} {
			if !strings.Contains(string(b), entry) {
				t.Errorf("%s lacks %q", k.file, entry)
			}
		}
	}
}

// brokenPipeline is a pipeline over src for the mission shape on target.
func brokenPipeline(t *testing.T, comp Compiler, dev Device, gpu space.Env, target kernels.Target, src kernels.Source, nvccVersion string, edit func(*PipelineOptions)) (*Pipeline, *space.Space) {
	t.Helper()
	prob := space.Problem{Family: kernels.DefaultFamily, Shapes: []space.Shape{{B: 1, H: 8, S: 512, D: 64}}, Dtype: "fp16"}
	sp, err := kernels.SDPASpace(prob, target)
	if err != nil {
		t.Fatal(err)
	}
	o := PipelineOptions{
		Space: sp, Problem: prob, Target: target, Compiler: comp,
		GPUs: []GPU{{Device: dev, Env: gpu, NVMLIndex: -1}},
		Gate: DefaultGateLimits(target.SharedPerBlock),
		Env:  space.Env{Arch: target.Arch, NVCC: nvccVersion, SourceHash: src.Hash},
	}
	if edit != nil {
		edit(&o)
	}
	p, err := NewPipeline(o)
	if err != nil {
		t.Fatal(err)
	}
	return p, sp
}

// TestBrokenKernelsCompile takes every broken candidate through the real
// nvcc and ptxas gates for sm_89 (a fake stands for the GPU): the compile
// errors and the ptxas reject are classified with their reason, and every
// other candidate compiles cleanly and reaches the GPU.
func TestBrokenKernelsCompile(t *testing.T) {
	if testing.Short() {
		t.Skip("compiling the broken-kernel suite with nvcc takes about half a minute; skipped with -short")
	}
	path := testNVCC(t)
	ctx := context.Background()
	nv, err := NVCCVersion(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	target, err := kernels.TargetFor("sm_89")
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	kernelsList := brokenKernels()
	results := make([]space.Result, len(kernelsList))
	devs := make([]*fakeDevice, len(kernelsList))
	var g errgroup.Group
	g.SetLimit(2)
	for i, k := range kernelsList {
		src := brokenSource(t, k.file)
		pool, err := NewCompilePool(CompileOptions{NVCC: NVCC{Path: path, Version: nv}, Arch: "sm_89", Source: src, Jobs: 1,
			WorkDir: filepath.Join(work, strings.TrimSuffix(k.file, ".cu"))})
		if err != nil {
			t.Fatal(err)
		}
		devs[i] = &fakeDevice{}
		p, sp := brokenPipeline(t, pool, devs[i], space.Env{GPU: "fake"}, target, src, nv, nil)
		g.Go(func() error {
			results[i] = p.Evaluate(ctx, sp.Default())
			return nil
		})
	}
	g.Wait()
	for i, k := range kernelsList {
		r := results[i]
		t.Logf("%-20s %-14s at %-11s %s", k.file, r.Status, r.Gate, r.Reason)
		reached := len(devs[i].requests()) > 0
		switch {
		case k.reachesGPU() && !reached:
			t.Errorf("%s: stopped at the %s gate (%s: %s); it must compile and reach the GPU", k.file, r.Gate, r.Status, r.Reason)
		case k.reachesGPU() && (r.Ptxas == nil || r.Ptxas.SpillStores != 0 || r.Ptxas.Registers == 0):
			t.Errorf("%s: ptxas figures %+v; want registers and no spills", k.file, r.Ptxas)
		case !k.reachesGPU() && (reached || r.Status != k.want):
			t.Errorf("%s: %s at the %s gate (%s), want %s before the GPU", k.file, r.Status, r.Gate, r.Reason, k.want)
		case !k.reachesGPU() && !strings.Contains(r.Reason, k.reason):
			t.Errorf("%s: reason %q does not say %q", k.file, r.Reason, k.reason)
		}
	}
}

// TestDeviceBrokenKernels runs every broken candidate through the whole
// pipeline on the GPU, as evotune check --kernel-source would, and checks
// its class; then it interleaves them with good configs of the real family
// on the same worker, which must come out OK whatever ran before. With
// EVOTUNE_EVIDENCE_DIR set it writes broken-kernels.md there.
func TestDeviceBrokenKernels(t *testing.T) {
	e := devSetup(t)
	ctx := context.Background()
	cache, err := OpenCache(filepath.Join(e.workDir, "cubins"), 4<<30)
	if err != nil {
		t.Fatal(err)
	}
	gpu := space.Env{GPU: e.info.Device, ComputeCap: e.info.ComputeCap}
	fast := func(o *PipelineOptions) {
		o.CheckTimeout = 15 * time.Second // the hanging candidate costs this much
		o.Timing = TimingOptions{Warmup: 2, Samples: 30, MinSampleUS: 50}
	}
	pipeline := func(src kernels.Source) (*Pipeline, *space.Space) {
		pool, err := NewCompilePool(CompileOptions{NVCC: e.nvcc, Arch: e.arch, Source: src, Cache: cache,
			WorkDir: filepath.Join(e.workDir, "build")})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { pool.Close() })
		return brokenPipeline(t, pool, e.worker, gpu, e.target, src, e.nvcc.Version, fast)
	}
	judge := func(k brokenKernel, r space.Result) string {
		switch {
		case r.Status != k.want:
			return fmt.Sprintf("%s at the %s gate (%s), want %s", r.Status, r.Gate, r.Reason, k.want)
		case !strings.Contains(r.Reason, k.reason):
			return fmt.Sprintf("reason %q does not say %q", r.Reason, k.reason)
		}
		return ""
	}

	type row struct {
		kernel, want, got, gate, reason string
	}
	var table []row
	t.Run("Each", func(t *testing.T) {
		for _, k := range brokenKernels() {
			p, sp := pipeline(brokenSource(t, k.file))
			r := p.Evaluate(ctx, sp.Default())
			table = append(table, row{k.file, string(k.want), string(r.Status), string(r.Gate), r.Reason})
			if why := judge(k, r); why != "" {
				t.Errorf("%s: %s", k.file, why)
			}
		}
		if e.worker.Restarts() < 2 {
			t.Errorf("the worker restarted %d times; the fault and the hang each need a restart", e.worker.Restarts())
		}
	})

	t.Run("SeedDependent", func(t *testing.T) {
		// The defect shows with seed 1 only: one seed would miss it.
		src := brokenSource(t, "seed_wrong.cu")
		p, sp := pipeline(src)
		c := sp.Default()
		cub, err := devCompile(ctx, p.o.Compiler.(*CompilePool), sp, c)
		if err != nil {
			t.Fatal(err)
		}
		defer cub.Release()
		shape := space.Shape{B: 1, H: 8, S: 512, D: 64}
		for seed, wantPass := range map[uint64]bool{1: false, 2: true, 3: true} {
			got := e.devCheck(ctx, cub.Path, c, shape, "fp16", false, seed)
			if got.Pass != wantPass {
				t.Errorf("seed_wrong.cu seed %d: pass %v (%s), want %v", seed, got.Pass, got.Why, wantPass)
			}
		}
	})

	t.Run("StaleOutput", func(t *testing.T) {
		// A correct candidate fills the worker's output buffer first; the
		// rows partial_write.cu skips must not pass with its values.
		shape := space.Shape{B: 1, H: 8, S: 77, D: 64}
		for _, file := range []string{"good.cu", "partial_write.cu"} {
			p, sp := pipeline(brokenSource(t, file))
			c := sp.Default()
			cub, err := devCompile(ctx, p.o.Compiler.(*CompilePool), sp, c)
			if err != nil {
				t.Fatal(err)
			}
			got := e.devCheck(ctx, cub.Path, c, shape, "fp16", false, 1)
			cub.Release()
			if wantPass := file == "good.cu"; got.Pass != wantPass || (!wantPass && got.NaN == 0) {
				t.Errorf("%s right after a correct run: pass %v, %d NaN (%s); want pass %v, and NaN where nothing was written",
					file, got.Pass, got.NaN, got.Why, wantPass)
			}
		}
	})

	t.Run("Mixed", func(t *testing.T) {
		family, sp := pipeline(kernels.SDPASource())
		rng := rand.New(rand.NewPCG(3, 4))
		good := []space.Config{sp.Default()}
		for len(good) < 5 {
			good = append(good, sp.Sample(rng))
		}
		bad := []string{"oob_write.cu", "infinite_loop.cu", "partial_write.cu", "race.cu"}
		restarts := e.worker.Restarts()
		for i, c := range good {
			r := family.Evaluate(ctx, c)
			// A sampled config may be refused before the GPU (ptxas), but
			// whatever ran before it must not make it fail on the GPU.
			if r.Gate == space.GateCorrectness || (r.Gate == space.GateTimed && !r.OK()) {
				t.Errorf("good config %s after broken candidates: %s at %s: %s", c.Key(), r.Status, r.Gate, r.Reason)
			}
			if i == 0 && !r.OK() {
				t.Errorf("the family's default config: %s at %s: %s", r.Status, r.Gate, r.Reason)
			}
			if i == len(bad) {
				break
			}
			k := brokenKernel{file: bad[i]}
			for _, each := range brokenKernels() {
				if each.file == bad[i] {
					k = each
				}
			}
			p, bsp := pipeline(brokenSource(t, k.file))
			if why := judge(k, p.Evaluate(ctx, bsp.Default())); why != "" {
				t.Errorf("%s between good configs: %s", k.file, why)
			}
		}
		if got := e.worker.Restarts() - restarts; got < 2 {
			t.Errorf("the worker restarted %d times in the mixed run, want at least 2 (a fault and a hang)", got)
		}
	})

	if dir := os.Getenv("EVOTUNE_EVIDENCE_DIR"); dir != "" {
		var b strings.Builder
		fmt.Fprintf(&b, "# Broken kernels through the pipeline\n\nGPU %s (compute %s), nvcc %s, commit %s, %s.\n\n",
			e.info.Device, e.info.ComputeCap, e.nvcc.Version, devCommit(), time.Now().UTC().Format("2006-01-02"))
		b.WriteString("| kernel | expected | got | gate | reason |\n|---|---|---|---|---|\n")
		for _, r := range table {
			reason := strings.ReplaceAll(r.reason, "|", `\|`)
			if len(reason) > 200 {
				reason = reason[:200] + "…"
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", r.kernel, r.want, r.got, r.gate, reason)
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, "broken-kernels.md")
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s", path)
	}
}
