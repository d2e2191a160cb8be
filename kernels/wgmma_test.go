package kernels

import (
	"slices"
	"strings"
	"testing"
)

// TestCompileWgmmaQK builds SDPA_WGMMA=1 (the knob wgmma=qk: Q K^T as
// Hopper's warpgroup MMA, an sm_90a build) beside the same config
// with mma.sync for sm_90, and checks that Q K^T left the synchronous tensor
// path: E4M3's QGMMA or int8's IGMMA appears, fp8 keeps fewer HMMA (on sm_90
// an E4M3 mma.sync is unpacked into two HMMA) and int8 no IMMA, and nothing
// spills. Where P V runs in fp16 it builds SDPA_WGMMA=2 (qk_pv) as well, which
// must leave no synchronous tensor instruction at all. No build may write
// Q's fragment registers inside the key loop (qkFragmentsClobbered). Configs
// the kernel cannot build are refused at compile time with the reason.
func TestCompileWgmmaQK(t *testing.T) {
	cc := newFP8SASSCompiler(t)
	builds := []struct {
		name, gmma string
		flags      []string
		pv         bool // P V runs in fp16, so SDPA_WGMMA=2 builds too
	}{
		{"fp8 d64 block_m=128 warps=8 pv_fp8=0", "QGMMA",
			[]string{"-DSDPA_FP8=1", "-DSDPA_PV_FP8=0", "-DSDPA_BLOCK_M=128", "-DSDPA_WARPS=8", "-DSDPA_STAGES=3"}, true},
		{"fp8 d64 block_m=128 warps=4 ws", "QGMMA",
			[]string{"-DSDPA_FP8=1", "-DSDPA_BLOCK_M=128", "-DSDPA_WARPS=4", "-DSDPA_WS=1", "-DSDPA_STAGES=3"}, false},
		{"fp8 d128 causal pv_accum=0 bf16 out", "QGMMA",
			[]string{"-DSDPA_FP8=1", "-DSDPA_HEAD_DIM=128", "-DSDPA_CAUSAL=1", "-DSDPA_OUT_BF16=1", "-DSDPA_PV_ACCUM=0", "-DSDPA_PV_FP8=0", "-DSDPA_WARPS=8"}, true},
		{"int8 d64 block_n=128", "IGMMA",
			[]string{"-DSDPA_INT8=1", "-DSDPA_BLOCK_N=128", "-DSDPA_SPLIT_KV=2"}, true},
	}
	for _, b := range builds {
		t.Run(strings.ReplaceAll(b.name, " ", "_"), func(t *testing.T) {
			t.Parallel()
			sync := cc.compile("sm_90", "src", b.flags)
			wg := cc.compile("sm_90a", "src", append(b.flags[:len(b.flags):len(b.flags)], "-DSDPA_WGMMA=1"))
			for _, c := range []*compiled{sync, wg} {
				if c.err != nil {
					t.Fatal(c.err)
				}
			}
			ns, nw := sassOps(sync.code), sassOps(wg.code)
			t.Logf("mma.sync %v, wgmma %v", ns, nw)
			if nw[b.gmma] == 0 || ns[b.gmma] != 0 {
				t.Errorf("%s: want %s with wgmma only, got mma.sync %v, wgmma %v", b.name, b.gmma, ns, nw)
			}
			if b.gmma == "QGMMA" && nw["HMMA"] >= ns["HMMA"] {
				t.Errorf("%s: wgmma keeps %d HMMA, mma.sync %d: Q K^T still unpacked", b.name, nw["HMMA"], ns["HMMA"])
			}
			if b.gmma == "IGMMA" && nw["IMMA"] != 0 {
				t.Errorf("%s: wgmma build keeps %d IMMA", b.name, nw["IMMA"])
			}
			if _, spills := fwdUsage(t, wg.ptxas); spills != 0 {
				t.Errorf("%s: wgmma build spills %d bytes", b.name, spills)
			}
			for _, c := range qkFragmentsClobbered(wg.code) {
				t.Errorf("%s: Q's fragments lost in the key loop: %s", b.name, c)
			}
			if !b.pv {
				return
			}
			// P V as wgmma too: fp16 HGMMA from V's widened copy, and no
			// synchronous tensor instruction left.
			pv := cc.compile("sm_90a", "src", append(b.flags[:len(b.flags):len(b.flags)], "-DSDPA_WGMMA=2"))
			if pv.err != nil {
				t.Fatal(pv.err)
			}
			np := sassOps(pv.code)
			t.Logf("P V as wgmma too: %v", np)
			if np["HGMMA"] == 0 || np[b.gmma] == 0 || np["HMMA"] != 0 || np["IMMA"] != 0 {
				t.Errorf("%s with SDPA_WGMMA=2: want HGMMA and %s and no HMMA or IMMA, got %v", b.name, b.gmma, np)
			}
			if _, spills := fwdUsage(t, pv.ptxas); spills != 0 {
				t.Errorf("%s with SDPA_WGMMA=2: spills %d bytes", b.name, spills)
			}
			// ptxas gives P's fragments Q's registers in some SDPA_WGMMA=2
			// builds (testdata/sass); these three keep them.
			for _, c := range qkFragmentsClobbered(pv.code) {
				t.Errorf("%s with SDPA_WGMMA=2: Q's fragments lost in the key loop: %s", b.name, c)
			}
		})
	}

	refused := []struct {
		arch  string
		flags []string
		why   string
	}{
		{"sm_89", []string{"-DSDPA_FP8=1"}, "needs sm_90a"},
		{"sm_90a", []string{}, "one-byte inputs"},
		{"sm_90a", []string{"-DSDPA_FP8=1", "-DSDPA_BLOCK_M=32"}, "row groups in fours"},
		{"sm_90a", []string{"-DSDPA_INT8=1", "-DSDPA_KV_SWIZZLE=0"}, "row groups in fours"},
		{"sm_90a", []string{"-DSDPA_FP8=1", "-DSDPA_Q_IN_REGS=0"}, "row groups in fours"},
		{"sm_90a", []string{"-DSDPA_FP8=1", "-DSDPA_WARPS=8", "-DSDPA_BLOCK_N=32"}, "key slices of 32 to 256"},
		{"sm_90a", []string{"-DSDPA_FP8=1", "-DSDPA_WGMMA=2"}, "P V in fp16"},
		{"sm_90a", []string{"-DSDPA_FP8=1", "-DSDPA_PV_FP8=0", "-DSDPA_WS=1", "-DSDPA_WGMMA=2"}, "refused with SDPA_WS=1"},
		{"sm_90a", []string{"-DSDPA_FP8=1", "-DSDPA_WGMMA=3"}, "0, 1 or 2"},
		{"sm_90a", []string{"-DSDPA_FP8=1", "-DSDPA_QK_WGMMA=1"}, "not its parts"},
	}
	for _, r := range refused {
		t.Run("refused/"+r.arch+strings.Join(r.flags, ""), func(t *testing.T) {
			t.Parallel()
			flags := r.flags
			if !slices.ContainsFunc(flags, func(f string) bool { return strings.HasPrefix(f, "-DSDPA_WGMMA=") }) {
				flags = append(flags[:len(flags):len(flags)], "-DSDPA_WGMMA=1")
			}
			c := cc.compile(r.arch, "src", flags)
			if c.err == nil {
				t.Fatalf("%s %v built; want it refused (%s)", r.arch, r.flags, r.why)
			}
			if !strings.Contains(c.err.Error(), r.why) {
				t.Errorf("%s %v refused without naming %q:\n%v", r.arch, r.flags, r.why, c.err)
			}
		})
	}
}
