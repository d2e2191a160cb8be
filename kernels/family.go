package kernels

import (
	"fmt"
	"slices"
	"strings"

	"evotune/space"
)

// A Family is one kernel family: everything the runner and the command line
// ask of it, declared in one place. The runner and the command line take a
// Family from FamilyOf(problem.Family) and never name a family themselves.
//
// It is a struct of values and functions rather than an interface: a family
// is a declaration with no state of its own, so one literal (sdpaFamily)
// lists all of it where a reader looks, and a test declares a fake family
// from a few closures without defining a type.
//
// A family brings its own GPU worker (Worker): the program that runs its
// candidates and its fp32 reference, speaking the protocol of protocol.go.
// That protocol still describes an attention problem (a B x H x S x D shape,
// a dtype, a causal mask, a softmax scale): a family whose problems are
// shaped otherwise needs the protocol to grow first.
type Family struct {
	// Name is what space.Problem.Family holds for the family's problems.
	Name string
	// Dtypes are the element types its problems may have.
	Dtypes []string
	// Archs are the nvcc architectures its kernels build for.
	Archs []string
	// VTransposed says its fp8 kernels can read V as the caller gives it
	// transposed (space.Problem.VTransposed).
	VTransposed bool
	// Source returns its embedded source files; Source.Name is the file
	// nvcc compiles.
	Source func() Source
	// Worker returns the sources of its GPU worker; Source.Name is the
	// file nvcc compiles into the worker program.
	Worker func() Source
	// Kernels are the entry points of its cubin in launch order; the
	// first is the one whose ptxas figures a result reports.
	Kernels []string
	// Space declares its knob space for problem p on target t.
	Space func(p space.Problem, t Target) (*space.Space, error)
	// Plan gives the launches of config c on shape s on target t.
	Plan func(c space.Config, s space.Shape, t Target) (Plan, error)
	// PlanC renders Plan's rules as C, for the configs compiled at head
	// dimension d, under prefix: the plan header export writes.
	PlanC func(prefix string, configs []space.Config, d int) (string, error)
	// LaunchC renders, for export's launcher, the C++ function
	// `cudaError_t launch(const void* const* fns, std::atomic<unsigned long
	// long>& smem_done, const struct PREFIX_plan& pl, SdpaParams p,
	// cudaStream_t stream)` that runs one plan: fns are a config's entry
	// points in Kernels' order, and allow_smem (the launcher's) grants a
	// kernel its dynamic shared memory once per device.
	LaunchC func(prefix string) string
	// Namespace is the C++ namespace of the source's code and the prefix of
	// its entry points, which export renames per config.
	Namespace string
	// Tolerance is the correctness gate for a dtype and its output dtype
	// ("" for the default) at input scale 1.
	Tolerance func(dtype, outDtype string) Tolerance
	// CheckNVCC returns an error when an nvcc release is too old for dtype.
	CheckNVCC func(dtype, release string) error
	// FLOPs counts the floating-point operations of one call on shape s.
	FLOPs func(s space.Shape, causal bool) float64
}

// DefaultFamily is the family the command line tunes, and the one a problem
// that names no family belongs to (replay files recorded before problems
// named their family).
const DefaultFamily = sdpaName

// families lists every family this build carries. A function rather than a
// variable: the list is fixed, and no caller can change it for another.
func families() []Family { return []Family{sdpaFamily(), fa8hFamily()} }

// FamilyNames returns the names of the families this build carries.
func FamilyNames() []string {
	var names []string
	for _, f := range families() {
		names = append(names, f.Name)
	}
	return names
}

// FamilyOf returns the family named name; "" is DefaultFamily.
func FamilyOf(name string) (Family, error) {
	if name == "" {
		name = DefaultFamily
	}
	for _, f := range families() {
		if f.Name == name {
			return f, nil
		}
	}
	return Family{}, fmt.Errorf("kernel family %q: this evotune carries %s", name, strings.Join(FamilyNames(), ", "))
}

// SpaceFor returns the family's space for problem p on target t, after
// checking what every family checks alike: that p is the family's and its
// dtype one the family has.
func (f Family) SpaceFor(p space.Problem, t Target) (*space.Space, error) {
	if p.Family != "" && p.Family != f.Name {
		return nil, fmt.Errorf("problem family %q is not %q", p.Family, f.Name)
	}
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("%s space: %w", f.Name, err)
	}
	if !slices.Contains(f.Dtypes, p.Dtype) {
		return nil, fmt.Errorf("%s space: dtype %q: the family has %s", f.Name, p.Dtype, strings.Join(f.Dtypes, ", "))
	}
	if p.VTransposed && !f.VTransposed {
		return nil, fmt.Errorf("%s space: the family reads V as it is, not transposed", f.Name)
	}
	return f.Space(p, t)
}

// DefaultArchOf is the architecture assumed for a problem of the named
// family where none is named and no GPU says which: DefaultArch where the
// family builds for it, else the family's first architecture (sdpa-hopper:
// sm_90). An unknown family gets DefaultArch; FamilyOf reports it.
func DefaultArchOf(family string) string {
	f, err := FamilyOf(family)
	if err != nil || slices.Contains(f.Archs, DefaultArch) {
		return DefaultArch
	}
	return f.Archs[0]
}

// Entry is the kernel whose ptxas figures a result reports.
func (f Family) Entry() string { return f.Kernels[0] }
