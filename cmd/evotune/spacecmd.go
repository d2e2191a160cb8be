package main

import (
	"context"
	"fmt"
	"strings"

	"evotune/kernels"
	"evotune/space"
)

// spaceOptions are the flags of evotune space.
type spaceOptions struct {
	problem problemFlags
	Arch    string
	Count   bool
}

func spaceCommand() command {
	return command{
		name:     "space",
		summary:  "list the knobs, their values and the constraints of the kernel family's space",
		synopsis: "evotune space [--count] [--shape BxHxSxD] [--dtype fp16|bf16|fp8|int8] [--out-dtype fp16|bf16] [--causal] [--arch sm_XY]",
		examples: `  evotune space
  evotune space --shape 2x8x1024x128 --dtype bf16 --arch sm_90

  # Only the number of valid configurations.
  evotune space --count
`,
		run: runSpace,
	}
}

func runSpace(ctx context.Context, c *cli, args []string) error {
	opts := spaceOptions{problem: defaultProblem(), Arch: kernels.DefaultArch}
	fs := newFlagSet("space")
	opts.problem.register(fs, true)
	fs.StringVar(&opts.Arch, "arch", opts.Arch, "target architecture whose limits the constraints use")
	fs.BoolVar(&opts.Count, "count", opts.Count, "print only the number of valid configurations")
	if _, err := c.parseFlags(fs, args, false); err != nil {
		return err
	}
	prob, err := opts.problem.problem("space")
	if err != nil {
		return err
	}
	if !fs.Changed("arch") {
		opts.Arch = kernels.DefaultArchOf(prob.Family)
	}
	sp, err := familySpace("space", prob, opts.Arch)
	if err != nil {
		return err
	}
	raw, valid := sp.Size()
	if opts.Count {
		fmt.Fprintln(c.stdout, valid)
		return nil
	}
	fmt.Fprintf(c.stdout, "space of %s on %s\n\n", problemLine(prob), opts.Arch)
	var rows [][]string
	for _, k := range sp.Knobs {
		layer := "macro"
		if k.Layer == space.Micro {
			layer = "micro"
		}
		values := make([]string, len(k.Values))
		for i, v := range k.Values {
			values[i] = v
			if v == k.Default {
				values[i] = v + "*"
			}
		}
		rows = append(rows, []string{k.Name, layer, strings.Join(values, " "), k.Macro, k.Doc})
	}
	if err := writeTable(c.stdout, "table", []string{"knob", "layer", "values (* default)", "macro", "what it does"}, rows); err != nil {
		return err
	}
	var defines []string
	for _, d := range sp.Defines {
		defines = append(defines, "-D"+d.Macro+"="+d.Value)
	}
	var constraints []string
	for _, con := range sp.Constraints {
		constraints = append(constraints, con.Name)
	}
	var absent []string
	for _, k := range sp.Knobs {
		if k.Absent != "" {
			absent = append(absent, k.Name+"="+k.Absent)
		}
	}
	fmt.Fprintf(c.stdout, "\nfixed defines: %s\n", strings.Join(defines, " "))
	if len(absent) > 0 {
		fmt.Fprintf(c.stdout, "a config recorded before a knob existed reads as: %s\n", strings.Join(absent, " "))
	}
	fmt.Fprintf(c.stdout, "constraints, in order: %s\n", strings.Join(constraints, ", "))
	fmt.Fprintf(c.stdout, "size: %d raw configurations, %d valid\n", raw, valid)
	return nil
}

// familySpace returns prob's kernel family's space for prob on arch, with the
// architecture's default limits. A bad architecture is a usage error of cmd
// naming --arch.
func familySpace(cmd string, prob space.Problem, arch string) (*space.Space, error) {
	t, err := kernels.TargetFor(arch)
	if err != nil {
		return nil, usagef(cmd, "--arch: %v", err)
	}
	if prob.Dtype == "fp8" && !kernels.FP8Arch(arch) {
		return nil, usagef(cmd, "--dtype fp8 needs E4M3 tensor cores: sm_89 or sm_90, not %s", arch)
	}
	family, err := kernels.FamilyOf(prob.Family)
	if err != nil {
		return nil, usagef(cmd, "--shape: %v", err)
	}
	sp, err := family.SpaceFor(prob, t)
	if err != nil {
		return nil, usagef(cmd, "--shape: %v", err)
	}
	return sp, nil
}

// familyDefault returns the kernel family's default config for a problem
// and its knobs in declaration order, or nil when the archive's problem is
// not one this build knows. The default does not depend on the target, so
// an architecture this build does not know still has one.
func familyDefault(p space.Problem, arch string) (space.Config, []space.Knob) {
	t, err := kernels.TargetFor(arch)
	if err != nil {
		t, err = kernels.TargetFor(kernels.DefaultArch)
	}
	if err != nil {
		return nil, nil
	}
	family, err := kernels.FamilyOf(p.Family)
	if err != nil {
		return nil, nil
	}
	s, err := family.SpaceFor(p, t)
	if err != nil {
		return nil, nil
	}
	return s.Default(), s.Knobs
}
