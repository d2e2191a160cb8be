package kernels

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"evotune/internal/testtool"
	"evotune/space"
)

// A compiler compiles the embedded SDPA source with nvcc exactly as the
// runner does (NVCCArgs), caching cubins by flags within one test.
type compiler struct {
	t      *testing.T
	nvcc   string
	objdmp string // cuobjdump, or "" to compare cubin bytes
	dir    string
	slots  chan struct{} // bounds parallel nvcc runs
	mu     sync.Mutex
	cache  map[string]*compiled
}

// A compiled candidate: its SASS (or cubin bytes) and ptxas's report.
type compiled struct {
	once  sync.Once
	code  []byte
	cubin []byte
	ptxas string
	err   error
}

func newCompiler(t *testing.T) *compiler {
	t.Helper()
	nvcc := testtool.LookPath(t, "nvcc", "the CUDA compile tests need it", "installs it (nvidia-cuda-toolkit)")
	objdump, _ := exec.LookPath("cuobjdump")
	return newCompilerWith(t, nvcc, objdump)
}

// fp8NVCCEnv names an nvcc of release 12.4 or newer for the fp8 compile
// tests when the nvcc on PATH is older; CI unpacks one (.ci/nvcc12).
const fp8NVCCEnv = "EVOTUNE_FP8_NVCC"

// newFP8Compiler returns a compiler whose nvcc builds E4M3 mma: $EVOTUNE_FP8_NVCC,
// else the nvcc on PATH when it is new enough. CI must have one.
func newFP8Compiler(t *testing.T) *compiler {
	t.Helper()
	nvcc := os.Getenv(fp8NVCCEnv)
	if nvcc == "" {
		nvcc, _ = exec.LookPath("nvcc")
	}
	why := ""
	if nvcc == "" {
		why = "no nvcc found"
	} else if out, err := exec.Command(nvcc, "--version").CombinedOutput(); err != nil {
		why = fmt.Sprintf("%s --version: %v", nvcc, err)
	} else if m := regexp.MustCompile(`release (\d+\.\d+)`).FindStringSubmatch(string(out)); m == nil {
		why = nvcc + " --version names no release"
	} else if err := CheckNVCCFor("fp8", m[1]); err != nil {
		why = err.Error()
	}
	if why != "" {
		testtool.Missing(t, fmt.Sprintf("fp8 compile tests need nvcc %s or newer (set %s): %s", FP8MinNVCC, fp8NVCCEnv, why),
			"sets "+fp8NVCCEnv+" to the nvcc that .ci/nvcc12 unpacks")
	}
	// cuobjdump of the same release: beside nvcc, or in the usr/bin of a
	// Debian package tree (usr/lib/nvidia-cuda-toolkit/bin/nvcc).
	objdump := ""
	for _, p := range []string{filepath.Join(filepath.Dir(nvcc), "cuobjdump"), filepath.Join(filepath.Dir(nvcc), "../../../bin/cuobjdump")} {
		if _, err := os.Stat(p); err == nil {
			objdump = p
			break
		}
	}
	return newCompilerWith(t, nvcc, objdump)
}

// newFP8SASSCompiler is newFP8Compiler for tests that read the SASS: they
// skip without a cuobjdump beside the fp8 nvcc, and fail so in CI, whose
// (.ci/nvcc12) has one.
func newFP8SASSCompiler(t *testing.T) *compiler {
	t.Helper()
	cc := newFP8Compiler(t)
	if cc.objdmp == "" {
		testtool.Missing(t, "no cuobjdump beside the fp8 nvcc: the SASS cannot be read", "has one (.ci/nvcc12)")
	}
	return cc
}

