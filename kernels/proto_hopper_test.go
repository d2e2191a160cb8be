package kernels

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// TestProtoHopperHarness builds kernels/proto/hopper/fa8.cu, the device
// runs' check and timing harness over the family's kernel (fa8h.cu), as its
// run.sh does for the builds its steps name (host code included), so that
// the harness keeps compiling as the kernel changes. The kernel's own
// properties are TestFA8HBuilds'.
func TestProtoHopperHarness(t *testing.T) {
	cc := newFP8Compiler(t)
	kernelsDir, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	// Read here so that the test's cached result goes stale when the
	// harness changes (fa8h.cu is embedded in the package).
	code, err := os.ReadFile(filepath.Join("proto", "hopper", "fa8.cu"))
	if err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(cc.dir, "fa8.cu")
	if err := os.WriteFile(src, code, 0o644); err != nil {
		t.Fatal(err)
	}
	for i, macros := range [][]string{
		{"-DHD=64", "-DBN=128", "-DNCW=2", "-DSTAGES=6", "-DPINGPONG=0", "-DPERSISTENT=1", "-DPREGS=56"},
		{"-DHD=128", "-DBN=128", "-DNCW=2", "-DSTAGES=4", "-DQK_SPLIT=2", "-DPERSISTENT=1", "-DCAUSAL=1"},
	} {
		out := filepath.Join(cc.dir, fmt.Sprintf("harness%d", i))
		args := append([]string{"-O3", "-std=c++17", "-gencode", "arch=compute_90a,code=sm_90a", "-I" + kernelsDir, "-o", out}, macros...)
		if log, err := exec.Command(cc.nvcc, append(args, src)...).CombinedOutput(); err != nil {
			t.Errorf("nvcc %s: %v\n%s", strings.Join(macros, " "), err, log)
		}
	}
}

// checkHopperSASS checks a build of the Hopper fp8 kernel (the prototype's
// or the family's): both products are E4M3 warpgroup MMAs and nothing else
// runs on the tensor cores, ptxas did not serialise them for a non-wgmma
// write to an accumulator (C7515) or, unless serialOK, for registers, and no
// instruction writes P's registers while the P V that reads them is in
// flight.
func checkHopperSASS(t *testing.T, b *sassBuild, serialOK bool) {
	t.Helper()
	if b.err != nil {
		t.Fatal(b.err)
	}
	ops := sassOps([]byte(b.sass))
	if ops["QGMMA"] == 0 || ops["HMMA"]+ops["QMMA"]+ops["HGMMA"] != 0 {
		t.Errorf("want E4M3 warpgroup MMAs only, got %v", ops)
	}
	if strings.Contains(b.ptxas, "C7515") || !serialOK && strings.Contains(b.ptxas, "C751") {
		t.Errorf("ptxas serialises the warpgroup MMAs:\n%s", b.ptxas)
	}
	if bad := inFlightAClobbered([]byte(b.sass)); len(bad) > 0 {
		t.Errorf("P's registers written while P V reads them:\n%s", strings.Join(bad, "\n"))
	}
}

