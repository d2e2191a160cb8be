// Package space owns the vocabulary of a tuning problem: knobs with their
// values and layer, configs with their canonical key and -D flag rendering,
// named constraints, sampling, neighbours and the size of a space, and the
// Result that records how far a config got through the gates. It runs
// nothing on nvcc or GPUs, but a Result names what they said: the Env (GPU,
// driver, arch, nvcc, source hash) it was measured in, the Ptxas figures,
// the Accuracy and the Timings. Those are plain records, kept here because
// every package (evo ranks them, runner fills them, elites stores them)
// speaks of results, and the dependencies point only towards space.
package space

// Layer says whether a knob changes the structure of a kernel (macro) or
// refines it within a structure (micro). The search mutates the two layers
// at different, adaptive rates.
type Layer int

const (
	Macro Layer = iota
	Micro
)

// A Knob is one compile-time parameter of a kernel family.
type Knob struct {
	Name   string   // user-facing name, e.g. "block_m"
	Macro  string   // the -D macro it renders to, e.g. "SDPA_BLOCK_M"
	Values []string // the ordered list of allowed values; a config may hold no other
	// MacroValues, when set, is what each value renders to (parallel to
	// Values), for values that are not C literals: "pad" → "0".
	MacroValues []string
	Layer       Layer
	Doc         string // one line
	// Default is the family's hand-picked value (one of Values).
	Default string
	// Absent is the value of a config that does not name this knob: the
	// one that compiles the code the family had before the knob existed,
	// so that a result recorded then reads as that config (Complete). Set
	// it only where that value compiles exactly that code. Empty: a config
	// must name the knob.
	Absent string
}

// A Constraint is a named rule over a Config. Check returns nil when the
// config is allowed, or an error that says why not; a rejection is reported
// with the constraint's Name. Check must neither keep nor modify the config
// it is given: enumeration reuses one map for every candidate.
type Constraint struct {
	Name  string
	Check func(Config) error
}

// A Define is a fixed -D macro that every candidate of a problem gets (head
// dimension, dtype, causal): not a knob, so the search never mutates it.
type Define struct {
	Macro string
	Value string
}

// A Space is a kernel family's knobs and constraints for one problem.
type Space struct {
	Family      string
	Knobs       []Knob
	Constraints []Constraint
	Defines     []Define
	// PlaceholderDefaults is set when the knobs' defaults are not a chosen
	// config but stand-ins that Knob.Default needs (a Kernel Tuner file
	// lists each parameter's values and no default, so the first value
	// stands in): a search then does not start from Default.
	PlaceholderDefaults bool
	// members, when set by Restrict, is the explicit list of the space's
	// configs; nil for a dense space, whose configs are all that pass the
	// constraints.
	members *memberSet
}
