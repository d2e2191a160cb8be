package kernels

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"evotune/space"
)

func fa8hProblem(d int, causal bool) space.Problem {
	return space.Problem{Family: fa8hName, Shapes: []space.Shape{{B: 4, H: 16, S: 2048, D: d}}, Dtype: "fp8", Causal: causal}
}

func fa8hTarget(t *testing.T) Target {
	t.Helper()
	tg, err := TargetFor("sm_90")
	if err != nil {
		t.Fatal(err)
	}
	return tg
}

// TestFA8HSpace checks what the family refuses and that its defaults are
// valid configs at both head dimensions.
func TestFA8HSpace(t *testing.T) {
	tg := fa8hTarget(t)
	f, err := FamilyOf(fa8hName)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []int{64, 128} {
		s, err := f.SpaceFor(fa8hProblem(d, false), tg)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Check(s.Default()); err != nil {
			t.Errorf("D=%d: the default %v is refused: %v", d, s.Default(), err)
		}
		flags, err := s.Flags(s.Default())
		if err != nil {
			t.Fatal(err)
		}
		if CompileArch("sm_90", flags) != "sm_90a" {
			t.Errorf("D=%d: the family's flags do not build for sm_90a: %v", d, flags)
		}
	}
	for _, c := range []struct {
		name string
		prob space.Problem
		arch string
		want string
	}{
		{"fp16", space.Problem{Family: fa8hName, Shapes: []space.Shape{{B: 1, H: 1, S: 64, D: 64}}, Dtype: "fp16"}, "sm_90", "dtype"},
		{"L4", fa8hProblem(64, false), "sm_89", "sm_90"},
		{"D=96", space.Problem{Family: fa8hName, Shapes: []space.Shape{{B: 1, H: 1, S: 64, D: 96}}, Dtype: "fp8"}, "sm_90", "head dimension"},
	} {
		tg, err := TargetFor(c.arch)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.SpaceFor(c.prob, tg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error naming %q", c.name, err, c.want)
		}
	}
	s64, _ := f.SpaceFor(fa8hProblem(64, false), tg)
	s128, _ := f.SpaceFor(fa8hProblem(128, false), tg)
	small := tg // a GPU with half the H100's shared memory a block
	small.SharedPerBlock /= 2
	s128small, _ := f.SpaceFor(fa8hProblem(128, false), small)
	for _, c := range []struct {
		s          *space.Space
		set        map[string]string
		constraint string
	}{
		{s64, map[string]string{"ncw": "1", "pingpong": "1", "pregs": "56"}, "pingpong"},
		{s64, map[string]string{"ncw": "1", "pregs": "24"}, "registers"},
		{s64, map[string]string{"pregs": "24"}, "registers"},
		{s128, map[string]string{"pingpong": "1", "pv_late": "1"}, "pingpong"},
		{s128, map[string]string{"qk_split": "1"}, "qk_split"},
		{s128small, map[string]string{"stages": "6"}, "shared_memory"},
		{s64, map[string]string{"v_smem": "1", "stages": "2"}, "v_smem"},
		{s128, map[string]string{"v_smem": "1"}, "v_smem"},
		{s128, map[string]string{"pregs": "40"}, "registers"},
		{s128, map[string]string{"bn": "64", "qk_split": "1"}, "registers"}, // pregs=24 with 64-key tiles
		{s64, map[string]string{"pregs": "40"}, "registers"},
	} {
		cfg := c.s.Default()
		for k, v := range c.set {
			cfg[k] = v
		}
		var rej *space.Rejection
		if err := c.s.Check(cfg); err == nil || !asRejection(err, &rej) || rej.Constraint != c.constraint {
			t.Errorf("%v: got %v, want a rejection by %s", c.set, err, c.constraint)
		}
	}
	c64, _ := f.SpaceFor(fa8hProblem(64, true), tg)
	if cfg := c64.Default(); true {
		cfg["pregs"] = "40"
		if err := c64.Check(cfg); err != nil {
			t.Errorf("causal D=64 with pregs=40: %v (its builds compile about half the time: the gate's to decide)", err)
		}
	}
	if _, ok := s64.Knob("qk_split"); !ok {
		t.Fatal("no qk_split knob")
	}
	if k, _ := s64.Knob("qk_split"); len(k.Values) != 1 {
		t.Errorf("D=64 qk_split values %v: 2 is 1 there (one extra accumulator is all D=64 has)", k.Values)
	}
}

