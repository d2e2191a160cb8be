package gatereport

import (
	"strings"
	"testing"

	"evotune/space"
)

func timing(s space.Shape, p50, lo, hi, p90, p99 float64, mhz, temp int, reasons ...string) space.Timing {
	return space.Timing{Shape: s, P50US: p50, CILowUS: lo, CIHighUS: hi, P90US: p90, P99US: p99,
		SMClockMHz: mhz, TempC: temp, ThrottleReasons: reasons, Throttled: len(reasons) > 0}
}

// TestWrite renders results that stopped at each kind of gate: every gate
// passed is said once, in order, and the one that stopped a result is the
// last line, with its status and reason.
func TestWrite(t *testing.T) {
	small, large := space.Shape{B: 1, H: 8, S: 512, D: 64}, space.Shape{B: 2, H: 8, S: 1024, D: 64}
	env := space.Env{GPU: "NVIDIA L4", Arch: "sm_89", Driver: "580.1", NVCC: "13.0.88", SourceHash: "0123456789abcdef0"}
	ptxas := &space.Ptxas{Registers: 168, SpillStores: 4, SpillLoads: 8, SharedBytes: 32768, StackBytes: 16}
	acc := &space.Accuracy{Cases: 12, MaxAbsErr: 0.00049, MeanAbsErr: 1.5e-05, RelL2: 0.00031}
	const (
		head = "config:      block_m=128\n" +
			"environment: NVIDIA L4 (sm_89), driver 580.1, nvcc 13.0.88, source 0123456789ab\n"
		passed = "constraint:  ok\n" +
			"compile:     ok, 2.3 s\n" +
			"ptxas:       ok, 168 registers, 4 B spill stores, 8 B spill loads, 32768 B static shared, 16 B stack\n"
		correct = "correctness: ok over 12 cases, max abs err 0.00049, mean abs err 1.5e-05, rel L2 0.00031, bad 0%\n"
	)
	cases := []struct {
		name string
		r    space.Result
		want string
	}{
		{"timed", space.Result{Key: "block_m=128", Status: space.StatusOK, Gate: space.GateTimed, Env: env,
			Cost: space.Cost{CompileSec: 2.34}, Ptxas: ptxas, Accuracy: acc, Objective: 170.56,
			Timings: []space.Timing{
				timing(small, 20.3, 20.08, 20.52, 21.19, 22.5, 2040, 61),
				timing(large, 150.26, 149.8, 150.9, 151.5, 160, 1800, 83, "sw_thermal", "hw_slowdown"),
			}},
			head + passed + correct +
				"timed:       1x8x512x64: p50 20.30 µs (95% CI 20.08 – 20.52), p90 21.19, p99 22.50 µs, SM clock 2040 MHz, 61 °C\n" +
				"timed:       2x8x1024x64: p50 150.3 µs (95% CI 149.8 – 150.9), p90 151.5, p99 160.0 µs, SM clock 1800 MHz, 83 °C, throttled: sw_thermal hw_slowdown\n" +
				"objective:   170.6 µs\n"},
		{"fault while timed", space.Result{Key: "block_m=128", Status: space.StatusFault, Gate: space.GateTimed, Env: env,
			Cost: space.Cost{CompileSec: 2.34}, Ptxas: ptxas, Accuracy: acc, Reason: "illegal address"},
			head + passed + correct + "timed:       fault: illegal address\n"},
		{"incorrect", space.Result{Key: "block_m=128", Status: space.StatusIncorrect, Gate: space.GateCorrectness, Env: env,
			Cost: space.Cost{CompileSec: 2.34}, Ptxas: ptxas, Reason: "max abs err 0.5 > 0.01"},
			head + passed + "correctness: incorrect: max abs err 0.5 > 0.01\n"},
		{"ptxas reject", space.Result{Key: "block_m=128", Status: space.StatusPtxasReject, Gate: space.GatePtxas, Env: env,
			Cost: space.Cost{CompileSec: 2.34}, Ptxas: ptxas, Reason: "spill stores 4 B > 0 B"},
			head + "constraint:  ok\ncompile:     ok, 2.3 s\nptxas:       ptxas_reject: spill stores 4 B > 0 B\n"},
		{"constraint, no environment", space.Result{Key: "block_m=128", Status: space.StatusConstraint, Gate: space.GateConstraint,
			Reason: "warps 16 exceed block_m 128"},
			"config:      block_m=128\n" +
				"environment: unknown (unknown), driver unknown, nvcc unknown, source unknown\n" +
				"constraint:  constraint_reject: warps 16 exceed block_m 128\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var b strings.Builder
			Write(&b, tc.r)
			if got := b.String(); got != tc.want {
				t.Errorf("got:\n%s\nwant:\n%s", got, tc.want)
			}
		})
	}
}
