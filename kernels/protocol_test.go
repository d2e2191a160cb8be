package kernels

import (
	"encoding/json"
	"strings"
	"testing"

	"evotune/space"
)

// TestRequestFor: a request about a problem's candidate carries the
// problem's element types, mask and V layout to the worker, by the field
// names worker.cu reads.
func TestRequestFor(t *testing.T) {
	p := space.Problem{Family: fa8hName, Dtype: "fp8", OutDtype: "bf16", Causal: true, VTransposed: true,
		Shapes: []space.Shape{{B: 1, H: 2, S: 77, D: 64}}}
	b, err := json.Marshal(RequestFor(OpTime, p))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"op":"time"`, `"dtype":"fp8"`, `"out_dtype":"bf16"`, `"causal":true`, `"v_transposed":true`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("request %s lacks %s", b, want)
		}
	}
	b, _ = json.Marshal(RequestFor(OpCheck, space.Problem{Dtype: "fp16"}))
	if strings.Contains(string(b), "v_transposed") || strings.Contains(string(b), "out_dtype") {
		t.Errorf("an fp16 request %s names fp8's options", b)
	}
}
