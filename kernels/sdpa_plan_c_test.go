package kernels

import (
	"bufio"
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"evotune/internal/testtool"
	"evotune/space"
)

// planCShapes are the shapes the C plans are compared on: the bench shapes,
// odd ones, a single row, the largest grids, and shapes the plan refuses.
var planCShapes = [][3]int{
	{1, 8, 512}, {2, 8, 512}, {4, 16, 2048}, {8, 16, 4096}, {3, 5, 77}, {1, 1, 1}, {7, 3, 1000},
	{1, 1, 65}, {5, 7, 129}, {16, 32, 8192}, {1, 1, 2147483647}, {65536, 65536, 1024}, {2147483647, 2147483647, 2147483647},
	{46341, 46341, 1}, {1, 32768, 65536}, {0, 8, 512}, {1, -1, 512}, {1, 8, 0},
}

// TestSDPAPlanC compiles the C that SDPAPlanC renders for a sample of every
// space's valid configs (D=64 and 128, fp16, fp8 and int8) and compares what it
// computes with SDPAPlan on many shapes and SM counts: the launcher that
// export writes and the worker's plans cannot drift apart.
func TestSDPAPlanC(t *testing.T) {
	cc := lookCC(t)
	rng := rand.New(rand.NewPCG(14, 1))
	for _, tc := range []struct {
		d     int
		dtype string
		arch  string
	}{{64, "fp16", "sm_90"}, {128, "fp16", "sm_80"}, {64, "fp8", "sm_89"}, {128, "fp8", "sm_90"}, {64, "int8", "sm_80"}} {
		t.Run(fmt.Sprintf("d%d-%s-%s", tc.d, tc.dtype, tc.arch), func(t *testing.T) {
			s, _ := mustSpace(t, tc.d, tc.dtype, false, tc.arch)
			all := s.ValidConfigs()
			configs := []space.Config{defaultConfig(s)}
			for range 40 {
				configs = append(configs, all[rng.IntN(len(all))])
			}
			// Every persistent and split value is among them.
			configs = append(configs, with(defaultConfig(s), "persistent", "1", "min_blocks_per_sm", "2"),
				with(defaultConfig(s), "split_kv", "4"), with(defaultConfig(s), "persistent", "1", "split_kv", "2"))
			comparePlanLines(t, runPlanC(t, cc, configs, tc.d), configs, tc.d, goPlanLine)
		})
	}
}

// goPlanLine is what the C program prints for one case, from SDPAPlan.
func goPlanLine(ci int, c space.Config, s space.Shape, sms, compiledD int) string {
	return planLine(ci, s, sms, compiledD, func() (Plan, error) { return SDPAPlan(c, s, Target{SMs: sms}) }, func(p Plan) string {
		f := p.Launches[0]
		line := fmt.Sprintf(" grid %d threads %d smem %d", f.Grid[0], f.Block[0], f.SharedBytes)
		if f.Grid[1] != 1 || f.Grid[2] != 1 || f.Block[1] != 1 || f.Block[2] != 1 {
			line += " (a grid or block of more than one dimension)"
		}
		split, _ := knobInt(c, "split_kv")
		cgrid, cthreads := 0, 0
		if len(p.Launches) > 1 {
			cgrid, cthreads = p.Launches[1].Grid[0], p.Launches[1].Block[0]
		}
		return fmt.Sprintf("%s split %d combine %d x %d workspace %d lse %d", line, split, cgrid, cthreads, p.WorkspaceBytes, p.LSEOffsetBytes)
	})
}

// planLine is what a rendered plan program prints for one case: the case,
// the status code the family's C plan returns where plan fails as it
// would, and for status 0 fields(the plan).
func planLine(ci int, s space.Shape, sms, compiledD int, plan func() (Plan, error), fields func(Plan) string) string {
	prefix := fmt.Sprintf("%d %d %d %d %d %d", ci, s.B, s.H, s.S, s.D, sms)
	if s.B <= 0 || s.H <= 0 || s.S <= 0 {
		return fmt.Sprintf("%s rc %d", prefix, PlanCBadShape)
	}
	if s.D != compiledD {
		return fmt.Sprintf("%s rc %d", prefix, PlanCBadHeadDim)
	}
	p, err := plan()
	switch {
	case err != nil && (strings.Contains(err.Error(), "tiles") || strings.Contains(err.Error(), "grid numbers")):
		return fmt.Sprintf("%s rc %d", prefix, PlanCTooManyTiles)
	case err != nil && strings.Contains(err.Error(), "SM count"):
		return fmt.Sprintf("%s rc %d", prefix, PlanCNoSMs)
	case err != nil:
		return fmt.Sprintf("%s error %v", prefix, err)
	}
	return prefix + " rc 0" + fields(p)
}