func asRejection(err error, rej **space.Rejection) bool { return errors.As(err, rej) }

// TestFA8HPlan checks the two launches, the persistent grid and the
// workspace V^T needs.
func TestFA8HPlan(t *testing.T) {
	tg := fa8hTarget(t)
	s, err := FA8HSpace(fa8hProblem(64, false), tg)
	if err != nil {
		t.Fatal(err)
	}
	cfg := s.Default()
	shape := space.Shape{B: 4, H: 16, S: 2000, D: 64}
	p, err := FA8HPlan(cfg, shape, tg)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Launches) != 2 || p.Launches[0].Kernel != FA8HTransposeKernel || p.Launches[1].Kernel != FA8HForwardKernel {
		t.Fatalf("launches %+v: want the transpose, then the forward", p.Launches)
	}
	sp := 2000 // already a multiple of 16
	if got, want := p.WorkspaceBytes, int64(4*16*64*sp); got != want {
		t.Errorf("workspace %d bytes, want %d (V^T, one byte an element)", got, want)
	}
	if got := p.Launches[0].Grid; got != [3]int{(sp + 511) / 512, 64, 1} { // 512 keys a CTA at D=64
		t.Errorf("transpose grid %v", got)
	}
	if got := p.Launches[1].Grid[0]; got != tg.SMs {
		t.Errorf("persistent forward grid %d, want the %d SMs (%d work items)", got, tg.SMs, 64*16)
	}
	if got := p.Launches[1].Block[0]; got != 384 {
		t.Errorf("forward block %d threads, want 384 (a producer and two consumer warpgroups)", got)
	}
	cfg["persistent"] = "0"
	if p, err = FA8HPlan(cfg, shape, tg); err != nil || p.Launches[1].Grid[0] != 64*16 {
		t.Errorf("forward grid without persistent: %+v, %v; want a CTA per work item (1024)", p, err)
	}
	if _, err := FA8HPlan(cfg, space.Shape{B: 1024, H: 128, S: 64, D: 64}, tg); err == nil {
		t.Error("131072 heads: want an error (the transpose numbers heads in grid.y)")
	}
	// v_smem=1: the forward alone, no workspace, more shared memory (two
	// row-major V tiles of 128 keys, rows of 64 + 16 bytes), and no limit
	// on the heads.
	vs := s.Default()
	vs["v_smem"] = "1"
	pv, err := FA8HPlan(vs, shape, tg)
	if err != nil {
		t.Fatal(err)
	}
	if len(pv.Launches) != 1 || pv.Launches[0].Kernel != FA8HForwardKernel || pv.WorkspaceBytes != 0 {
		t.Errorf("v_smem=1: %+v, want the forward alone and no workspace", pv)
	}
	p0, _ := FA8HPlan(s.Default(), shape, tg)
	if got, want := pv.Launches[0].SharedBytes-p0.Launches[1].SharedBytes, 2*128*(64+16); got != want {
		t.Errorf("v_smem=1 adds %d bytes of shared memory, want %d", got, want)
	}
	if _, err := FA8HPlan(vs, space.Shape{B: 1024, H: 128, S: 64, D: 64}, tg); err != nil {
		t.Errorf("v_smem=1, 131072 heads: %v (no transpose launch, so no grid.y limit)", err)
	}
	if _, err := FA8HPlan(vs, space.Shape{B: 1 << 20, H: 1 << 12, S: 64, D: 64}, tg); err == nil {
		t.Error("v_smem=1, 2^32 heads: want an error (more work items than a grid)")
	}
	if _, err := FA8HPlan(cfg, space.Shape{B: 1, H: 1, S: 0, D: 64}, tg); err == nil {
		t.Error("S=0: want an error")
	}
	// V given transposed: the forward alone, with the shared memory of
	// v_smem=0 (V^T tiles straight into the ring), no workspace, no limit
	// on the heads.
	vtp := fa8hProblem(64, false)
	vtp.VTransposed = true
	st, err := FA8HSpace(vtp, tg)
	if err != nil {
		t.Fatal(err)
	}
	pg, err := FA8HPlan(st.Default(), shape, tg)
	if err != nil {
		t.Fatal(err)
	}
	if len(pg.Launches) != 1 || pg.Launches[0].Kernel != FA8HForwardKernel || pg.WorkspaceBytes != 0 ||
		pg.Launches[0].SharedBytes != p0.Launches[1].SharedBytes {
		t.Errorf("V given transposed: %+v, want the forward alone with the default's %d bytes of shared memory and no workspace", pg, p0.Launches[1].SharedBytes)
	}
	if _, err := FA8HPlan(st.Default(), space.Shape{B: 1024, H: 128, S: 64, D: 64}, tg); err != nil {
		t.Errorf("V given transposed, 131072 heads: %v (no transpose launch, so no grid.y limit)", err)
	}
}

