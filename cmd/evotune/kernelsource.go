package main

import (
	"context"
	"crypto/sha256"
	byteorder "encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"

	"evotune/evo"
	"evotune/kernels"
	"evotune/runner"
	"evotune/space"
)

// maxKernelSourceBytes bounds a --kernel-source file: a CUDA source is a few
// hundred kilobytes at most, and a mistaken path to a large file should fail
// at once rather than fill memory.
const maxKernelSourceBytes = 16 << 20

// readKernelSource reads the --kernel-source file of subcommand cmd into a
// kernel source that compiles in place of the embedded sdpa.cu: same entry
// points (sdpa_fwd, sdpa_combine) taking SdpaParams, with the embedded
// sdpa_params.h beside it. The hash covers both files, so results of this
// source never mix with the embedded one's in an archive or the compile
// cache. A path that cannot be read is a usage error.
func readKernelSource(cmd, path string) (kernels.Source, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return kernels.Source{}, usagef(cmd, "--kernel-source: %v", err)
	}
	switch {
	case fi.IsDir():
		return kernels.Source{}, usagef(cmd, "--kernel-source %s: is a directory, want a .cu file", path)
	case fi.Size() > maxKernelSourceBytes:
		return kernels.Source{}, usagef(cmd, "--kernel-source %s: %d bytes, more than the %d a kernel source may have", path, fi.Size(), maxKernelSourceBytes)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return kernels.Source{}, usagef(cmd, "--kernel-source: %v", err)
	}
	if len(b) == 0 {
		return kernels.Source{}, usagef(cmd, "--kernel-source %s: the file is empty", path)
	}
	embedded := kernels.SDPASource()
	files := map[string][]byte{}
	for name, content := range embedded.Files {
		files[name] = content
	}
	files[embedded.Name] = b
	return kernels.Source{Name: embedded.Name, Files: files, Hash: sourceHash(files)}, nil
}

// sourceHash hashes file names and contents with length prefixes, as the
// kernels package hashes its embedded sources, so that a source read from a
// file and the embedded one hash alike exactly when their files are equal.
func sourceHash(files map[string][]byte) string {
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	h := sha256.New()
	var n8 [8]byte
	for _, n := range names {
		byteorder.LittleEndian.PutUint64(n8[:], uint64(len(n)))
		h.Write(n8[:])
		h.Write([]byte(n))
		byteorder.LittleEndian.PutUint64(n8[:], uint64(len(files[n])))
		h.Write(n8[:])
		h.Write(files[n])
	}
	return hex.EncodeToString(h.Sum(nil))
}

// useSource makes the rig compile src instead of the embedded source: a
// new compile pool over the same cache directory (the cache keys carry the
// source hash, so the two never share an entry), and src's hash in every
// result's provenance. It must be called before the rig compiles anything.
func (r *gpuRig) useSource(cmd string, src kernels.Source, s gpuSetup) error {
	cacheDir, err := cacheDirectory(s.Cache)
	if err != nil {
		return fmt.Errorf("%s --cache: %w", cmd, err)
	}
	cache, err := runner.OpenCache(filepath.Join(cacheDir, "cubins"), 0)
	if err != nil {
		return fmt.Errorf("%s --cache: %w", cmd, err)
	}
	pool, err := runner.NewCompilePool(runner.CompileOptions{
		NVCC: r.nvcc, Arch: r.arch, Source: src, Cache: cache, Jobs: s.Jobs,
	})
	if err != nil {
		return fmt.Errorf("%s --kernel-source: %w", cmd, err)
	}
	if r.pool != nil {
		r.pool.Close()
	}
	r.pool, r.source = pool, src
	return nil
}

// gpuBackendFrom is the GPU backend of evotune tune compiling src, the
// --kernel-source file, instead of the embedded kernel.
func gpuBackendFrom(ctx context.Context, opts tuneOptions, prob space.Problem, src kernels.Source, stderr io.Writer) (backend, error) {
	setup := gpuSetup{Arch: opts.Arch, NVCC: opts.NVCC, Cache: opts.Cache, GPUs: opts.GPUs, Jobs: opts.Jobs}
	rig, err := openGPU(ctx, "tune", setup, stderr)
	if err != nil {
		return backend{}, fmt.Errorf("%w (to search without a GPU, use --replay FILE)", err)
	}
	if err := rig.useSource("tune", src, setup); err != nil {
		rig.Close()
		return backend{}, err
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
	name := fmt.Sprintf("%s on %d GPU(s), nvcc %s, kernel source %s", rig.gpus[0].Env.GPU, len(rig.gpus), rig.nvcc.Version, opts.KernelSource)
	return backend{name: name, problem: prob, space: sp, eval: pipe, env: rig.env(), clock: evo.WallClock{}, close: rig.Close}, nil
}
