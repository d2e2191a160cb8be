package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"evotune/cmd/evotune/internal/bundle"
	"evotune/internal/testtool"
	"evotune/kernels"
	"evotune/space"
)

// The committed archive the examples are built against in CI: two shapes,
// so the bundle dispatches, measured on an H100 from the kernel source kept
// beside it.
const (
	exampleArchive = "../../results/2026-11-22-h100-retune/archive-mission"
	exampleSource  = "../../results/2026-11-22-h100-retune/kernel-source"
	examplesDir    = "../../examples"
)

// nvccFor returns the nvcc on PATH, failing in CI (which installs one) and
// skipping elsewhere.
func nvccFor(t *testing.T) string {
	t.Helper()
	return testtool.LookPath(t, "nvcc", "the examples cannot be compiled here", "installs it")
}

func runTool(t *testing.T, dir, name string, args ...string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

// TestExamplesBuild is what a user does: export the committed archive into
// the examples' third_party folder with the CLI, then compile the bundle for
// every supported architecture, and the CMake example's test program and the
// PyTorch extension against it. No GPU is needed; examples/device-check.sh
// runs them on one.
func TestExamplesBuild(t *testing.T) {
	t.Parallel() // slow (subprocesses, replays or nvcc) and independent of the other tests
	nvcc := nvccFor(t)
	work := t.TempDir()
	b := filepath.Join(work, "third_party", "attention")
	stdout, stderr, code := runCLI(t, "export", "--archive", exampleArchive, "--kernel-source", exampleSource, "--name", "attention", "--to", b)
	if code != 0 {
		t.Fatalf("export: exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, "(attention_forward; 3 configs") {
		t.Errorf("export of the two-shape archive: %q, want 3 configs (the overall best and each shape's)", stdout)
	}
	abs := func(p string) string {
		a, err := filepath.Abs(p)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	examples := abs(examplesDir)

	// The bundle compiles for every architecture the tuner targets.
	t.Run("bundle sm_80 sm_86 sm_89 sm_90", func(t *testing.T) {
		args := []string{"-std=c++17", "-O3"}
		for _, a := range []string{"80", "86", "89", "90"} {
			args = append(args, "-gencode=arch=compute_"+a+",code=sm_"+a)
		}
		args = append(args, "-c", "-o", filepath.Join(work, "attention_launch.o"), filepath.Join(b, "attention_launch.cu"))
		runTool(t, work, nvcc, args...)
	})

	t.Run("cmake example sources", func(t *testing.T) {
		// The sources CMakeLists.txt builds, linked as it links them.
		runTool(t, work, nvcc, "-std=c++17", "-O3", "-arch=sm_80", "-I", b, "-o", filepath.Join(work, "attention_test"),
			filepath.Join(b, "attention_launch.cu"), filepath.Join(examples, "cmake", "attention_test.cu"))
	})

	t.Run("cmake example", func(t *testing.T) {
		cmake, err := exec.LookPath("cmake")
		if err != nil {
			t.Skip("no cmake on PATH: CMakeLists.txt was not run (the sources it builds were compiled and linked with nvcc)")
		}
		build := filepath.Join(work, "build")
		runTool(t, work, cmake, "-S", filepath.Join(examples, "cmake"), "-B", build, "-DATTENTION_BUNDLE="+b,
			"-DCMAKE_CUDA_ARCHITECTURES=80", "-DCMAKE_CUDA_COMPILER="+nvcc)
		runTool(t, work, cmake, "--build", build)
		if _, err := os.Stat(filepath.Join(build, "attention_test")); err != nil {
			t.Errorf("the CMake build made no attention_test: %v", err)
		}
	})

	t.Run("torch extension", func(t *testing.T) {
		// Its CUDA source is the bundle's launcher, compiled above; the
		// binding needs PyTorch's headers.
		python, err := exec.LookPath("python3")
		if err != nil {
			t.Skip("no python3: the extension's binding (attention_ext.cpp) was not compiled; its CUDA source, the bundle's launcher, was")
		}
		// Parsed without writing a __pycache__ into the checkout.
		runTool(t, work, python, "-c", "import ast, sys; ast.parse(open(sys.argv[1]).read(), sys.argv[1])", filepath.Join(examples, "torch", "check.py"))
		out, err := exec.Command(python, "-c",
			"import torch.utils.cpp_extension as c, sysconfig; print('\\n'.join(c.include_paths() + [sysconfig.get_paths()['include']]))").Output()
		if err != nil {
			t.Skip("PyTorch headers absent (python3 cannot import torch): attention_ext.cpp was not compiled; its CUDA source, the bundle's launcher, was")
		}
		args := []string{"-std=c++17", "-O3", "-c", "-x", "cu", "-arch=sm_80", "-DTORCH_EXTENSION_NAME=attention_ext", "-I", b}
		for _, inc := range strings.Fields(string(out)) {
			args = append(args, "-I", inc)
		}
		args = append(args, "-o", filepath.Join(work, "attention_ext.o"), filepath.Join(examples, "torch", "attention_ext.cpp"))
		runTool(t, work, nvcc, args...)
	})

	t.Run("device-check.sh parses", func(t *testing.T) {
		runTool(t, work, "bash", "-n", filepath.Join(examples, "device-check.sh"))
	})
}

// TestExamplesBuildFP8 compiles the CMake example's test program against an
// fp8 bundle (the launcher takes the dequantisation scales) with the nvcc
// that builds E4M3 mma.
func TestExamplesBuildFP8(t *testing.T) {
	t.Parallel() // slow (subprocesses, replays or nvcc) and independent of the other tests
	nvcc := os.Getenv("EVOTUNE_FP8_NVCC")
	if nvcc == "" {
		t.Skipf("EVOTUNE_FP8_NVCC is not set: an fp8 bundle needs nvcc %s or newer", kernels.FP8MinNVCC)
	}
	prob := space.Problem{Family: kernels.DefaultFamily, Dtype: "fp8", Shapes: []space.Shape{{B: 1, H: 8, S: 512, D: 64}}}
	work, examples := defaultBundle(t, prob, "sm_89")
	// Compiled, not linked: the nvcc CI unpacks for fp8 comes without its
	// own CUDA runtime library.
	for _, src := range []string{filepath.Join(work, "attention_launch.cu"), filepath.Join(examples, "cmake", "attention_test.cu")} {
		runTool(t, work, nvcc, "-std=c++17", "-O3", "-arch=sm_89", "-I", work, "-c", "-o", filepath.Join(work, filepath.Base(src)+".o"), src)
	}
}

// TestExamplesBuildInt8 compiles and links the CMake example's test program
// against an int8 bundle with a bf16 output (the launcher takes the row and
// column scale arrays) with the nvcc on PATH, which builds IMMA, for the
// A100's architecture.
func TestExamplesBuildInt8(t *testing.T) {
	t.Parallel() // slow (subprocesses, replays or nvcc) and independent of the other tests
	nvcc := nvccFor(t)
	prob := space.Problem{Family: kernels.DefaultFamily, Dtype: "int8", OutDtype: "bf16", Shapes: []space.Shape{{B: 1, H: 8, S: 512, D: 64}}}
	work, examples := defaultBundle(t, prob, "sm_80")
	runTool(t, work, nvcc, "-std=c++17", "-O3", "-arch=sm_80", "-I", work, "-o", filepath.Join(work, "attention_test"),
		filepath.Join(work, "attention_launch.cu"), filepath.Join(examples, "cmake", "attention_test.cu"))
}

// defaultBundle exports the family default of prob for arch into a fresh
// directory and returns it with the examples folder's absolute path.
func defaultBundle(t *testing.T, prob space.Problem, arch string) (work, examples string) {
	t.Helper()
	tg, err := kernels.TargetFor(arch)
	if err != nil {
		t.Fatal(err)
	}
	sp, err := kernels.SDPASpace(prob, tg)
	if err != nil {
		t.Fatal(err)
	}
	def := sp.Default()
	flags, err := sp.Flags(def)
	if err != nil {
		t.Fatal(err)
	}
	bd, err := bundle.New("attention", prob, kernels.SDPASource(), arch, bundle.Config{Key: def.Key(), Config: def, Flags: flags}, nil)
	if err != nil {
		t.Fatal(err)
	}
	files, err := bd.Files()
	if err != nil {
		t.Fatal(err)
	}
	work = t.TempDir()
	if err := writeExport(work, files); err != nil {
		t.Fatal(err)
	}
	examples, err = filepath.Abs(examplesDir)
	if err != nil {
		t.Fatal(err)
	}
	return work, examples
}
