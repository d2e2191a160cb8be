package main

import (
	"os"

	"evotune/kernels"
)

// maxKernelSourceBytes bounds a --kernel-source file: a CUDA source is a few
// hundred kilobytes at most, and a mistaken path to a large file should fail
// at once rather than fill memory.
const maxKernelSourceBytes = 16 << 20

// readKernelSource reads the --kernel-source file of subcommand cmd into a
// kernel source that compiles in place of the file nvcc compiles of
// embedded, the family's embedded source (for SDPA: sdpa.cu, with the same
// entry points taking SdpaParams, and the embedded sdpa_params.h beside
// it). The hash covers every file, so results of this source never mix
// with the embedded one's in an archive or the compile cache. A path that
// cannot be read is a usage error.
func readKernelSource(cmd, path string, embedded kernels.Source) (kernels.Source, error) {
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
	return embedded.With(embedded.Name, b), nil
}
