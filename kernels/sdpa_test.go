package kernels

import (
	"slices"
	"strings"
	"testing"

	"evotune/space"
)

// The tests read spaces through these small helpers rather than the space
// package's methods, so they check the declaration itself.

func defaultConfig(s *space.Space) space.Config {
	c := space.Config{}
	for _, k := range s.Knobs {
		c[k.Name] = k.Default
	}
	return c
}

// with returns a copy of c with the given name=value pairs applied.
func with(c space.Config, kv ...string) space.Config {
	out := space.Config{}
	for k, v := range c {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i]] = kv[i+1]
	}
	return out
}

// rejectedBy returns the name of the first constraint that refuses c, or "".
func rejectedBy(s *space.Space, c space.Config) (string, error) {
	for _, con := range s.Constraints {
		if err := con.Check(c); err != nil {
			return con.Name, err
		}
	}
	return "", nil
}

// enumerate calls fn on every raw config of s.
func enumerate(s *space.Space, fn func(space.Config)) {
	c := space.Config{}
	var rec func(i int)
	rec = func(i int) {
		if i == len(s.Knobs) {
			fn(with(c))
			return
		}
		for _, v := range s.Knobs[i].Values {
			c[s.Knobs[i].Name] = v
			rec(i + 1)
		}
	}
	rec(0)
}

func mustSpace(t testing.TB, d int, dtype string, causal bool, arch string) (*space.Space, Target) {
	t.Helper()
	tg, err := TargetFor(arch)
	if err != nil {
		t.Fatal(err)
	}
	p := space.Problem{Family: DefaultFamily, Shapes: []space.Shape{{B: 2, H: 8, S: 512, D: d}}, Dtype: dtype, Causal: causal}
	s, err := SDPASpace(p, tg)
	if err != nil {
		t.Fatal(err)
	}
	return s, tg
}

func TestTargetFor(t *testing.T) {
	for _, arch := range []string{"sm_80", "sm_86", "sm_89", "sm_90"} {
		tg, err := TargetFor(arch)
		if err != nil {
			t.Fatalf("TargetFor(%s): %v", arch, err)
		}
		if tg.Arch != arch || tg.SMs <= 0 || tg.SharedPerBlock < 99*1024 || tg.RegsPerSM != 65536 || tg.MaxThreadsPerSM < 1536 {
			t.Errorf("TargetFor(%s) = %+v", arch, tg)
		}
	}
	if tg, _ := TargetFor("sm_89"); tg.SMs != 58 || tg.SharedPerBlock != 101376 {
		t.Errorf("sm_89 = %+v, want the L4's 58 SMs and 101376 bytes", tg)
	}
	if _, err := TargetFor("sm_75"); err == nil {
		t.Error("TargetFor(sm_75) succeeded")
	}
}

func TestSDPASpaceDefines(t *testing.T) {
	s, _ := mustSpace(t, 128, "bf16", true, "sm_90")
	want := []space.Define{{Macro: "SDPA_HEAD_DIM", Value: "128"}, {Macro: "SDPA_BF16", Value: "1"}, {Macro: "SDPA_CAUSAL", Value: "1"}}
	if !slices.Equal(s.Defines, want) {
		t.Errorf("defines = %v, want %v", s.Defines, want)
	}
	tg, _ := TargetFor("sm_89")
	bad := []space.Problem{
		{Family: DefaultFamily, Shapes: []space.Shape{{B: 1, H: 1, S: 64, D: 96}}, Dtype: "fp16"},
		{Family: DefaultFamily, Shapes: []space.Shape{{B: 1, H: 1, S: 64, D: 64}}, Dtype: "fp32"},
		{Family: "gemm", Shapes: []space.Shape{{B: 1, H: 1, S: 64, D: 64}}, Dtype: "fp16"},
		{Family: DefaultFamily, Dtype: "fp16"},
	}
	for _, p := range bad {
		if _, err := SDPASpace(p, tg); err == nil {
			t.Errorf("SDPASpace(%+v) succeeded", p)
		}
	}
}

func TestKnobsHaveMacrosAndDefaults(t *testing.T) {
	for _, dtype := range []string{"fp16", "fp8", "int8"} {
		t.Run(dtype, func(t *testing.T) { knobsHaveMacrosAndDefaults(t, dtype) })
	}
}

