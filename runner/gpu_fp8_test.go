package runner

import (
	"testing"

	"evotune/kernels"
)

// TestDeviceFP8 checks the fp8 (E4M3) family on the GPU (devOneByteSweep):
// configs covering every knob value at D=64 and D=128 through every fp8
// check case, then end-to-end accuracy and time beside fp16 at the bench
// shapes. EVOTUNE_SWEEP_N sets the D=64 sample size (default 40; the other
// variants get a quarter, V given transposed at D=64 a half).
func TestDeviceFP8(t *testing.T) {
	devRequireHeavy(t)
	e := devSetup(t)
	if !kernels.FP8Arch(e.arch) {
		t.Skipf("%s has no E4M3 tensor cores", e.arch)
	}
	if err := kernels.CheckNVCCFor("fp8", e.nvcc.Version); err != nil {
		t.Skip(err)
	}
	n := devSweepN()
	devOneByteSweep(t, e, "fp8", []devOneByteVariant{
		{"d64-fp8", "1x8x512x64", "fp16", false, n, false},
		{"d64-fp8-causal-bf16out", "1x4x300x64", "bf16", true, max(n/4, 1), false},
		{"d128-fp8", "1x3x77x128", "fp16", false, max(n/4, 1), false},
		// V given transposed (SDPA_V_GIVEN): the worker lays out V^T as a
		// caller would, K's tile rows are reordered, O's columns stored in order.
		{"d64-fp8-vt", "1x8x512x64", "fp16", false, max(n/2, 1), true},
		{"d128-fp8-causal-vt", "1x3x77x128", "bf16", true, max(n/4, 1), true},
	})
}
