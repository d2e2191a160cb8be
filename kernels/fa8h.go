package kernels

import (
	"embed"
	"fmt"
	"strconv"

	"evotune/space"
)

// The Hopper-native fp8 family (kernels/fa8h.cu): both attention products on
// wgmma, E4M3 inputs, sm_90a only. kernels/NOTES.md, "A Hopper-native fp8
// kernel", holds its design and measurements; kernels/proto/hopper the
// prototype they were taken with.

//go:embed fa8h.cu sdpa_params.h
var fa8hFS embed.FS

// fa8hName is the family's name, what --family takes.
const fa8hName = "sdpa-hopper"

// Kernel entry points in the family's cubin.
const (
	FA8HForwardKernel   = "fa8h_fwd"
	FA8HTransposeKernel = "fa8h_vt"
)

// sm90aDefine is the define a family's space renders when its code builds
// for sm_90a only (CompileArch).
const sm90aDefine = "EVOTUNE_SM90A"

func fa8hFamily() Family {
	return Family{
		Name:        fa8hName,
		Dtypes:      []string{"fp8"},
		Archs:       []string{"sm_90"},
		VTransposed: true,
		Source:      FA8HSource,
		Worker:      WorkerSource,
		Kernels:     []string{FA8HForwardKernel, FA8HTransposeKernel},
		Space:       FA8HSpace,
		Plan:        FA8HPlan,
		PlanC:       FA8HPlanC,
		LaunchC:     fa8hLaunchC,
		Namespace:   "fa8h",
		Tolerance:   ToleranceFor,
		CheckNVCC:   CheckNVCCFor,
		FLOPs:       SDPAFLOPs,
	}
}

// FA8HSource returns the family's embedded sources.
func FA8HSource() Source {
	files := map[string][]byte{}
	for _, n := range []string{"fa8h.cu", "sdpa_params.h"} {
		b, err := fa8hFS.ReadFile(n)
		if err != nil {
			panic("kernels: embedded file missing: " + n) // go:embed guarantees it
		}
		files[n] = b
	}
	return Source{Name: "fa8h.cu", Files: files, Hash: hashFiles(files)}
}

