package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"evotune/evo"
	"evotune/kernels"
	"evotune/runner"
	"evotune/space"

	"github.com/spf13/pflag"
)

// gpuSetup is what compiling and running candidates on this machine needs:
// flags shared by tune and check.
type gpuSetup struct {
	Arch  string
	NVCC  string
	Cache string
	GPUs  []int
	Jobs  int
	// Source is compiled in place of the embedded kernel source when set
	// (--kernel-source).
	Source *kernels.Source
}

// register adds the flags that say where and how candidates compile, bound
// to s; archExample is the --arch example of the subcommand's help.
func (s *gpuSetup) register(fs *pflag.FlagSet, archExample string) {
	fs.StringVar(&s.Arch, "arch", s.Arch, "target architecture, e.g. "+archExample+" (default: the GPU's)")
	fs.StringVar(&s.NVCC, "nvcc", s.NVCC, "nvcc `path` (default: found on PATH or in /usr/local/cuda)")
	fs.StringVar(&s.Cache, "cache", s.Cache, "compile cache `directory` (default: the user cache directory)")
}

// probeTimeout bounds the worker's first answer (device info).
const probeTimeout = 60 * time.Second

// A gpuRig is the opened GPU path: NVML, the compile pool and one worker
// per GPU. Close releases all of it.
type gpuRig struct {
	nvml    *runner.NVML
	nvcc    runner.NVCC
	arch    string
	target  kernels.Target
	pool    *runner.CompilePool
	workers []*runner.Worker
	gpus    []runner.GPU
	source  kernels.Source
}

// openGPU finds the GPUs, nvcc and the architecture, builds the worker (or
// takes it from the cache) and starts one worker per GPU. With no GPU it
// fails with an error that says so; cmd names the subcommand.
func openGPU(ctx context.Context, cmd string, s gpuSetup, stderr io.Writer) (_ *gpuRig, err error) {
	rig := &gpuRig{source: kernels.SDPASource()}
	if s.Source != nil {
		rig.source = *s.Source
	}
	defer func() {
		if err != nil {
			rig.Close()
		}
	}()
	rig.nvml, err = runner.OpenNVML()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cmd, err)
	}
	devs, err := rig.nvml.Devices()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cmd, err)
	}
	indices := s.GPUs
	if len(indices) == 0 {
		indices = []int{0}
	}
	for _, i := range indices {
		if i >= len(devs) {
			return nil, usagef(cmd, "--gpus: no GPU %d (this machine has %d)", i, len(devs))
		}
	}
	rig.arch, err = runner.ResolveArch(s.Arch, devs[indices[0]].ComputeCap)
	if err != nil {
		return nil, usagef(cmd, "--arch: %v", err)
	}
	rig.nvcc, err = runner.FindNVCC(ctx, s.NVCC, os.Getenv("CUDA_HOME"))
	if err != nil {
		return nil, fmt.Errorf("%s --nvcc: %w", cmd, err)
	}
	cacheDir, err := cacheDirectory(s.Cache)
	if err != nil {
		return nil, fmt.Errorf("%s --cache: %w", cmd, err)
	}
	cache, err := runner.OpenCache(filepath.Join(cacheDir, "cubins"), 0)
	if err != nil {
		return nil, fmt.Errorf("%s --cache: %w", cmd, err)
	}
	bin, err := runner.BuildWorker(ctx, rig.nvcc.Path, rig.arch, filepath.Join(cacheDir, "worker"))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cmd, err)
	}
	for _, i := range indices {
		w, err := runner.StartWorker(ctx, bin, i, stderr)
		if err != nil {
			return nil, fmt.Errorf("%s: starting the GPU worker on GPU %d: %w", cmd, i, err)
		}
		rig.workers = append(rig.workers, w)
		target, _, err := runner.ProbeTarget(ctx, w, rig.arch, probeTimeout)
		if err != nil {
			return nil, fmt.Errorf("%s: GPU %d: %w", cmd, i, err)
		}
		if len(rig.gpus) == 0 {
			rig.target = target
		} else {
			// Every GPU runs the same candidates: the space is built for the
			// most constrained one.
			rig.target.SMs = min(rig.target.SMs, target.SMs)
			rig.target.SharedPerBlock = min(rig.target.SharedPerBlock, target.SharedPerBlock)
		}
		d := devs[i]
		rig.gpus = append(rig.gpus, runner.GPU{Device: w, NVMLIndex: i,
			Env: space.Env{GPU: d.Name, GPUUUID: d.UUID, ComputeCap: d.ComputeCap, Driver: d.Driver}})
	}
	rig.pool, err = runner.NewCompilePool(runner.CompileOptions{
		NVCC: rig.nvcc, Arch: rig.arch, Source: rig.source, Cache: cache, Jobs: s.Jobs,
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cmd, err)
	}
	return rig, nil
}

