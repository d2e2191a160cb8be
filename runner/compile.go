package runner

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"evotune/kernels"
)

// DefaultCompileTimeout bounds one nvcc run.
const DefaultCompileTimeout = 120 * time.Second

// CompileOptions configure a CompilePool.
type CompileOptions struct {
	NVCC   NVCC
	Arch   string         // "sm_89"
	Source kernels.Source // the kernel family's files
	// Args renders the nvcc command line (without the program name) for
	// flags, compiling the file srcName (Source.Name) of the source in
	// srcDir to outCubin; nil means kernels.NVCCArgs. It must include
	// -Xptxas -v.
	Args func(arch string, flags []string, srcDir, srcName, outCubin string) []string
	// WorkDir holds the written sources and nvcc's outputs; "" means a new
	// temporary directory that Close removes.
	WorkDir string
	Cache   *Cache        // nil compiles every request
	Jobs    int           // parallel nvcc runs; ≤ 0 means runtime.NumCPU()
	Timeout time.Duration // per nvcc run; ≤ 0 means DefaultCompileTimeout
}

// A CompilePool runs nvcc for candidates, a bounded number at a time, each
// nvcc in its own process group so that a timeout or a cancellation kills
// it with everything it started (cicc, ptxas).
type CompilePool struct {
	opts    CompileOptions
	ownWork bool
	slots   chan struct{}

	srcOnce sync.Once
	srcDir  string
	srcErr  error
}

// A Cubin is a compiled candidate, ready for the GPU worker.
type Cubin struct {
	Path       string
	Ptxas      string  // nvcc's stderr, with the -Xptxas -v report
	CompileSec float64 // nvcc's time for this request; 0 when cached
	Cached     bool
	release    func()
}

// Release says the cubin file is no longer needed by the caller (it may
// then be evicted from the cache or removed). It is safe on nil.
func (c *Cubin) Release() {
	if c != nil && c.release != nil {
		c.release()
		c.release = nil
	}
}

// A CompileError is a failed nvcc run: its output was an error, or it ran
// past its time limit.
type CompileError struct {
	Reason  string // the first meaningful error lines
	Output  string // nvcc's whole stderr and stdout
	Timeout bool
}

func (e *CompileError) Error() string { return "nvcc: " + e.Reason }

// NewCompilePool makes a pool from opts.
func NewCompilePool(opts CompileOptions) (*CompilePool, error) {
	if opts.NVCC.Path == "" || opts.Arch == "" {
		return nil, errors.New("compile pool: nvcc path and arch are required")
	}
	if opts.Source.Name == "" || opts.Source.Hash == "" {
		return nil, errors.New("compile pool: kernel source has no name or hash")
	}
	if opts.Args == nil {
		opts.Args = kernels.NVCCArgs
	}
	if opts.Jobs <= 0 {
		opts.Jobs = runtime.NumCPU()
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultCompileTimeout
	}
	p := &CompilePool{opts: opts, slots: make(chan struct{}, opts.Jobs)}
	if opts.WorkDir == "" {
		d, err := os.MkdirTemp("", "evotune-build-")
		if err != nil {
			return nil, fmt.Errorf("compile pool: %w", err)
		}
		p.opts.WorkDir, p.ownWork = d, true
	} else if err := os.MkdirAll(opts.WorkDir, 0o755); err != nil {
		return nil, fmt.Errorf("compile pool: work dir: %w", err)
	}
	return p, nil
}

// Close removes the work directory when the pool made it.
func (p *CompilePool) Close() error {
	if p.ownWork {
		return os.RemoveAll(p.opts.WorkDir)
	}
	return nil
}

// Key returns the cache key of the candidate with these flags.
func (p *CompilePool) Key(flags []string) string {
	args := p.opts.Args(p.opts.Arch, flags, "{src}", p.opts.Source.Name, "{out}")
	return CacheKey(p.opts.Source.Hash, p.opts.NVCC.Version, p.opts.Arch, flags, args)
}

// Compile returns the cubin for flags, from the cache when it is there. A
// failed compile is a *CompileError; a cancelled ctx returns ctx.Err().
func (p *CompilePool) Compile(ctx context.Context, flags []string) (*Cubin, error) {
	if p.opts.Cache == nil {
		out, err := p.run(ctx, flags)
		if err != nil {
			return nil, err
		}
		return &Cubin{Path: out.cubin, Ptxas: out.stderr, CompileSec: out.sec, release: func() { os.RemoveAll(filepath.Dir(out.cubin)) }}, nil
	}
	key := p.Key(flags)
	var sec float64
	e, hit, err := p.opts.Cache.Do(ctx, key, func(ctx context.Context) ([]byte, string, float64, error) {
		out, err := p.run(ctx, flags)
		if err != nil {
			return nil, "", 0, err
		}
		defer os.RemoveAll(filepath.Dir(out.cubin))
		b, err := os.ReadFile(out.cubin)
		if err != nil {
			return nil, "", 0, fmt.Errorf("reading nvcc's cubin: %w", err)
		}
		sec = out.sec
		return b, out.stderr, out.sec, nil
	})
	if err != nil {
		return nil, err
	}
	cache := p.opts.Cache
	return &Cubin{Path: e.Cubin, Ptxas: e.Ptxas, CompileSec: sec, Cached: hit, release: func() { cache.Release(key) }}, nil
}

