package space

import "time"

// Status classifies how an evaluation ended.
type Status string

const (
	StatusOK           Status = "ok"
	StatusConstraint   Status = "constraint_reject" // refused before any compile
	StatusCompileError Status = "compile_error"
	StatusPtxasReject  Status = "ptxas_reject"
	StatusIncorrect    Status = "incorrect"
	StatusFault        Status = "fault"   // a CUDA error or a crashed worker
	StatusTimeout      Status = "timeout" // compile or GPU request outlived its limit
)

// Gate names the stage at which an evaluation stopped; a config that passed
// everything stops at GateTimed.
type Gate string

const (
	GateConstraint  Gate = "constraint"
	GateCompile     Gate = "compile"
	GatePtxas       Gate = "ptxas"
	GateCorrectness Gate = "correctness"
	GateTimed       Gate = "timed"
)

// Ptxas holds the resource figures that ptxas -v reports for the kernel.
type Ptxas struct {
	Registers   int `json:"registers"`
	SpillStores int `json:"spill_stores"` // bytes
	SpillLoads  int `json:"spill_loads"`  // bytes
	SharedBytes int `json:"shared_bytes"` // static shared memory
	StackBytes  int `json:"stack_bytes"`
}

// Accuracy is the worst case over all correctness cases (shapes, seeds,
// input scales) that a candidate was checked on.
type Accuracy struct {
	MaxAbsErr  float64 `json:"max_abs_err"`
	MeanAbsErr float64 `json:"mean_abs_err"`
	RelL2      float64 `json:"rel_l2"`
	BadFrac    float64 `json:"bad_frac"`
	NaN        int     `json:"nan"`
	Inf        int     `json:"inf"`
	Cases      int     `json:"cases"`
	// fp8 and int8: the worst end-to-end error against fp32 attention on the
	// unquantised inputs over the cases at input scale 1, where it is gated
	// (lowest cosine similarity, highest relative L1).
	E2ECos   float64 `json:"e2e_cos,omitempty"`
	E2ERelL1 float64 `json:"e2e_rel_l1,omitempty"`
}

// Timing is the measurement of one shape. Times are per kernel call, in
// microseconds.
type Timing struct {
	Shape             Shape     `json:"shape"`
	P50US             float64   `json:"p50_us"`
	P90US             float64   `json:"p90_us"`
	P99US             float64   `json:"p99_us"`
	CILowUS           float64   `json:"ci_low_us"`  // 95% confidence interval of the median
	CIHighUS          float64   `json:"ci_high_us"` //
	SamplesUS         []float64 `json:"samples_us,omitempty"`
	LaunchesPerSample int       `json:"launches_per_sample"`
	// Telemetry seen around the measurement.
	SMClockMHz      int      `json:"sm_clock_mhz,omitempty"`
	TempC           int      `json:"temp_c,omitempty"`
	PowerW          float64  `json:"power_w,omitempty"`
	EnergyPerCallUJ float64  `json:"energy_per_call_uj,omitempty"`
	ThrottleReasons []string `json:"throttle_reasons,omitempty"`
	Throttled       bool     `json:"throttled,omitempty"`
	Remeasured      bool     `json:"remeasured,omitempty"`
}

// Cost is the time an evaluation spent in each stage, in seconds.
type Cost struct {
	CompileSec float64 `json:"compile_sec"`
	CheckSec   float64 `json:"check_sec"`
	TimeSec    float64 `json:"time_sec"`
}

// Total is the whole cost of the evaluation.
func (c Cost) Total() float64 { return c.CompileSec + c.CheckSec + c.TimeSec }

// Env is where a result was produced: the provenance that decides whether two
// results may be compared.
type Env struct {
	GPU        string `json:"gpu,omitempty"` // e.g. "NVIDIA L4"
	GPUUUID    string `json:"gpu_uuid,omitempty"`
	ComputeCap string `json:"compute_cap,omitempty"` // e.g. "8.9"
	Driver     string `json:"driver,omitempty"`
	Arch       string `json:"arch,omitempty"` // e.g. "sm_89"
	NVCC       string `json:"nvcc,omitempty"` // nvcc release, e.g. "13.0.88"
	SourceHash string `json:"source_hash,omitempty"`
	Replay     string `json:"replay,omitempty"` // set when answered from a recorded file
}

// A Result records what happened to one config.
type Result struct {
	Seq       int       `json:"seq"` // position in the archive's log, assigned on append
	Key       string    `json:"key"`
	Config    Config    `json:"config"`
	Status    Status    `json:"status"`
	Gate      Gate      `json:"gate"`
	Reason    string    `json:"reason,omitempty"`
	Flags     []string  `json:"flags,omitempty"`
	Ptxas     *Ptxas    `json:"ptxas,omitempty"`
	Accuracy  *Accuracy `json:"accuracy,omitempty"`
	Timings   []Timing  `json:"timings,omitempty"`
	Objective float64   `json:"objective_us,omitempty"` // weighted sum of p50s; ranks OK results, lower is better
	Cost      Cost      `json:"cost"`
	Env       Env       `json:"env"`
	Problem   *Problem  `json:"problem,omitempty"`
	Started   time.Time `json:"started"`
	Finished  time.Time `json:"finished"`
}

// OK reports whether the result passed every gate and was timed.
func (r Result) OK() bool { return r.Status == StatusOK && r.Objective > 0 }
