package runner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"
)

// An NVCC is the CUDA compiler that builds the candidates and the worker:
// where it is and which release it is, which every result records.
type NVCC struct {
	Path    string
	Version string // "11.8.89"
}

// NVCCLocations returns where FindNVCC looks, in order: the --nvcc flag
// value, $CUDA_HOME/bin/nvcc, /usr/local/cuda/bin/nvcc. PATH comes last and
// is searched by FindNVCC itself.
func NVCCLocations(flag, cudaHome string) []string {
	var locs []string
	if flag != "" {
		return []string{flag} // an explicit choice is never second-guessed
	}
	if cudaHome != "" {
		locs = append(locs, filepath.Join(cudaHome, "bin", "nvcc"))
	}
	return append(locs, "/usr/local/cuda/bin/nvcc")
}

// FindNVCC finds nvcc (the --nvcc flag value, then $CUDA_HOME/bin/nvcc,
// /usr/local/cuda/bin/nvcc, then PATH) and asks it for its release.
func FindNVCC(ctx context.Context, flag, cudaHome string) (NVCC, error) {
	locs := NVCCLocations(flag, cudaHome)
	path := ""
	for _, p := range locs {
		if isExecutable(p) {
			path = p
			break
		}
	}
	if path == "" && flag != "" {
		return NVCC{}, fmt.Errorf("--nvcc %s: not an executable file", flag)
	}
	if path == "" {
		p, err := exec.LookPath("nvcc")
		if err != nil {
			return NVCC{}, fmt.Errorf("nvcc not found: looked in %s and PATH; install the CUDA toolkit or pass --nvcc", strings.Join(locs, ", "))
		}
		path = p
	}
	v, err := NVCCVersion(ctx, path)
	if err != nil {
		return NVCC{}, err
	}
	return NVCC{Path: path, Version: v}, nil
}

func isExecutable(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular() && st.Mode().Perm()&0o111 != 0
}

// NVCCVersion runs path --version and returns the release it prints.
func NVCCVersion(ctx context.Context, path string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, "--version").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("running %s --version: %w", path, err)
	}
	v, err := ParseNVCCVersion(string(out))
	if err != nil {
		return "", fmt.Errorf("%s --version: %w", path, err)
	}
	return v, nil
}

var nvccVersionRE = regexp.MustCompile(`release \d+\.\d+, V(\d+\.\d+\.\d+)`)

// ParseNVCCVersion reads the output of nvcc --version: "Cuda compilation
// tools, release 11.8, V11.8.89" gives "11.8.89".
func ParseNVCCVersion(out string) (string, error) {
	m := nvccVersionRE.FindStringSubmatch(out)
	if m == nil {
		return "", errors.New("no \"release X.Y, VX.Y.Z\" line in its output")
	}
	return m[1], nil
}

// ArchForComputeCap maps a compute capability ("8.9") to the architecture
// nvcc targets ("sm_89"), refusing those not among archs, the kernel
// family's (kernels.Family.Archs).
func ArchForComputeCap(cc string, archs []string) (string, error) {
	major, minor, ok := strings.Cut(strings.TrimSpace(cc), ".")
	if !ok || major == "" || minor == "" || strings.Trim(major+minor, "0123456789") != "" {
		return "", fmt.Errorf("compute capability %q: want MAJOR.MINOR, e.g. 8.9", cc)
	}
	arch := "sm_" + major + minor
	if !slices.Contains(archs, arch) {
		return "", fmt.Errorf("compute capability %s (%s) is not supported; supported: %s", cc, arch, strings.Join(archs, ", "))
	}
	return arch, nil
}

// ResolveArch picks the architecture to compile for: the GPU's when there
// is one (computeCap non-empty; a --arch that disagrees is an error, since
// its cubins would not load), else the --arch flag, which is then required.
func ResolveArch(flagArch, computeCap string, archs []string) (string, error) {
	if computeCap != "" {
		arch, err := ArchForComputeCap(computeCap, archs)
		if err != nil {
			return "", err
		}
		if flagArch != "" && flagArch != arch {
			return "", fmt.Errorf("--arch %s: the GPU here is %s (compute capability %s)", flagArch, arch, computeCap)
		}
		return arch, nil
	}
	if flagArch == "" {
		return "", fmt.Errorf("no GPU found: pass --arch (one of %s) to compile without one", strings.Join(archs, ", "))
	}
	if !slices.Contains(archs, flagArch) {
		return "", fmt.Errorf("--arch %s: not supported; supported: %s", flagArch, strings.Join(archs, ", "))
	}
	return flagArch, nil
}
