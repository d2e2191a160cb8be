package kernels

import "evotune/space"

// sdpaName is the SDPA family's name, its problems' space.Problem.Family.
const sdpaName = "sdpa"

// sdpaFamily declares the SDPA forward family (fp16, bf16, fp8 and int8
// inputs) for the runner and the command line. cp.async, bf16 tensor cores
// and int8's IMMA need sm_80 or newer.
func sdpaFamily() Family {
	return Family{
		Name:   sdpaName,
		Dtypes: []string{"fp16", "bf16", "fp8", "int8"},
		Archs:  []string{"sm_80", "sm_86", "sm_87", "sm_89", "sm_90"},
		// fp8's V given transposed is the problem macro SDPA_V_GIVEN: the
		// plan is the same either way.
		VTransposed: true,
		Source:      SDPASource,
		Worker:      WorkerSource,
		Kernels:     []string{SDPAForwardKernel, SDPACombineKernel},
		Space:       SDPASpace,
		Plan:        SDPAPlan,
		PlanC:       SDPAPlanC,
		LaunchC:     sdpaLaunchC,
		Namespace:   sdpaName,
		Tolerance:   ToleranceFor,
		CheckNVCC:   CheckNVCCFor,
		FLOPs:       SDPAFLOPs,
	}
}

// sdpaKnobs declares the knobs of the SDPA forward family. Each renders to
// the -D macro named here, which kernels/sdpa.cu guards with #ifndef.
func sdpaKnobs() []space.Knob {
	return []space.Knob{
		{Name: "ws", Macro: "SDPA_WS", Values: []string{"0", "1"}, Layer: space.Macro, Default: "0",
			Doc: "warp specialisation: producer warps stream K/V into the ring while consumer warps compute"},
		{Name: "producer_warps", Macro: "SDPA_PRODUCER_WARPS", Values: []string{"1", "2"}, Layer: space.Micro, Default: "1",
			Doc: "producer warps per CTA (with ws=1)"},
		{Name: "stages", Macro: "SDPA_STAGES", Values: []string{"1", "2", "3", "4"}, Layer: space.Micro, Default: "2",
			Doc: "cp.async ring depth for K/V tiles (1 = synchronous loads)"},
		{Name: "block_m", Macro: "SDPA_BLOCK_M", Values: []string{"16", "32", "64", "128"}, Layer: space.Macro, Default: "64",
			Doc: "query rows per CTA tile"},
		{Name: "block_n", Macro: "SDPA_BLOCK_N", Values: []string{"32", "64", "128", "256"}, Layer: space.Macro, Default: "64",
			Doc: "key rows per K/V tile"},
		{Name: "warps", Macro: "SDPA_WARPS", Values: []string{"2", "4", "8"}, Layer: space.Macro, Default: "4",
			Doc: "consumer (compute) warps per CTA"},
		{Name: "fast_exp", Macro: "SDPA_FAST_EXP", Values: []string{"0", "1"}, Layer: space.Micro, Default: "1",
			Doc: "exp2 via ex2.approx with log2(e)*scale folded into one multiply"},
		{Name: "persistent", Macro: "SDPA_PERSISTENT", Values: []string{"0", "1"}, Layer: space.Macro, Default: "0",
			Doc: "a grid of resident CTAs looping over tiles"},
		{Name: "q_in_regs", Macro: "SDPA_Q_IN_REGS", Values: []string{"0", "1"}, Layer: space.Micro, Default: "1",
			Doc: "hold Q fragments in registers for the whole key loop (else re-read from shared memory)"},
		{Name: "kv_layout", Macro: "SDPA_KV_SWIZZLE", Values: []string{"pad", "swizzle"}, MacroValues: []string{"0", "1"}, Layer: space.Micro, Default: "swizzle",
			Doc: "shared-memory layout of K/V tiles: padded rows or XOR swizzle"},
		{Name: "min_blocks_per_sm", Macro: "SDPA_MIN_BLOCKS", Values: []string{"1", "2", "3", "4"}, Layer: space.Micro, Default: "1",
			Doc: "__launch_bounds__ minimum resident blocks per SM"},
		{Name: "split_kv", Macro: "SDPA_SPLIT_KV", Values: []string{"1", "2", "4"}, Layer: space.Macro, Default: "1",
			Doc: "split the key sequence across CTAs, combined by a second kernel"},
	}
}