// comparePlanLines checks a rendered plan program's lines against line (Go)
// for every config, shape of planCShapes, SM count and head dimension (the
// compiled one, then a wrong one), in the program's order.
func comparePlanLines(t *testing.T, got []string, configs []space.Config, d int, line func(ci int, c space.Config, s space.Shape, sms, compiledD int) string) {
	t.Helper()
	i := 0
	for ci, c := range configs {
		for _, sh := range planCShapes {
			for _, sms := range []int{132, 58, 0} {
				for _, dd := range []int{d, 192 - d} {
					want := line(ci, c, space.Shape{B: sh[0], H: sh[1], S: sh[2], D: dd}, sms, d)
					if i >= len(got) {
						t.Fatalf("D=%d: the C program printed %d lines, want more", d, len(got))
					}
					if got[i] != want {
						t.Errorf("config %s, shape %v D=%d, %d SMs:\n   C: %s\n  Go: %s", c.Key(), sh, dd, sms, got[i], want)
					}
					i++
				}
			}
		}
	}
	if i != len(got) {
		t.Errorf("D=%d: the C program printed %d lines, want %d", d, len(got), i)
	}
}

// lookCC returns the C compiler the plan programs are built with; CI has one.
func lookCC(t *testing.T) string {
	t.Helper()
	return testtool.LookPath(t, "cc", "the rendered plan cannot be compiled here", "has one (nvcc needs it)")
}

// runPlanC renders configs' plans, compiles them into a program that prints
// one line per case in goPlanLine's order, runs it and returns its lines.
func runPlanC(t *testing.T, cc string, configs []space.Config, d int) []string {
	t.Helper()
	src, err := SDPAPlanC("tp", configs, d)
	if err != nil {
		t.Fatalf("SDPAPlanC: %v", err)
	}
	return runRenderedPlanC(t, cc, src, len(configs), d,
		" grid %lld threads %d smem %d split %d combine %lld x %d workspace %lld lse %lld",
		"p.grid, p.threads, p.smem_bytes, p.split_kv, p.combine_grid, p.combine_threads, p.workspace_bytes, p.lse_offset_bytes")
}

// runRenderedPlanC compiles src, a family's plans of n configs rendered
// under the prefix tp, into a program that prints, for every case, the
// status and (when 0) the plan's fields as format and args (C) say, runs
// it and returns its lines.
func runRenderedPlanC(t *testing.T, cc, src string, n, d int, format, args string) []string {
	t.Helper()
	var b strings.Builder
	b.WriteString("#include <stdio.h>\n\n")
	b.WriteString(src)
	b.WriteString("\ntypedef int (*plan_fn)(int, int, int, int, int, struct tp_plan*);\nstatic const plan_fn fns[] = {")
	for i := range n {
		fmt.Fprintf(&b, "tp_plan_%d, ", i)
	}
	b.WriteString("};\nstatic const int shapes[][3] = {")
	for _, s := range planCShapes {
		fmt.Fprintf(&b, "{%d, %d, %d}, ", s[0], s[1], s[2])
	}
	fmt.Fprintf(&b, `};
int main(void) {
    const int sms[] = {132, 58, 0};
    const int ds[] = {%d, %d};
    unsigned ci, si, mi, di;
    for (ci = 0; ci < sizeof fns / sizeof fns[0]; ci++)
        for (si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
            for (mi = 0; mi < 3; mi++)
                for (di = 0; di < 2; di++) {
                    struct tp_plan p;
                    const int *s = shapes[si];
                    int rc = fns[ci](s[0], s[1], s[2], ds[di], sms[mi], &p);
                    printf("%%u %%d %%d %%d %%d %%d rc %%d", ci, s[0], s[1], s[2], ds[di], sms[mi], rc);
                    if (rc == 0)
                        printf("%s", %s);
                    printf("\n");
                }
    return 0;
}
`, d, 192-d, format, args)
	dir := t.TempDir()
	file := filepath.Join(dir, "plan.c")
	if err := os.WriteFile(file, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "plan")
	cmd := exec.Command(cc, "-std=c99", "-O1", "-Wall", "-Wextra", "-Werror", "-fsanitize=undefined", "-fno-sanitize-recover=all", "-o", bin, file)
	if out, err := cmd.CombinedOutput(); err != nil {
		// Not every C compiler has the sanitizer: try without.
		cmd = exec.Command(cc, "-std=c99", "-O1", "-Wall", "-Wextra", "-Werror", "-o", bin, file)
		if out2, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s\n(with -fsanitize=undefined: %s)", strings.Join(cmd.Args, " "), err, out2, out)
		}
	}
	out, err := exec.Command(bin).Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			t.Fatalf("running the plan program: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("running the plan program: %v", err)
	}
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	return lines
}

func TestSDPAPlanCRefuses(t *testing.T) {
	s, _ := mustSpace(t, 64, "fp16", false, "sm_90")
	if _, err := SDPAPlanC("not an identifier", []space.Config{defaultConfig(s)}, 64); err == nil {
		t.Error("SDPAPlanC accepted a prefix that is not a C identifier")
	}
	if _, err := SDPAPlanC("p", []space.Config{with(defaultConfig(s), "block_m", "16", "warps", "8")}, 64); err == nil {
		t.Error("SDPAPlanC rendered a warp layout that does not divide")
	}
}