// cacheDirectory is --cache, or evotune's directory in the user cache.
func cacheDirectory(flag string) (string, error) {
	if flag != "" {
		return flag, nil
	}
	dir, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "evotune"), nil
}

// env is the provenance every result of this rig shares; the pipeline adds
// the GPU's own identity.
func (r *gpuRig) env() space.Env {
	env := space.Env{Arch: r.arch, NVCC: r.nvcc.Version, SourceHash: r.source.Hash}
	if len(r.gpus) > 0 {
		g := r.gpus[0].Env
		env.GPU, env.ComputeCap, env.Driver = g.GPU, g.ComputeCap, g.Driver
	}
	return env
}

// pipeline returns the GPU evaluator for problem p over space sp.
func (r *gpuRig) pipeline(p space.Problem, sp *space.Space) (*runner.Pipeline, error) {
	return runner.NewPipeline(runner.PipelineOptions{
		Space: sp, Problem: p, Target: r.target, Compiler: r.pool, GPUs: r.gpus,
		Gate: runner.DefaultGateLimits(r.target.SharedPerBlock), Env: r.env(), Telemetry: r.nvml,
	})
}

// Close stops the workers and releases NVML and the compile pool.
func (r *gpuRig) Close() error {
	var errs []error
	for _, w := range r.workers {
		errs = append(errs, w.Close())
	}
	if r.pool != nil {
		errs = append(errs, r.pool.Close())
	}
	if r.nvml != nil {
		errs = append(errs, r.nvml.Close())
	}
	return errors.Join(errs...)
}

// gpuBackend compiles and times candidates on this machine's GPUs.
// src, when not nil, is compiled in place of the embedded kernel source.
func gpuBackend(ctx context.Context, opts tuneOptions, prob space.Problem, src *kernels.Source, stderr io.Writer) (backend, error) {
	setup := gpuSetup{Arch: opts.Arch, NVCC: opts.NVCC, Cache: opts.Cache, GPUs: opts.GPUs, Jobs: opts.Jobs, Source: src}
	rig, err := openGPU(ctx, "tune", setup, stderr)
	if err != nil {
		return backend{}, fmt.Errorf("%w (to search without a GPU, use --replay FILE)", err)
	}
	sp, err := kernels.SDPASpace(prob, rig.target)
	if err != nil {
		rig.Close()
		return backend{}, usagef("tune", "--shape: %v", err)
	}
	pipe, err := rig.pipeline(prob, sp)
	if err != nil {
		rig.Close()
		return backend{}, fmt.Errorf("tune: %w", err)
	}
	name := fmt.Sprintf("%s on %d GPU(s), nvcc %s", rig.gpus[0].Env.GPU, len(rig.gpus), rig.nvcc.Version)
	if opts.KernelSource != "" {
		name += ", kernel source " + opts.KernelSource
	}
	// Enough candidates in flight that every nvcc job has work while each
	// GPU checks or times one and has the next compiled and waiting.
	parallel := cmp.Or(opts.Jobs, runtime.NumCPU()) + 2*len(rig.gpus)
	return backend{name: name, problem: prob, space: sp, eval: pipe, env: rig.env(), clock: evo.WallClock{}, close: rig.Close, parallel: parallel}, nil
}
