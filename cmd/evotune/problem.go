package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"evotune/kernels"
	"evotune/runner"
	"evotune/space"
)

// problemFlags are the flags that name a tuning problem: the shapes (with
// optional objective weights), the dtype and the causal mask.
type problemFlags struct {
	Family   string // the kernel family; "" is kernels.DefaultFamily
	Shapes   []string
	Dtype    string
	OutDtype string // fp8's and int8's output: fp16 (the default) or bf16
	Causal   bool
	// VTransposed: fp8's V comes transposed from the caller (space.Problem).
	VTransposed bool
}

// defaultProblem is the mission shape: one batch of eight heads, 512 keys,
// head dimension 64, fp16, no mask.
func defaultProblem() problemFlags {
	return problemFlags{Shapes: []string{"1x8x512x64"}, Dtype: "fp16"}
}

// register adds the problem flags to fs. Multi says whether --shape may be
// repeated (a multi-shape objective) or names one shape.
func (p *problemFlags) register(fs *pflag.FlagSet, multi bool) {
	if multi {
		fs.StringArrayVar(&p.Shapes, "shape", p.Shapes, "problem shape `BxHxSxD`, optionally with an objective weight (BxHxSxD:W); repeat for a multi-shape objective")
	} else {
		fs.StringArrayVar(&p.Shapes, "shape", p.Shapes, "problem shape `BxHxSxD`")
	}
	fs.StringVar(&p.Dtype, "dtype", p.Dtype, "element type: "+space.DtypeList()+" (fp8: E4M3 inputs with per-tensor scales; needs sm_89 or newer and nvcc "+kernels.FP8MinNVCC+
		" or newer; int8: INT8 inputs with per-row Q and K and per-column V scales)")
	fs.StringVar(&p.OutDtype, "out-dtype", p.OutDtype, "output type of --dtype fp8 or int8: fp16 or bf16 (default fp16)")
	fs.BoolVar(&p.Causal, "causal", p.Causal, "apply a causal mask")
	fs.BoolVar(&p.VTransposed, "v-transposed", p.VTransposed, vTransposedUsage)
	fs.StringVar(&p.Family, "family", p.Family, "kernel family: "+strings.Join(kernels.FamilyNames(), ", ")+
		" (default "+kernels.DefaultFamily+"; sdpa-hopper: fp8 on wgmma, sm_90 only)")
}

// problem validates the flags and returns the problem they name. Errors are
// usage errors of cmd naming the flag at fault.
func (p problemFlags) problem(cmd string) (space.Problem, error) {
	outDtype, err := checkDtypes(cmd, p.Dtype, p.OutDtype)
	if err != nil {
		return space.Problem{}, err
	}
	family, err := kernels.FamilyOf(p.Family)
	if err != nil {
		return space.Problem{}, usagef(cmd, "--family: %v", err)
	}
	if !slices.Contains(family.Dtypes, p.Dtype) {
		return space.Problem{}, usagef(cmd, "--dtype %s: the %s family takes %s", p.Dtype, family.Name, strings.Join(family.Dtypes, ", "))
	}
	if err := checkVTransposed(cmd, family, p.Dtype, p.VTransposed); err != nil {
		return space.Problem{}, err
	}
	prob := space.Problem{Family: family.Name, Dtype: p.Dtype, OutDtype: outDtype, Causal: p.Causal, VTransposed: p.VTransposed}
	// A repeated flag replaces the default rather than adding to it.
	shapes := p.Shapes
	if len(shapes) == 0 {
		return space.Problem{}, usagef(cmd, "--shape: at least one shape is needed")
	}
	weighted := false
	var weights []float64
	for _, text := range shapes {
		shape, weight, hasWeight, err := parseWeightedShape(text)
		if err != nil {
			return space.Problem{}, usagef(cmd, "--shape %q: %v", text, err)
		}
		prob.Shapes = append(prob.Shapes, shape)
		weights = append(weights, weight)
		weighted = weighted || hasWeight
	}
	if weighted {
		prob.Weights = weights
	}
	if err := prob.Validate(); err != nil {
		return space.Problem{}, usagef(cmd, "--shape: %v", err)
	}
	return prob, nil
}

