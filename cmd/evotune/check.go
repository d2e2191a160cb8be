package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"evotune/cmd/evotune/internal/gatereport"
	"evotune/cmd/evotune/internal/textfmt"
	"evotune/kernels"
	"evotune/runner"
	"evotune/space"
)

// checkOptions are the flags of evotune check.
type checkOptions struct {
	problem     problemFlags
	Config      string
	CompileOnly bool
	// KernelSource is a .cu file compiled in place of the embedded
	// kernel source.
	KernelSource string
	gpu          gpuSetup
	GPU          int
}

func checkCommand() command {
	return command{
		name:     "check",
		summary:  "run one configuration through every gate and print what each said",
		synopsis: "evotune check [--config k=v,...] [--shape BxHxSxD] [--dtype fp16|bf16|fp8|int8] [--out-dtype fp16|bf16] [--causal] [--compile-only] [--arch sm_XY]",
		examples: `  # The family's default configuration, on this machine's GPU.
  evotune check

  # Compile only (no GPU needed): ptxas figures and the cubin path.
  evotune check --config block_m=128,warps=8,stages=3 --compile-only --arch sm_89
`,
		run: runCheck,
	}
}

func runCheck(ctx context.Context, c *cli, args []string) error {
	opts := checkOptions{problem: defaultProblem()}
	fs := newFlagSet("check")
	fs.StringVar(&opts.Config, "config", opts.Config, "the configuration as `k=v,...`; knobs not named take their default")
	opts.problem.register(fs, true)
	fs.BoolVar(&opts.CompileOnly, "compile-only", opts.CompileOnly, "stop after the ptxas gate (no GPU needed)")
	opts.gpu.register(fs, kernels.DefaultArch)
	fs.IntVar(&opts.GPU, "gpu", opts.GPU, "index of the GPU to check on")
	fs.StringVar(&opts.KernelSource, "kernel-source", opts.KernelSource, "compile this .cu `file` in place of the embedded kernel (same entry points and SdpaParams)")
	if _, err := c.parseFlags(fs, args, false); err != nil {
		return err
	}
	prob, err := opts.problem.problem("check")
	if err != nil {
		return err
	}
	if opts.GPU < 0 {
		return usagef("check", "--gpu %d: want a GPU index", opts.GPU)
	}
	if opts.gpu.Arch != "" {
		if _, err := kernels.TargetFor(opts.gpu.Arch); err != nil {
			return usagef("check", "--arch: %v", err)
		}
	}
	// The config is read against the named architecture's space first (with
	// no --arch, against any architecture's: some knobs are one
	// architecture's, as fp8's wgmma is sm_90's), so that a mistyped knob is
	// reported before any GPU or nvcc is looked for; the GPU's space reads it
	// again below.
	if err := parseEarly(prob, opts.gpu.Arch, opts.Config); err != nil {
		return err
	}
	if err := checkToolchain(ctx, "check", opts.gpu.NVCC, prob); err != nil {
		return err
	}
	family, err := kernels.FamilyOf(prob.Family)
	if err != nil {
		return fmt.Errorf("check: %w", err)
	}
	opts.gpu.Family = family
	src := family.Source()
	if opts.KernelSource != "" {
		if src, err = readKernelSource("check", opts.KernelSource, src); err != nil {
			return err
		}
	}
	opts.gpu.GPUs, opts.gpu.gpusFlag = []int{opts.GPU}, "--gpu"
	if opts.KernelSource != "" {
		opts.gpu.Source = &src
	}
	if opts.CompileOnly {
		opts.gpu.Jobs = 1
		return compileOnly(ctx, c.stdout, opts, prob)
	}
	rig, err := opts.gpu.open(ctx, "check", false, c.stderr)
	if err != nil {
		return fmt.Errorf("%w (use --compile-only --arch sm_XY to check without a GPU)", err)
	}
	defer rig.Close()
	sp, err := rig.Space(prob)
	if err != nil {
		return usagef("check", "--shape: %v", err)
	}
	cfg, err := sp.Parse(opts.Config)
	if err != nil {
		return usagef("check", "--config %q on %s: %v", opts.Config, rig.Arch(), err)
	}
	pipe, err := rig.Pipeline(prob, sp)
	if err != nil {
		return fmt.Errorf("check: %w", err)
	}
	r := pipe.Evaluate(ctx, cfg)
	gatereport.Write(c.stdout, r)
	if !r.OK() {
		return fmt.Errorf("check: %s stopped at the %s gate", r.Key, r.Gate)
	}
	return nil
}

