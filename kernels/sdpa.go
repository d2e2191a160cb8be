// Package kernels holds the CUDA kernel families evotune tunes, embedded in
// the binary, with what the rest of the tool must know about them: each
// family's knob space and constraints, launch geometry, FLOP and byte
// counts, correctness tolerances, the nvcc command line, and the GPU
// worker's protocol.
package kernels

import (
	"crypto/sha256"
	"embed"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"evotune/space"
)

//go:embed sdpa.cu sdpa_params.h
var sdpaFiles embed.FS

// A Target is what the constraints and the launch plan need to know about
// a GPU. TargetFor gives an architecture's defaults; the runner overrides
// SMs and SharedPerBlock with what the real device reports.
type Target struct {
	Arch            string // nvcc architecture, "sm_89"
	SMs             int    // streaming multiprocessors
	SharedPerBlock  int    // opt-in dynamic shared memory per block, bytes
	RegsPerSM       int    // 32-bit registers per SM
	MaxThreadsPerSM int    // resident threads per SM
}

// DefaultArch is the architecture assumed where none is named and no GPU
// says which: the L4's, the GPU of the mission evotune tunes for.
const DefaultArch = "sm_89"

// TargetFor returns the defaults of a supported architecture, for use when
// no GPU is present (constraint checks, compile-only runs).
func TargetFor(arch string) (Target, error) {
	switch arch {
	case "sm_80": // A100
		return Target{Arch: arch, SMs: 108, SharedPerBlock: 166912, RegsPerSM: 65536, MaxThreadsPerSM: 2048}, nil
	case "sm_86": // RTX 30xx / A40 class
		return Target{Arch: arch, SMs: 82, SharedPerBlock: 101376, RegsPerSM: 65536, MaxThreadsPerSM: 1536}, nil
	case "sm_89": // L4 (58 SMs)
		return Target{Arch: arch, SMs: 58, SharedPerBlock: 101376, RegsPerSM: 65536, MaxThreadsPerSM: 1536}, nil
	case "sm_90": // H100 SXM
		return Target{Arch: arch, SMs: 132, SharedPerBlock: 232448, RegsPerSM: 65536, MaxThreadsPerSM: 2048}, nil
	}
	return Target{}, fmt.Errorf("architecture %q: want one of sm_80, sm_86, sm_89, sm_90", arch)
}

// sdpaGeom is the static geometry a config compiles to; sdpa.cu derives the
// same quantities from the same macros.
type sdpaGeom struct {
	d                        int
	ws                       bool
	producerWarps            int
	stages                   int
	blockM, blockN           int
	warps                    int // consumer warps
	warpsM, warpsN           int
	rowsPerWarp, colsPerWarp int
	qInRegs                  bool
	swizzle                  bool
	minBlocks                int
	split                    int
	persistent               bool
	// oneByte: fp8 or int8 inputs (one-byte tiles), whose knob pvAccum is;
	// pvFP8 is fp8's alone.
	oneByte, pvFP8, pvAccum bool
	// qkAccum: fp8's two-level Q K^T accumulation (the wgmma path always);
	// qkF16: fp8's Q K^T in fp16 on mma.sync.
	qkAccum, qkF16 bool
	// wgmma (fp8 on sm_90): Q K^T as wgmma, not mma.sync. (The kernel's
	// SDPA_WGMMA=2, P V too, is not in the space: kernels/NOTES.md.)
	wgmma bool
}

// esz is the bytes of an input element.
func (g sdpaGeom) esz() int {
	if g.oneByte {
		return 1
	}
	return 2
}

// threads is the CTA size: consumer warps plus, with ws, producer warps.
func (g sdpaGeom) threads() int {
	w := g.warps
	if g.ws {
		w += g.producerWarps
	}
	return 32 * w
}

// knobInt reads an integer knob; a missing or non-integer value is an error
// naming the knob, so a malformed config is refused rather than panicking.
func knobInt(c space.Config, name string) (int, error) {
	v, ok := c[name]
	if !ok {
		return 0, fmt.Errorf("config has no value for knob %s", name)
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, fmt.Errorf("knob %s=%q is not an integer", name, v)
	}
	return n, nil
}