// TestFA8HVTransposedSpace: a problem whose V comes transposed has the
// one-value knob v_given (what the plan and the launcher read) and no
// v_smem; a family that reads V as it is refuses it, and so does a dtype
// other than fp8 (the first family's V given is TestVGivenDropsTheRegrouping's
// and TestCompileFP8Sample's).
func TestFA8HVTransposedSpace(t *testing.T) {
	tg := fa8hTarget(t)
	p := fa8hProblem(128, true)
	p.VTransposed = true
	f, _ := FamilyOf(fa8hName)
	s, err := f.SpaceFor(p, tg)
	if err != nil {
		t.Fatal(err)
	}
	if k, ok := s.Knob("v_given"); !ok || len(k.Values) != 1 || k.Default != "1" {
		t.Errorf("v_given knob %+v (%v): want one value, 1", k, ok)
	}
	if _, ok := s.Knob("v_smem"); ok {
		t.Error("a v_smem knob with V given transposed: the producer has no rows of V to transpose")
	}
	if got := s.Default()["v_given"]; got != "1" {
		t.Errorf("default v_given=%q", got)
	}
	rows, _ := f.SpaceFor(fa8hProblem(128, true), tg)
	if _, ok := rows.Knob("v_given"); ok {
		t.Error("v_given with V as it is")
	}
	// Both families this build carries take V transposed; one declared
	// here reads V as it is.
	asIs := Family{Name: "rows", Dtypes: []string{"fp8"}, Space: func(space.Problem, Target) (*space.Space, error) {
		t.Error("Space called for a problem the family refuses")
		return nil, nil
	}}
	q := p
	q.Family = asIs.Name
	if _, err := asIs.SpaceFor(q, tg); err == nil || !strings.Contains(err.Error(), "transposed") {
		t.Errorf("a family reading V as it is, with V transposed: %v, want a refusal naming it", err)
	}
	q = p
	q.Dtype = "int8"
	if err := q.Validate(); err == nil {
		t.Error("int8 with V transposed validated")
	}
}