// compileOnly takes cfg through the constraint, nvcc and ptxas gates on the
// named architecture (or the GPU's, when there is one) and prints the
// figures and the cubin's path.
func compileOnly(ctx context.Context, w io.Writer, opts checkOptions, prob space.Problem) error {
	rig, err := opts.gpu.open(ctx, "check", true, nil)
	if err != nil {
		return err
	}
	defer rig.Close()
	sp, err := rig.Space(prob)
	if err != nil {
		return usagef("check", "--shape: %v", err)
	}
	cfg, err := sp.Parse(opts.Config)
	if err != nil {
		return usagef("check", "--config %q on %s: %v", opts.Config, rig.Arch(), err)
	}
	fmt.Fprintf(w, "config:     %s\n", cfg.Key())
	fmt.Fprintf(w, "problem:    %s on %s\n", problemLine(prob), rig.Arch())
	if err := sp.Check(cfg); err != nil {
		fmt.Fprintf(w, "constraint: rejected: %v\n", err)
		return fmt.Errorf("check: %s stopped at the constraint gate", cfg.Key())
	}
	fmt.Fprintln(w, "constraint: ok")
	flags, err := sp.Flags(cfg)
	if err != nil {
		return fmt.Errorf("check: rendering flags: %w", err)
	}
	cub, err := rig.Compiler().Compile(ctx, flags)
	var ce *runner.CompileError
	if errors.As(err, &ce) {
		fmt.Fprintf(w, "compile:    failed: %s\n", ce.Reason)
		return fmt.Errorf("check: %s stopped at the compile gate", cfg.Key())
	}
	if err != nil {
		return fmt.Errorf("check: compiling: %w", err)
	}
	defer cub.Release()
	cached := ""
	if cub.Cached {
		cached = " (from the cache)"
	}
	fmt.Fprintf(w, "compile:    ok, nvcc %s, %.1f s%s\n", rig.NVCC().Version, cub.CompileSec, cached)
	fmt.Fprintf(w, "flags:      %s\n", strings.Join(flags, " "))
	rep, err := runner.ParsePtxas(cub.Ptxas)
	if err != nil {
		return fmt.Errorf("check: reading ptxas output: %w", err)
	}
	worst := rep.Worst()
	for _, f := range rep.Functions {
		if f.Entry {
			fmt.Fprintf(w, "ptxas:      %s: %s\n", f.Name, textfmt.Ptxas(f.Ptxas))
		}
	}
	fmt.Fprintf(w, "cubin:      %s\n", cub.Path)
	if reason := runner.DefaultGateLimits(rig.Target().SharedPerBlock).Check(worst); reason != "" {
		fmt.Fprintf(w, "ptxas gate: rejected: %s\n", reason)
		return fmt.Errorf("check: %s stopped at the ptxas gate", cfg.Key())
	}
	fmt.Fprintln(w, "ptxas gate: ok (correctness and timing need a GPU)")
	return nil
}

// parseEarly reads a --config text against arch's space, or with no arch
// against the first of the family's architectures (the default one first)
// whose space knows every knob the text names: its refusal is the error, so
// that a bad value of sm_90's wgmma is called a bad value, not an unknown
// knob. Where no space knows them all, the default architecture's refusal
// is the error.
func parseEarly(prob space.Problem, arch, text string) error {
	archs := []string{cmp.Or(arch, kernels.DefaultArchOf(prob.Family))}
	if arch == "" {
		if family, err := kernels.FamilyOf(prob.Family); err == nil {
			for _, a := range family.Archs {
				if a != archs[0] {
					archs = append(archs, a)
				}
			}
		}
	}
	var first error
	for _, a := range archs {
		sp, err := familySpace("check", prob, a)
		if err != nil {
			if first == nil {
				first = err
			}
			continue
		}
		_, err = sp.Parse(text)
		if err == nil {
			return nil
		}
		if knowsAll(sp, text) {
			return usagef("check", "--config %q: %v", text, err)
		}
		if first == nil {
			first = usagef("check", "--config %q: %v", text, err)
		}
	}
	return first
}

// knowsAll reports whether sp has every knob a k=v,... text names.
func knowsAll(sp *space.Space, text string) bool {
	for _, kv := range strings.Split(text, ",") {
		name, _, _ := strings.Cut(kv, "=")
		if name = strings.TrimSpace(name); name == "" {
			continue
		}
		if _, ok := sp.Knob(name); !ok {
			return false
		}
	}
	return true
}
