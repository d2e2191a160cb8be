package runner

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"evotune/kernels"
)

const nvcc118Version = `nvcc: NVIDIA (R) Cuda compiler driver
Copyright (c) 2005-2022 NVIDIA Corporation
Built on Wed_Sep_21_10:33:58_PDT_2022
Cuda compilation tools, release 11.8, V11.8.89
Build cuda_11.8.r11.8/compiler.31833905_0
`

func TestParseNVCCVersion(t *testing.T) {
	tests := []struct {
		out, want string
	}{
		{nvcc118Version, "11.8.89"},
		{"Cuda compilation tools, release 13.0, V13.0.88\nBuild cuda_13.0.r13.0/compiler.36424714_0\n", "13.0.88"},
		{"Cuda compilation tools, release 12.4, V12.4.131\n", "12.4.131"},
		{"", ""},
		{"gcc (Debian 12.2.0-14) 12.2.0\n", ""},
	}
	for _, tt := range tests {
		got, err := ParseNVCCVersion(tt.out)
		if got != tt.want || (err != nil) != (tt.want == "") {
			t.Errorf("ParseNVCCVersion(%q) = %q, %v; want %q", tt.out, got, err, tt.want)
		}
	}
}

// fakeNVCC writes an executable script that prints an nvcc --version text.
func fakeNVCC(t *testing.T, dir, version string) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "nvcc")
	script := "#!/bin/sh\necho 'Cuda compilation tools, release 12.0, V" + version + "'\n"
	if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestFindNVCC(t *testing.T) {
	ctx := context.Background()
	tmp := t.TempDir()
	flagNVCC := fakeNVCC(t, filepath.Join(tmp, "flag"), "12.0.1")
	home := filepath.Join(tmp, "cuda")
	fakeNVCC(t, filepath.Join(home, "bin"), "12.0.2")
	pathDir := filepath.Join(tmp, "path")
	fakeNVCC(t, pathDir, "12.0.3")
	t.Setenv("PATH", pathDir)
	systemCUDA := isExecutable("/usr/local/cuda/bin/nvcc")

	tests := []struct {
		name, flag, home, want string
	}{
		{"flag wins", flagNVCC, home, "12.0.1"},
		{"CUDA_HOME", "", home, "12.0.2"},
	}
	if !systemCUDA {
		tests = append(tests, struct{ name, flag, home, want string }{"PATH", "", filepath.Join(tmp, "none"), "12.0.3"})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, err := FindNVCC(ctx, tt.flag, tt.home)
			if err != nil {
				t.Fatal(err)
			}
			if n.Version != tt.want {
				t.Errorf("found %s version %s, want %s", n.Path, n.Version, tt.want)
			}
		})
	}

	t.Run("bad flag", func(t *testing.T) {
		_, err := FindNVCC(ctx, filepath.Join(tmp, "missing", "nvcc"), home)
		if err == nil || !strings.Contains(err.Error(), "--nvcc") {
			t.Errorf("err = %v, want one naming --nvcc", err)
		}
	})
	t.Run("none", func(t *testing.T) {
		t.Setenv("PATH", filepath.Join(tmp, "empty"))
		n, err := FindNVCC(ctx, "", filepath.Join(tmp, "nohome"))
		if systemCUDA {
			if err != nil || n.Path != "/usr/local/cuda/bin/nvcc" {
				t.Errorf("with /usr/local/cuda: got %+v, %v", n, err)
			}
			return
		}
		if err == nil || !strings.Contains(err.Error(), "/usr/local/cuda/bin/nvcc") || !strings.Contains(err.Error(), "nohome") {
			t.Errorf("err = %v, want one naming where it looked", err)
		}
	})
}

func TestNVCCVersionReal(t *testing.T) {
	v, err := NVCCVersion(context.Background(), testNVCC(t))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(v, ".") != 2 {
		t.Errorf("version %q is not X.Y.Z", v)
	}
}

// defaultArchs are the architectures of the family the command line tunes.
func defaultArchs(t testing.TB) []string {
	t.Helper()
	f, err := kernels.FamilyOf(kernels.DefaultFamily)
	if err != nil {
		t.Fatal(err)
	}
	return f.Archs
}

func TestArchForComputeCap(t *testing.T) {
	archs := defaultArchs(t)
	tests := []struct {
		cc, want string
		ok       bool
	}{
		{"8.9", "sm_89", true},
		{"9.0", "sm_90", true},
		{"8.0", "sm_80", true},
		{"7.5", "", false},
		{"89", "", false},
		{"8.x", "", false},
		{"", "", false},
	}
	for _, tt := range tests {
		got, err := ArchForComputeCap(tt.cc, archs)
		if got != tt.want || (err == nil) != tt.ok {
			t.Errorf("ArchForComputeCap(%q) = %q, %v", tt.cc, got, err)
		}
	}
}

func TestResolveArch(t *testing.T) {
	archs := defaultArchs(t)
	tests := []struct {
		flag, cc, want string
		errHas         string
	}{
		{"", "8.9", "sm_89", ""},
		{"sm_89", "8.9", "sm_89", ""},
		{"sm_90", "8.9", "", "--arch sm_90"},
		{"sm_90", "", "sm_90", ""},
		{"", "", "", "--arch"},
		{"sm_70", "", "", "not supported"},
	}
	for _, tt := range tests {
		got, err := ResolveArch(tt.flag, tt.cc, archs)
		if got != tt.want {
			t.Errorf("ResolveArch(%q, %q) = %q, want %q", tt.flag, tt.cc, got, tt.want)
		}
		if tt.errHas != "" && (err == nil || !strings.Contains(err.Error(), tt.errHas)) {
			t.Errorf("ResolveArch(%q, %q) err = %v, want it to mention %q", tt.flag, tt.cc, err, tt.errHas)
		}
		if tt.errHas == "" && err != nil {
			t.Errorf("ResolveArch(%q, %q): %v", tt.flag, tt.cc, err)
		}
	}
}
