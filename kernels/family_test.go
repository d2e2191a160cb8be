package kernels

import (
	"strings"
	"testing"

	"evotune/space"
)

func TestFamilyOf(t *testing.T) {
	for _, name := range []string{"", DefaultFamily} {
		f, err := FamilyOf(name)
		if err != nil {
			t.Fatalf("FamilyOf(%q): %v", name, err)
		}
		if f.Name != DefaultFamily {
			t.Errorf("FamilyOf(%q) = family %q, want %q", name, f.Name, DefaultFamily)
		}
	}
	_, err := FamilyOf("nope")
	if err == nil {
		t.Fatal(`FamilyOf("nope") succeeded`)
	}
	for _, want := range append([]string{`"nope"`}, FamilyNames()...) {
		if !strings.Contains(err.Error(), want) {
			t.Errorf(`FamilyOf("nope") = %q, want it to name %s`, err, want)
		}
	}
}

// TestSDPAFamilyDeclaration checks that the family's declaration is whole:
// what the runner and export take from it is there and agrees with itself.
func TestSDPAFamilyDeclaration(t *testing.T) {
	f, err := FamilyOf(DefaultFamily)
	if err != nil {
		t.Fatal(err)
	}
	src := f.Source()
	if _, ok := src.Files[src.Name]; !ok {
		t.Errorf("source %s is not among its files", src.Name)
	}
	if f.Entry() != SDPAForwardKernel {
		t.Errorf("entry kernel %q, want %q", f.Entry(), SDPAForwardKernel)
	}
	for _, k := range f.Kernels {
		if !strings.Contains(string(src.Files[src.Name]), " "+k+"(") {
			t.Errorf("kernel %s is not defined in %s", k, src.Name)
		}
	}
	w := f.Worker()
	if main, ok := w.Files[w.Name]; !ok || !strings.Contains(string(main), "int main(") || w.Hash == "" {
		t.Errorf("worker source %s: not among its files, without a main, or without a hash", w.Name)
	}
	tg, err := TargetFor(DefaultArch)
	if err != nil {
		t.Fatal(err)
	}
	shape := space.Shape{B: 1, H: 8, S: 512, D: 64}
	for _, dtype := range f.Dtypes {
		p := space.Problem{Family: f.Name, Shapes: []space.Shape{shape}, Dtype: dtype}
		s, err := f.SpaceFor(p, tg)
		if err != nil {
			t.Fatalf("%s: %v", dtype, err)
		}
		plan, err := f.Plan(s.Default(), shape, tg)
		if err != nil {
			t.Fatalf("%s: plan of the default config: %v", dtype, err)
		}
		if plan.Launches[0].Kernel != f.Entry() {
			t.Errorf("%s: the plan launches %s first, not the entry kernel %s", dtype, plan.Launches[0].Kernel, f.Entry())
		}
		if tol := f.Tolerance(dtype, ""); tol.MaxAbs <= 0 {
			t.Errorf("%s: tolerance %+v has no MaxAbs", dtype, tol)
		}
	}
}

func TestSpaceForRefusesOthersProblems(t *testing.T) {
	sdpa, err := FamilyOf(DefaultFamily)
	if err != nil {
		t.Fatal(err)
	}
	tg, _ := TargetFor(DefaultArch)
	shapes := []space.Shape{{B: 1, H: 1, S: 64, D: 64}}
	// A family of fp16 alone refuses bf16 though the space package has it.
	narrow := sdpa
	narrow.Name, narrow.Dtypes = "narrow", []string{"fp16"}
	for _, tt := range []struct {
		f      Family
		p      space.Problem
		errHas string
	}{
		{sdpa, space.Problem{Family: "narrow", Shapes: shapes, Dtype: "fp16"}, `"narrow" is not "sdpa"`},
		{narrow, space.Problem{Family: "narrow", Shapes: shapes, Dtype: "bf16"}, `dtype "bf16": the family has fp16`},
		{sdpa, space.Problem{Family: "sdpa", Dtype: "fp16"}, "sdpa space: problem has no shape"},
	} {
		_, err := tt.f.SpaceFor(tt.p, tg)
		if err == nil || !strings.Contains(err.Error(), tt.errHas) {
			t.Errorf("%s.SpaceFor(%+v) = %v, want an error with %q", tt.f.Name, tt.p, err, tt.errHas)
		}
	}
}