func geomOf(c space.Config, d int) (sdpaGeom, error) {
	g := sdpaGeom{d: d}
	ints := []struct {
		name string
		dst  *int
	}{
		{"producer_warps", &g.producerWarps}, {"stages", &g.stages}, {"block_m", &g.blockM},
		{"block_n", &g.blockN}, {"warps", &g.warps}, {"min_blocks_per_sm", &g.minBlocks},
		{"split_kv", &g.split},
	}
	for _, k := range ints {
		n, err := knobInt(c, k.name)
		if err != nil {
			return g, err
		}
		if n <= 0 {
			return g, fmt.Errorf("knob %s=%d must be positive", k.name, n)
		}
		*k.dst = n
	}
	bools := []struct {
		name string
		dst  *bool
	}{{"ws", &g.ws}, {"persistent", &g.persistent}, {"q_in_regs", &g.qInRegs}}
	for _, k := range bools {
		n, err := knobInt(c, k.name)
		if err != nil {
			return g, err
		}
		*k.dst = n != 0
	}
	// Only the one-byte dtypes declare pv_accum, and only fp8 pv_fp8,
	// qk_accum and qk_f16.
	for _, k := range []struct {
		name string
		dst  *bool
	}{{"pv_accum", &g.pvAccum}, {"pv_fp8", &g.pvFP8}, {"qk_accum", &g.qkAccum}, {"qk_f16", &g.qkF16}} {
		if _, ok := c[k.name]; !ok {
			continue
		}
		n, err := knobInt(c, k.name)
		if err != nil {
			return g, err
		}
		*k.dst = n != 0
	}
	_, g.oneByte = c["pv_accum"]
	switch c["wgmma"] {
	case "", "off":
	case "qk":
		g.wgmma = true
	default:
		return g, fmt.Errorf("knob wgmma=%q: want off or qk", c["wgmma"])
	}
	switch c["kv_layout"] {
	case "pad":
	case "swizzle":
		g.swizzle = true
	default:
		return g, fmt.Errorf("knob kv_layout=%q: want pad or swizzle", c["kv_layout"])
	}
	g.warpsM = min(g.warps, max(g.blockM/16, 1))
	g.warpsN = g.warps / g.warpsM
	g.rowsPerWarp = g.blockM / g.warpsM
	g.colsPerWarp = g.blockN / g.warpsN
	return g, nil
}

// layoutErr reports why a warp layout does not divide evenly, or nil.
func (g sdpaGeom) layoutErr() error {
	switch {
	case g.blockM%16 != 0:
		return fmt.Errorf("block_m=%d is not a multiple of 16", g.blockM)
	case g.warps%g.warpsM != 0:
		return fmt.Errorf("warps=%d do not split into %d row groups", g.warps, g.warpsM)
	case g.blockN%g.warpsN != 0 || g.colsPerWarp%16 != 0:
		return fmt.Errorf("block_n=%d over %d warps gives %d key columns per warp, not a multiple of 16",
			g.blockN, g.warpsN, g.blockN/g.warpsN)
	case g.rowsPerWarp > 64:
		return fmt.Errorf("block_m=%d over %d warps gives %d rows per warp, more than 64", g.blockM, g.warpsM, g.rowsPerWarp)
	case g.oneByte && g.colsPerWarp%32 != 0:
		return fmt.Errorf("block_n=%d over %d warps gives %d key columns per warp; fp8 and int8 read one-byte V 32 keys at a time",
			g.blockN, g.warpsN, g.colsPerWarp)
	case g.oneByte && (g.d/8/g.warpsN)%2 != 0:
		return fmt.Errorf("%d key slices at D=%d: fp8 and int8 keep each pair of O's column tiles in one slice, so at most %d slices",
			g.warpsN, g.d, g.d/16)
	}
	return nil
}

