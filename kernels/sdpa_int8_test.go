package kernels

import (
	"slices"
	"strings"
	"testing"

	"evotune/space"
)

// TestInt8Space checks int8's declaration: fp16's knobs plus pv_accum (with
// fp8's default rule), SDPA_INT8 and the output dtype among the defines, and
// every target architecture allowed (IMMA is sm_80's), where fp8 still
// needs sm_89.
func TestInt8Space(t *testing.T) {
	fp16, _ := mustSpace(t, 64, "fp16", false, "sm_80")
	var fp16Knobs []string
	for _, k := range fp16.Knobs {
		fp16Knobs = append(fp16Knobs, k.Name)
	}
	for _, arch := range []string{"sm_80", "sm_86", "sm_89", "sm_90"} {
		for _, d := range []int{64, 128} {
			for _, out := range []string{"", "fp16", "bf16"} {
				tg, _ := TargetFor(arch)
				p := space.Problem{Family: DefaultFamily, Shapes: []space.Shape{{B: 2, H: 8, S: 512, D: d}}, Dtype: "int8", OutDtype: out}
				s, err := SDPASpace(p, tg)
				if err != nil {
					t.Fatalf("%s d=%d out %q: %v", arch, d, out, err)
				}
				var names []string
				for _, k := range s.Knobs {
					names = append(names, k.Name)
				}
				if want := append(slices.Clone(fp16Knobs), "pv_accum"); !slices.Equal(names, want) {
					t.Errorf("%s d=%d: knobs %v, want %v", arch, d, names, want)
				}
				accum := s.Knobs[len(s.Knobs)-1]
				if want := map[int]string{64: "1", 128: "0"}[d]; accum.Default != want || accum.Macro != "SDPA_PV_ACCUM" {
					t.Errorf("d=%d: pv_accum %+v, want macro SDPA_PV_ACCUM default %s", d, accum, want)
				}
				outBF16 := "0"
				if out == "bf16" {
					outBF16 = "1"
				}
				want := []space.Define{{Macro: "SDPA_HEAD_DIM", Value: map[int]string{64: "64", 128: "128"}[d]}, {Macro: "SDPA_BF16", Value: "0"},
					{Macro: "SDPA_CAUSAL", Value: "0"}, {Macro: "SDPA_INT8", Value: "1"}, {Macro: "SDPA_OUT_BF16", Value: outBF16}}
				if !slices.Equal(s.Defines, want) {
					t.Errorf("%s d=%d out %q: defines %v, want %v", arch, d, out, s.Defines, want)
				}
				if name, err := rejectedBy(s, defaultConfig(s)); err != nil {
					t.Errorf("%s d=%d: the default is rejected by %s: %v", arch, d, name, err)
				}
			}
		}
	}
	tg, _ := TargetFor("sm_86")
	if _, err := SDPASpace(space.Problem{Family: DefaultFamily, Shapes: []space.Shape{{B: 1, H: 1, S: 64, D: 64}}, Dtype: "fp8"}, tg); err == nil ||
		!strings.Contains(err.Error(), "sm_89") {
		t.Errorf("fp8 on sm_86: err = %v, want a refusal naming sm_89", err)
	}
}

// TestInt8Geometry checks that an int8 config's geometry is one-byte, as
// fp8's is, keyed by pv_accum: half the shared memory of fp16's tiles, the
// 32-key slices and paired column tiles of one-byte V, and the second
// accumulator of pv_accum=1 in the register estimate.
func TestInt8Geometry(t *testing.T) {
	fp16, _ := mustSpace(t, 64, "fp16", false, "sm_89")
	i8, _ := mustSpace(t, 64, "int8", false, "sm_89")
	fp8, _ := mustSpace(t, 64, "fp8", false, "sm_89")
	for _, kv := range [][]string{nil, {"kv_layout", "swizzle", "stages", "3", "block_n", "128"}} {
		c := with(defaultConfig(i8), kv...)
		g, err := geomOf(c, 64)
		if err != nil {
			t.Fatal(err)
		}
		if !g.oneByte || g.esz() != 1 || !g.pvAccum || g.pvFP8 {
			t.Errorf("int8 %v: geometry %+v, want one-byte with pv_accum and no pv_fp8", kv, g)
		}
		// Swizzled rows have no padding: one-byte tiles take half the bytes.
		if got, want := SharedBytes(c, 64), SharedBytes(with(defaultConfig(fp16), kv...), 64)/2; got != want {
			t.Errorf("int8 %v: %d bytes of shared memory, want half of fp16's, %d", kv, got, want)
		}
		if got, want := SharedBytes(c, 64), SharedBytes(with(defaultConfig(fp8), kv...), 64); got != want {
			t.Errorf("int8 %v: %d bytes of shared memory, fp8's %d", kv, got, want)
		}
	}
	one, _ := geomOf(with(defaultConfig(i8), "pv_accum", "0"), 64)
	two, _ := geomOf(defaultConfig(i8), 64)
	if two.regEstimate()-one.regEstimate() != 64/2*(two.rowsPerWarp/16) {
		t.Errorf("pv_accum=1 adds %d registers to the estimate, want the tile's P V accumulator", two.regEstimate()-one.regEstimate())
	}
	if g, _ := geomOf(defaultConfig(fp16), 64); g.oneByte || g.pvAccum {
		t.Errorf("fp16 geometry %+v is one-byte", g)
	}
	// 4 warps over 16 rows split 64 keys into slices of 16: fp16 takes
	// them, int8 (like fp8) reads one-byte V 32 keys at a time.
	narrow := []string{"block_m", "16", "warps", "4", "block_n", "64"}
	if name, err := rejectedBy(fp16, with(defaultConfig(fp16), narrow...)); name != "" {
		t.Errorf("fp16 16-key slices rejected by %s: %v", name, err)
	}
	for _, s := range []*space.Space{i8, fp8} {
		name, err := rejectedBy(s, with(defaultConfig(s), narrow...))
		if name != "warp_layout" || !strings.Contains(err.Error(), "fp8 and int8") {
			t.Errorf("one-byte 16-key slices: rejected by %q (%v), want warp_layout naming fp8 and int8", name, err)
		}
	}
	if _, err := geomOf(with(defaultConfig(i8), "pv_accum", "x"), 64); err == nil || !strings.Contains(err.Error(), "pv_accum") {
		t.Errorf("pv_accum=x: err = %v, want one naming the knob", err)
	}
}

// TestInt8ValidSpaceSize checks that int8's constraints leave a space worth
// searching at both head dimensions on the L4 and the A100.
func TestInt8ValidSpaceSize(t *testing.T) {
	for _, arch := range []string{"sm_80", "sm_89"} {
		for _, d := range []int{64, 128} {
			s, _ := mustSpace(t, d, "int8", false, arch)
			valid := 0
			enumerate(s, func(c space.Config) {
				if name, _ := rejectedBy(s, c); name == "" {
					valid++
				}
			})
			t.Logf("%s d=%d: %d valid int8 configs", arch, d, valid)
			if valid < 1000 {
				t.Errorf("%s d=%d: only %d valid int8 configs", arch, d, valid)
			}
		}
	}
}