func knobsHaveMacrosAndDefaults(t *testing.T, dtype string) {
	s, _ := mustSpace(t, 64, dtype, false, "sm_89")
	src := string(SDPASource().Files["sdpa.cu"])
	for _, k := range s.Knobs {
		if !slices.Contains(k.Values, k.Default) {
			t.Errorf("knob %s: default %q not in %v", k.Name, k.Default, k.Values)
		}
		def := k.Default
		if k.MacroValues != nil {
			def = k.MacroValues[slices.Index(k.Values, k.Default)]
		}
		// The source's #ifndef default must be the declared default, so a
		// config rendered without a knob means the same kernel.
		guard := "#ifndef " + k.Macro + "\n#define " + k.Macro + " " + def + "\n"
		if !strings.Contains(src, guard) {
			t.Errorf("sdpa.cu lacks %q", guard)
		}
	}
	for _, d := range s.Defines {
		if !strings.Contains(src, "#ifndef "+d.Macro+"\n") {
			t.Errorf("sdpa.cu does not guard %s", d.Macro)
		}
	}
}

func TestDefaultIsValidEverywhere(t *testing.T) {
	for _, arch := range []string{"sm_80", "sm_86", "sm_89", "sm_90"} {
		for _, d := range []int{64, 128} {
			s, _ := mustSpace(t, d, "fp16", false, arch)
			if name, err := rejectedBy(s, defaultConfig(s)); err != nil {
				t.Errorf("%s d=%d: default rejected by %s: %v", arch, d, name, err)
			}
		}
	}
}

func TestConstraints(t *testing.T) {
	tests := []struct {
		name string
		d    int
		arch string
		kv   []string
		want string // constraint that rejects, "" for valid
	}{
		{"default", 64, "sm_89", nil, ""},
		{"producers without ws", 64, "sm_89", []string{"producer_warps", "2"}, "ws_producers"},
		{"ws with producers", 64, "sm_89", []string{"ws", "1", "producer_warps", "2"}, ""},
		{"ws single stage", 64, "sm_89", []string{"ws", "1", "stages", "1"}, "ws_stages"},
		{"single stage without ws", 64, "sm_89", []string{"stages", "1"}, ""},
		{"block_m 16 one warp row group", 64, "sm_89", []string{"block_m", "16", "warps", "4", "block_n", "64"}, ""},
		{"block_m 16 eight warps need 128 keys", 64, "sm_89", []string{"block_m", "16", "warps", "8", "block_n", "64"}, "warp_layout"},
		{"block_m 16 eight warps 128 keys", 64, "sm_89", []string{"block_m", "16", "warps", "8", "block_n", "128"}, ""},
		{"rows per warp 64", 64, "sm_89", []string{"block_m", "128", "warps", "2", "block_n", "32", "q_in_regs", "0"}, ""},
		{"rows per warp 64 with q in registers", 64, "sm_89", []string{"block_m", "128", "warps", "2", "block_n", "32"}, "registers"},
		{"d128 big tiles regs", 128, "sm_89", []string{"block_m", "128", "warps", "2", "block_n", "64"}, "registers"},
		{"min blocks regs", 128, "sm_90", []string{"block_m", "128", "warps", "4", "min_blocks_per_sm", "4"}, "registers"},
		{"shared too big on L4", 128, "sm_89", []string{"block_m", "64", "block_n", "128", "stages", "4", "kv_layout", "pad"}, "shared_memory"},
		{"same fits on H100", 128, "sm_90", []string{"block_m", "64", "block_n", "128", "stages", "3", "kv_layout", "pad"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := mustSpace(t, tt.d, "fp16", false, tt.arch)
			got, err := rejectedBy(s, with(defaultConfig(s), tt.kv...))
			if got != tt.want {
				t.Fatalf("rejected by %q (%v), want %q", got, err, tt.want)
			}
		})
	}
}

func TestMinBlocksThreads(t *testing.T) {
	// No L4 or H100 config reaches the thread limit with 4 blocks, so use a
	// smaller SM.
	p := space.Problem{Family: DefaultFamily, Shapes: []space.Shape{{B: 1, H: 1, S: 64, D: 64}}, Dtype: "fp16"}
	s, err := SDPASpace(p, Target{Arch: "small", SMs: 1, SharedPerBlock: 49152, RegsPerSM: 65536, MaxThreadsPerSM: 1024})
	if err != nil {
		t.Fatal(err)
	}
	c := with(defaultConfig(s), "warps", "8", "ws", "1", "producer_warps", "2", "min_blocks_per_sm", "4")
	if name, err := rejectedBy(s, c); name != "min_blocks" {
		t.Errorf("rejected by %q (%v), want min_blocks", name, err)
	}
	if name, err := rejectedBy(s, with(c, "ws", "0", "producer_warps", "1", "warps", "2")); name != "" {
		t.Errorf("2 warps x 4 blocks rejected by %s: %v", name, err)
	}
}

