package runner

import (
	"bufio"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"evotune/space"
)

// A PtxasFunction is what ptxas -v reports for one function of a cubin.
type PtxasFunction struct {
	Name  string // as ptxas prints it: "sdpa_fwd" or a mangled "_Z8sdpa_fwd..."
	Arch  string // "sm_89"; empty for functions that are not entry points
	Entry bool   // a kernel (__global__), as opposed to a non-inlined device function
	space.Ptxas
	Barriers int // named barriers; printed by newer nvcc releases only
}

// A PtxasReport is the parsed -Xptxas -v output of one compile: every
// function, in the order ptxas printed them.
type PtxasReport struct {
	Functions []PtxasFunction
}

// The lines of ptxas -v output that carry figures. Releases differ in what
// they put between the figures ("used N barriers" since CUDA 12, a "Compile
// time" line in recent releases), so each figure is matched on its own.
var (
	ptxasEntryRE = regexp.MustCompile(`Compiling entry function '([^']+)' for '([^']+)'`)
	ptxasPropsRE = regexp.MustCompile(`Function properties for (\S+)`)
	ptxasFrameRE = regexp.MustCompile(`(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads`)
	ptxasUsedRE  = regexp.MustCompile(`Used (\d+) registers`)
	ptxasBarRE   = regexp.MustCompile(`used (\d+) barriers`)
	ptxasSmemRE  = regexp.MustCompile(`(\d+) bytes smem`)
)

// ParsePtxas reads the output of nvcc -Xptxas -v (nvcc's stderr, which may
// hold other lines too). It fails only when the text names no function.
func ParsePtxas(text string) (PtxasReport, error) {
	var rep PtxasReport
	index := map[string]int{} // function name → position in rep.Functions
	get := func(name string) *PtxasFunction {
		i, ok := index[name]
		if !ok {
			i = len(rep.Functions)
			index[name] = i
			rep.Functions = append(rep.Functions, PtxasFunction{Name: name})
		}
		return &rep.Functions[i]
	}
	// cur is the function the next figures belong to: "Function properties"
	// names it for the stack line, "Compiling entry function" for the
	// "Used" line that follows.
	var cur, entry *PtxasFunction
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if m := ptxasEntryRE.FindStringSubmatch(line); m != nil {
			f := get(m[1])
			f.Entry, f.Arch = true, m[2]
			cur, entry = f, f
			continue
		}
		if m := ptxasPropsRE.FindStringSubmatch(line); m != nil {
			cur = get(m[1])
			continue
		}
		if m := ptxasFrameRE.FindStringSubmatch(line); m != nil && cur != nil {
			cur.StackBytes, cur.SpillStores, cur.SpillLoads = atoi(m[1]), atoi(m[2]), atoi(m[3])
			continue
		}
		if m := ptxasUsedRE.FindStringSubmatch(line); m != nil && entry != nil {
			entry.Registers = atoi(m[1])
			if b := ptxasBarRE.FindStringSubmatch(line); b != nil {
				entry.Barriers = atoi(b[1])
			}
			if s := ptxasSmemRE.FindStringSubmatch(line); s != nil {
				entry.SharedBytes = atoi(s[1])
			}
		}
	}
	if err := sc.Err(); err != nil {
		return rep, fmt.Errorf("reading ptxas output: %w", err)
	}
	if len(rep.Functions) == 0 {
		return rep, fmt.Errorf("ptxas output names no function (was -Xptxas -v passed?)")
	}
	return rep, nil
}

// atoi converts a run of digits that a regexp has already matched.
func atoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0 // only on overflow, which no ptxas figure reaches
	}
	return n
}

// Kernel returns the figures of the entry function called name, whether
// ptxas printed it plain (extern "C") or mangled (_Z<len><name>...).
func (r PtxasReport) Kernel(name string) (PtxasFunction, bool) {
	for _, f := range r.Functions {
		if f.Entry && (f.Name == name || mangledBase(f.Name) == name) {
			return f, true
		}
	}
	return PtxasFunction{}, false
}

// mangledBase returns the unqualified function name inside an Itanium
// mangled name ("_Z8sdpa_fwdPKf" → "sdpa_fwd"), or "" for any other name.
func mangledBase(sym string) string {
	rest, ok := strings.CutPrefix(sym, "_Z")
	if !ok {
		return ""
	}
	i := 0
	for i < len(rest) && rest[i] >= '0' && rest[i] <= '9' {
		i++
	}
	n, err := strconv.Atoi(rest[:i])
	if err != nil || i+n > len(rest) {
		return ""
	}
	return rest[i : i+n]
}

// Worst returns, figure by figure, the largest value over the entry
// functions: a candidate is only as good as its worst kernel.
func (r PtxasReport) Worst() space.Ptxas {
	var w space.Ptxas
	for _, f := range r.Functions {
		if !f.Entry {
			continue
		}
		w.Registers = max(w.Registers, f.Registers)
		w.SpillStores = max(w.SpillStores, f.SpillStores)
		w.SpillLoads = max(w.SpillLoads, f.SpillLoads)
		w.SharedBytes = max(w.SharedBytes, f.SharedBytes)
		w.StackBytes = max(w.StackBytes, f.StackBytes)
	}
	return w
}

// GateLimits are the ptxas figures a candidate may not exceed. A negative
// limit is not checked.
type GateLimits struct {
	// MaxRegisters per thread. 255 is the hardware limit; a lower figure
	// is a budget (registers × threads per block must also fit the SM,
	// which the pipeline checks against each launch).
	MaxRegisters int
	// MaxSpillBytes bounds spill stores and spill loads each; 0 refuses
	// any spill, which is what a tuned kernel should have.
	MaxSpillBytes int
	// MaxStackBytes bounds the stack frame.
	MaxStackBytes int
	// MaxSharedBytes bounds static shared memory per block (the device's
	// opt-in per-block limit).
	MaxSharedBytes int
}

// DefaultGateLimits returns the limits for a device whose per-block shared
// memory limit is sharedPerBlock: at most 255 registers, no spills, any
// stack frame.
func DefaultGateLimits(sharedPerBlock int) GateLimits {
	return GateLimits{MaxRegisters: 255, MaxSpillBytes: 0, MaxStackBytes: -1, MaxSharedBytes: sharedPerBlock}
}

// Check returns "" when p is within the limits, or a reason that names the
// first figure over its limit ("spill stores 48 B > 0 B").
func (g GateLimits) Check(p space.Ptxas) string {
	checks := []struct {
		name   string
		value  int
		limit  int
		suffix string
	}{
		{"registers", p.Registers, g.MaxRegisters, ""},
		{"spill stores", p.SpillStores, g.MaxSpillBytes, " B"},
		{"spill loads", p.SpillLoads, g.MaxSpillBytes, " B"},
		{"stack frame", p.StackBytes, g.MaxStackBytes, " B"},
		{"static shared memory", p.SharedBytes, g.MaxSharedBytes, " B"},
	}
	for _, c := range checks {
		if c.limit >= 0 && c.value > c.limit {
			return fmt.Sprintf("%s %d%s > %d%s", c.name, c.value, c.suffix, c.limit, c.suffix)
		}
	}
	return ""
}