// fa8hKnobs declares the family's knobs for head dimension d, causal or
// not, with V as it is or given transposed (vTransposed). The defaults are
// the builds the device runs kept (results/2026-11-26-h100-fa8proto), with
// the producer's registers raised where 40 spilled; at D=64, causal or not,
// three ring slots with one in 8 exponentials on the FMA pipe, the best of
// every tune since the register transpose (results/2026-11-26-h200-vt:
// 155.6 and 155.2 µs against the old default's 157.7 and 157.4, causal
// 648.4 against 653.6). V given transposed keeps them
// (results/2026-11-26-h200-vgiven).
func fa8hKnobs(d int, vTransposed bool) []space.Knob {
	split, splits, pregs, stages, late, emu := "1", []string{"1"}, "56", "3", "0", "1"
	if d == 128 {
		// Q K^T as two chains of two steps (qk_split=3): 14% faster than
		// qk_split=2 through bench, 1.08x faster than cuDNN, inside the
		// gate with errors 2-3x qk_split=2's at input scale 16
		// (results/2026-11-26-h200-pairs); without qk_split=2's later
		// steps P V need not be issued late. exp_emu=1 measured 1% slower
		// there (results/2026-11-26-h200-emu).
		split, splits, pregs, late, stages, emu = "3", []string{"1", "2", "3"}, "24", "0", "4", "0"
	}
	knobs := []space.Knob{
		{Name: "bn", Macro: "FA8H_BN", Values: []string{"64", "128"}, Layer: space.Macro, Default: "128",
			Doc: "keys a tile (the N of Q K^T's wgmma, the K of P V's)"},
		{Name: "ncw", Macro: "FA8H_NCW", Values: []string{"1", "2"}, Layer: space.Macro, Default: "2",
			Doc: "consumer warpgroups of 64 query rows each (a CTA's rows: 64 or 128)"},
		{Name: "stages", Macro: "FA8H_STAGES", Values: []string{"2", "3", "4", "6"}, Layer: space.Micro, Default: stages,
			Doc: "K and V^T tiles in the producer's ring"},
		{Name: "pingpong", Macro: "FA8H_PINGPONG", Values: []string{"0", "1"}, Layer: space.Micro, Default: "0",
			Doc: "the two consumer warpgroups take turns issuing their MMAs (named barriers)"},
		{Name: "persistent", Macro: "FA8H_PERSISTENT", Values: []string{"0", "1"}, Layer: space.Micro, Default: "1",
			Doc: "at most one CTA per SM, striding over the work items (Q double-buffered)"},
		{Name: "qk_split", Macro: "FA8H_QK_SPLIT", Values: splits, Layer: space.Micro, Default: split,
			Doc: "Q K^T's k32 steps each in a fresh accumulator summed in fp32 (1), one extra accumulator reused step by step (2, D=128), or two chains of two steps summed in fp32 (3, D=128); chained sums fail the gate"},
		{Name: "pv_accum", Macro: "FA8H_PV_ACCUM", Values: []string{"0", "1"}, Layer: space.Micro, Default: "0",
			Doc: "each tile's P V in a fresh accumulator, added into O in fp32"},
		{Name: "pregs", Macro: "FA8H_PREGS", Values: []string{"24", "40", "56"}, Layer: space.Micro, Default: pregs,
			Doc: "registers the producer warpgroup keeps (setmaxnreg); the consumers share the rest"},
		{Name: "pv_late", Macro: "FA8H_PV_LATE", Values: []string{"0", "1"}, Layer: space.Micro, Default: late, Absent: "0",
			Doc: "P V of the tile before issued after Q K^T of this tile has landed (not beside it), so qk_split=2's later steps do not wait for it"},
		{Name: "exp_emu", Macro: "FA8H_EXP_EMU", Values: []string{"0", "1"}, Layer: space.Micro, Default: emu, Absent: "0",
			Doc: "one in 8 of the softmax's exponentials by a polynomial on the FMA pipe instead of the MUFU"},
	}
	if vTransposed {
		// Not searched: the problem's V layout, which the plan (no
		// transpose launch) and the launcher read from the config.
		return append(knobs, space.Knob{Name: "v_given", Macro: "FA8H_V_GIVEN", Values: []string{"1"}, Layer: space.Micro, Default: "1",
			Doc: "V comes transposed from the caller, V^T [B, H, D, S rounded up to 16], the keys beyond S zero (the problem's V layout; not searched)"})
	}
	// The producer transposes V itself: level with the launch at D=64,
	// 1-2% slower causal and at D=128, 38% faster at 1x8x512x64
	// (results/2026-11-26-h200-vsmem).
	return append(knobs, space.Knob{Name: "v_smem", Macro: "FA8H_V_SMEM", Values: []string{"0", "1"}, Layer: space.Micro, Default: "0", Absent: "0",
		Doc: "V transposed tile by tile in shared memory by the producer warpgroup (1), not by a launch before the forward (0)"})
}

// fa8hGeom is a config's numbers.
type fa8hGeom struct {
	d, bn, ncw, stages, pregs int
	pingpong, persistent      bool
	pvLate, vSmem, vGiven     bool
	qkSplit                   int
}

func fa8hGeomOf(c space.Config, d int) (fa8hGeom, error) {
	g := fa8hGeom{d: d}
	for _, f := range []struct {
		knob string
		dst  *int
	}{{"bn", &g.bn}, {"ncw", &g.ncw}, {"stages", &g.stages}, {"pregs", &g.pregs}, {"qk_split", &g.qkSplit}} {
		v, err := strconv.Atoi(c[f.knob])
		if err != nil {
			return g, fmt.Errorf("knob %s: %q is not a number", f.knob, c[f.knob])
		}
		*f.dst = v
	}
	g.pingpong, g.persistent, g.pvLate, g.vSmem = c["pingpong"] == "1", c["persistent"] == "1", c["pv_late"] == "1", c["v_smem"] == "1"
	g.vGiven = c["v_given"] == "1"
	return g, nil
}