// checkToolchain refuses, in one line naming the version needed, an nvcc too
// old for the problem's dtype (fp8's E4M3 mma.sync needs PTX ISA 8.4), before
// anything is built or started. Other dtypes cost nothing here.
func checkToolchain(ctx context.Context, cmd, nvccFlag string, prob space.Problem) error {
	if prob.Dtype != "fp8" {
		return nil
	}
	nvcc, err := runner.FindNVCC(ctx, nvccFlag, os.Getenv("CUDA_HOME"))
	if err != nil {
		return fmt.Errorf("%s --nvcc: %w", cmd, err)
	}
	family, err := kernels.FamilyOf(prob.Family)
	if err != nil {
		return fmt.Errorf("%s: %w", cmd, err)
	}
	if err := family.CheckNVCC(prob.Dtype, nvcc.Version); err != nil {
		return fmt.Errorf("%s: %w (%s; pass --nvcc or set CUDA_HOME)", cmd, err, nvcc.Path)
	}
	return nil
}

// vTransposedUsage is --v-transposed's help.
const vTransposedUsage = "fp8: V comes transposed, [B, H, D, S rounded up to 16] with the keys beyond S zero " +
	"(the quantisation pass that makes fp8 inputs writes it so at no cost), so the kernel reads it without a transpose"

// checkVTransposed refuses --v-transposed where the dtype or the family
// reads V as it is.
func checkVTransposed(cmd string, family kernels.Family, dtype string, vTransposed bool) error {
	switch {
	case !vTransposed:
		return nil
	case dtype != "fp8":
		return usagef(cmd, "--v-transposed: only --dtype fp8 takes V transposed, not %s", dtype)
	case !family.VTransposed:
		var takers []string
		for _, name := range kernels.FamilyNames() {
			if f, err := kernels.FamilyOf(name); err == nil && f.VTransposed {
				takers = append(takers, name)
			}
		}
		return usagef(cmd, "--v-transposed: the %s family reads V as it is; --family %s takes it transposed", family.Name, strings.Join(takers, " or "))
	}
	return nil
}

// checkDtypes checks --dtype and --out-dtype, the one place the command
// line does, and returns the output dtype as an archive spells it: fp16,
// the default output, is "".
func checkDtypes(cmd, dtype, outDtype string) (string, error) {
	if !slices.Contains(space.Dtypes(), dtype) {
		return "", usagef(cmd, "--dtype %q: want %s", dtype, space.DtypeList())
	}
	switch {
	case outDtype == "":
	case !space.Quantized(dtype):
		return "", usagef(cmd, "--out-dtype %s: only --dtype fp8 and int8 take one (%s writes %s)", outDtype, dtype, dtype)
	case outDtype != "fp16" && outDtype != "bf16":
		return "", usagef(cmd, "--out-dtype %q: want fp16 or bf16", outDtype)
	case outDtype == "fp16":
		return "", nil
	}
	return outDtype, nil
}

// parseWeightedShape reads "BxHxSxD" or "BxHxSxD:W".
func parseWeightedShape(text string) (shape space.Shape, weight float64, hasWeight bool, err error) {
	shapeText, weightText, hasWeight := strings.Cut(text, ":")
	weight = 1
	if hasWeight {
		weight, err = strconv.ParseFloat(weightText, 64)
		if err != nil || !(weight > 0) || weight > 1e6 {
			return space.Shape{}, 0, false, fmt.Errorf("weight %q is not a positive number", weightText)
		}
	}
	shape, err = space.ParseShape(shapeText)
	if err != nil {
		// ParseShape names the shape itself; the caller names it already.
		msg := strings.TrimPrefix(err.Error(), fmt.Sprintf("shape %q: ", shapeText))
		return space.Shape{}, 0, false, fmt.Errorf("%s", msg)
	}
	return shape, weight, hasWeight, nil
}