// wgmmaErr reports why a config cannot run wgmma (sdpa.cu's static_asserts
// say the same), or nil. Their key-slice bound (32 to 256 keys) needs no
// check here: one-byte layouts take slices in 32s (layoutErr) and block_n
// is at most 256.
func (g sdpaGeom) wgmmaErr() error {
	if !g.wgmma {
		return nil
	}
	switch {
	case g.warpsM%4 != 0:
		return fmt.Errorf("wgmma takes row groups in fours (a warpgroup), and block_m=%d over %d warps gives %d", g.blockM, g.warps, g.warpsM)
	case !g.swizzle:
		return fmt.Errorf("wgmma reads K in the swizzled layout, not kv_layout=pad")
	case !g.qInRegs:
		return fmt.Errorf("wgmma takes Q from registers (q_in_regs=1)")
	case !g.qkAccum:
		return fmt.Errorf("wgmma=qk always gives each k32 step its own accumulator; keep qk_accum=1 (the same code)")
	}
	return nil
}

// qkF16Err reports why a config cannot run qk_f16 (sdpa.cu's static_assert
// says the same), or nil.
func (g sdpaGeom) qkF16Err() error {
	switch {
	case !g.qkF16:
		return nil
	case g.wgmma:
		return fmt.Errorf("qk_f16 runs Q K^T on mma.sync, which wgmma=qk replaces; keep qk_f16=0 with wgmma")
	case !g.qInRegs:
		return fmt.Errorf("qk_f16 widens Q's fragments once per CTA, so it takes q_in_regs=1")
	}
	return nil
}

// regEstimate is a lower-bound estimate of the 32-bit registers a consumer
// thread keeps live: the O and S accumulators, the Q fragments when held in
// registers, the softmax row state, and a fixed allowance for addresses and
// loop state (40, from ptxas 11.8: the default D=64 config fits 128
// registers only with a few spilled words). ptxas has the final word; this
// only prunes the hopeless.
func (g sdpaGeom) regEstimate() int {
	mt := g.rowsPerWarp / 16
	r := mt*g.d/2 + mt*g.colsPerWarp/2 + 4*mt + 40
	if g.qInRegs {
		qsz := g.esz()
		if g.qkF16 {
			qsz = 2 // Q's fragments widened to fp16
		}
		r += mt * g.d * qsz / 8
	}
	if g.oneByte && g.pvAccum {
		r += mt * g.d / 2 // the tile's fresh P V accumulator
	}
	return r
}

// sharedBytes mirrors kSmemBytes in sdpa.cu. Rows are padded by one
// 16-byte chunk without the swizzle.
func (g sdpaGeom) sharedBytes() int {
	rowBytes := g.d * g.esz()
	if !g.swizzle {
		rowBytes += 16
	}
	q := g.blockM * rowBytes
	ring := g.stages * 2 * g.blockN * rowBytes
	combine := 0
	if g.warpsN > 1 {
		combine = (g.warpsN-1)*g.blockM*g.d*4 + 2*g.warpsN*g.blockM*4
	}
	if g.ws {
		// Producers may already fill the ring for the next tile while
		// consumers combine, so the combine area cannot alias the ring.
		return q + ring + combine
	}
	return max(q+ring, combine)
}

// SharedBytes returns the dynamic shared memory the SDPA kernel uses for
// config c at head dimension d. sdpa.cu computes the same expression as
// SDPA_SMEM_BYTES and traps when launched with less. It returns 0 for a
// config it cannot read.
func SharedBytes(c space.Config, d int) int {
	g, err := geomOf(c, d)
	if err != nil {
		return 0
	}
	return g.sharedBytes()
}

