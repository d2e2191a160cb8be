package space

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// A Shape is the [B, H, S, D] shape of an attention call.
type Shape struct {
	B int `json:"b"`
	H int `json:"h"`
	S int `json:"s"`
	D int `json:"d"`
}

// String renders the shape as BxHxSxD.
func (s Shape) String() string { return fmt.Sprintf("%dx%dx%dx%d", s.B, s.H, s.S, s.D) }

// Limits on shapes accepted from users: beyond them a single problem would
// not fit any GPU evotune targets.
const (
	MaxBatchHeads = 1 << 16
	MaxSeqLen     = 1 << 18
)

// ParseShape parses BxHxSxD.
func ParseShape(text string) (Shape, error) {
	parts := strings.Split(strings.ToLower(strings.TrimSpace(text)), "x")
	if len(parts) != 4 {
		return Shape{}, fmt.Errorf("shape %q: want BxHxSxD, e.g. 1x8x512x64", text)
	}
	var v [4]int
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n <= 0 {
			return Shape{}, fmt.Errorf("shape %q: %q is not a positive integer", text, p)
		}
		v[i] = n
	}
	s := Shape{B: v[0], H: v[1], S: v[2], D: v[3]}
	if s.B*s.H > MaxBatchHeads {
		return Shape{}, fmt.Errorf("shape %q: B*H = %d exceeds %d", text, s.B*s.H, MaxBatchHeads)
	}
	if s.S > MaxSeqLen {
		return Shape{}, fmt.Errorf("shape %q: S = %d exceeds %d", text, s.S, MaxSeqLen)
	}
	return s, nil
}

// A Problem is what a search tunes for: one kernel family, one or more
// shapes (with weights for the objective), a dtype and the causal flag.
type Problem struct {
	Family  string    `json:"family"`
	Shapes  []Shape   `json:"shapes"`
	Weights []float64 `json:"weights,omitempty"` // one per shape; empty means all 1
	Dtype   string    `json:"dtype"`             // "fp16", "bf16", "fp8" (E4M3 inputs) or "int8"
	Causal  bool      `json:"causal"`
	// OutDtype is the output dtype of a quantised dtype (fp8, int8): "" or
	// "fp16", or "bf16".
	OutDtype string `json:"out_dtype,omitempty"`
	// VTransposed (fp8) says the caller gives V as V^T, [B, H, D, Sp] with
	// Sp the keys rounded up to 16 and the keys beyond S zero, as the
	// quantisation pass that makes fp8 inputs can write it at no cost; the
	// kernel then reads it as the mma's K-major operand without
	// transposing. Only a family that declares it takes it.
	VTransposed bool `json:"v_transposed,omitempty"`
}

// Dtypes lists the element types a problem may name, in the order help
// text shows them: fp16 and bf16 inputs and outputs, fp8 (E4M3 inputs with
// per-tensor scales) and int8 (symmetric INT8 inputs with per-row Q and K
// and per-column V scales), both with fp16 or bf16 output.
func Dtypes() []string { return []string{"fp16", "bf16", "fp8", "int8"} }

// Quantized reports whether dtype's inputs are one-byte quantised values
// with dequantisation scales (fp8, int8): their output is fp16 or bf16, as
// the problem's OutDtype chooses, not the input dtype.
func Quantized(dtype string) bool { return dtype == "fp8" || dtype == "int8" }

// DtypeList is Dtypes as help text says it: "fp16, bf16, fp8 or int8".
func DtypeList() string {
	d := Dtypes()
	return strings.Join(d[:len(d)-1], ", ") + " or " + d[len(d)-1]
}

// Weight returns the objective weight of shape i.
func (p Problem) Weight(i int) float64 {
	if i < len(p.Weights) {
		return p.Weights[i]
	}
	return 1
}

// KernelTunerFamilyPrefix starts the family name of a space read from a
// Kernel Tuner cache file (the kernel's name follows): its knobs and its
// problem come from the file, so such a problem has no shape and no dtype.
const KernelTunerFamilyPrefix = "kernel_tuner/"

// Validate checks the problem's own consistency.
func (p Problem) Validate() error {
	if strings.HasPrefix(p.Family, KernelTunerFamilyPrefix) {
		if len(p.Shapes) != 0 || p.Dtype != "" || p.Causal || p.OutDtype != "" || p.VTransposed {
			return fmt.Errorf("problem %s: a Kernel Tuner space takes no shape, dtype or causal flag", p.Family)
		}
		return nil
	}
	if len(p.Shapes) == 0 {
		return fmt.Errorf("problem has no shape")
	}
	if !slices.Contains(Dtypes(), p.Dtype) {
		return fmt.Errorf("dtype %q: want %s", p.Dtype, DtypeList())
	}
	switch {
	case p.OutDtype == "" || Quantized(p.Dtype) && (p.OutDtype == "fp16" || p.OutDtype == "bf16"):
	case Quantized(p.Dtype):
		return fmt.Errorf("output dtype %q: %s writes fp16 or bf16", p.OutDtype, p.Dtype)
	default:
		return fmt.Errorf("output dtype %q: only fp8 and int8 take one (%s writes %s)", p.OutDtype, p.Dtype, p.Dtype)
	}
	if p.VTransposed && p.Dtype != "fp8" {
		return fmt.Errorf("V transposed: only fp8 takes V transposed, not %s", p.Dtype)
	}
	if len(p.Weights) != 0 && len(p.Weights) != len(p.Shapes) {
		return fmt.Errorf("%d weights for %d shapes", len(p.Weights), len(p.Shapes))
	}
	for i, w := range p.Weights {
		if !(w > 0) {
			return fmt.Errorf("weight %d of shape %s must be positive", i, p.Shapes[i])
		}
	}
	for _, s := range p.Shapes[1:] {
		if s.D != p.Shapes[0].D {
			return fmt.Errorf("shapes %s and %s: all shapes of a problem share the head dimension (it is compiled in)", p.Shapes[0], s)
		}
	}
	return nil
}
