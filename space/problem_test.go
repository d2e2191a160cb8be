package space

import (
	"strings"
	"testing"
)

func TestKernelTunerProblemValidate(t *testing.T) {
	p := Problem{Family: KernelTunerFamilyPrefix + "Xgemm"}
	if err := p.Validate(); err != nil {
		t.Errorf("a Kernel Tuner problem with no shape or dtype: %v", err)
	}
	for _, bad := range []Problem{
		{Family: p.Family, Dtype: "fp16"},
		{Family: p.Family, Shapes: []Shape{{1, 8, 512, 64}}},
		{Family: p.Family, Causal: true},
	} {
		if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "takes no shape, dtype or causal flag") {
			t.Errorf("%+v: err = %v", bad, err)
		}
	}
	// Any other family still needs a shape.
	if err := (Problem{Family: "sdpa"}).Validate(); err == nil {
		t.Errorf("an SDPA problem with no shape validated")
	}
}

// TestProblemOutDtype checks that the quantised dtypes (fp8, int8) and only
// they choose their output dtype, and that a refusal names the way out.
func TestProblemOutDtype(t *testing.T) {
	shapes := []Shape{{1, 8, 512, 64}}
	for _, c := range []struct {
		dtype, out string
		errHas     string // "" means valid
	}{
		{"fp16", "", ""},
		{"bf16", "", ""},
		{"fp8", "", ""},
		{"fp8", "bf16", ""},
		{"int8", "", ""},
		{"int8", "fp16", ""},
		{"int8", "bf16", ""},
		{"int8", "fp8", "int8 writes fp16 or bf16"},
		{"fp8", "int8", "fp8 writes fp16 or bf16"},
		{"fp16", "bf16", "only fp8 and int8 take one (fp16 writes fp16)"},
		{"bf16", "fp16", "only fp8 and int8 take one (bf16 writes bf16)"},
	} {
		err := Problem{Family: "sdpa", Shapes: shapes, Dtype: c.dtype, OutDtype: c.out}.Validate()
		switch {
		case c.errHas == "" && err != nil:
			t.Errorf("dtype %s, output %q: %v", c.dtype, c.out, err)
		case c.errHas != "" && (err == nil || !strings.Contains(err.Error(), c.errHas)):
			t.Errorf("dtype %s, output %q: err = %v, want one saying %q", c.dtype, c.out, err, c.errHas)
		}
		if got := Quantized(c.dtype); got != (c.dtype == "fp8" || c.dtype == "int8") {
			t.Errorf("Quantized(%s) = %v", c.dtype, got)
		}
	}
	if err := (Problem{Family: "sdpa", Shapes: shapes, Dtype: "int4"}).Validate(); err == nil || !strings.Contains(err.Error(), "fp16, bf16, fp8 or int8") {
		t.Errorf("dtype int4: err = %v, want one listing the dtypes", err)
	}
}