// SDPASpace declares the SDPA family's space for problem p on target t:
// the knobs, the problem's fixed defines, and the named constraints.
func SDPASpace(p space.Problem, t Target) (*space.Space, error) {
	if p.Family != "" && p.Family != sdpaName {
		return nil, fmt.Errorf("problem family %q is not %q", p.Family, sdpaName)
	}
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("sdpa space: %w", err)
	}
	d := p.Shapes[0].D
	if d != 64 && d != 128 {
		return nil, fmt.Errorf("sdpa space: head dimension %d: want 64 or 128", d)
	}
	if t.SMs <= 0 || t.SharedPerBlock <= 0 || t.RegsPerSM <= 0 || t.MaxThreadsPerSM <= 0 {
		return nil, fmt.Errorf("sdpa space: target %+v is incomplete", t)
	}
	flag := func(b bool) string {
		if b {
			return "1"
		}
		return "0"
	}
	s := &space.Space{
		Family: sdpaName,
		Knobs:  sdpaKnobs(),
		Defines: []space.Define{
			{Macro: "SDPA_HEAD_DIM", Value: strconv.Itoa(d)},
			{Macro: "SDPA_BF16", Value: flag(p.Dtype == "bf16")},
			{Macro: "SDPA_CAUSAL", Value: flag(p.Causal)},
		},
		Constraints: sdpaConstraints(d, t),
	}
	if p.Dtype == "fp8" {
		if !FP8Arch(t.Arch) {
			return nil, fmt.Errorf("sdpa space: fp8 needs E4M3 tensor cores (sm_89 or newer), not %s", t.Arch)
		}
		s.Knobs = append(s.Knobs, sdpaFP8Knobs(d, t.Arch)...)
		s.Defines = append(s.Defines,
			space.Define{Macro: "SDPA_FP8", Value: "1"},
			space.Define{Macro: "SDPA_OUT_BF16", Value: flag(p.OutDtype == "bf16")})
		if p.VTransposed {
			// Defined only here, so the builds of V as it is keep their flags.
			s.Defines = append(s.Defines, space.Define{Macro: "SDPA_V_GIVEN", Value: "1"})
		}
	}
	if p.Dtype == "int8" {
		// IMMA (mma.sync s8) is on every architecture the family targets.
		s.Knobs = append(s.Knobs, sdpaInt8Knobs(d)...)
	}
	if p.Dtype == "fp8" && t.Arch == "sm_90" {
		s.Knobs = append(s.Knobs, wgmmaKnob())
	}
	if p.Dtype == "int8" {
		s.Defines = append(s.Defines,
			space.Define{Macro: "SDPA_INT8", Value: "1"},
			space.Define{Macro: "SDPA_OUT_BF16", Value: flag(p.OutDtype == "bf16")})
	}
	if err := s.Validate(); err != nil {
		return nil, fmt.Errorf("sdpa space declaration: %w", err)
	}
	return s, nil
}

// sdpaConstraints returns the named rules, cheapest and most basic first.
func sdpaConstraints(d int, t Target) []space.Constraint {
	geom := func(check func(sdpaGeom) error) func(space.Config) error {
		return func(c space.Config) error {
			g, err := geomOf(c, d)
			if err != nil {
				return err
			}
			return check(g)
		}
	}
	return []space.Constraint{
		{Name: "ws_producers", Check: geom(func(g sdpaGeom) error {
			if !g.ws && g.producerWarps != 1 {
				return fmt.Errorf("producer_warps=%d has no effect without ws=1 (keep 1 to avoid duplicate configs)", g.producerWarps)
			}
			return nil
		})},
		{Name: "ws_stages", Check: geom(func(g sdpaGeom) error {
			if g.ws && g.stages < 2 {
				return fmt.Errorf("ws=1 needs stages >= 2 for producers to run ahead, got %d", g.stages)
			}
			return nil
		})},
		{Name: "threads", Check: geom(func(g sdpaGeom) error {
			if g.threads() > 1024 {
				return fmt.Errorf("%d threads per CTA exceed 1024", g.threads())
			}
			return nil
		})},
		{Name: "warp_layout", Check: geom(sdpaGeom.layoutErr)},
		{Name: "min_blocks", Check: geom(func(g sdpaGeom) error {
			if n := g.threads() * g.minBlocks; n > t.MaxThreadsPerSM {
				return fmt.Errorf("%d threads x min_blocks_per_sm=%d = %d exceed %d threads per SM", g.threads(), g.minBlocks, n, t.MaxThreadsPerSM)
			}
			return nil
		})},
		{Name: "registers", Check: geom(func(g sdpaGeom) error {
			est := g.regEstimate()
			budget := min(255, t.RegsPerSM/(g.threads()*g.minBlocks))
			if est > budget {
				return fmt.Errorf("an estimated %d registers per thread exceed the budget of %d (%d threads, min_blocks_per_sm=%d)",
					est, budget, g.threads(), g.minBlocks)
			}
			return nil
		})},
		{Name: "wgmma", Check: geom(sdpaGeom.wgmmaErr)},
		{Name: "qk_f16", Check: geom(sdpaGeom.qkF16Err)},
		{Name: "shared_memory", Check: geom(func(g sdpaGeom) error {
			if b := g.sharedBytes(); b > t.SharedPerBlock {
				return fmt.Errorf("%d bytes of shared memory exceed the %d bytes a block may have on %s", b, t.SharedPerBlock, t.Arch)
			}
			return nil
		})},
	}
}