func TestConstraintsRefuseMalformedConfigs(t *testing.T) {
	s, _ := mustSpace(t, 64, "fp16", false, "sm_89")
	for _, c := range []space.Config{
		with(defaultConfig(s), "block_m", "x"),
		with(defaultConfig(s), "kv_layout", "diagonal"),
		{},
	} {
		if name, err := rejectedBy(s, c); err == nil {
			t.Errorf("config %v accepted", c)
		} else if name == "" {
			t.Errorf("config %v: rejection has no constraint name", c)
		}
	}
}

func TestSharedBytes(t *testing.T) {
	s, _ := mustSpace(t, 64, "fp16", false, "sm_89")
	def := defaultConfig(s)
	tests := []struct {
		name string
		c    space.Config
		d    int
		want int
	}{
		// q 64x64x2 + 2 stages x (K+V) 64x64x2
		{"default", def, 64, 8192 + 32768},
		// pad: row stride 136; q 128x136x2 + 3 x 2 x 64x136x2
		{"d128 pad", with(def, "kv_layout", "pad", "stages", "3", "block_m", "128"), 128, 34816 + 104448},
		// warps_n=4: combine 3x16x64x4 + 2x4x16x4 = 12800 fits in q + ring
		{"split warps", with(def, "block_m", "16"), 64, 2048 + 32768},
		// ws keeps the combine area apart from the ring
		{"split warps ws", with(def, "block_m", "16", "ws", "1"), 64, 2048 + 32768 + 12800},
		// 8 warps over 16 rows split 128 keys: q + ring still exceed the combine area
		{"ring dominates", with(def, "block_m", "16", "warps", "8", "block_n", "128", "stages", "1"), 128, 4096 + 65536},
		// 2 row groups x 4 key groups, 1 stage: the combine area 3x32x64x4 + 2x4x32x4 is larger
		{"combine dominates", with(def, "block_m", "32", "warps", "8", "stages", "1"), 64, 25600},
		{"malformed", with(def, "stages", "many"), 64, 0},
	}
	for _, tt := range tests {
		if got := SharedBytes(tt.c, tt.d); got != tt.want {
			t.Errorf("%s: SharedBytes = %d, want %d", tt.name, got, tt.want)
		}
	}
}

