package runner

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"evotune/kernels"
	"evotune/space"
)

// TestOpenSetupErrors: a setup that cannot work names the field at fault,
// so that the command line can name its flag. None of these needs a GPU.
func TestOpenSetupErrors(t *testing.T) {
	tmp := t.TempDir()
	nvcc := fakeNVCC(t, filepath.Join(tmp, "bin"), "12.0.1")
	notADir := filepath.Join(tmp, "file")
	if err := os.WriteFile(notADir, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		setup Setup
		field string
		want  string
	}{
		{"arch the family lacks", Setup{CompileOnly: true, Arch: "sm_70", NVCC: nvcc, Cache: tmp}, FieldArch, `architecture "sm_70"`},
		{"no such nvcc", Setup{CompileOnly: true, Arch: "sm_89", NVCC: filepath.Join(tmp, "nowhere", "nvcc"), Cache: tmp}, FieldNVCC, "nowhere"},
		{"cache under a file", Setup{CompileOnly: true, Arch: "sm_89", NVCC: nvcc, Cache: filepath.Join(notADir, "cache")}, FieldCache, "cubin cache"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rig, err := Open(context.Background(), tt.setup)
			if err == nil {
				rig.Close()
				t.Fatal("Open succeeded")
			}
			var se *SetupError
			if !errors.As(err, &se) || se.Field != tt.field || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Open: %v (%T); want a SetupError on %s containing %q", err, err, tt.field, tt.want)
			}
			if !strings.HasPrefix(err.Error(), tt.field+": ") {
				t.Errorf("error %q does not start with its field", err)
			}
		})
	}
}

