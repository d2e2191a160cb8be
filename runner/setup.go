package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"evotune/kernels"
	"evotune/space"
)

// A Setup says where and how candidates compile and run on this machine:
// what tune, check and bench take from their flags. Its zero value means
// GPU 0, its architecture, nvcc found where FindNVCC looks, and the user's
// cache directory.
type Setup struct {
	Arch     string // nvcc architecture, e.g. "sm_89"; "" means the GPU's
	NVCC     string // nvcc path; "" means found (CUDAHome, PATH, /usr/local/cuda)
	CUDAHome string // $CUDA_HOME, where FindNVCC looks first
	Cache    string // compile cache directory; "" means evotune's in the user cache
	GPUs     []int  // NVML indices of the GPUs to run on; empty means GPU 0
	Jobs     int    // parallel nvcc runs; 0 means one per CPU
	// Family is the kernel family the rig compiles and spaces; the zero
	// value means kernels.DefaultFamily.
	Family kernels.Family
	// Source is compiled in place of the family's embedded source when set.
	Source *kernels.Source
	// CompileOnly opens the compile path alone: no worker, and no GPU at all
	// when Arch is set.
	CompileOnly bool
	// Stderr receives the workers' stderr; nil drops it.
	Stderr io.Writer
}

// The Setup fields a SetupError can name.
const (
	FieldArch  = "Arch"
	FieldNVCC  = "NVCC"
	FieldCache = "Cache"
	FieldGPUs  = "GPUs"
)

// A SetupError is a setup that cannot work on this machine because of one
// of its fields (a GPU index it lacks, an architecture it cannot build, an
// nvcc or cache directory that is not there), so that the command line can
// name the flag that set it.
type SetupError struct {
	Field string // FieldArch, FieldNVCC, FieldCache or FieldGPUs
	Err   error
}

func (e *SetupError) Error() string { return e.Field + ": " + e.Err.Error() }
func (e *SetupError) Unwrap() error { return e.Err }

func fieldErr(field string, err error) error { return &SetupError{Field: field, Err: err} }

// probeTimeout bounds a worker's first answer (device info).
const probeTimeout = 60 * time.Second

// A Rig is an opened Setup: NVML, the compile pool and one worker per GPU
// (only the compile pool, and NVML when it was needed for the
// architecture, for a compile-only setup). Close releases all of it.
type Rig struct {
	nvml    *NVML
	nvcc    NVCC
	arch    string
	family  kernels.Family
	target  kernels.Target
	source  kernels.Source
	pool    *CompilePool
	workers []*Worker
	gpus    []GPU
}