func newCompilerWith(t *testing.T, nvcc, objdump string) *compiler {
	t.Helper()
	dir := t.TempDir()
	src := SDPASource()
	for _, sub := range []string{"src", "src2"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			t.Fatal(err)
		}
		for name, b := range src.Files {
			if err := os.WriteFile(filepath.Join(dir, sub, name), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	return &compiler{t: t, nvcc: nvcc, objdmp: objdump, dir: dir, slots: make(chan struct{}, 2), cache: map[string]*compiled{}}
}

// compile returns the cubin of flags for arch, from srcSub ("src" normally;
// "src2" to prove the source path does not leak into the code).
func (cc *compiler) compile(arch, srcSub string, flags []string) *compiled {
	key := arch + " " + srcSub + " " + strings.Join(flags, " ")
	cc.mu.Lock()
	c, ok := cc.cache[key]
	if !ok {
		c = &compiled{}
		cc.cache[key] = c
	}
	n := len(cc.cache)
	cc.mu.Unlock()
	c.once.Do(func() {
		cc.slots <- struct{}{}
		defer func() { <-cc.slots }()
		out := filepath.Join(cc.dir, fmt.Sprintf("k%d.cubin", n))
		cmd := exec.Command(cc.nvcc, NVCCArgs(arch, flags, filepath.Join(cc.dir, srcSub), SDPASource().Name, out)...)
		log, err := cmd.CombinedOutput()
		c.ptxas = string(log)
		if err != nil {
			c.err = fmt.Errorf("nvcc %s %s: %v\n%s", arch, strings.Join(flags, " "), err, log)
			return
		}
		if c.cubin, c.err = os.ReadFile(out); c.err != nil {
			return
		}
		c.code = c.cubin
		if cc.objdmp != "" {
			sass, err := exec.Command(cc.objdmp, "-sass", out).Output()
			if err != nil {
				c.err = fmt.Errorf("cuobjdump -sass %s: %v", out, err)
				return
			}
			c.code = sass
		}
	})
	return c
}

var ptxasFwdRE = regexp.MustCompile(`(?s)Compiling entry function 'sdpa_fwd'.*?(\d+) bytes spill stores, (\d+) bytes spill loads.*?Used (\d+) registers`)

// fwdUsage reads sdpa_fwd's registers and spill bytes from ptxas -v.
func fwdUsage(t *testing.T, ptxas string) (regs, spills int) {
	t.Helper()
	m := ptxasFwdRE.FindStringSubmatch(ptxas)
	if m == nil {
		t.Fatalf("no sdpa_fwd usage in ptxas output:\n%s", ptxas)
	}
	st, _ := strconv.Atoi(m[1])
	ld, _ := strconv.Atoi(m[2])
	regs, _ = strconv.Atoi(m[3])
	return regs, st + ld
}

// coverSample picks valid configs greedily until every value of every knob
// appears in at least one, starting with the default.
func coverSample(s *space.Space, rng *rand.Rand) []space.Config {
	type pair struct{ knob, value string }
	missing := map[pair]bool{}
	for _, k := range s.Knobs {
		for _, v := range k.Values {
			missing[pair{k.Name, v}] = true
		}
	}
	var valid []space.Config
	enumerate(s, func(c space.Config) {
		if s.Check(c) == nil {
			valid = append(valid, c)
		}
	})
	rng.Shuffle(len(valid), func(i, j int) { valid[i], valid[j] = valid[j], valid[i] })
	valid = append([]space.Config{s.Default()}, valid...)
	var out []space.Config
	for len(missing) > 0 {
		best, gain := -1, 0
		for i, c := range valid {
			g := 0
			for k, v := range c {
				if missing[pair{k, v}] {
					g++
				}
			}
			if g > gain {
				best, gain = i, g
			}
		}
		if best < 0 {
			break // some value appears in no valid config; the caller reports it
		}
		for k, v := range valid[best] {
			delete(missing, pair{k, v})
		}
		out = append(out, valid[best])
	}
	return out
}

// TestCompileSample compiles a sample of valid configs that covers every
// knob value, on both the L4's and the H100's architecture, for two
// problems that between them cover every define; each must compile, agree
// with SharedBytes, and the defaults must not spill.
func TestCompileSample(t *testing.T) {
	cc := newCompiler(t)
	problems := []struct {
		d      int
		dtype  string
		causal bool
	}{{64, "fp16", false}, {128, "bf16", true}}
	for _, arch := range []string{"sm_89", "sm_90"} {
		for pi, pr := range problems {
			s, _ := mustSpace(t, pr.d, pr.dtype, pr.causal, arch)
			sample := coverSample(s, rand.New(rand.NewPCG(1, uint64(pi))))
			if pi == 1 {
				// The second problem only needs to prove its defines build.
				sample = sample[:3]
			}
			for i, c := range sample {
				name := fmt.Sprintf("%s/d%d_%s_causal%v/%02d", arch, pr.d, pr.dtype, pr.causal, i)
				flags, err := s.Flags(c)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				flags = append(flags, "-DSDPA_EXPECT_SMEM="+strconv.Itoa(SharedBytes(c, pr.d)))
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					res := cc.compile(arch, "src", flags)
					if res.err != nil {
						t.Fatalf("config %s: %v", c.Key(), res.err)
					}
					regs, spills := fwdUsage(t, res.ptxas)
					t.Logf("%s: %d registers, %d spill bytes", c.Key(), regs, spills)
					if i == 0 && spills != 0 {
						t.Errorf("the default config spills %d bytes", spills)
					}
				})
			}
			if pi == 0 && len(sample) > 24 {
				t.Errorf("sample of %d configs is larger than needed", len(sample))
			}
		}
	}
}