// TestOpenCompileOnly opens the compile path alone for a named
// architecture: the architecture's target, the nvcc found, no GPU, and a
// pipeline refused for want of one.
func TestOpenCompileOnly(t *testing.T) {
	tmp := t.TempDir()
	nvcc := fakeNVCC(t, filepath.Join(tmp, "bin"), "12.0.7")
	src := kernels.SDPASource()
	src.Hash = "feedface"
	rig, err := Open(context.Background(), Setup{CompileOnly: true, Arch: "sm_90", NVCC: nvcc, Cache: filepath.Join(tmp, "cache"), Source: &src})
	if err != nil {
		t.Fatal(err)
	}
	defer rig.Close()
	want, _ := kernels.TargetFor("sm_90")
	if rig.Arch() != "sm_90" || rig.Target() != want || rig.NVCC().Version != "12.0.7" || len(rig.GPUs()) != 0 || rig.Compiler() == nil {
		t.Errorf("rig: arch %s, target %+v, nvcc %+v, %d GPUs; want sm_90, %+v, 12.0.7, none", rig.Arch(), rig.Target(), rig.NVCC(), len(rig.GPUs()), want)
	}
	if env := rig.Env(); env != (space.Env{Arch: "sm_90", NVCC: "12.0.7", SourceHash: "feedface"}) {
		t.Errorf("Env = %+v", env)
	}
	if fi, err := os.Stat(filepath.Join(tmp, "cache", "cubins")); err != nil || !fi.IsDir() {
		t.Errorf("cubin cache not created: %v", err)
	}
	p := space.Problem{Family: kernels.DefaultFamily, Shapes: []space.Shape{{B: 1, H: 8, S: 512, D: 64}}, Dtype: "fp16"}
	sp, err := rig.Space(p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rig.Pipeline(p, sp); err == nil {
		t.Error("Pipeline of a compile-only rig succeeded; want an error")
	}
}

func TestCacheDirectory(t *testing.T) {
	if got, err := CacheDirectory("/x/y"); got != "/x/y" || err != nil {
		t.Errorf("CacheDirectory(/x/y) = %q, %v", got, err)
	}
	t.Setenv("XDG_CACHE_HOME", "/cache/home")
	t.Setenv("HOME", "/home/u")
	if got, err := CacheDirectory(""); got != "/cache/home/evotune" || err != nil {
		t.Errorf("CacheDirectory(\"\") = %q, %v; want /cache/home/evotune", got, err)
	}
}

// TestDeviceOpen opens the whole GPU stack the way tune, check and bench
// do, and takes the family default through every gate; a GPU index the
// machine lacks is a SetupError on GPUs, and a compile-only setup with no
// architecture takes the GPU's.
func TestDeviceOpen(t *testing.T) {
	if ok, why := devGPUPresent(); !ok {
		t.Skip(why)
	}
	ctx := context.Background()
	cache := t.TempDir()
	if _, err := Open(ctx, Setup{GPUs: []int{99}, Cache: cache, CUDAHome: os.Getenv("CUDA_HOME")}); err == nil {
		t.Error("Open on GPU 99 succeeded")
	} else if se := (*SetupError)(nil); !errors.As(err, &se) || se.Field != FieldGPUs {
		t.Errorf("Open on GPU 99: %v, want a SetupError on GPUs", err)
	}
	rig, err := Open(ctx, Setup{Cache: cache, CUDAHome: os.Getenv("CUDA_HOME"), Stderr: devLogWriter{t}})
	if err != nil {
		t.Skipf("a GPU but no rig: %v", err)
	}
	defer rig.Close()
	if len(rig.GPUs()) != 1 || rig.Env().GPU == "" || rig.Env().Arch != rig.Arch() || rig.Target().SMs <= 0 {
		t.Errorf("rig: %d GPUs, env %+v, target %+v", len(rig.GPUs()), rig.Env(), rig.Target())
	}
	p := space.Problem{Family: kernels.DefaultFamily, Shapes: []space.Shape{{B: 1, H: 8, S: 512, D: 64}}, Dtype: "fp16"}
	sp, err := rig.Space(p)
	if err != nil {
		t.Fatal(err)
	}
	pipe, err := rig.Pipeline(p, sp)
	if err != nil {
		t.Fatal(err)
	}
	if r := pipe.Evaluate(ctx, sp.Default()); !r.OK() || r.Env.GPUUUID == "" {
		t.Errorf("the family default: %s at the %s gate (%s), env %+v", r.Status, r.Gate, r.Reason, r.Env)
	}
	co, err := Open(ctx, Setup{CompileOnly: true, Cache: cache, CUDAHome: os.Getenv("CUDA_HOME")})
	if err != nil {
		t.Fatal(err)
	}
	defer co.Close()
	if co.Arch() != rig.Arch() || len(co.GPUs()) != 0 {
		t.Errorf("compile-only rig: arch %s (the GPU's is %s), %d GPUs", co.Arch(), rig.Arch(), len(co.GPUs()))
	}
}

// TestOpenFamily opens a compile-only rig for a family kernels.FamilyOf
// does not know: the rig compiles that family's source and serves its
// space, and refuses another family's problem.
func TestOpenFamily(t *testing.T) {
	tmp := t.TempDir()
	nvcc := fakeNVCC(t, filepath.Join(tmp, "bin"), "12.4.131")
	toySpace := &space.Space{Family: "toy", Knobs: []space.Knob{
		{Name: "tile", Macro: "TOY_TILE", Values: []string{"16", "32"}, Default: "16"}}}
	toy := kernels.Family{
		Name:    "toy",
		Dtypes:  []string{"fp16"},
		Archs:   []string{"sm_89"},
		Kernels: []string{"toy_fwd"},
		Source: func() kernels.Source {
			return kernels.Source{Name: "toy.cu", Files: map[string][]byte{"toy.cu": []byte("// toy\n")}, Hash: "70y"}
		},
		Space: func(space.Problem, kernels.Target) (*space.Space, error) { return toySpace, nil },
	}
	rig, err := Open(context.Background(), Setup{Family: toy, CompileOnly: true, Arch: "sm_89", NVCC: nvcc, Cache: filepath.Join(tmp, "cache")})
	if err != nil {
		t.Fatal(err)
	}
	defer rig.Close()
	if h := rig.Env().SourceHash; h != "70y" {
		t.Errorf("rig source hash %q, want the toy family's 70y", h)
	}
	shapes := []space.Shape{{B: 1, H: 1, S: 64, D: 64}}
	sp, err := rig.Space(space.Problem{Family: "toy", Shapes: shapes, Dtype: "fp16"})
	if err != nil || sp != toySpace {
		t.Errorf("Space of a toy problem = %v, %v; want the toy family's", sp, err)
	}
	if _, err := rig.Space(space.Problem{Family: kernels.DefaultFamily, Shapes: shapes, Dtype: "fp16"}); err == nil {
		t.Errorf("Space of a %s problem on the toy rig succeeded", kernels.DefaultFamily)
	}
	if _, err := rig.Space(space.Problem{Family: "toy", Shapes: shapes, Dtype: "bf16"}); err == nil || !strings.Contains(err.Error(), "bf16") {
		t.Errorf("Space of a bf16 toy problem = %v; want an error naming bf16", err)
	}
}
