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