// TestCompileFP8Sample is TestCompileSample for fp8 (E4M3 inputs) on the
// two architectures with E4M3 tensor cores: a sample covering every knob
// value at D=64, and the first configs of D=128 causal with bf16 output;
// each compiles, agrees with SharedBytes (the kernel's static_assert), and
// the default does not spill. V given transposed (SDPA_V_GIVEN) gets a
// covering sample of its own on the L4's architecture (every tile width,
// loader and warp split meets V^T's tile layout) and the first configs of
// D=128 causal on sm_90 (wgmma=qk's default).
func TestCompileFP8Sample(t *testing.T) {
	both := []string{"sm_89", "sm_90"}
	compileQuantizedSample(t, newFP8Compiler(t), "fp8", 2, []quantizedSample{
		{d: 64, out: "fp16", archs: both},
		{d: 128, causal: true, out: "bf16", archs: both, first: 3},
		{d: 64, out: "fp16", vt: true, archs: []string{"sm_89"}},
		{d: 128, causal: true, out: "bf16", vt: true, archs: []string{"sm_90"}, first: 3},
	})
}

// TestVGivenDropsTheRegrouping: with V given transposed, P V takes V^T's
// ldmatrix fragments as the mma's B operand (E4M3) or widens them as they
// are (fp16 P V), so the prmt that regroup V's transposed fragments are
// gone from the forward, and the tensor work is the same: sm_89's defaults
// at D=64 and D=128, P V in E4M3 and in fp16.
func TestVGivenDropsTheRegrouping(t *testing.T) {
	cc := newFP8SASSCompiler(t)
	tg, err := TargetFor("sm_89")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []int{64, 128} {
		for _, pvFP8 := range []string{"1", "0"} {
			t.Run(fmt.Sprintf("d%d_pv_fp8=%s", d, pvFP8), func(t *testing.T) {
				var prmt, mma [2]int
				for i, vt := range []bool{false, true} {
					p := space.Problem{Family: DefaultFamily, Shapes: []space.Shape{{B: 2, H: 8, S: 512, D: d}}, Dtype: "fp8", VTransposed: vt}
					s, err := SDPASpace(p, tg)
					if err != nil {
						t.Fatal(err)
					}
					c := s.Default()
					c["pv_fp8"] = pvFP8
					flags, err := s.Flags(c)
					if err != nil {
						t.Fatal(err)
					}
					res := cc.compile("sm_89", "src", flags)
					if res.err != nil {
						t.Fatal(res.err)
					}
					for _, in := range parseSASS(res.code) {
						op, _, _ := strings.Cut(in.op, ".")
						switch { // both kernels: the combine is the same in both builds
						case op == "PRMT":
							prmt[i]++
						case op == "QMMA" || op == "HMMA":
							mma[i]++
						}
					}
				}
				t.Logf("PRMT %d -> %d, tensor instructions %d -> %d", prmt[0], prmt[1], mma[0], mma[1])
				if mma[0] == 0 || mma[1] != mma[0] {
					t.Errorf("tensor instructions %d with V as it is, %d with V given: want the same, some", mma[0], mma[1])
				}
				if prmt[0] < 32 || prmt[1] > prmt[0]/8 {
					t.Errorf("PRMT %d with V as it is, %d with V given: want the regrouping (32 or more) gone", prmt[0], prmt[1])
				}
			})
		}
	}
}