// sdpaFP8Knobs declares the knobs only fp8 (E4M3) problems have. The
// presence of pv_accum in a config is what makes its geometry one-byte
// (fp8's and int8's tiles); pv_fp8 and qk_accum are fp8's alone. pv_fp8 and
// pv_accum came with fp8 itself; qk_accum and qk_f16 came later, so each
// declares the value an fp8 config recorded before it means (Absent).
//
// qk_accum is pv_accum's remedy for Q K^T: the E4M3 tensor cores add onto an
// accumulator with fewer bits than fp32. On the H100 the chained E4M3 wgmma
// erred by up to 1.56 at input scale 16, where the gate allows 1.04, and
// within 0.38 with a fresh accumulator per k32 step
// (results/2026-11-25-h100-wgmma-tune). The H100's E4M3 mma.sync is exact
// (unpacked to fp16, summed in fp32), but the L4's is native QMMA, whose
// accumulator is reported to keep about 13 mantissa bits (SageAttention2),
// so the L4 is expected to need it: the default is 1 at D=64 (64 FADDs a
// tile, no more registers with nvcc 12.4), and the search and the gate
// decide. The wgmma path always splits, so wgmma=qk takes qk_accum=1 only.
func sdpaFP8Knobs(d int, arch string) []space.Knob {
	return []space.Knob{
		{Name: "pv_fp8", Macro: "SDPA_PV_FP8", Values: []string{"0", "1"}, Layer: space.Micro, Default: "1",
			Doc: "P V in E4M3 (m16n8k32, P quantised as exp(s - m + 8 ln 2)) or in fp16 (V widened to fp16 in registers)"},
		pvAccumKnob(d),
		qkAccumKnob(d, arch),
		qkF16Knob(),
	}
}

// qkF16Knob runs fp8's Q K^T in fp16 on mma.sync: Q's E4M3 fragments are
// widened to fp16 once per CTA and K's in registers per tile, each k32 step
// two m16n8k16 fp16 MMAs summed in fp32 (exact: E4M3 is a subset of fp16).
// On sm_90 the E4M3 mma.sync is itself unpacked to fp16 HMMA by ptxas, Q's
// fragments again every tile (and with nvcc 12.4 each k16 half into a
// zeroed accumulator, FADDs after): this does the same work with Q widened
// once and the HMMAs chained. On the H100 the search kept it at the short
// shape, where wgmma does not reach (results/2026-11-26-h100-qkf16). On
// sm_89 it trades the native E4M3 rate for fp16's (half)
// and exact sums, so the search and the gate decide there. It needs Q in
// registers (widened once) and mma.sync (wgmma=qk replaces the product).
// A config recorded before the knob means qk_f16=0: with it, every earlier
// build's SASS is byte-identical to the commit before the knob
// (kernels/NOTES.md, "qk_f16").
func qkF16Knob() space.Knob {
	return space.Knob{Name: "qk_f16", Macro: "SDPA_QK_F16", Values: []string{"0", "1"}, Layer: space.Micro, Default: "0", Absent: "0",
		Doc: "Q K^T in fp16 on mma.sync: Q widened to fp16 once per CTA, K per tile (fp32 sums)"}
}

