package runner

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"evotune/space"
)

func readPtxas(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "ptxas", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestParsePtxasCaptured(t *testing.T) {
	tests := []struct {
		file     string
		kernel   space.Ptxas // sdpa_fwd's own figures
		worst    space.Ptxas
		entries  int
		barriers int
	}{
		{"spills.nvcc11.8.sm_89.txt",
			space.Ptxas{Registers: 32, SpillStores: 2288, SpillLoads: 2352, StackBytes: 1240},
			space.Ptxas{Registers: 32, SpillStores: 2288, SpillLoads: 2352, StackBytes: 1240}, 1, 0},
		{"smem.nvcc11.8.sm_89.txt",
			space.Ptxas{Registers: 14, SharedBytes: 16640},
			space.Ptxas{Registers: 40, SharedBytes: 16640}, 2, 0},
		{"stack.nvcc11.8.sm_89.txt",
			space.Ptxas{Registers: 40, StackBytes: 128},
			space.Ptxas{Registers: 40, StackBytes: 128}, 1, 0},
		{"spills.nvcc13.0.sm_90.txt",
			space.Ptxas{Registers: 32, SpillStores: 2812, SpillLoads: 2864, StackBytes: 1728},
			space.Ptxas{Registers: 32, SpillStores: 2812, SpillLoads: 2864, StackBytes: 1728}, 1, 0},
		{"smem.nvcc13.0.sm_90.txt",
			space.Ptxas{Registers: 14, SharedBytes: 16640},
			space.Ptxas{Registers: 40, SharedBytes: 16640}, 2, 1},
		{"stack.nvcc13.0.sm_90.txt",
			space.Ptxas{Registers: 31, StackBytes: 128},
			space.Ptxas{Registers: 31, StackBytes: 128}, 1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			rep, err := ParsePtxas(readPtxas(t, tt.file))
			if err != nil {
				t.Fatal(err)
			}
			k, ok := rep.Kernel("sdpa_fwd")
			if !ok {
				t.Fatalf("no sdpa_fwd in %+v", rep.Functions)
			}
			if k.Ptxas != tt.kernel {
				t.Errorf("sdpa_fwd = %+v, want %+v", k.Ptxas, tt.kernel)
			}
			if k.Barriers != tt.barriers {
				t.Errorf("sdpa_fwd barriers = %d, want %d", k.Barriers, tt.barriers)
			}
			if w := rep.Worst(); w != tt.worst {
				t.Errorf("Worst = %+v, want %+v", w, tt.worst)
			}
			entries := 0
			for _, f := range rep.Functions {
				if f.Entry {
					entries++
					if !strings.HasPrefix(f.Arch, "sm_") {
						t.Errorf("entry %s has arch %q", f.Name, f.Arch)
					}
				}
			}
			if entries != tt.entries {
				t.Errorf("%d entry functions, want %d", entries, tt.entries)
			}
		})
	}
}

func TestParsePtxasNonEntryNotInWorst(t *testing.T) {
	// A non-inlined device function's stack frame is listed but is not a
	// kernel: it must neither be found by Kernel nor count in Worst.
	text := readPtxas(t, "stack.nvcc11.8.sm_89.txt") + "    4096 bytes stack frame, 8 bytes spill stores, 8 bytes spill loads\n"
	rep, err := ParsePtxas(text)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := rep.Kernel("pick"); ok {
		t.Error("Kernel found the device function pick")
	}
	if w := rep.Worst(); w.StackBytes != 128 || w.SpillStores != 0 {
		t.Errorf("Worst = %+v, counted the device function", w)
	}
}

func TestParsePtxasEmpty(t *testing.T) {
	for _, text := range []string{"", "nvcc warning : something\n", "ptxas info    : 0 bytes gmem\n"} {
		if _, err := ParsePtxas(text); err == nil {
			t.Errorf("ParsePtxas(%q) succeeded", text)
		}
	}
}

func TestMangledBase(t *testing.T) {
	tests := map[string]string{
		"_Z8sdpa_fwdPKfPfi": "sdpa_fwd",
		"_Z4pickPKfi":       "pick",
		"sdpa_fwd":          "",
		"_Z":                "",
		"_Z99short":         "",
		"_Zx":               "",
	}
	for in, want := range tests {
		if got := mangledBase(in); got != want {
			t.Errorf("mangledBase(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestGateLimitsCheck(t *testing.T) {
	lim := GateLimits{MaxRegisters: 128, MaxSpillBytes: 0, MaxStackBytes: -1, MaxSharedBytes: 48 * 1024}
	tests := []struct {
		name string
		p    space.Ptxas
		want string
	}{
		{"clean", space.Ptxas{Registers: 128, SharedBytes: 48 * 1024, StackBytes: 4096}, ""},
		{"registers", space.Ptxas{Registers: 168}, "registers 168 > 128"},
		{"spill stores", space.Ptxas{Registers: 64, SpillStores: 48, SpillLoads: 48}, "spill stores 48 B > 0 B"},
		{"spill loads", space.Ptxas{Registers: 64, SpillLoads: 8}, "spill loads 8 B > 0 B"},
		{"smem", space.Ptxas{Registers: 64, SharedBytes: 50000}, "static shared memory 50000 B > 49152 B"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := lim.Check(tt.p); got != tt.want {
				t.Errorf("Check(%+v) = %q, want %q", tt.p, got, tt.want)
			}
		})
	}
	stack := GateLimits{MaxRegisters: -1, MaxSpillBytes: -1, MaxStackBytes: 64, MaxSharedBytes: -1}
	if got, want := stack.Check(space.Ptxas{Registers: 255, SpillStores: 9, StackBytes: 128}), "stack frame 128 B > 64 B"; got != want {
		t.Errorf("stack limit: got %q, want %q", got, want)
	}
	if d := DefaultGateLimits(99 * 1024); d.MaxRegisters != 255 || d.MaxSpillBytes != 0 || d.MaxStackBytes >= 0 || d.MaxSharedBytes != 99*1024 {
		t.Errorf("DefaultGateLimits = %+v", d)
	}
}

func FuzzParsePtxas(f *testing.F) {
	for _, name := range []string{"spills.nvcc11.8.sm_89.txt", "smem.nvcc11.8.sm_89.txt", "stack.nvcc11.8.sm_89.txt"} {
		b, err := os.ReadFile(filepath.Join("testdata", "ptxas", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(b))
	}
	f.Fuzz(func(t *testing.T, text string) {
		rep, err := ParsePtxas(text)
		if err != nil {
			return
		}
		w := rep.Worst()
		for _, fn := range rep.Functions {
			if fn.Entry && fn.Registers > w.Registers {
				t.Fatalf("Worst %+v below entry %+v", w, fn)
			}
		}
	})
}
