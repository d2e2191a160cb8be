package runner

import "testing"

// TestDeviceInt8 checks the int8 family on the GPU as TestDeviceFP8 checks
// fp8 (devOneByteSweep): configs covering every knob value at D=64 and
// D=128, fp16 and bf16 output, through every int8 check case (input scales
// 1, 4, 16; S = 1, 77, 500, 512, 4096 and the problem's), each passing the
// gate with no NaN or Inf; then end-to-end accuracy and time beside fp16 at
// the bench shapes. The passing configs must include both pv_accum values,
// split_kv > 1, ws=1 and persistent=1. Every target architecture has IMMA
// and nvcc 11.8 builds it, so only a missing GPU skips it.
func TestDeviceInt8(t *testing.T) {
	devRequireHeavy(t)
	e := devSetup(t)
	n := devSweepN()
	records := devOneByteSweep(t, e, "int8", []devOneByteVariant{
		{"d64-int8", "1x8x512x64", "fp16", false, n, false},
		{"d64-int8-causal-bf16out", "1x4x300x64", "bf16", true, max(n/4, 1), false},
		{"d128-int8", "1x3x77x128", "fp16", false, max(n/4, 1), false},
	})
	passed := map[string]bool{}
	for _, r := range records {
		if !r.Pass {
			continue
		}
		if r.NaNInf != 0 {
			t.Errorf("%s %s passed with %d NaN or Inf outputs", r.Variant, r.Key, r.NaNInf)
		}
		for _, kv := range [][2]string{{"pv_accum", "0"}, {"pv_accum", "1"}, {"split_kv", "2"}, {"split_kv", "4"}, {"ws", "1"}, {"persistent", "1"}} {
			if r.Config[kv[0]] == kv[1] {
				passed[kv[0]+"="+kv[1]] = true
			}
		}
	}
	for _, want := range []string{"pv_accum=0", "pv_accum=1", "ws=1", "persistent=1"} {
		if !passed[want] {
			t.Errorf("no passing int8 config has %s", want)
		}
	}
	if !passed["split_kv=2"] && !passed["split_kv=4"] {
		t.Error("no passing int8 config splits the keys (split_kv > 1)")
	}
}