// qkAccumKnob is fp8's two-level Q K^T accumulation (sdpaFP8Knobs says why).
// At D=128 it holds a second score accumulator across four k32 steps: the
// default 64x64 config takes 244 registers with nvcc 12.4 on sm_89 against
// 184 without, the margin that spilled pv_accum's D=128 default with nvcc
// 13.0, so D=128 defaults to 0 and leaves 1 to the search and the gate.
// sm_90 keeps 1: its default runs wgmma (wgmmaKnob), which always splits
// and takes qk_accum=1 (198 registers at D=128).
//
// A config recorded before the knob means qk_accum=0, one accumulator
// chained over D: qk_accum=0 builds are byte-identical in SASS to the commit
// before the knob (kernels/NOTES.md, "qk_accum"). The wgmma path split
// before the knob as after it, whatever qk_accum says, and the wgmma
// constraint keeps only qk_accum=1 of that one code: so a wgmma=qk config
// recorded between the two knobs reads as qk_accum=0, the same code, which
// that constraint refuses as a duplicate.
func qkAccumKnob(d int, arch string) space.Knob {
	accum := "1"
	if d >= 128 && arch != "sm_90" {
		accum = "0"
	}
	return space.Knob{Name: "qk_accum", Macro: "SDPA_QK_ACCUM", Values: []string{"0", "1"}, Layer: space.Micro, Default: accum, Absent: "0",
		Doc: "two-level Q K^T accumulation: each 32-wide step of D into a fresh accumulator, added in fp32"}
}

// sdpaInt8Knobs declares the knobs only int8 problems have: P V always runs
// in fp16 with V widened in registers, so two-level accumulation is the one.
func sdpaInt8Knobs(d int) []space.Knob { return []space.Knob{pvAccumKnob(d)} }

// wgmmaKnob is fp8's Hopper tensor path, declared on sm_90 only (an sm_90a
// build: NVCCArgs picks it from the rendered macro). "qk" runs Q K^T as
// wgmma m64nNk32 E4M3 in place of mma.sync, which on sm_90 unpacks E4M3 into
// fp16 HMMA: 1.16-1.39x faster at fp8's long shapes, same tiles
// (results/2026-11-25-h100-wgmma). The E4M3 wgmma adds onto its accumulator
// with fewer bits than fp32, so each k32 step has an accumulator of its own,
// summed in fp32; chained instead, it failed the gate at input scale 16
// (results/2026-11-25-h100-wgmma-tune). The default is qk: faster than
// mma.sync in every config measured and valid with the other defaults.
//
// The kernel's SDPA_WGMMA=2 (P V as wgmma too, from a widened copy of V) is
// not offered: in some builds (ws=1; D=128 with 128-key tiles) ptxas gives
// P's fragments the registers of Q's, wrong from the second key tile on, and
// where it is right it was slower than Q K^T alone (kernels/NOTES.md).
// int8 is not offered wgmma either: Q K^T alone gained it nothing (0.99x),
// and int8 builds with nvcc 11.8, which has no wgmma (PTX ISA 8.0).
//
// An sm_90 fp8 config recorded before the knob ran mma.sync: it means
// wgmma=off. The SASS of seven fp8 builds for sm_90 (nvcc 12.4; six configs
// of results/2026-11-25-h100-fp8-tune at D=64, one at D=128 causal), from
// the source before the knob with the flags they were recorded with and
// from the commit that made the knob with -DSDPA_WGMMA=0 added, is
// byte-identical.
func wgmmaKnob() space.Knob {
	return space.Knob{Name: "wgmma", Macro: "SDPA_WGMMA", Values: []string{"off", "qk"}, MacroValues: []string{"0", "1"},
		Layer: space.Micro, Default: "qk", Absent: "off",
		Doc: "Q K^T on Hopper's warpgroup MMA (an sm_90a build) in place of mma.sync"}
}

// pvAccumKnob is the one-byte kernels' two-level P V accumulation.
//
// At D=128 the two-level accumulation holds a second 64-column O accumulator
// per thread: the 64x64 fp8 default then needs 252 registers with nvcc 12.4
// and spills 24 B with 13.0 on sm_90 (device run 2026-11-25), so D=128
// defaults to one-level accumulation (204 registers) and leaves two-level to
// the search and the gate. int8 keeps the same tiles and accumulators, so
// the same rule.
func pvAccumKnob(d int) space.Knob {
	accum := "1"
	if d >= 128 {
		accum = "0"
	}
	return space.Knob{Name: "pv_accum", Macro: "SDPA_PV_ACCUM", Values: []string{"0", "1"}, Layer: space.Micro, Default: accum,
		Doc: "two-level P V accumulation: each K/V tile into a fresh accumulator, added into the fp32 O"}
}