// Kernel entry points in the SDPA cubin.
const (
	SDPAForwardKernel = "sdpa_fwd"
	SDPACombineKernel = "sdpa_combine"
)

// combineRowsPerBlock is the rows of O that one sdpa_combine CTA of
// combineThreads merges (one warp per row); sdpa.cu agrees.
const (
	combineThreads      = 128
	combineRowsPerBlock = combineThreads / 32
	maxGridX            = 1<<31 - 1
	maxCombineGrid      = 1 << 20 // sdpa_combine strides over rows beyond this
)

// SDPAPlan returns the launches for config c on shape s: sdpa_fwd, then
// sdpa_combine when split_kv > 1, and the fp32 workspace the split needs.
// SDPAPlanC renders these same rules as C for the launcher that export
// writes; TestSDPAPlanC compiles it and compares the two over many configs
// and shapes, so a change here must be made there too.
func SDPAPlan(c space.Config, s space.Shape, t Target) (Plan, error) {
	if s.B <= 0 || s.H <= 0 || s.S <= 0 {
		return Plan{}, fmt.Errorf("sdpa plan: shape %s must be positive", s)
	}
	g, err := geomOf(c, s.D)
	if err != nil {
		return Plan{}, fmt.Errorf("sdpa plan: %w", err)
	}
	if err := g.layoutErr(); err != nil {
		return Plan{}, fmt.Errorf("sdpa plan: %w", err)
	}
	bh := int64(s.B) * int64(s.H)
	mBlocks := int64(ceilDiv(s.S, g.blockM))
	// The kernel numbers tiles with 32-bit ints, persistent or not. Each
	// factor is bounded before the next product, so none overflows.
	if bh > maxGridX || bh*mBlocks > maxGridX || bh*mBlocks*int64(g.split) > maxGridX {
		return Plan{}, fmt.Errorf("sdpa plan: shape %s has more than %d tiles, more than the grid allows", s, maxGridX)
	}
	tiles := bh * mBlocks * int64(g.split)
	grid := tiles
	if g.persistent {
		if t.SMs <= 0 {
			return Plan{}, fmt.Errorf("sdpa plan: persistent=1 needs the target's SM count")
		}
		grid = min(tiles, int64(t.SMs)*int64(g.minBlocks))
	}
	p := Plan{Launches: []Launch{{
		Kernel:      SDPAForwardKernel,
		Grid:        [3]int{int(grid), 1, 1},
		Block:       [3]int{g.threads(), 1, 1},
		SharedBytes: g.sharedBytes(),
	}}}
	if g.split > 1 {
		rows := bh * int64(s.S)
		p.LSEOffsetBytes = alignUp(int64(g.split)*rows*int64(s.D)*4, 16)
		p.WorkspaceBytes = p.LSEOffsetBytes + int64(g.split)*rows*4
		p.Launches = append(p.Launches, Launch{
			Kernel: SDPACombineKernel,
			Grid:   [3]int{int(min((rows+combineRowsPerBlock-1)/combineRowsPerBlock, maxCombineGrid)), 1, 1},
			Block:  [3]int{combineThreads, 1, 1},
		})
	}
	return p, nil
}

func ceilDiv(a, b int) int     { return (a + b - 1) / b }
func alignUp(n, a int64) int64 { return (n + a - 1) / a * a }

