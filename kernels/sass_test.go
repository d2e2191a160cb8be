package kernels

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// A sassInst is one SASS instruction: its function (the index of its
// "Function :" header), address, opcode and operands.
type sassInst struct {
	fn   int
	addr int64
	op   string
	args []string
}

var sassLineRE = regexp.MustCompile(`/\*([0-9a-f]{4,})\*/\s+(?:@!?U?P[0-9T]\s+)?([A-Z][A-Za-z0-9_.]*)\s*([^;]*);`)

// parseSASS reads cuobjdump -sass output into instructions, in address
// order within each function.
func parseSASS(sass []byte) []sassInst {
	var out []sassInst
	fn := 0
	for _, line := range strings.Split(string(sass), "\n") {
		if strings.Contains(line, "Function :") {
			fn++
			continue
		}
		m := sassLineRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		addr, err := strconv.ParseInt(m[1], 16, 64)
		if err != nil {
			continue
		}
		var args []string
		for _, a := range strings.Split(m[3], ",") {
			if a = strings.TrimSpace(a); a != "" {
				args = append(args, a)
			}
		}
		out = append(out, sassInst{fn: fn, addr: addr, op: m[2], args: args})
	}
	return out
}

// sassOps counts a cubin's tensor-core instructions by opcode (HMMA, IMMA,
// QGMMA, ...) in its SASS.
func sassOps(sass []byte) map[string]int {
	n := map[string]int{}
	for _, in := range parseSASS(sass) {
		switch op, _, _ := strings.Cut(in.op, "."); op {
		case "HMMA", "IMMA", "QMMA", "HGMMA", "QGMMA", "IGMMA":
			n[op]++
		}
	}
	return n
}

var sassRegRE = regexp.MustCompile(`^R([0-9]+)(?:\.reuse)?$`)

// sassDest returns the registers an instruction writes through its first
// operand (four for 128-bit and x4 forms, two for 64-bit and wide ones),
// or nil when its first operand is not a general register.
func sassDest(in sassInst) []int {
	if len(in.args) == 0 {
		return nil
	}
	m := sassRegRE.FindStringSubmatch(in.args[0])
	if m == nil {
		return nil
	}
	r, _ := strconv.Atoi(m[1])
	n := 1
	switch {
	case strings.Contains(in.op, ".128"), strings.HasSuffix(in.op, ".4"):
		n = 4
	case strings.Contains(in.op, ".64"), strings.Contains(in.op, ".WIDE"), strings.HasSuffix(in.op, ".2"):
		n = 2
	}
	regs := make([]int, n)
	for i := range regs {
		regs[i] = r + i
	}
	return regs
}

// qkFragmentsClobbered reports every write, inside the loop that runs a
// Q K^T warpgroup MMA (QGMMA or IGMMA with A from registers), to that A
// operand's four registers: Q's fragments are loaded once before the key
// loop and read by every tile's MMA, so a write inside the loop is a
// register allocation that loses them. The loop of an instruction is the
// innermost backward branch around it.
func qkFragmentsClobbered(sass []byte) []string {
	insts := parseSASS(sass)
	var bad []string
	for i, in := range insts {
		if !strings.HasPrefix(in.op, "QGMMA") && !strings.HasPrefix(in.op, "IGMMA") || len(in.args) < 2 {
			continue
		}
		m := sassRegRE.FindStringSubmatch(in.args[1])
		if m == nil {
			continue // A from shared memory
		}
		a, _ := strconv.Atoi(m[1])
		// The innermost loop around it: the backward branch after it
		// whose target is closest below it.
		lo, hi := int64(-1), int64(-1)
		for _, b := range insts[i+1:] {
			if b.fn != in.fn || b.op != "BRA" || len(b.args) == 0 {
				continue
			}
			target, err := strconv.ParseInt(strings.TrimPrefix(b.args[len(b.args)-1], "0x"), 16, 64)
			if err != nil || target > in.addr || target <= lo {
				continue
			}
			lo, hi = target, b.addr
		}
		if lo < 0 {
			continue
		}
		for _, w := range insts {
			if w.fn != in.fn || w.addr < lo || w.addr > hi {
				continue
			}
			for _, r := range sassDest(w) {
				if r >= a && r < a+4 {
					bad = append(bad, fmt.Sprintf("%04x %s %s writes R%d, A of the %s at %04x (loop %04x-%04x)",
						w.addr, w.op, strings.Join(w.args, ", "), r, in.op, in.addr, lo, hi))
				}
			}
		}
	}
	return bad
}