// stripAddrs drops the header lines (file names, the build's identity) so
// that two builds compare by their code.
func stripAddrs(sass string) string {
	var b bytes.Buffer
	for _, line := range strings.Split(sass, "\n") {
		if strings.Contains(line, "/*") {
			b.WriteString(line)
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// inFlightAClobbered reports every write to the A registers of a warpgroup
// MMA with A from registers (P in P V) between that MMA and the next wait
// for every group (WARPGROUP.DEPBAR.LE gsb0, 0x0), in address order: the
// MMA reads them asynchronously until then.
func inFlightAClobbered(sass []byte) []string {
	insts := parseSASS(sass)
	var bad []string
	for i, in := range insts {
		if !strings.HasPrefix(in.op, "QGMMA") || len(in.args) < 2 {
			continue
		}
		m := sassRegRE.FindStringSubmatch(in.args[1])
		if m == nil {
			continue // A from shared memory
		}
		a, _ := strconv.Atoi(m[1])
		for _, w := range insts[i+1:] {
			if w.fn != in.fn {
				break
			}
			if strings.HasPrefix(w.op, "WARPGROUP.DEPBAR") && len(w.args) == 2 && w.args[1] == "0x0" {
				break
			}
			if strings.HasPrefix(w.op, "QGMMA") {
				continue // the MMAs of the same batch write accumulators
			}
			for _, r := range sassDest(w) {
				if r >= a && r < a+4 {
					bad = append(bad, fmt.Sprintf("%04x %s %s writes R%d, A of the %s at %04x", w.addr, w.op,
						strings.Join(w.args, ", "), r, in.op, in.addr))
				}
			}
		}
	}
	return bad
}

// TestInFlightAClobbered pins the check on three hand-written sequences: a
// write to P's registers before the wait for every group is flagged, the
// same write after it is not, and so is a write to a register beside them.
func TestInFlightAClobbered(t *testing.T) {
	head := "        /*0100*/                   QGMMA.64x64x32.F32.E4M3.E4M3 R24, R196, gdesc[UR4], R24, gsb0 ;\n"
	wait := "        /*0120*/                   WARPGROUP.DEPBAR.LE gsb0, 0x0 ;\n"
	write := func(addr, reg string) string {
		return "        /*" + addr + "*/                   F2FP.SATFINITE.E4M3.F32.PACK_AB_MERGE_C " + reg + ", R10, R11, RZ ;\n"
	}
	for _, c := range []struct {
		name, sass string
		want       int
	}{
		{"before the wait", head + write("0110", "R198") + wait, 1},
		{"after the wait", head + wait + write("0130", "R198"), 0},
		{"beside P", head + write("0110", "R200") + wait, 0},
	} {
		if got := inFlightAClobbered([]byte(c.sass)); len(got) != c.want {
			t.Errorf("%s: %d findings %v, want %d", c.name, len(got), got, c.want)
		}
	}
}

// A sassBuild is one compile of a test's: its SASS, its ptxas -v output, or
// why it failed.
type sassBuild struct {
	sass, ptxas string
	err         error
	once        sync.Once
}

// sassBuilds compiles flag sets at most once each, two at a time, with the
// nvcc arguments args gives for the flags and the output cubin.
type sassBuilds struct {
	cc     *compiler
	args   func(flags []string, outCubin string) []string
	mu     sync.Mutex
	builds map[string]*sassBuild
	slots  chan struct{}
}

func newSASSBuilds(cc *compiler, args func(flags []string, outCubin string) []string) *sassBuilds {
	return &sassBuilds{cc: cc, args: args, builds: map[string]*sassBuild{}, slots: make(chan struct{}, 2)}
}

func (s *sassBuilds) get(flags []string) *sassBuild {
	key := strings.Join(flags, " ")
	s.mu.Lock()
	b, ok := s.builds[key]
	if !ok {
		b = &sassBuild{}
		s.builds[key] = b
	}
	n := len(s.builds)
	s.mu.Unlock()
	b.once.Do(func() {
		s.slots <- struct{}{}
		defer func() { <-s.slots }()
		out := filepath.Join(s.cc.dir, fmt.Sprintf("sass%p-%d.cubin", s, n))
		log, err := exec.Command(s.cc.nvcc, s.args(flags, out)...).CombinedOutput()
		b.ptxas = string(log)
		if err != nil {
			b.err = fmt.Errorf("nvcc %s: %v\n%s", key, err, log)
			return
		}
		sass, err := exec.Command(s.cc.objdmp, "-sass", out).Output()
		if err != nil {
			b.err = fmt.Errorf("cuobjdump -sass %s: %v", out, err)
			return
		}
		b.sass = string(sass)
	})
	return b
}
