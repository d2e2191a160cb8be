package kernels

import (
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func readGz(t *testing.T, path string) []byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(z)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestQKFragmentsClobbered runs the SASS check on builds whose results on
// the H100 are known (testdata/sass): the two wrong ones must be flagged,
// with the instruction that overwrites Q's fragments inside the key loop,
// and the right one must not.
func TestQKFragmentsClobbered(t *testing.T) {
	for _, c := range []struct {
		file string
		lost bool
	}{
		{"qk-lost-d128-bn128.sass.gz", true},
		{"qk-lost-ws.sass.gz", true},
		{"qk-kept-d128-bn64.sass.gz", false},
	} {
		sass := readGz(t, filepath.Join("testdata", "sass", c.file))
		if n := len(parseSASS(sass)); n < 1000 {
			t.Fatalf("%s: parsed %d instructions; the parser misses the format", c.file, n)
		}
		bad := qkFragmentsClobbered(sass)
		switch {
		case c.lost && len(bad) == 0:
			t.Errorf("%s: Q's fragments are overwritten in the key loop (wrong on the H100), and the check saw nothing", c.file)
		case !c.lost && len(bad) > 0:
			t.Errorf("%s: right on the H100, yet flagged: %s", c.file, bad[0])
		case c.lost && !strings.Contains(bad[0], "QGMMA"):
			t.Errorf("%s: the finding does not name the QGMMA whose A is lost: %s", c.file, bad[0])
		}
		if len(bad) > 0 {
			t.Logf("%s: %d writes, first: %s", c.file, len(bad), bad[0])
		}
	}
}

// TestParseSASS pins the parser on hand-written lines: predicates, .reuse,
// wide destinations, functions apart, and a branch in another function that
// must not be taken for a loop.
func TestParseSASS(t *testing.T) {
	sass := []byte(`
		Function : other
        /*0000*/                   MOV R4, R5 ;
        /*0010*/              @!P0 BRA 0x0 ;
		Function : sdpa_fwd
        /*0000*/                   LDSM.16.M88.4 R8, [R2] ;
        /*0010*/                   WARPGROUP.ARRIVE ;
        /*0020*/                   QGMMA.64x64x32.F32.E4M3.E4M3 R24, R8, gdesc[UR4], RZ, !UPT, gsb0 ;
        /*0030*/                   FFMA R12, R9.reuse, R3, R2 ;
        /*0040*/                   IMAD.WIDE R6, R3, 0x4, R4 ;
        /*0048*/                   F2FP.F16.F32.PACK_AB R11, R3, R2 ;
        /*0050*/              @P1 BRA 0x10 ;
        /*0060*/                   FADD R8, R8, R9 ;
        /*0070*/                   EXIT ;
`)
	in := parseSASS(sass)
	if len(in) != 11 || in[0].fn != 1 || in[2].fn != 2 || in[4].op != "QGMMA.64x64x32.F32.E4M3.E4M3" || in[4].args[1] != "R8" {
		t.Fatalf("parsed %+v", in)
	}
	if d := sassDest(in[2]); len(d) != 4 || d[0] != 8 {
		t.Errorf("LDSM x4 writes %v, want R8-R11", d)
	}
	if d := sassDest(in[6]); len(d) != 2 || d[0] != 6 {
		t.Errorf("IMAD.WIDE writes %v, want R6-R7", d)
	}
	bad := qkFragmentsClobbered(sass)
	// The loop is 0x10-0x50 of sdpa_fwd: F2FP's R11 is in the QGMMA's A
	// (R8-R11); FFMA's R12 and IMAD.WIDE's R6-R7 are not; FADD R8 is after
	// the loop, and the other function's branch is no loop of this one.
	if len(bad) != 1 || !strings.Contains(bad[0], "F2FP") || !strings.Contains(bad[0], "R11") {
		t.Errorf("findings %q, want the one F2FP write of R11", bad)
	}
}