func (g fa8hGeom) rows() int    { return 64 * g.ncw }
func (g fa8hGeom) threads() int { return 128 * (g.ncw + 1) }

// sharedBytes is what fa8h.cu's kSmemBytes computes: two Q buffers, the
// ring of K and V^T tiles, with v_smem two row-major V tiles (rows padded
// by 16 bytes), the mbarriers and the slack that aligns the base to 1,024
// bytes.
func (g fa8hGeom) sharedBytes() int {
	q := g.rows() * g.d
	staging := 0
	if g.vSmem {
		staging = 2 * g.bn * (g.d + 16)
	}
	return 2*q + g.stages*2*g.bn*g.d + staging + 2*g.stages*8 + 32 + 1024
}

// FA8HSpace is the family's knob space for problem p on target t.
func FA8HSpace(p space.Problem, t Target) (*space.Space, error) {
	if p.Family != "" && p.Family != fa8hName {
		return nil, fmt.Errorf("problem family %q is not %q", p.Family, fa8hName)
	}
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("%s space: %w", fa8hName, err)
	}
	if p.Dtype != "fp8" {
		return nil, fmt.Errorf("%s space: dtype %q: the family is fp8 only", fa8hName, p.Dtype)
	}
	if t.Arch != "sm_90" {
		return nil, fmt.Errorf("%s space: the family needs sm_90 (wgmma), not %s", fa8hName, t.Arch)
	}
	d, causal := p.Shapes[0].D, p.Causal
	if d != 64 && d != 128 {
		return nil, fmt.Errorf("%s space: head dimension %d: want 64 or 128", fa8hName, d)
	}
	if t.SharedPerBlock <= 0 {
		return nil, fmt.Errorf("%s space: target %+v is incomplete", fa8hName, t)
	}
	flag := func(b bool) string {
		if b {
			return "1"
		}
		return "0"
	}
	geom := func(check func(fa8hGeom) error) func(space.Config) error {
		return func(c space.Config) error {
			g, err := fa8hGeomOf(c, d)
			if err != nil {
				return err
			}
			return check(g)
		}
	}
	s := &space.Space{
		Family: fa8hName,
		Knobs:  fa8hKnobs(d, p.VTransposed),
		Defines: []space.Define{
			{Macro: "FA8H_HD", Value: strconv.Itoa(d)},
			{Macro: "FA8H_CAUSAL", Value: flag(p.Causal)},
			{Macro: "FA8H_OUT_BF16", Value: flag(p.OutDtype == "bf16")},
			{Macro: sm90aDefine, Value: "1"},
		},
		Constraints: []space.Constraint{
			{Name: "pingpong", Check: geom(func(g fa8hGeom) error {
				if g.pingpong && g.ncw != 2 {
					return fmt.Errorf("pingpong=1 alternates two consumer warpgroups; ncw=%d has one", g.ncw)
				}
				if g.pingpong && g.pvLate {
					return fmt.Errorf("pingpong=1 has no schedule with pv_late=1 (P V issued after Q K^T lands)")
				}
				return nil
			})},
			{Name: "qk_split", Check: geom(func(g fa8hGeom) error {
				// Three extra 128-key accumulators beside O do not fit 240
				// registers (ptxas spills 350 bytes).
				if g.d == 128 && g.bn == 128 && g.qkSplit == 1 {
					return fmt.Errorf("qk_split=1 at D=128 with bn=128 needs three extra 64-register accumulators beside O's 64; take qk_split=2 or bn=64")
				}
				return nil
			})},
			{Name: "registers", Check: geom(func(g fa8hGeom) error {
				// With one consumer warpgroup the consumers have 240
				// registers whatever the producer keeps, and the producer
				// spills below 56 (nvcc 12.4: 20-88 bytes at 24).
				if g.ncw == 1 && g.pregs != 56 {
					return fmt.Errorf("pregs=%d: with one consumer warpgroup the consumers have 240 registers whatever the producer keeps, and the producer spills below 56; keep 56", g.pregs)
				}
				// At D=64 the producer's 24 registers always spill (nvcc 12.4
				// and 13.0; results/2026-11-26-hopperfam-cli/sweep).
				if g.d == 64 && g.pregs == 24 {
					return fmt.Errorf("pregs=24: at D=64 the producer warpgroup spills with 24 registers; take 40 or 56")
				}
				// The rules below held in every build seen: nvcc 13.0 in
				// every sdpa-hopper archive and sweep under results/ (33,
				// 19 and 79 builds, all spilling), nvcc 12.4 in a sample
				// over stages, pv_late and pv_accum (36 builds, all
				// spilling; results/2026-11-26-h200-vt). Causal D=64
				// builds at pregs=40 compile about half the time, so the
				// gate decides those.
				if g.d == 128 && g.bn == 128 && g.pregs != 24 {
					return fmt.Errorf("pregs=%d: at D=128 with bn=128 the consumers need all 240 registers (the extra Q K^T accumulator beside O and the scores), which pregs=24 alone leaves them", g.pregs)
				}
				if g.d == 128 && g.bn == 64 && g.pregs == 24 {
					return fmt.Errorf("pregs=24: at D=128 with bn=64 the producer warpgroup spills with 24 registers; take 40 or 56")
				}
				if g.d == 64 && !causal && g.bn == 128 && g.ncw == 2 && g.pregs == 40 {
					return fmt.Errorf("pregs=40: at D=64 with bn=128 and two consumer warpgroups the producer spills with 40 registers; take 56")
				}
				return nil
			})},
			{Name: "v_smem", Check: geom(func(g fa8hGeom) error {
				// The producer signals a slot a tile late (it transposes
				// tile j-1 while tile j's copies fly), which deadlocks on
				// two slots.
				if g.vSmem && g.stages < 3 {
					return fmt.Errorf("v_smem=1 signals each ring slot a tile late and needs 3 stages or more, not %d", g.stages)
				}
				// At D=128 with 128-key tiles the consumers need 240
				// registers (pregs=24), and the producer's transpose spills
				// at 24 (44-64 bytes, nvcc 12.4 and 13.0;
				// results/2026-11-26-h200-vsmem).
				if g.vSmem && g.d == 128 && g.bn == 128 {
					return fmt.Errorf("v_smem=1 at D=128 with bn=128: the producer's transpose spills at the 24 registers the consumers leave it; take bn=64 or v_smem=0")
				}
				return nil
			})},
			{Name: "shared_memory", Check: geom(func(g fa8hGeom) error {
				if b := g.sharedBytes(); b > t.SharedPerBlock {
					return fmt.Errorf("%d bytes of shared memory exceed the %d bytes a block may have on %s", b, t.SharedPerBlock, t.Arch)
				}
				return nil
			})},
		},
	}
	if err := s.Validate(); err != nil {
		return nil, fmt.Errorf("%s space declaration: %w", fa8hName, err)
	}
	return s, nil
}

