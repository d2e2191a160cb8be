package runner

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"evotune/kernels"
	"evotune/space"
)

// TestDeviceHopper checks the sdpa-hopper family on an sm_90 GPU as the
// pipeline would: a sample of configs covering every knob value at D=64,
// D=64 causal with bf16 output and D=128, and V given transposed at D=64 and
// at D=128 causal, each compiled for sm_90a, refused
// at the ptxas gate when it spills (as a tune refuses it: no GPU time), and
// the rest through every fp8 check case (input scales 1, 4 and 16; S = 1,
// 77, 500, 512, 4096 and the problem's; three seeds and softmax scales),
// judged by the family's gate. It fails for every config that fails a case,
// and reports every knob value that no config of a variant got past ptxas
// (a value that only spills on this nvcc). It writes hopper.json and
// hopper.txt to the evidence directory. The sample is devHopperSample's;
// EVOTUNE_SWEEP_N sets its D=64 size (default 40; the other variants get a
// quarter).
func TestDeviceHopper(t *testing.T) {
	devRequireHeavy(t)
	e := devSetup(t)
	if e.arch != "sm_90" {
		t.Skipf("sdpa-hopper builds for sm_90a only; this GPU is %s", e.arch)
	}
	fam, err := kernels.FamilyOf("sdpa-hopper")
	if err != nil {
		t.Fatal(err)
	}
	if err := fam.CheckNVCC("fp8", e.nvcc.Version); err != nil {
		t.Skip(err)
	}
	gate := DefaultGateLimits(e.target.SharedPerBlock)
	n := devSweepN()
	variants := []devOneByteVariant{
		{"d64", "1x8x512x64", "fp16", false, n, false},
		{"d64-causal-bf16out", "1x4x300x64", "bf16", true, max(n/4, 1), false},
		{"d128", "1x3x77x128", "fp16", false, max(n/4, 1), false},
		// V given transposed: the worker lays out V^T as a caller would.
		{"d64-vt", "1x8x512x64", "fp16", false, max(n/2, 1), true},
		{"d128-causal-vt", "1x3x77x128", "fp16", true, max(n/2, 1), true},
	}
	records := e.devSweep(t, e.poolFor(t, fam.Source()), fam, "fp8", variants, devHopperSample, &gate)

	var tab bytes.Buffer
	tw := tabwriter.NewWriter(&tab, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "variant\tconfigs\tptxas refused\tchecked\tfailed\tcases\tworst max abs/scale\tworst rel L2\tworst e2e cos\tworst e2e rel L1\tNaN+Inf\tvalues never past ptxas")
	for _, v := range variants {
		var cfgs, refused, checked, bad, cases, naninf int
		worstMax, worstRel, worstCos, worstL1 := 0.0, 0.0, 1.0, 0.0
		seen, reached := map[string]bool{}, map[string]bool{}
		for _, r := range records {
			if r.Variant != v.name {
				continue
			}
			cfgs++
			for k, val := range r.Config {
				seen[k+"="+val] = true
			}
			if r.Ptxas != "" {
				refused++
				continue
			}
			if !r.Pass {
				bad++
				t.Errorf("%s %s: %s: %s", v.name, r.Key, r.FirstFail, r.Why)
			}
			if r.Compile == "" {
				checked++
				for k, val := range r.Config {
					reached[k+"="+val] = true
				}
			}
			cases += r.Cases
			naninf += r.NaNInf
			worstMax, worstRel = math.Max(worstMax, r.WorstMax), math.Max(worstRel, r.WorstRel)
			if r.Cases > 0 {
				worstCos, worstL1 = math.Min(worstCos, r.WorstCos), math.Max(worstL1, r.WorstL1)
			}
		}
		var never []string
		for kv := range seen {
			if !reached[kv] {
				never = append(never, kv)
			}
		}
		sort.Strings(never)
		if naninf > 0 {
			t.Errorf("%s: %d NaN or Inf outputs", v.name, naninf)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%.3g\t%.3g\t%.5f\t%.4f\t%d\t%s\n", v.name, cfgs, refused, checked, bad, cases,
			worstMax, worstRel, worstCos, worstL1, naninf, strings.Join(never, " "))
	}
	tw.Flush()
	t.Logf("sdpa-hopper on %s, nvcc %s:\n%s", e.info.Device, e.nvcc.Version, tab.String())
	dir := devEvidenceDir(t)
	b, err := json.MarshalIndent(records, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	head := fmt.Sprintf("sdpa-hopper sweep on %s (compute %s, driver %d), nvcc %s, %s\n\n", e.info.Device, e.info.ComputeCap,
		e.info.DriverVersion, e.nvcc.Version, time.Now().UTC().Format(time.RFC3339))
	for name, data := range map[string][]byte{"hopper.json": b, "hopper.txt": []byte(head + tab.String())} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// devHopperSample is the default, the default with each knob value in turn
// (where that is a valid config: most of these pass ptxas, so every value
// reaches the GPU unless it only ever spills), then devCoverSelect's
// configs covering every value, up to n in all beyond the one-knob ones.
func devHopperSample(sp *space.Space, n int) []space.Config {
	var out []space.Config
	seen := map[string]bool{}
	add := func(c space.Config) {
		if k := c.Key(); !seen[k] && sp.Check(c) == nil {
			seen[k] = true
			out = append(out, c)
		}
	}
	add(sp.Default())
	for _, k := range sp.Knobs {
		for _, v := range k.Values {
			c := sp.Default()
			c[k.Name] = v
			add(c)
		}
	}
	for _, c := range devCoverSelect(sp.ValidConfigs(), n, 1) {
		add(c)
	}
	return out
}