// SDPAFLOPs counts the floating-point operations of one forward call: two
// matrix products of 2·D flops per (query, key) pair that is not masked.
func SDPAFLOPs(s space.Shape, causal bool) float64 {
	n := float64(s.S)
	pairs := n * n
	if causal {
		pairs = n * (n + 1) / 2
	}
	return 4 * float64(s.B) * float64(s.H) * float64(s.D) * pairs
}

// SDPABytes is the minimal HBM traffic of one call: Q, K and V read once
// and O written once, in the input dtype (fp8 and int8: one-byte inputs, a
// two-byte output), and int8's scales read once (a float per row of Q and
// of K, per column of V).
func SDPABytes(s space.Shape, dtype string) float64 {
	bh := float64(s.B) * float64(s.H)
	elems := bh * float64(s.S) * float64(s.D)
	switch dtype {
	case "fp8":
		return (3 + 2) * elems
	case "int8":
		return (3+2)*elems + 4*bh*float64(2*s.S+s.D)
	}
	return 8 * elems // fp16 and bf16: four two-byte tensors
}

// FP8Arch reports whether an architecture has E4M3 tensor cores (sm_89 and
// sm_90 among those evotune targets).
func FP8Arch(arch string) bool { return arch == "sm_89" || arch == "sm_90" }

// FP8MinNVCC is the oldest nvcc that compiles the fp8 family: mma.sync
// m16n8k32 with E4M3 operands needs PTX ISA 8.4.
const FP8MinNVCC = "12.4"

// CheckNVCCFor returns an error when an nvcc release (as "12.4.131") is too
// old for dtype. Only fp8 asks for more than the oldest nvcc evotune
// supports: int8's IMMA mma.sync is in PTX ISA 7.0, which nvcc 11.8 has.
func CheckNVCCFor(dtype, release string) error {
	if dtype != "fp8" {
		return nil
	}
	var maj, mnr int
	if _, err := fmt.Sscanf(release, "%d.%d", &maj, &mnr); err != nil {
		return fmt.Errorf("nvcc release %q: cannot tell whether it builds fp8 (needs %s or newer)", release, FP8MinNVCC)
	}
	if maj < 12 || maj == 12 && mnr < 4 {
		return fmt.Errorf("--dtype fp8 needs nvcc %s or newer (PTX ISA 8.4 for E4M3 mma.sync); this nvcc is %s", FP8MinNVCC, release)
	}
	return nil
}

// A Source is a kernel family's embedded source files and their content
// hash, which goes into every result's provenance and every cache key.
type Source struct {
	Name  string            // the file nvcc compiles
	Files map[string][]byte // every file the compile reads, by name
	Hash  string            // sha256 over names and contents, hex
}

// SDPASource returns the embedded SDPA sources.
func SDPASource() Source {
	files := map[string][]byte{}
	names := []string{"sdpa.cu", "sdpa_params.h"}
	for _, n := range names {
		b, err := sdpaFiles.ReadFile(n)
		if err != nil {
			panic("kernels: embedded file missing: " + n) // go:embed guarantees it
		}
		files[n] = b
	}
	return Source{Name: "sdpa.cu", Files: files, Hash: hashFiles(files)}
}

// With returns a copy of s with the file name holding content (added or
// replaced), hashed as the embedded sources are: a user's kernel file in
// place of the family's, say. Equal files give equal hashes.
func (s Source) With(name string, content []byte) Source {
	files := make(map[string][]byte, len(s.Files)+1)
	for n, b := range s.Files {
		files[n] = b
	}
	files[name] = content
	return Source{Name: s.Name, Files: files, Hash: hashFiles(files)}
}

// hashFiles hashes names and contents with length prefixes, so no two
// different file sets hash alike by concatenation.
func hashFiles(files map[string][]byte) string {
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	h := sha256.New()
	var n8 [8]byte
	for _, n := range names {
		binary.LittleEndian.PutUint64(n8[:], uint64(len(n)))
		h.Write(n8[:])
		h.Write([]byte(n))
		binary.LittleEndian.PutUint64(n8[:], uint64(len(files[n])))
		h.Write(n8[:])
		h.Write(files[n])
	}
	return hex.EncodeToString(h.Sum(nil))
}

