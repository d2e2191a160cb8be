package kernels

import "evotune/space"

// The GPU worker speaks JSON lines over stdin/stdout: one Request a line in,
// one Response a line out, strictly in turn. These types are the protocol;
// kernels/worker.cu implements the other side.

// A Launch is one kernel launch of a candidate.
type Launch struct {
	Kernel      string `json:"kernel"` // entry point name in the cubin
	Grid        [3]int `json:"grid"`
	Block       [3]int `json:"block"`
	SharedBytes int    `json:"smem"` // dynamic shared memory
}

// A Plan is everything the worker needs to run a candidate on one shape:
// its launches in order (all take the same SdpaParams) and the size of the
// fp32 workspace (split-kv partials) the worker must provide: the kernel's
// o_part points at its start and lse_part at LSEOffsetBytes into it.
type Plan struct {
	Launches       []Launch `json:"launches"`
	WorkspaceBytes int64    `json:"workspace_bytes"`
	LSEOffsetBytes int64    `json:"lse_offset_bytes"`
}

// Request ops.
const (
	OpInfo  = "info"  // describe the device
	OpCheck = "check" // run once on seeded inputs, compare with the fp32 reference
	OpTime  = "time"  // CUDA-graph timing
	OpQuit  = "quit"
)

// A Request asks the worker for one thing.
type Request struct {
	ID       int64       `json:"id"`
	Op       string      `json:"op"`
	Cubin    string      `json:"cubin,omitempty"` // path of the candidate's cubin
	Plan     Plan        `json:"plan"`
	Shape    space.Shape `json:"shape"`
	Dtype    string      `json:"dtype,omitempty"`     // "fp16", "bf16", "fp8" or "int8"
	OutDtype string      `json:"out_dtype,omitempty"` // fp8's and int8's output, "fp16" (default) or "bf16"
	Causal   bool        `json:"causal,omitempty"`
	// VTransposed (fp8): the kernel reads V as V^T [B, H, D, Sp], Sp the
	// keys rounded up to 16 and the keys beyond S zero (space.Problem).
	VTransposed bool    `json:"v_transposed,omitempty"`
	Scale       float64 `json:"scale,omitempty"` // softmax scale; 0 means 1/sqrt(D)

	// check
	Seed       uint64  `json:"seed,omitempty"`
	InputScale float64 `json:"input_scale,omitempty"` // inputs ~ U(-InputScale, InputScale); 0 means 1
	InputDist  string  `json:"input_dist,omitempty"`  // "uniform" (default) or "normal": N(0, InputScale²)
	Atol       float64 `json:"atol,omitempty"`        // an element is bad when |o-ref| > Atol + Rtol*|ref|
	Rtol       float64 `json:"rtol,omitempty"`

	// time
	Warmup      int     `json:"warmup,omitempty"`        // graph replays before sampling
	Samples     int     `json:"samples,omitempty"`       // at least 30
	MinSampleUS float64 `json:"min_sample_us,omitempty"` // each sample lasts at least this long
	NoRotate    bool    `json:"no_rotate,omitempty"`     // reuse one input set (L2-hot)
	Eager       bool    `json:"eager,omitempty"`         // plain launches between events, no graph: host launch cost included
}

// RequestFor returns a request of op about a candidate of problem p, with
// what every check and timing of p carries: its element types, its mask and
// how V comes. The caller adds the cubin, plan, shape and op's own fields.
func RequestFor(op string, p space.Problem) Request {
	return Request{Op: op, Dtype: p.Dtype, OutDtype: p.OutDtype, Causal: p.Causal, VTransposed: p.VTransposed}
}

// A Response answers one Request. Error is set when the request failed; then
// Sticky says the CUDA context is lost and the worker exits after answering.
type Response struct {
	ID     int64  `json:"id"`
	Error  string `json:"error,omitempty"`
	Sticky bool   `json:"sticky,omitempty"`

	// info
	Device         string `json:"device,omitempty"`
	ComputeCap     string `json:"compute_cap,omitempty"` // "9.0"
	SMs            int    `json:"sms,omitempty"`
	SharedPerBlock int    `json:"smem_per_block_optin,omitempty"`
	L2Bytes        int    `json:"l2_bytes,omitempty"`
	DriverVersion  int    `json:"driver_version,omitempty"`

	// check
	MaxAbsErr  float64 `json:"max_abs_err,omitempty"`
	MeanAbsErr float64 `json:"mean_abs_err,omitempty"`
	RelL2      float64 `json:"rel_l2,omitempty"`
	BadFrac    float64 `json:"bad_frac,omitempty"`
	NaN        int     `json:"nan,omitempty"`
	Inf        int     `json:"inf,omitempty"`
	Repeatable bool    `json:"repeatable,omitempty"` // a second run gave bitwise the same output
	OutStd     float64 `json:"out_std,omitempty"`    // standard deviation of the candidate's output
	RefStd     float64 `json:"ref_std,omitempty"`    // and of the reference
	// fp8 and int8: end-to-end error against fp32 attention on the
	// unquantised inputs, and the dequantisation scales the inputs were
	// quantised with: fp8's one a tensor; for int8, whose scales are one a
	// row of Q and K and one a column of V, the largest of each tensor.
	E2ECos    float64 `json:"e2e_cos,omitempty"`
	E2ERelL1  float64 `json:"e2e_rel_l1,omitempty"`
	E2EMaxAbs float64 `json:"e2e_max_abs,omitempty"`
	QScale    float64 `json:"q_scale,omitempty"`
	KScale    float64 `json:"k_scale,omitempty"`
	VScale    float64 `json:"v_scale,omitempty"`

	// time
	SamplesUS         []float64 `json:"samples_us,omitempty"` // per call
	LaunchesPerSample int       `json:"launches_per_sample,omitempty"`
	InputSets         int       `json:"input_sets,omitempty"` // rotated input sets
}
