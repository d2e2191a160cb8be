package runner

import (
	"context"
	"math/rand/v2"
	"path"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"evotune/kernels"
	"evotune/space"
)

// noisy returns n samples around median with relative spread noise.
func noisy(seed uint64, n int, median, noise float64) []float64 {
	r := rand.New(rand.NewPCG(seed, 7))
	out := make([]float64, n)
	for i := range out {
		out[i] = median * (1 + noise*(r.Float64()*2-1))
	}
	return out
}

func TestUTest(t *testing.T) {
	o := DefaultConfirmOptions()
	cases := []struct {
		name                  string
		challenger, incumbent []float64
		faster                bool
	}{
		{"clearly faster", noisy(1, 120, 10, 0.02), noisy(2, 120, 11, 0.02), true},
		{"within noise", noisy(3, 120, 10, 0.05), noisy(4, 120, 10.01, 0.05), false},
		{"the same samples", noisy(5, 120, 10, 0.02), noisy(5, 120, 10, 0.02), false},
		{"slower", noisy(6, 120, 11, 0.02), noisy(7, 120, 10, 0.02), false},
		{"significant but below the threshold, CIs overlapping", noisy(8, 2000, 10, 0.2), noisy(9, 2000, 10.04, 0.2), false},
		{"no samples", nil, noisy(10, 30, 10, 0.02), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := UTest(tc.challenger, tc.incumbent, o)
			if c.Faster != tc.faster {
				t.Errorf("Faster = %v, want %v (%s)", c.Faster, tc.faster, c.Reason)
			}
			if c.Reason == "" {
				t.Error("no reason")
			}
		})
	}
}

// confirmDevice answers time requests with noisy samples whose median
// depends on the config (the cubin's name) and records their order.
type confirmDevice struct {
	median map[string]float64
	mu     sync.Mutex
	order  []string
	seed   uint64
}

func (d *confirmDevice) Do(_ context.Context, req kernels.Request, _ time.Duration) (kernels.Response, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if req.Op != kernels.OpTime || req.Eager || req.Samples != 30 {
		return kernels.Response{Error: "want graph time requests of 30 samples"}, nil
	}
	name := strings.TrimSuffix(path.Base(req.Cubin), ".cubin")
	d.order = append(d.order, name)
	d.seed++
	return kernels.Response{SamplesUS: noisy(d.seed, req.Samples, d.median[name], 0.03), LaunchesPerSample: 10}, nil
}

// blockCompiler names each cubin by its block knob.
type blockCompiler struct{}

func (blockCompiler) Compile(_ context.Context, flags []string) (*Cubin, error) {
	block := ""
	for _, f := range flags {
		if b, ok := strings.CutPrefix(f, "-DBLOCK="); ok {
			block = b
		}
	}
	return &Cubin{Path: "/fake/" + block + ".cubin"}, nil
}

func TestConfirmerInterleavesOnOneGPU(t *testing.T) {
	cases := []struct {
		name       string
		a, b       float64 // medians of the challenger (block 32) and incumbent (block 64)
		faster     bool
		wantReason string
	}{
		{"clearly faster", 10, 11, true, "faster"},
		{"within noise", 10, 10.02, false, "within noise"},
		{"slower", 11, 10, false, "not faster"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dev := &confirmDevice{median: map[string]float64{"32": tc.a, "64": tc.b}}
			p := newConfirmPipeline(t, dev)
			c, err := NewConfirmer(p, ConfirmOptions{})
			if err != nil {
				t.Fatal(err)
			}
			ch := space.Result{Key: "a", Config: space.Config{"block": "32", "mode": "ok"}}
			in := space.Result{Key: "b", Config: space.Config{"block": "64", "mode": "ok"}}
			got, err := c.Confirm(context.Background(), ch, in)
			if err != nil {
				t.Fatal(err)
			}
			if got.Faster != tc.faster || !strings.HasPrefix(got.Reason, tc.wantReason) {
				t.Errorf("Faster %v (%s), want %v (%s...)", got.Faster, got.Reason, tc.faster, tc.wantReason)
			}
			want := []string{"32", "64", "64", "32", "32", "64", "64", "32"}
			if !slices.Equal(dev.order, want) {
				t.Errorf("request order %v, want rounds alternating %v", dev.order, want)
			}
			if got.Samples != 120 {
				t.Errorf("%d samples a side, want 120", got.Samples)
			}
		})
	}
}

func newConfirmPipeline(t *testing.T, dev Device) *Pipeline {
	t.Helper()
	p, err := NewPipeline(PipelineOptions{
		Space: testSpace(), Problem: testProblem(), Compiler: blockCompiler{},
		Target: kernels.Target{Arch: "sm_89", SMs: 58, SharedPerBlock: 101376, RegsPerSM: 65536, MaxThreadsPerSM: 1536},
		GPUs:   []GPU{{Device: dev, NVMLIndex: -1}},
		Family: testFamily(),
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestNewConfirmerRejectsBadOptions(t *testing.T) {
	p := newConfirmPipeline(t, &confirmDevice{})
	for _, o := range []ConfirmOptions{{Alpha: 1.5}, {Alpha: -0.1}, {MinRelDiff: 2}} {
		if _, err := NewConfirmer(p, o); err == nil {
			t.Errorf("NewConfirmer(%+v) accepted", o)
		}
	}
	if _, err := NewConfirmer(nil, ConfirmOptions{}); err == nil {
		t.Error("NewConfirmer(nil) accepted")
	}
}