// Open finds the GPUs, nvcc and the architecture, opens the compile cache,
// builds the worker (or takes it from the cache) and starts one worker per
// GPU. A machine with no GPU fails with OpenNVML's error, unless the setup
// is compile-only with an architecture. Errors caused by one field of s are
// *SetupError.
func Open(ctx context.Context, s Setup) (_ *Rig, err error) {
	r := &Rig{family: s.Family}
	if r.family.Name == "" {
		if r.family, err = kernels.FamilyOf(kernels.DefaultFamily); err != nil {
			return nil, err
		}
	}
	r.source = r.family.Source()
	if s.Source != nil {
		r.source = *s.Source
	}
	defer func() {
		if err != nil {
			r.Close()
		}
	}()
	indices := s.GPUs
	if len(indices) == 0 {
		indices = []int{0}
	}
	var devs []DeviceInfo
	if s.CompileOnly && s.Arch != "" {
		if r.target, err = kernels.TargetFor(s.Arch); err != nil {
			return nil, fieldErr(FieldArch, err)
		}
		r.arch = s.Arch
	} else {
		if r.nvml, err = OpenNVML(); err != nil {
			if s.CompileOnly {
				return nil, fieldErr(FieldArch, fmt.Errorf("needed on a machine with no GPU (%w)", err))
			}
			return nil, err
		}
		if devs, err = r.nvml.Devices(); err != nil {
			return nil, err
		}
		for _, i := range indices {
			if i < 0 || i >= len(devs) {
				return nil, fieldErr(FieldGPUs, fmt.Errorf("no GPU %d (this machine has %d)", i, len(devs)))
			}
		}
		if r.arch, err = ResolveArch(s.Arch, devs[indices[0]].ComputeCap, r.family.Archs); err != nil {
			return nil, fieldErr(FieldArch, err)
		}
		if r.target, err = kernels.TargetFor(r.arch); err != nil {
			return nil, fieldErr(FieldArch, err)
		}
	}
	if r.nvcc, err = FindNVCC(ctx, s.NVCC, s.CUDAHome); err != nil {
		return nil, fieldErr(FieldNVCC, err)
	}
	cacheDir, err := CacheDirectory(s.Cache)
	if err != nil {
		return nil, fieldErr(FieldCache, err)
	}
	cache, err := OpenCache(filepath.Join(cacheDir, "cubins"), 0)
	if err != nil {
		return nil, fieldErr(FieldCache, err)
	}
	if r.pool, err = NewCompilePool(CompileOptions{NVCC: r.nvcc, Arch: r.arch, Source: r.source, Cache: cache, Jobs: s.Jobs}); err != nil {
		return nil, err
	}
	if s.CompileOnly {
		return r, nil
	}
	if r.family.Worker == nil {
		return nil, fmt.Errorf("kernel family %s declares no GPU worker: it can be compiled (--compile-only), not run", r.family.Name)
	}
	bin, err := BuildWorker(ctx, r.nvcc.Path, r.family.Worker(), r.arch, filepath.Join(cacheDir, "worker"))
	if err != nil {
		return nil, err
	}
	for n, i := range indices {
		w, err := StartWorker(ctx, bin, i, s.Stderr)
		if err != nil {
			return nil, fmt.Errorf("starting the GPU worker on GPU %d: %w", i, err)
		}
		r.workers = append(r.workers, w)
		target, _, err := ProbeTarget(ctx, w, r.arch, probeTimeout)
		if err != nil {
			return nil, fmt.Errorf("GPU %d: %w", i, err)
		}
		if n == 0 {
			r.target = target
		} else {
			// Every GPU runs the same candidates: the space is built for the
			// most constrained one.
			r.target.SMs = min(r.target.SMs, target.SMs)
			r.target.SharedPerBlock = min(r.target.SharedPerBlock, target.SharedPerBlock)
		}
		d := devs[i]
		r.gpus = append(r.gpus, GPU{Device: w, NVMLIndex: i,
			Env: space.Env{GPU: d.Name, GPUUUID: d.UUID, ComputeCap: d.ComputeCap, Driver: d.Driver}})
	}
	return r, nil
}

// CacheDirectory is dir, or evotune's directory in the user cache when dir
// is empty.
func CacheDirectory(dir string) (string, error) {
	if dir != "" {
		return dir, nil
	}
	base, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(base, "evotune"), nil
}

// Arch returns the architecture candidates compile for.
func (r *Rig) Arch() string { return r.arch }

// NVCC returns the nvcc that compiles them.
func (r *Rig) NVCC() NVCC { return r.nvcc }

// Target returns what the constraints know of the GPUs: the most
// constrained one's figures, or the architecture's defaults when the rig is
// compile-only.
func (r *Rig) Target() kernels.Target { return r.target }

// GPUs returns the GPUs the rig runs on, with their identity; none for a
// compile-only rig.
func (r *Rig) GPUs() []GPU { return r.gpus }

// Compiler returns the compile pool.
func (r *Rig) Compiler() *CompilePool { return r.pool }

// Env is the provenance every result of this rig shares; a pipeline adds
// each GPU's own identity.
func (r *Rig) Env() space.Env {
	env := space.Env{Arch: r.arch, NVCC: r.nvcc.Version, SourceHash: r.source.Hash}
	if len(r.gpus) > 0 {
		g := r.gpus[0].Env
		env.GPU, env.ComputeCap, env.Driver = g.GPU, g.ComputeCap, g.Driver
	}
	return env
}

// Space returns the rig's kernel family's space for problem p on the rig's
// GPUs; a problem of another family is an error.
func (r *Rig) Space(p space.Problem) (*space.Space, error) {
	return r.family.SpaceFor(p, r.target)
}

// Pipeline returns the GPU evaluator for problem p over space sp.
func (r *Rig) Pipeline(p space.Problem, sp *space.Space) (*Pipeline, error) {
	if len(r.gpus) == 0 {
		return nil, errors.New("a compile-only setup has no GPU to evaluate on")
	}
	return NewPipeline(PipelineOptions{
		Space: sp, Problem: p, Family: r.family, Target: r.target, Compiler: r.pool, GPUs: r.gpus,
		Gate: DefaultGateLimits(r.target.SharedPerBlock), Env: r.Env(), Telemetry: r.nvml,
	})
}

// Close stops the workers and releases the compile pool and NVML.
func (r *Rig) Close() error {
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