func TestSDPAPlan(t *testing.T) {
	s, tg := mustSpace(t, 64, "fp16", false, "sm_89")
	def := defaultConfig(s)
	tests := []struct {
		name      string
		c         space.Config
		shape     space.Shape
		grid      int
		block     int
		launches  int
		workspace int64
		lseOff    int64
	}{
		{"default", def, space.Shape{B: 2, H: 8, S: 512, D: 64}, 2 * 8 * 8, 128, 1, 0, 0},
		{"tail rows", def, space.Shape{B: 1, H: 3, S: 65, D: 64}, 3 * 2, 128, 1, 0, 0},
		{"one row", def, space.Shape{B: 1, H: 1, S: 1, D: 64}, 1, 128, 1, 0, 0},
		{"ws threads", with(def, "ws", "1", "producer_warps", "2"), space.Shape{B: 1, H: 1, S: 128, D: 64}, 2, 192, 1, 0, 0},
		{"persistent caps at SMs x min blocks", with(def, "persistent", "1", "min_blocks_per_sm", "2"),
			space.Shape{B: 4, H: 16, S: 2048, D: 64}, 58 * 2, 128, 1, 0, 0},
		{"persistent small problem", with(def, "persistent", "1"), space.Shape{B: 1, H: 2, S: 64, D: 64}, 2, 128, 1, 0, 0},
		{"split", with(def, "split_kv", "4"), space.Shape{B: 1, H: 2, S: 100, D: 64}, 2 * 2 * 4, 128, 2,
			4*2*100*64*4 + 4*2*100*4, 4 * 2 * 100 * 64 * 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := SDPAPlan(tt.c, tt.shape, tg)
			if err != nil {
				t.Fatal(err)
			}
			if len(p.Launches) != tt.launches {
				t.Fatalf("%d launches, want %d", len(p.Launches), tt.launches)
			}
			f := p.Launches[0]
			if f.Kernel != SDPAForwardKernel || f.Grid != [3]int{tt.grid, 1, 1} || f.Block != [3]int{tt.block, 1, 1} {
				t.Errorf("forward launch %+v, want grid %d block %d", f, tt.grid, tt.block)
			}
			if f.SharedBytes != SharedBytes(tt.c, tt.shape.D) {
				t.Errorf("forward smem %d, want SharedBytes %d", f.SharedBytes, SharedBytes(tt.c, tt.shape.D))
			}
			if p.WorkspaceBytes != tt.workspace || p.LSEOffsetBytes != tt.lseOff || p.LSEOffsetBytes%16 != 0 {
				t.Errorf("workspace %d lse at %d, want %d at %d", p.WorkspaceBytes, p.LSEOffsetBytes, tt.workspace, tt.lseOff)
			}
			if tt.launches == 2 {
				cb := p.Launches[1]
				rows := tt.shape.B * tt.shape.H * tt.shape.S
				if cb.Kernel != SDPACombineKernel || cb.Grid[0]*cb.Block[0]/32 < rows || cb.SharedBytes != 0 {
					t.Errorf("combine launch %+v does not cover %d rows with a warp each", cb, rows)
				}
			}
		})
	}
	if _, err := SDPAPlan(with(def, "block_m", "16", "warps", "8"), space.Shape{B: 1, H: 1, S: 64, D: 64}, tg); err == nil {
		t.Error("plan accepted a warp layout that does not divide")
	}
	if _, err := SDPAPlan(def, space.Shape{B: 1, H: 0, S: 64, D: 64}, tg); err == nil {
		t.Error("plan accepted H=0")
	}
}

func TestFLOPsAndBytes(t *testing.T) {
	sh := space.Shape{B: 2, H: 8, S: 512, D: 64}
	if got, want := SDPAFLOPs(sh, false), 4.0*2*8*512*512*64; got != want {
		t.Errorf("FLOPs = %g, want %g", got, want)
	}
	// causal counts the unmasked pairs: S(S+1)/2
	if got, want := SDPAFLOPs(space.Shape{B: 1, H: 1, S: 3, D: 64}, true), 4.0*64*6; got != want {
		t.Errorf("causal FLOPs = %g, want %g", got, want)
	}
	if got, want := SDPABytes(sh, "fp16"), 4.0*2*2*8*512*64; got != want {
		t.Errorf("bytes = %g, want %g", got, want)
	}
	// fp8: three one-byte inputs and a two-byte output.
	if got, want := SDPABytes(sh, "fp8"), 5.0*2*8*512*64; got != want {
		t.Errorf("fp8 bytes = %g, want %g", got, want)
	}
	// int8: as fp8, plus a float per row of Q and K and per column of V.
	if got, want := SDPABytes(sh, "int8"), 5.0*2*8*512*64+4*2*8*(512+512+64); got != want {
		t.Errorf("int8 bytes = %g, want %g", got, want)
	}
}

func TestValidSpaceSize(t *testing.T) {
	for _, arch := range []string{"sm_89", "sm_90"} {
		for _, d := range []int{64, 128} {
			s, _ := mustSpace(t, d, "fp16", false, arch)
			var raw, valid int
			byConstraint := map[string]int{}
			enumerate(s, func(c space.Config) {
				raw++
				if name, _ := rejectedBy(s, c); name == "" {
					valid++
				} else {
					byConstraint[name]++
				}
			})
			t.Logf("%s d=%d: %d valid of %d raw; rejected by %v", arch, d, valid, raw, byConstraint)
			if d == 64 && valid < 10000 {
				t.Errorf("%s d=64: only %d valid configs, want well over 10000", arch, valid)
			}
			if valid < 1000 {
				t.Errorf("%s d=%d: only %d valid configs", arch, d, valid)
			}
		}
	}
}