// NVCCArgs returns the one nvcc argument list (without the program name)
// that compiles a candidate: the file srcName (a family's Source.Name) of
// the source in srcDir, the rendered -D flags, to outCubin. No -G and no
// -lineinfo: line info embeds the source path, and the same config must
// give the same cubin from any directory.
//
// A config with wgmma (SDPA_WGMMA other than 0) builds for sm_90a, the
// architecture-specific target that has it, where sm_90 is asked for: the
// cubin runs only on sm_90 GPUs, which are what sm_90 means here.
func NVCCArgs(arch string, flags []string, srcDir, srcName, outCubin string) []string {
	arch = CompileArch(arch, flags)
	args := []string{"-cubin", "-arch=" + arch, "-O3", "-std=c++17", "-Xptxas", "-v", "-I" + srcDir}
	args = append(args, flags...)
	return append(args, "-o", outCubin, filepath.Join(srcDir, srcName))
}

// CompileArch returns the nvcc architecture that builds flags for arch:
// sm_90a for sm_90 with wgmma (-DSDPA_WGMMA=1 or 2, or a family whose space
// defines EVOTUNE_SM90A=1), else arch itself.
func CompileArch(arch string, flags []string) string {
	if arch != "sm_90" {
		return arch
	}
	for _, f := range flags {
		if v, ok := strings.CutPrefix(f, "-DSDPA_WGMMA="); ok && v != "0" || f == "-D"+sm90aDefine+"=1" {
			return "sm_90a"
		}
	}
	return arch
}

// A Tolerance is the correctness gate against the fp32 reference. An
// element is bad when |o-ref| > Atol + Rtol·|ref|; a candidate passes when
// the bad fraction is at most BadFrac and the max, mean and relative L2
// errors are within MaxAbs, MeanAbs and RelL2. For fp8 and int8, E2ECos and
// E2ERelL1 bound the end-to-end error against fp32 attention on the unquantised
// inputs (cosine similarity at least E2ECos, relative L1 at most E2ERelL1) at
// input scale 1; zero means not gated.
type Tolerance struct {
	Atol, Rtol, MaxAbs, MeanAbs, RelL2, BadFrac float64
	E2ECos, E2ERelL1                            float64
}