// TestCompileInt8Sample is TestCompileFP8Sample for int8 with the nvcc on
// PATH (11.8 builds IMMA): the covering sample at D=64 on the A100's and the
// L4's architecture, and the first configs of D=128 causal with bf16 output
// on the other two, so every target architecture builds int8.
func TestCompileInt8Sample(t *testing.T) {
	compileQuantizedSample(t, newCompiler(t), "int8", 3, []quantizedSample{
		{d: 64, out: "fp16", archs: []string{"sm_80", "sm_89"}},
		{d: 128, causal: true, out: "bf16", archs: []string{"sm_86", "sm_90"}, first: 3},
	})
}

// A quantizedSample is one problem of a quantised dtype to compile a
// covering sample of (its first configs only, when first > 0) on archs.
type quantizedSample struct {
	d      int
	causal bool
	out    string
	vt     bool // fp8: V given transposed
	archs  []string
	first  int
}

func compileQuantizedSample(t *testing.T, cc *compiler, dtype string, seed uint64, problems []quantizedSample) {
	for pi, pr := range problems {
		for _, arch := range pr.archs {
			tg, err := TargetFor(arch)
			if err != nil {
				t.Fatal(err)
			}
			p := space.Problem{Family: DefaultFamily, Shapes: []space.Shape{{B: 2, H: 8, S: 512, D: pr.d}}, Dtype: dtype, OutDtype: pr.out, Causal: pr.causal,
				VTransposed: pr.vt}
			s, err := SDPASpace(p, tg)
			if err != nil {
				t.Fatal(err)
			}
			sample := coverSample(s, rand.New(rand.NewPCG(seed, uint64(pi))))
			if pr.first > 0 {
				sample = sample[:pr.first]
			}
			for i, c := range sample {
				vt := ""
				if pr.vt {
					vt = "_vt"
				}
				name := fmt.Sprintf("%s/d%d_%s_%s_causal%v%s/%02d", arch, pr.d, dtype, pr.out, pr.causal, vt, i)
				flags, err := s.Flags(c)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				flags = append(flags, "-DSDPA_EXPECT_SMEM="+strconv.Itoa(SharedBytes(c, pr.d)))
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					res := cc.compile(arch, "src", flags)
					if res.err != nil {
						t.Fatalf("config %s: %v", c.Key(), res.err)
					}
					regs, spills := fwdUsage(t, res.ptxas)
					t.Logf("%s: %d registers, %d spill bytes", c.Key(), regs, spills)
					if i == 0 && spills != 0 {
						t.Errorf("the default config spills %d bytes", spills)
					}
				})
			}
		}
	}
}

// TestEveryKnobChangesCode proves that each knob reaches the machine code:
// from the default, setting any one knob to any other value gives
// different SASS. Where that single change is invalid, the test also
// changes the fewest other knobs needed and compares against the default
// with only those other changes, so the difference is still due to the
// knob under test.
func TestEveryKnobChangesCode(t *testing.T) {
	everyKnobChangesCode(t, newCompiler(t), "fp16", "sm_89", nil)
}

// TestEveryFP8KnobChangesCode is TestEveryKnobChangesCode for the fp8
// space: every knob, the fp8-only ones included, on the E4M3 kernel.
func TestEveryFP8KnobChangesCode(t *testing.T) {
	everyKnobChangesCode(t, newFP8Compiler(t), "fp8", "sm_89", nil)
}

// TestEveryInt8KnobChangesCode is TestEveryKnobChangesCode for the int8
// space, pv_accum included, with the nvcc on PATH: 11.8 builds IMMA.
func TestEveryInt8KnobChangesCode(t *testing.T) {
	everyKnobChangesCode(t, newCompiler(t), "int8", "sm_89", nil)
}