// TestFA8HBuilds compiles the family the way the runner does (NVCCArgs) and
// checks every knob: each value changes the SASS against the default, the
// plan's shared memory and transpose CTAs are the kernel's (static_asserts
// in fa8h.cu), and
// the defaults at D=64, D=128 and causal pass checkHopperSASS.
func TestFA8HBuilds(t *testing.T) {
	cc := newFP8SASSCompiler(t)
	src := FA8HSource()
	dir := filepath.Join(cc.dir, "fa8h")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, b := range src.Files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	builds := newSASSBuilds(cc, func(flags []string, out string) []string {
		return NVCCArgs("sm_90", flags, dir, src.Name, out)
	})
	tg := fa8hTarget(t)
	// A config's flags, with the shared memory its plan gives for the
	// kernel's static_assert.
	flagsOf := func(s *space.Space, c space.Config, d int) []string {
		flags, err := s.Flags(c)
		if err != nil {
			t.Fatal(err)
		}
		p, err := FA8HPlan(c, space.Shape{B: 1, H: 1, S: 64, D: d}, tg)
		if err != nil {
			t.Fatal(err)
		}
		return append(flags, "-DFA8H_EXPECT_SMEM="+strconv.Itoa(p.Launches[len(p.Launches)-1].SharedBytes),
			"-DFA8H_EXPECT_VT_KEYS="+strconv.Itoa(fa8hVtKeys(d)))
	}
	for _, c := range []struct {
		name     string
		prob     space.Problem
		serialOK bool
	}{
		{"d64", fa8hProblem(64, false), false},
		{"d64_causal", fa8hProblem(64, true), false},
		{"d128", fa8hProblem(128, false), false},
	} {
		s, err := FA8HSpace(c.prob, tg)
		if err != nil {
			t.Fatal(err)
		}
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			checkHopperSASS(t, builds.get(flagsOf(s, s.Default(), c.prob.Shapes[0].D)), c.serialOK)
		})
	}
	// Each knob's values against the D=64 default, and qk_split=1 against 2
	// at D=128 (with 64-key tiles, where both fit).
	s, err := FA8HSpace(fa8hProblem(64, false), tg)
	if err != nil {
		t.Fatal(err)
	}
	s128, err := FA8HSpace(fa8hProblem(128, false), tg)
	if err != nil {
		t.Fatal(err)
	}
	// pair builds a and b and wants their SASS to differ; both must be
	// valid unless unchecked (a value the constraints allow in no config
	// that differs from another in that knob alone).
	pair := func(name string, s *space.Space, d int, a, b space.Config, unchecked ...bool) {
		for _, c := range []space.Config{a, b} {
			if err := s.Check(c); err != nil && len(unchecked) == 0 {
				t.Errorf("%s: %v: %v", name, c, err)
				return
			}
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			base, changed := builds.get(flagsOf(s, a, d)), builds.get(flagsOf(s, b, d))
			for _, b := range []*sassBuild{base, changed} {
				if b.err != nil {
					t.Fatal(b.err)
				}
			}
			if stripAddrs(base.sass) == stripAddrs(changed.sass) {
				t.Errorf("%s leaves the SASS unchanged", name)
			}
		})
	}
	a, b := s128.Default(), s128.Default()
	a["bn"], b["bn"], b["qk_split"] = "64", "64", "1"
	a["pregs"], b["pregs"] = "40", "40" // 24 spills with 64-key tiles
	pair("d128_qk_split=1", s128, 128, a, b)
	c := s128.Default()
	c["qk_split"] = "2" // against the default's 3
	pair("d128_qk_split=2", s128, 128, s128.Default(), c)
	// V given transposed (the one-value knob v_given, from the problem):
	// the forward reads the caller's V^T instead of the workspace's.
	for _, d := range []int{64, 128} {
		p := fa8hProblem(d, false)
		p.VTransposed = true
		st, err := FA8HSpace(p, tg)
		if err != nil {
			t.Fatal(err)
		}
		rows := s
		if d == 128 {
			rows = s128
		}
		flagsT := flagsOf(st, st.Default(), d)
		t.Run(fmt.Sprintf("d%d_v_given", d), func(t *testing.T) {
			t.Parallel()
			base, given := builds.get(flagsOf(rows, rows.Default(), d)), builds.get(flagsT)
			for _, b := range []*sassBuild{base, given} {
				if b.err != nil {
					t.Fatal(b.err)
				}
			}
			if stripAddrs(base.sass) == stripAddrs(given.sass) {
				t.Error("v_given=1 leaves the SASS unchanged")
			}
			checkHopperSASS(t, given, false)
		})
	}
	for _, k := range s.Knobs {
		for _, v := range k.Values {
			if v == k.Default {
				continue
			}
			cfg := s.Default()
			cfg[k.Name] = v
			if k.Name == "ncw" { // one consumer warpgroup: no ping-pong, the producer keeps 56 registers
				cfg["pingpong"], cfg["pregs"] = "0", "56"
			}
			if k.Name == "pregs" && v == "40" { // with 128-key tiles 40 spills at D=64: against 56 with 64-key tiles
				a, b := s.Default(), s.Default()
				a["bn"], b["bn"], b["pregs"] = "64", "64", "40"
				pair("pregs=40_bn64", s, 64, a, b)
				continue
			}
			if k.Name == "pregs" && v == "24" {
				// Valid only at D=128 with 128-key tiles, where the other
				// values are refused (the consumers need 240 registers):
				// built against 40 there all the same, unchecked.
				a, b := s128.Default(), s128.Default()
				a["pregs"], b["pregs"] = "40", "24"
				pair("pregs=24_d128", s128, 128, a, b, true)
				continue
			}
			if s.Check(cfg) != nil { // a value D=64 refuses (pregs=24): against the D=128 default
				c128 := s128.Default()
				c128[k.Name] = v
				alt := s128.Default()
				for _, w := range k.Values {
					if w != v {
						alt[k.Name] = w
						break
					}
				}
				pair(k.Name+"="+v+"_d128", s128, 128, alt, c128)
				continue
			}
			pair(k.Name+"="+v, s, 64, s.Default(), cfg)
		}
	}
}

