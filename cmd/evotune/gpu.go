package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"

	"evotune/evo"
	"evotune/kernels"
	"evotune/runner"
	"evotune/space"

	"github.com/spf13/pflag"
)

// gpuSetup is what compiling and running candidates on this machine needs:
// the flags shared by tune, check and bench.
type gpuSetup struct {
	// Family is the kernel family compiled; the zero value means
	// kernels.DefaultFamily.
	Family kernels.Family
	Arch   string
	NVCC   string
	Cache  string
	GPUs   []int
	Jobs   int
	// Source is compiled in place of the embedded kernel source when set
	// (--kernel-source).
	Source *kernels.Source
	// gpusFlag is the flag that picks the GPUs: --gpus for tune, --gpu
	// for the commands that run on one.
	gpusFlag string
}

// register adds the flags that say where and how candidates compile, bound
// to s; archExample is the --arch example of the subcommand's help.
func (s *gpuSetup) register(fs *pflag.FlagSet, archExample string) {
	fs.StringVar(&s.Arch, "arch", s.Arch, "target architecture, e.g. "+archExample+" (default: the GPU's)")
	fs.StringVar(&s.NVCC, "nvcc", s.NVCC, "nvcc `path` (default: found on PATH or in /usr/local/cuda)")
	fs.StringVar(&s.Cache, "cache", s.Cache, "compile cache `directory` (default: the user cache directory)")
}

// open opens the rig the flags describe; its errors name the flag at fault
// and the subcommand cmd.
func (s gpuSetup) open(ctx context.Context, cmd string, compileOnly bool, stderr io.Writer) (*runner.Rig, error) {
	rig, err := runner.Open(ctx, runner.Setup{
		Arch: s.Arch, NVCC: s.NVCC, CUDAHome: os.Getenv("CUDA_HOME"), Cache: s.Cache, GPUs: s.GPUs, Jobs: s.Jobs,
		Family: s.Family, Source: s.Source, CompileOnly: compileOnly, Stderr: stderr,
	})
	if err == nil {
		return rig, nil
	}
	var se *runner.SetupError
	if !errors.As(err, &se) {
		return nil, fmt.Errorf("%s: %w", cmd, err)
	}
	switch se.Field {
	case runner.FieldArch:
		return nil, usagef(cmd, "--arch: %v", se.Err)
	case runner.FieldGPUs:
		return nil, usagef(cmd, "%s: %v", cmp.Or(s.gpusFlag, "--gpus"), se.Err)
	case runner.FieldNVCC:
		return nil, fmt.Errorf("%s --nvcc: %w", cmd, se.Err)
	case runner.FieldCache:
		return nil, fmt.Errorf("%s --cache: %w", cmd, se.Err)
	}
	return nil, fmt.Errorf("%s: %w", cmd, err)
}

// gpuBackend compiles and times candidates on this machine's GPUs.
// src, when not nil, is compiled in place of the embedded kernel source.
func gpuBackend(ctx context.Context, opts tuneOptions, prob space.Problem, src *kernels.Source, stderr io.Writer) (backend, error) {
	family, err := kernels.FamilyOf(prob.Family)
	if err != nil {
		return backend{}, fmt.Errorf("tune: %w", err)
	}
	setup := gpuSetup{Family: family, Arch: opts.Arch, NVCC: opts.NVCC, Cache: opts.Cache, GPUs: opts.GPUs, Jobs: opts.Jobs, Source: src}
	rig, err := setup.open(ctx, "tune", false, stderr)
	if err != nil {
		return backend{}, fmt.Errorf("%w (to search without a GPU, use --replay FILE)", err)
	}
	sp, err := rig.Space(prob)
	if err != nil {
		rig.Close()
		return backend{}, usagef("tune", "--shape: %v", err)
	}
	pipe, err := rig.Pipeline(prob, sp)
	if err != nil {
		rig.Close()
		return backend{}, fmt.Errorf("tune: %w", err)
	}
	confirm, err := confirmer(pipe)
	if err != nil {
		rig.Close()
		return backend{}, fmt.Errorf("tune: %w", err)
	}
	gpus := rig.GPUs()
	name := fmt.Sprintf("%s on %d GPU(s), nvcc %s", gpus[0].Env.GPU, len(gpus), rig.NVCC().Version)
	if opts.KernelSource != "" {
		name += ", kernel source " + opts.KernelSource
	}
	// Enough candidates in flight that every nvcc job has work while each
	// GPU checks or times one and has the next compiled and waiting.
	parallel := cmp.Or(opts.Jobs, runtime.NumCPU()) + 2*len(gpus)
	return backend{name: name, problem: prob, space: sp, eval: pipe, env: rig.Env(), clock: evo.WallClock{}, close: rig.Close,
		confirm: confirm, parallel: parallel}, nil
}

// confirmer returns the search's confirmer on the GPU: an elite is
// displaced only by a challenger that is faster when both are measured
// again, interleaved, on one GPU.
func confirmer(pipe *runner.Pipeline) (evo.Confirmer, error) {
	c, err := runner.NewConfirmer(pipe, runner.ConfirmOptions{})
	if err != nil {
		return nil, err
	}
	return evo.ConfirmerFunc(func(ctx context.Context, challenger, incumbent space.Result) (evo.Verdict, error) {
		v, err := c.Confirm(ctx, challenger, incumbent)
		return evo.Verdict{Displace: v.Faster, ChallengerUS: v.ChallengerUS, IncumbentUS: v.IncumbentUS,
			PValue: v.PValue, Reason: v.Reason}, err
	}), nil
}