func TestSDPASource(t *testing.T) {
	src := SDPASource()
	if src.Name != "sdpa.cu" || len(src.Files) != 2 || len(src.Files["sdpa_params.h"]) == 0 {
		t.Fatalf("source = %s with %d files", src.Name, len(src.Files))
	}
	if again := SDPASource(); again.Hash != src.Hash || len(src.Hash) != 64 {
		t.Errorf("hash %q is not stable or not sha256 hex", src.Hash)
	}
	files := map[string][]byte{"a": []byte("bc"), "ab": []byte("c")}
	if hashFiles(files) == hashFiles(map[string][]byte{"a": []byte("b"), "ab": []byte("cc")}) {
		t.Error("different file sets hash alike")
	}
	if hashFiles(map[string][]byte{"ab": []byte("c")}) == hashFiles(map[string][]byte{"a": []byte("bc")}) {
		t.Error("name and content boundaries are not hashed")
	}
}

func TestNVCCArgs(t *testing.T) {
	args := NVCCArgs("sm_89", []string{"-DSDPA_HEAD_DIM=64"}, "/src", "sdpa.cu", "/out/x.cubin")
	joined := strings.Join(args, " ")
	for _, want := range []string{"-cubin", "-arch=sm_89", "-O3", "-std=c++17", "-Xptxas -v", "-I/src", "-DSDPA_HEAD_DIM=64", "-o /out/x.cubin", "/src/sdpa.cu"} {
		if !strings.Contains(joined, want) {
			t.Errorf("nvcc args %q lack %q", joined, want)
		}
	}
	for _, bad := range []string{"-G", "-lineinfo"} {
		if slices.Contains(args, bad) {
			t.Errorf("nvcc args contain %s", bad)
		}
	}
}

func TestToleranceFor(t *testing.T) {
	fp16, bf16 := ToleranceFor("fp16", ""), ToleranceFor("bf16", "")
	if fp16.MaxAbs <= 0 || fp16.MaxAbs > 2e-3 || fp16.Atol >= fp16.MaxAbs {
		t.Errorf("fp16 tolerance %+v", fp16)
	}
	if bf16.MaxAbs != 8*fp16.MaxAbs || bf16.RelL2 <= fp16.RelL2 {
		t.Errorf("bf16 tolerance %+v is not 8x fp16 %+v", bf16, fp16)
	}
	if fp16.E2ECos != 0 || fp16.E2ERelL1 != 0 || bf16.E2ECos != 0 {
		t.Errorf("fp16 %+v or bf16 %+v gates end-to-end error: they have no quantised inputs", fp16, bf16)
	}
	// int8's kernel error is the fp16 kernel's, with O rounded to the
	// output dtype; end to end it is gated as fp8 is.
	for _, out := range []string{"", "fp16", "bf16"} {
		got, want := ToleranceFor("int8", out), fp16
		if out == "bf16" {
			want = bf16
		}
		want.E2ECos, want.E2ERelL1 = got.E2ECos, got.E2ERelL1
		if got != want {
			t.Errorf("int8 with output %q: tolerance %+v, want %+v", out, got, want)
		}
		if !(got.E2ECos > 0.99 && got.E2ECos < 1 && got.E2ERelL1 > 0 && got.E2ERelL1 < ToleranceFor("fp8", out).E2ERelL1) {
			t.Errorf("int8 with output %q: end-to-end gate cosine %g, relative L1 %g: want a gate tighter than fp8's", out, got.E2ECos, got.E2ERelL1)
		}
	}
	if ToleranceFor("fp8", "bf16") != ToleranceFor("fp8", "") {
		t.Error("fp8's gate depends on its output dtype: its bound already covers bf16's rounding")
	}
}

func TestSourceWith(t *testing.T) {
	src := SDPASource()
	same := src.With(src.Name, src.Files[src.Name])
	if same.Hash != src.Hash {
		t.Errorf("replacing %s by its own content changed the hash: %s != %s", src.Name, same.Hash, src.Hash)
	}
	other := src.With(src.Name, append([]byte("// edited\n"), src.Files[src.Name]...))
	if other.Hash == src.Hash {
		t.Error("a different kernel file kept the embedded hash")
	}
	if string(other.Files[src.Name][:9]) != "// edited" {
		t.Error("With did not replace the file")
	}
	if len(other.Files) != len(src.Files) || other.Name != src.Name {
		t.Errorf("With changed the file set: %d files named %q, want %d named %q", len(other.Files), other.Name, len(src.Files), src.Name)
	}
}