// TestDefaultArchOf: a family that does not build for the default
// architecture is assumed on its own.
func TestDefaultArchOf(t *testing.T) {
	for family, want := range map[string]string{"": DefaultArch, sdpaName: DefaultArch, fa8hName: "sm_90", "nope": DefaultArch} {
		if got := DefaultArchOf(family); got != want {
			t.Errorf("DefaultArchOf(%q) = %s, want %s", family, got, want)
		}
	}
}

// TestFA8HPlanC compiles the C that FA8HPlanC renders for every valid config
// at D=64 and D=128 (and the first family's shapes of planCShapes, SM counts
// and a wrong head dimension) and compares it with FA8HPlan: the launcher
// export writes and the worker's plans cannot drift apart.
func TestFA8HPlanC(t *testing.T) {
	cc := lookCC(t)
	tg := fa8hTarget(t)
	for _, d := range []int{64, 128} {
		s, err := FA8HSpace(fa8hProblem(d, false), tg)
		if err != nil {
			t.Fatal(err)
		}
		vt := fa8hProblem(d, false)
		vt.VTransposed = true
		st, err := FA8HSpace(vt, tg)
		if err != nil {
			t.Fatal(err)
		}
		configs := append(s.ValidConfigs(), st.ValidConfigs()...)
		src, err := FA8HPlanC("tp", configs, d)
		if err != nil {
			t.Fatal(err)
		}
		got := runRenderedPlanC(t, cc, src, len(configs), d,
			" grid %lld threads %d smem %d vt %lld x %d x %d workspace %lld lse %lld",
			"p.grid, p.threads, p.smem_bytes, p.vt_grid_x, p.vt_grid_y, p.vt_threads, p.workspace_bytes, p.lse_offset_bytes")
		comparePlanLines(t, got, configs, d, fa8hPlanLine)
	}
	if _, err := FA8HPlanC("not an identifier", nil, 64); err == nil {
		t.Error("FA8HPlanC accepted a prefix that is not a C identifier")
	}
}

// fa8hPlanLine is what TestFA8HPlanC's C program prints for one case, from
// FA8HPlan.
func fa8hPlanLine(ci int, c space.Config, s space.Shape, sms, compiledD int) string {
	return planLine(ci, s, sms, compiledD, func() (Plan, error) { return FA8HPlan(c, s, Target{SMs: sms}) }, func(p Plan) string {
		fwd, vt := p.Launches[len(p.Launches)-1], Launch{} // v_smem=1, v_given=1: no transpose, zeros
		if len(p.Launches) == 2 {
			vt = p.Launches[0]
		}
		return fmt.Sprintf(" grid %d threads %d smem %d vt %d x %d x %d workspace %d lse %d", fwd.Grid[0], fwd.Block[0],
			fwd.SharedBytes, vt.Grid[0], vt.Grid[1], vt.Block[0], p.WorkspaceBytes, p.LSEOffsetBytes)
	})
}