// maxGridY is the largest grid.y a launch may have (the transpose's heads).
const maxGridY = 65535

// fa8hVtKeys is the keys a CTA of fa8h_vt transposes (FA8H_VT_KEYS): eight
// warps of 128 keys by 32 bytes of d.
func fa8hVtKeys(d int) int { return 128 * 8 * 32 / d }

// noTranspose says the plan has no transpose launch: the forward
// transposes V itself (v_smem=1) or the caller gave it transposed
// (v_given=1).
func (g fa8hGeom) noTranspose() bool { return g.vSmem || g.vGiven }

// fa8hMaxHeads is the most batches x heads a plan takes: the transpose's
// grid.y, or without it the forward's grid (a work item at least a head).
func fa8hMaxHeads(g fa8hGeom) int64 {
	if g.noTranspose() {
		return maxGridX
	}
	return maxGridY
}

// FA8HPlan returns the launches for config c on shape s: fa8h_vt writes V^T
// into the workspace, fa8h_fwd reads it; with v_smem=1 fa8h_fwd alone,
// which reads V as it is, and with v_given=1 fa8h_fwd alone, which reads
// the caller's V^T.
func FA8HPlan(c space.Config, s space.Shape, t Target) (Plan, error) {
	if s.B <= 0 || s.H <= 0 || s.S <= 0 {
		return Plan{}, fmt.Errorf("%s plan: shape %s must be positive", fa8hName, s)
	}
	g, err := fa8hGeomOf(c, s.D)
	if err != nil {
		return Plan{}, fmt.Errorf("%s plan: %w", fa8hName, err)
	}
	bh := int64(s.B) * int64(s.H)
	if bh > fa8hMaxHeads(g) {
		return Plan{}, fmt.Errorf("%s plan: %d batches x heads exceed the %d a grid numbers", fa8hName, bh, fa8hMaxHeads(g))
	}
	items := bh * int64(ceilDiv(s.S, g.rows()))
	if items > maxGridX {
		return Plan{}, fmt.Errorf("%s plan: shape %s has more than %d tiles, more than the grid allows", fa8hName, s, maxGridX)
	}
	grid := items
	if g.persistent {
		if t.SMs <= 0 {
			return Plan{}, fmt.Errorf("%s plan: persistent=1 needs the target's SM count", fa8hName)
		}
		grid = min(items, int64(t.SMs))
	}
	fwd := Launch{Kernel: FA8HForwardKernel, Grid: [3]int{int(grid), 1, 1}, Block: [3]int{g.threads(), 1, 1}, SharedBytes: g.sharedBytes()}
	if g.noTranspose() {
		return Plan{Launches: []Launch{fwd}}, nil
	}
	sp, vtKeys := int64(ceilDiv(s.S, 16)*16), int64(fa8hVtKeys(s.D))
	return Plan{
		Launches: []Launch{
			{Kernel: FA8HTransposeKernel, Grid: [3]int{int((sp + vtKeys - 1) / vtKeys), int(bh), 1}, Block: [3]int{256, 1, 1}},
			fwd,
		},
		WorkspaceBytes: alignUp(bh*int64(s.D)*sp, 16),
	}, nil
}