// ToleranceFor returns the gate for a dtype and its output dtype (a
// quantised dtype's fp16 or bf16; "" is the default), at input scale 1.
//
// Why these numbers (fp16): the reference is computed in fp32 from the same
// fp16 inputs, so the kernel's only errors are P rounded to fp16 before P·V
// (relative 2^-11 per element, averaging out over keys) and O rounded to
// fp16 (half an ulp: 2.4e-4 near 0.5). Long rows average many keys and err
// by ~1e-5; the worst rows are short causal rows whose outputs approach 1,
// where the two roundings add to ~5e-4. PyTorch's flash kernel shows
// 1.5e-4..1e-3 max error on such inputs. MaxAbs 2e-3 leaves room for that
// and still catches a single wrong key (a wrong key moves an output by
// ~1/S of a value of size ~0.5, i.e. 1e-3 at S=512, and usually far more).
// bf16 has 3 fewer mantissa bits, so every bound is 8x looser.
//
// fp8 (E4M3 inputs, fp16 or bf16 output). The kernel error is measured
// against the fp32 reference on the same dequantised inputs, so Q K^T is
// exact up to fp32 accumulation and the errors are P's rounding and O's.
// (That holds for mma.sync, which on sm_90 unpacks E4M3 to fp16 and sums in
// fp32. Hopper's E4M3 wgmma, the knob wgmma, adds onto its accumulator with
// fewer bits: chained over D's k32 steps, scores in the hundreds (input
// scale 16) erred by up to 1.56 against this bound's 1.04 in rows where two
// keys nearly tie. The gate was kept and the kernel changed: each step has
// its own accumulator, summed in fp32, and errs 0.38 at most. kernels/NOTES.md,
// "wgmma".)
// With pv_fp8=1, P is rounded to E4M3 (3 mantissa bits): each p is off by
// at most 2^-4 of itself, so an output, a p-weighted mean of V, is off by at
// most 2^-4 max|V| = 0.0625 at input scale 1, plus O's fp16 rounding
// (2^-11): MaxAbs and Atol 0.065 are that bound, not a statistical guess,
// and any element beyond it is a bug. The rounding errors are independent
// with RMS 2^-4/sqrt(3) = 0.036 of each p, so O's RMS error is at most
// 0.036 of its RMS: RelL2 0.05. MeanAbs 0.02 is 0.036 of the mean |O| of
// the shortest rows (S=1: |O| = |V|, mean 0.5) with room. (pv_fp8=0 keeps
// P in fp16 and errs like fp16; the gate is the dtype's, not the knob's.)
// End to end, against the unquantised inputs, the inputs' own E4M3
// rounding dominates: Q, K and V each off by up to 2^-4 relative. Exact
// attention on the dequantised N(0,1) inputs is itself at cosine 0.9987
// and relative L1 0.049 of fp32 at 1x1x512x64 (kernels/NOTES.md, "fp8");
// no E4M3 kernel can do better. E2ECos 0.995 and E2ERelL1 0.10 leave 2x
// that floor for the kernel's own error; the measured figures go into
// every result. fp8's bound already covers a bf16 O's rounding (2^-9).
//
// int8 (INT8 inputs, per-row Q and K and per-column V scales, fp16 or bf16
// output). Against the fp32 reference on the same dequantised inputs, S is
// exact: the int32 dot product is exact and its two scales cost fp32's
// rounding. V's bytes widen to fp16 exactly (integers below 2048) and its
// column scale multiplies O after the sum. So the errors are those of the
// fp16 kernel: P rounded to fp16 before P V, and O rounded to the output
// dtype. The gate is fp16's with fp16 output and bf16's with bf16 output,
// whose rounding of O is 8x coarser; this is why the gate takes the output
// dtype. End to end, the inputs' INT8 rounding dominates: with per-row and
// per-column amax scales each element is off by at most half a step,
// amax/254, and the floor model (go run ./kernels/internal/fp8floor, the row
// "int8 kernel: Q, K row; V INT8 channel; P fp16") puts exact attention on
// the dequantised N(0,1) inputs at relative L1 0.010-0.012 and cosine above
// 0.9999 at the bench shapes. Measured on the H100 (TestDeviceInt8,
// results/2026-11-25-h100-int8): over 36 configs x 1,674 check cases the
// worst end-to-end figures at input scale 1 (U(-1, 1)) are cosine 0.99998
// and relative L1 0.0057, and on N(0,1) at the four bench shapes 0.99992
// and 0.0113-0.0124, the model's floor: the kernel adds nothing measurable.
// E2ECos 0.9995 and E2ERelL1 0.02 are the accuracy a user of quantised
// attention asks for (SageAttention's terms, #13's target) and leave 3.5x
// the worst measured rel L1; a kernel that errs beyond them is a bug.
func ToleranceFor(dtype, outDtype string) Tolerance {
	if dtype == "fp8" {
		return Tolerance{Atol: 0.065, Rtol: 0, MaxAbs: 0.065, MeanAbs: 0.02, RelL2: 0.05, BadFrac: 1e-4,
			E2ECos: 0.995, E2ERelL1: 0.10}
	}
	t := Tolerance{Atol: 1e-3, Rtol: 1e-2, MaxAbs: 2e-3, MeanAbs: 1e-4, RelL2: 4e-3, BadFrac: 1e-4}
	if dtype == "int8" {
		t.E2ECos, t.E2ERelL1 = 0.9995, 0.02
	}
	if dtype == "bf16" || dtype == "int8" && outDtype == "bf16" {
		t.Atol *= 8
		t.Rtol *= 8
		t.MaxAbs *= 8
		t.MeanAbs *= 8
		t.RelL2 *= 8
	}
	return t
}
