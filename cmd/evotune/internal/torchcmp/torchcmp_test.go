package torchcmp

import (
	"strings"
	"testing"

	"evotune/elites"
	"evotune/space"
)

func TestParseShapes(t *testing.T) {
	got, err := ParseShapes([]string{"1x8x512x64, 2x8x512x64:causal", "", "4x16x2048x128"})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range got {
		names = append(names, s.String())
	}
	if strings.Join(names, " ") != "1x8x512x64 2x8x512x64:causal 4x16x2048x128" {
		t.Errorf("ParseShapes = %v", names)
	}
	for _, bad := range [][]string{{"1x8x512x64:window"}, {"1x8x512"}, {" , "}} {
		if _, err := ParseShapes(bad); err == nil {
			t.Errorf("ParseShapes(%q) succeeded", bad)
		}
	}
}

func TestDtype(t *testing.T) {
	for _, tc := range [][3]string{{"fp16", "", "fp16"}, {"bf16", "", "bf16"}, {"fp8", "", "fp16"}, {"fp8", "bf16", "bf16"}, {"int8", "", "fp16"}, {"int8", "bf16", "bf16"}} {
		if got := Dtype(tc[0], tc[1]); got != tc[2] {
			t.Errorf("Dtype(%s, %s) = %s, want %s", tc[0], tc[1], got, tc[2])
		}
	}
}

// TestAttachAndMarkdown: PyTorch's timings land in the row of their shape
// and mask, ratios are ours over theirs, and a backend that failed is a
// cell that says so, never a ratio.
func TestAttachAndMarkdown(t *testing.T) {
	rep := elites.Bench{Env: space.Env{GPU: "Fake H100", Arch: "sm_90"}, Dtype: "fp16", Best: "block_m=64",
		Rows: []elites.BenchRow{
			{Shape: "1x8x512x64", Source: "best", Ours: elites.BenchMeasure{Key: "block_m=64", Status: space.StatusOK, GraphUS: 6, EagerUS: 9}},
			{Shape: "1x8x512x64", Causal: true, Source: "best", Ours: elites.BenchMeasure{Key: "block_m=64", Status: space.StatusOK, GraphUS: 4}},
		}}
	Attach(&rep, []elites.TorchTiming{
		{Shape: "1x8x512x64", Backend: "cudnn", GraphUS: 8, EagerUS: 30},
		{Shape: "1x8x512x64", Backend: "flash", GraphUS: 12, EagerUS: 40},
		{Shape: "1x8x512x64", Backend: "efficient", Error: "RuntimeError: no"},
		{Shape: "1x8x512x64", Backend: "cudnn", Causal: true, GraphUS: 5},
	})
	if r := rep.Rows[0]; r.OursOverCuDNN != 0.75 || r.OursOverFlash != 0.5 || len(r.Torch) != 3 {
		t.Errorf("row 0: ours/cuDNN %g, ours/flash %g, %d backends; want 0.75, 0.5, 3", r.OursOverCuDNN, r.OursOverFlash, len(r.Torch))
	}
	if r := rep.Rows[1]; r.OursOverCuDNN != 0.8 || r.OursOverFlash != 0 || len(r.Torch) != 1 {
		t.Errorf("causal row: ours/cuDNN %g, ours/flash %g, %d backends; want 0.8, 0, 1", r.OursOverCuDNN, r.OursOverFlash, len(r.Torch))
	}
	md := Markdown(rep)
	for _, want := range []string{
		"- GPU: Fake H100 (compute unknown, sm_90, driver unknown)",
		"| 1x8x512x64 | best | 6.00 | 9.00 | n/a (n/a) | 12.00 / 40.00 | 8.00 / 30.00 | unsupported | 0.75 | 0.50 | n/a |",
		"| 1x8x512x64 causal | best | 4.00 | n/a | n/a (n/a) | n/a | 5.00 / n/a | n/a | 0.80 | n/a | n/a |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("bench.md lacks %q:\n%s", want, md)
		}
	}
}