// TestWgmmaKnobChangesCode is TestEveryKnobChangesCode for the knob only
// sm_90's fp8 space declares: from its default (wgmma=qk), off changes the
// SASS (built for sm_90a by NVCCArgs where wgmma is on).
func TestWgmmaKnobChangesCode(t *testing.T) {
	everyKnobChangesCode(t, newFP8Compiler(t), "fp8", "sm_90", func(k string) bool { return k == "wgmma" })
}

// everyKnobChangesCode compiles, for arch, the dtype's default beside each
// one-knob change of it (every knob, or those only keeps).
func everyKnobChangesCode(t *testing.T, cc *compiler, dtype, arch string, only func(knob string) bool) {
	s, _ := mustSpace(t, 64, dtype, false, arch)
	def := s.Default()
	render := func(c space.Config) []string {
		t.Helper()
		flags, err := s.Flags(c)
		if err != nil {
			t.Fatal(err)
		}
		return flags
	}

	type variant struct {
		name       string
		base, with space.Config
	}
	var variants []variant
	for _, k := range s.Knobs {
		if only != nil && !only(k.Name) {
			continue
		}
		for _, v := range k.Values {
			if v == k.Default {
				continue
			}
			base, changed, ok := fixToValid(s, def, k.Name, v)
			if !ok {
				t.Errorf("%s=%s: no valid config within one extra change of the default", k.Name, v)
				continue
			}
			name := k.Name + "=" + v
			if fix := diffKeys(def, base); fix != "" {
				t.Logf("%s is invalid alone; both sides also set %s", name, fix)
				name += "+" + fix
			}
			variants = append(variants, variant{name, base, changed})
		}
	}

	// Identical flags must give identical code, even from another source
	// directory, or every comparison below would prove nothing.
	baseFlags := render(def)
	var wg sync.WaitGroup
	for _, sub := range []string{"src", "src2"} {
		wg.Add(1)
		go func() { defer wg.Done(); cc.compile(arch, sub, baseFlags) }()
	}
	for _, v := range variants {
		for _, c := range []space.Config{v.base, v.with} {
			wg.Add(1)
			go func() { defer wg.Done(); cc.compile(arch, "src", render(c)) }()
		}
	}
	wg.Wait()

	a, b := cc.compile(arch, "src", baseFlags), cc.compile(arch, "src2", baseFlags)
	if a.err != nil || b.err != nil {
		t.Fatalf("default config: %v %v", a.err, b.err)
	}
	if !bytes.Equal(a.code, b.code) {
		t.Fatal("the default config compiled twice gives different code")
	}
	if !bytes.Equal(a.cubin, b.cubin) {
		t.Log("note: cubin bytes differ between source directories; comparing SASS only")
	}
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			x, y := cc.compile(arch, "src", render(v.base)), cc.compile(arch, "src", render(v.with))
			if x.err != nil || y.err != nil {
				t.Fatalf("%v %v", x.err, y.err)
			}
			if bytes.Equal(x.code, y.code) {
				t.Errorf("%s does not change the code of %s", v.name, v.base.Key())
			}
		})
	}
}

// fixToValid returns (base, base with knob=value) where base is c, or c
// with the one other knob change that makes both valid.
func fixToValid(s *space.Space, c space.Config, knob, value string) (base, changed space.Config, ok bool) {
	changed = with(c, knob, value)
	if s.Check(changed) == nil {
		return c, changed, true
	}
	for _, k := range s.Knobs {
		if k.Name == knob {
			continue
		}
		for _, v := range k.Values {
			b := with(c, k.Name, v)
			if s.Check(b) == nil && s.Check(with(b, knob, value)) == nil {
				return b, with(b, knob, value), true
			}
		}
	}
	return nil, nil, false
}

// diffKeys names the knobs where b differs from a, as k=v pairs.
func diffKeys(a, b space.Config) string {
	var out []string
	for k, v := range b {
		if a[k] != v {
			out = append(out, k+"="+v)
		}
	}
	slices.Sort(out)
	return strings.Join(out, ",")
}