// TestWgmmaSpace checks where the wgmma knob is declared (fp8 on sm_90
// only), its values and constraint's refusals (the kernel's static_asserts
// in Go), and the architecture it builds for.
func TestWgmmaSpace(t *testing.T) {
	for _, c := range []struct {
		dtype, arch string
		want        bool
	}{{"fp8", "sm_90", true}, {"fp8", "sm_89", false}, {"int8", "sm_90", false}, {"fp16", "sm_90", false}} {
		s, _ := mustSpace(t, 64, c.dtype, false, c.arch)
		k, ok := s.Knob("wgmma")
		if ok != c.want {
			t.Errorf("%s on %s: wgmma declared %v, want %v", c.dtype, c.arch, ok, c.want)
		}
		if ok && k.Default != "qk" {
			t.Errorf("%s on %s: wgmma default %q, want qk", c.dtype, c.arch, k.Default)
		}
	}
	s, _ := mustSpace(t, 64, "fp8", false, "sm_90")
	def := s.Default()
	if err := s.Check(def); err != nil {
		t.Fatalf("the sm_90 fp8 default is invalid: %v", err)
	}
	for _, r := range []struct {
		c    space.Config
		want string
	}{
		{with(def, "block_m", "32"), "row groups in fours"},
		{with(def, "kv_layout", "pad"), "swizzled layout"},
		{with(def, "q_in_regs", "0"), "Q from registers"},
		{with(def, "wgmma", "qk_pv"), `value "qk_pv"`},
	} {
		err := s.Check(r.c)
		if err == nil || !strings.Contains(err.Error(), r.want) {
			t.Errorf("%s: got %v, want a refusal naming %q", r.c.Key(), err, r.want)
		}
		if off := with(r.c, "wgmma", "off"); s.Check(off) != nil && r.c["wgmma"] != "qk_pv" {
			t.Errorf("%s: invalid even with wgmma=off: %v", off.Key(), s.Check(off))
		}
	}
	// wgmma reads K where mma.sync does: the same shared memory.
	if got, off := SharedBytes(def, 64), SharedBytes(with(def, "wgmma", "off"), 64); got != off {
		t.Errorf("wgmma=qk uses %d bytes of shared memory, off %d", got, off)
	}
	for _, c := range []struct {
		arch  string
		flags []string
		want  string
	}{
		{"sm_90", []string{"-DSDPA_FP8=1", "-DSDPA_WGMMA=1"}, "sm_90a"},
		{"sm_90", []string{"-DSDPA_WGMMA=2"}, "sm_90a"},
		{"sm_90", []string{"-DSDPA_FP8=1", "-DSDPA_WGMMA=0"}, "sm_90"},
		{"sm_90", []string{"-DSDPA_FP8=1"}, "sm_90"},
		{"sm_89", []string{"-DSDPA_WGMMA=1"}, "sm_89"},
	} {
		if got := CompileArch(c.arch, c.flags); got != c.want {
			t.Errorf("CompileArch(%s, %v) = %s, want %s", c.arch, c.flags, got, c.want)
		}
	}
	if args := strings.Join(NVCCArgs("sm_90", []string{"-DSDPA_WGMMA=1"}, "/s", "sdpa.cu", "/o"), " "); !strings.Contains(args, "-arch=sm_90a ") {
		t.Errorf("NVCCArgs for a wgmma config: %s", args)
	}
}

// TestQKAccumKnob checks fp8's two-level Q K^T accumulation: declared for
// fp8 only, default 1 except at D=128 off sm_90 (the register margin), and
// with wgmma=qk (which always splits) only as 1.
func TestQKAccumKnob(t *testing.T) {
	for _, c := range []struct {
		dtype, arch string
		d           int
		want        string // "" for not declared
	}{
		{"fp8", "sm_89", 64, "1"}, {"fp8", "sm_89", 128, "0"}, {"fp8", "sm_90", 64, "1"}, {"fp8", "sm_90", 128, "1"},
		{"int8", "sm_89", 64, ""}, {"fp16", "sm_90", 64, ""},
	} {
		s, _ := mustSpace(t, c.d, c.dtype, false, c.arch)
		k, ok := s.Knob("qk_accum")
		switch {
		case ok != (c.want != ""):
			t.Errorf("%s D=%d on %s: qk_accum declared %v", c.dtype, c.d, c.arch, ok)
		case ok && (k.Default != c.want || k.Macro != "SDPA_QK_ACCUM"):
			t.Errorf("%s D=%d on %s: qk_accum %+v, want default %s", c.dtype, c.d, c.arch, k, c.want)
		case ok && s.Check(s.Default()) != nil:
			t.Errorf("%s D=%d on %s: the default is invalid: %v", c.dtype, c.d, c.arch, s.Check(s.Default()))
		}
	}
	s, _ := mustSpace(t, 64, "fp8", false, "sm_90")
	if err := s.Check(with(s.Default(), "qk_accum", "0")); err == nil || !strings.Contains(err.Error(), "keep qk_accum=1") {
		t.Errorf("wgmma=qk with qk_accum=0: %v, want refused (the same code)", err)
	}
	if err := s.Check(with(with(s.Default(), "qk_accum", "0"), "wgmma", "off")); err != nil {
		t.Errorf("wgmma=off with qk_accum=0: %v", err)
	}
}