// FA8HPlanC renders FA8HPlan's rules for each of configs, compiled at head
// dimension d, as C that needs no CUDA header: a struct PREFIX_plan and a
// function PREFIX_plan_I(b, h, s, d, sms, &plan) per config I, with the
// status codes of SDPAPlanC (the launcher's forward reads them alike).
// TestFA8HPlanC compiles them and compares them with FA8HPlan.
func FA8HPlanC(prefix string, configs []space.Config, d int) (string, error) {
	b, P, err := planCHead(fa8hName, "FA8HPlan", prefix, `    long long grid;             /* fa8h_fwd CTAs (grid.x) */
    int threads;                /* fa8h_fwd threads per CTA */
    int smem_bytes;             /* fa8h_fwd dynamic shared memory */
    long long vt_grid_x;        /* fa8h_vt CTAs: key blocks of 32768 / d (0: no transpose launch) ... */
    int vt_grid_y;              /* ... by batch x heads */
    int vt_threads;             /* fa8h_vt threads per CTA */
    long long workspace_bytes;  /* V^T, one byte an element, keys padded to 16 */
    long long lse_offset_bytes; /* unused: 0 */
`)
	if err != nil {
		return "", err
	}
	for i, c := range configs {
		g, err := fa8hGeomOf(c, d)
		if err != nil {
			return "", fmt.Errorf("%s plan in C, config %s: %w", fa8hName, c.Key(), err)
		}
		planCFunc(b, prefix, i, c, d)
		b.WriteString("    long long bh, items, grid;\n")
		fmt.Fprintf(b, "    if (b <= 0 || h <= 0 || s <= 0) return %s_PLAN_BAD_SHAPE;\n", P)
		fmt.Fprintf(b, "    if (d != %d) return %s_PLAN_BAD_HEAD_DIM;\n", d, P)
		b.WriteString("    bh = (long long)b * h;\n")
		// Heads beyond the transpose's grid.y, or (v_smem=1, v_given=1) beyond the
		// forward's grid, where items would also overflow.
		fmt.Fprintf(b, "    if (bh > %dLL) return %s_PLAN_TOO_MANY_TILES;\n", fa8hMaxHeads(g), P)
		fmt.Fprintf(b, "    items = bh * (((long long)s + %d - 1) / %d);\n", g.rows(), g.rows())
		fmt.Fprintf(b, "    if (items > %dLL) return %s_PLAN_TOO_MANY_TILES;\n", int64(maxGridX), P)
		b.WriteString("    grid = items;\n")
		if g.persistent {
			fmt.Fprintf(b, "    if (sms <= 0) return %s_PLAN_NO_SMS;\n", P)
			b.WriteString("    if (grid > sms) grid = sms;\n")
		} else {
			b.WriteString("    (void)sms;\n")
		}
		b.WriteString("    p->grid = grid;\n")
		fmt.Fprintf(b, "    p->threads = %d;\n", g.threads())
		fmt.Fprintf(b, "    p->smem_bytes = %d;\n", g.sharedBytes())
		if g.noTranspose() { // the forward transposes V itself, or the caller did: no launch, no workspace
			b.WriteString("    p->vt_grid_x = 0;\n")
			b.WriteString("    p->vt_grid_y = 0;\n")
			b.WriteString("    p->vt_threads = 0;\n")
			b.WriteString("    p->workspace_bytes = 0;\n")
		} else {
			b.WriteString("    long long sp = ((long long)s + 15) / 16 * 16;\n")
			fmt.Fprintf(b, "    p->vt_grid_x = (sp + %d - 1) / %d;\n", fa8hVtKeys(d), fa8hVtKeys(d))
			b.WriteString("    p->vt_grid_y = (int)bh;\n")
			b.WriteString("    p->vt_threads = 256;\n")
			fmt.Fprintf(b, "    p->workspace_bytes = (bh * %d * sp + 15) / 16 * 16;\n", d)
		}
		b.WriteString("    p->lse_offset_bytes = 0;\n")
		fmt.Fprintf(b, "    return %s_PLAN_OK;\n}\n", P)
	}
	return b.String(), nil
}

// fa8hLaunchC: V's transpose (fns[1]) into the workspace, where the plan has
// one (v_smem=0), then the forward (fns[0]).
func fa8hLaunchC(prefix string) string {
	return fmt.Sprintf(`// launch runs a plan: V's transpose into the workspace (unless the config's
// forward transposes V itself: vt_grid_x 0), then the forward.
cudaError_t launch(const void* const* fns, std::atomic<unsigned long long>& smem_done,
                   const struct %[1]s_plan& pl, SdpaParams p, cudaStream_t stream) {
    cudaError_t err = allow_smem(fns[0], pl.smem_bytes, smem_done);
    if (err != cudaSuccess) return err;
    void* args[] = {&p};
    if (pl.vt_grid_x > 0) {
        err = cudaLaunchKernel(fns[1], dim3(static_cast<unsigned>(pl.vt_grid_x), static_cast<unsigned>(pl.vt_grid_y)),
                               dim3(pl.vt_threads), args, 0, stream);
        if (err != cudaSuccess) return err;
    }
    return cudaLaunchKernel(fns[0], dim3(static_cast<unsigned>(pl.grid)), dim3(pl.threads), args,
                            static_cast<size_t>(pl.smem_bytes), stream);
}
`, prefix)
}