type nvccRun struct {
	cubin  string
	stderr string
	sec    float64
}

// run waits for a free slot and runs nvcc once for flags.
func (p *CompilePool) run(ctx context.Context, flags []string) (nvccRun, error) {
	select {
	case p.slots <- struct{}{}:
	case <-ctx.Done():
		return nvccRun{}, ctx.Err()
	}
	defer func() { <-p.slots }()

	src, err := p.sources()
	if err != nil {
		return nvccRun{}, err
	}
	outDir, err := os.MkdirTemp(p.opts.WorkDir, "out-")
	if err != nil {
		return nvccRun{}, fmt.Errorf("compile: %w", err)
	}
	cubin := filepath.Join(outDir, "candidate.cubin")

	tctx, cancel := context.WithTimeout(ctx, p.opts.Timeout)
	defer cancel()
	cmd := exec.CommandContext(tctx, p.opts.NVCC.Path, p.opts.Args(p.opts.Arch, flags, src, p.opts.Source.Name, cubin)...)
	cmd.Dir = outDir // nvcc's intermediate files, if any, stay out of the shared source dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		// The whole group: nvcc's children (cicc, ptxas) would otherwise
		// outlive it and keep the CPU.
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err = cmd.Run()
	sec := time.Since(start).Seconds()
	if err != nil {
		os.RemoveAll(outDir)
		if ctx.Err() != nil {
			return nvccRun{}, ctx.Err()
		}
		out := stderr.String() + stdout.String()
		if tctx.Err() != nil {
			return nvccRun{}, &CompileError{Reason: fmt.Sprintf("ran past its %s limit", p.opts.Timeout), Output: out, Timeout: true}
		}
		return nvccRun{}, &CompileError{Reason: compileReason(out, src, err), Output: out}
	}
	return nvccRun{cubin: cubin, stderr: stderr.String(), sec: sec}, nil
}

// sources writes the kernel's files once, into a directory named by their
// hash: concurrent pools and processes write identical bytes, and the
// rename makes the directory appear whole.
func (p *CompilePool) sources() (string, error) {
	p.srcOnce.Do(func() {
		s := p.opts.Source
		dir := filepath.Join(p.opts.WorkDir, "src-"+s.Hash[:min(16, len(s.Hash))])
		if _, err := os.Stat(filepath.Join(dir, s.Name)); err == nil {
			p.srcDir = dir
			return
		}
		tmp, err := os.MkdirTemp(p.opts.WorkDir, ".src-")
		if err != nil {
			p.srcErr = fmt.Errorf("writing kernel sources: %w", err)
			return
		}
		for name, b := range s.Files {
			if err := os.WriteFile(filepath.Join(tmp, name), b, 0o644); err != nil {
				os.RemoveAll(tmp)
				p.srcErr = fmt.Errorf("writing kernel source %s: %w", name, err)
				return
			}
		}
		if err := os.Rename(tmp, dir); err != nil {
			os.RemoveAll(tmp)
			if _, serr := os.Stat(filepath.Join(dir, s.Name)); serr != nil {
				p.srcErr = fmt.Errorf("writing kernel sources: %w", err)
				return
			}
		}
		p.srcDir = dir
	})
	return p.srcDir, p.srcErr
}

// compileReason picks the lines of a failed nvcc run that say why: those
// naming an error (at most three), with the source directory dropped, else
// the last line of output, else the exit status.
func compileReason(out, srcDir string, runErr error) string {
	var errs []string
	var last string
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(strings.ReplaceAll(line, srcDir+string(filepath.Separator), ""))
		if line == "" {
			continue
		}
		last = line
		l := strings.ToLower(line)
		if strings.Contains(l, "detected in the compilation of") {
			continue // "1 error detected in ...": a count, not a reason
		}
		if strings.Contains(l, "error") || strings.Contains(l, "fatal") {
			errs = append(errs, line)
		}
	}
	switch {
	case len(errs) > 0:
		return strings.Join(errs[:min(3, len(errs))], "; ")
	case last != "":
		return last
	default:
		return runErr.Error()
	}
}
