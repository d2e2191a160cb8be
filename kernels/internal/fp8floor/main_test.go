package main

import (
	"bytes"
	"strconv"
	"strings"
	"testing"
)

// smallArgs keep the run to a fraction of a second: shapes of 128 keys,
// 2 heads of 32 query rows.
var smallArgs = []string{"--shapes", "1x2x128x64,1x2x128x32:causal", "--stress-shape", "1x4x128x64", "--heads", "2", "--rows", "32"}

func runFloor(t *testing.T, args []string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if err := run(args, &stdout, &stderr); err != nil {
		t.Fatalf("run %v: %v (stderr %q)", args, err, stderr.String())
	}
	return stdout.String()
}

// cells returns the table row of scheme name: cos, rel L1 and max abs for
// each column, in the first table when first, else in the second.
func cells(t *testing.T, out, name string, first bool) [][3]float64 {
	t.Helper()
	tables := strings.SplitN(out, "Stress cases", 2)
	table := tables[1]
	if first {
		table = tables[0]
	}
	for _, line := range strings.Split(table, "\n") {
		fields := strings.Split(line, "|")
		if len(fields) < 3 || strings.TrimSpace(fields[1]) != name {
			continue
		}
		var row [][3]float64
		for _, cell := range fields[2 : len(fields)-1] {
			var v [3]float64
			parts := strings.Split(cell, "/")
			if len(parts) != 3 {
				t.Fatalf("cell %q of %q: want cos / rel L1 / max abs", cell, name)
			}
			for i, p := range parts {
				f, err := strconv.ParseFloat(strings.TrimSpace(p), 64)
				if err != nil {
					t.Fatalf("cell %q of %q: %v", cell, name, err)
				}
				v[i] = f
			}
			row = append(row, v)
		}
		return row
	}
	t.Fatalf("no row %q in\n%s", name, table)
	return nil
}

func TestFloorTable(t *testing.T) {
	out := runFloor(t, smallArgs)
	if again := runFloor(t, smallArgs); again != out {
		t.Fatalf("two runs with the same flags differ:\n%s\n---\n%s", out, again)
	}
	if n := strings.Count(out, "\n| ") - 2; n != 2*len(schemes()) { // less the two headers
		t.Errorf("%d scheme rows, want %d in each of two tables", n, len(schemes()))
	}
	if strings.Contains(out, "non-finite") {
		t.Errorf("a scheme gave NaN or infinite outputs:\n%s", out)
	}
	// What the model must show whatever the seed: fp16 inputs are far
	// closer than E4M3's, each E4M3 operand alone costs 2-4% relative L1,
	// and INT8 Q and K with fp16 V beat the kernel's per-tensor E4M3.
	fp16 := cells(t, out, "fp16 Q, K, V; P fp16 (the fp16 kernel)", true)
	kernel := cells(t, out, "kernel: Q, K, V E4M3 tensor; P fp16 (pv_fp8=0)", true)
	int8 := cells(t, out, "INT8 Q, K b64; V fp16", true)
	for col := range kernel {
		if fp16[col][1] > 0.002 || kernel[col][1] < 0.03 || kernel[col][1] > 0.07 || int8[col][1] >= kernel[col][1] {
			t.Errorf("column %d: rel L1 fp16 %g, kernel %g, INT8 %g: want fp16 <= 0.002 < INT8 < kernel in [0.03, 0.07]",
				col, fp16[col][1], kernel[col][1], int8[col][1])
		}
	}
	for _, name := range []string{"Q alone E4M3 tensor", "K alone E4M3 tensor", "V alone E4M3 tensor"} {
		if c := cells(t, out, name, true)[0]; c[1] < 0.02 || c[1] > 0.04 {
			t.Errorf("%s: rel L1 %g, want 0.02-0.04 (E4M3's 2^-4 relative rounding)", name, c[1])
		}
	}
	// Smoothing removes K's channel offsets, which per-tensor E4M3 pays for.
	offsets := cells(t, out, "kernel: Q, K, V E4M3 tensor; P fp16 (pv_fp8=0)", false)[2]
	smooth := cells(t, out, "E4M3 tensor, K smoothed", false)[2]
	if smooth[1] >= offsets[1] {
		t.Errorf("K channel offsets: smoothing gives rel L1 %g, not below the kernel's %g", smooth[1], offsets[1])
	}
	// A head 10^5 times louder pushes the others' values under E4M3's
	// subnormals with one per-tensor scale; per-block scales do not see it.
	loud := cells(t, out, "kernel: Q, K, V E4M3 tensor; P fp16 (pv_fp8=0)", false)[4]
	blocks := cells(t, out, "E4M3 Q, K b64; V b64 keys", false)[4]
	if loud[1] < 0.3 || blocks[1] > 0.07 {
		t.Errorf("another head x10^5: rel L1 %g per tensor, %g per block of 64; want per tensor broken (>= 0.3), per block at the N(0,1) floor (<= 0.07)", loud[1], blocks[1])
	}
}

func TestFloorFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--shapes", "1x2x128"}, "--shapes"},
		{[]string{"--shapes", "1x2x128x64:masked"}, "only suffix is :causal"},
		{[]string{"--stress-shape", "big"}, "--stress-shape"},
		{[]string{"--rows", "0"}, "--rows"},
	} {
		var stdout, stderr bytes.Buffer
		err := run(c.args, &stdout, &stderr)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("run %v: error %v, want one naming %q", c.args, err, c.want)
		}
	}
}