// TestAbsentValues pins which knobs declare the value of a config recorded
// before they existed, and that value: qk_accum=0, qk_f16=0 and wgmma=off
// compile the code from before each knob (see their declarations); every
// other knob came with its dtype, or with the family, and a config must
// name it. A config of the first fp8 space (before all three knobs)
// completes to a valid config of today's.
func TestAbsentValues(t *testing.T) {
	want := map[string]string{"qk_accum": "0", "qk_f16": "0", "wgmma": "off"}
	for _, dtype := range []string{"fp16", "bf16", "fp8", "int8"} {
		for _, arch := range []string{"sm_80", "sm_89", "sm_90"} {
			for _, d := range []int{64, 128} {
				if dtype == "fp8" && arch == "sm_80" {
					continue
				}
				s, _ := mustSpace(t, d, dtype, false, arch)
				for _, k := range s.Knobs {
					if k.Absent != want[k.Name] {
						t.Errorf("%s D=%d on %s: knob %s declares absent value %q, want %q", dtype, d, arch, k.Name, k.Absent, want[k.Name])
					}
				}
			}
		}
	}
	for _, arch := range []string{"sm_89", "sm_90"} {
		s, _ := mustSpace(t, 64, "fp8", false, arch)
		old := defaultConfig(s)
		for name := range want {
			delete(old, name)
		}
		got, filled := s.Complete(old)
		if !filled {
			t.Fatalf("fp8 on %s: Complete filled nothing in %s", arch, old.Key())
		}
		if err := s.Check(got); err != nil {
			t.Errorf("fp8 on %s: %s completed to %s: %v", arch, old.Key(), got.Key(), err)
		}
		for name, v := range want {
			if _, declared := s.Knob(name); declared && got[name] != v {
				t.Errorf("fp8 on %s: completed %s=%q, want %q", arch, name, got[name], v)
			}
		}
	}
}

// TestQKF16Knob checks fp8's fp16 Q K^T: declared for fp8 only, on both fp8
// architectures, off by default, and refused where the kernel's static_assert
// would refuse it (with wgmma=qk, or without Q in registers).
func TestQKF16Knob(t *testing.T) {
	for _, c := range []struct {
		dtype, arch string
		want        bool
	}{{"fp8", "sm_89", true}, {"fp8", "sm_90", true}, {"int8", "sm_89", false}, {"fp16", "sm_90", false}} {
		s, _ := mustSpace(t, 64, c.dtype, false, c.arch)
		k, ok := s.Knob("qk_f16")
		switch {
		case ok != c.want:
			t.Errorf("%s on %s: qk_f16 declared %v", c.dtype, c.arch, ok)
		case ok && (k.Default != "0" || k.Macro != "SDPA_QK_F16"):
			t.Errorf("%s on %s: qk_f16 %+v, want default 0", c.dtype, c.arch, k)
		}
	}
	s, _ := mustSpace(t, 64, "fp8", false, "sm_90")
	on := with(s.Default(), "qk_f16", "1")
	if err := s.Check(on); err == nil || !strings.Contains(err.Error(), "keep qk_f16=0 with wgmma") {
		t.Errorf("wgmma=qk with qk_f16=1: %v, want refused", err)
	}
	off := with(on, "wgmma", "off")
	if err := s.Check(off); err != nil {
		t.Errorf("wgmma=off with qk_f16=1: %v", err)
	}
	if err := s.Check(with(off, "q_in_regs", "0")); err == nil || !strings.Contains(err.Error(), "q_in_regs=1") {
		t.Errorf("q_in_regs=0 with qk_f16=1: %v, want refused", err)
	}
}
