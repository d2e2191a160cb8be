package space

import "math/rand/v2"

// A Config assigns a value to every knob of a space: knob name → value.
// Values are strings drawn from the knob's list ("64", "swizzle").
type Config map[string]string

// Key returns the canonical key: "name=value" pairs sorted by name, joined by ",".
func (c Config) Key() string { panic("space: not implemented yet") }

// Hash returns a short stable hash of Key (16 hex digits).
func (c Config) Hash() string { panic("space: not implemented yet") }

// Clone returns a copy.
func (c Config) Clone() Config { panic("space: not implemented yet") }

// Int returns the value of knob name as an integer; it panics if the value
// is not an integer (a space's own declaration error).
func (c Config) Int(name string) int { panic("space: not implemented yet") }

// Knob returns the knob with that name.
func (s *Space) Knob(name string) (Knob, bool) { panic("space: not implemented yet") }

// Default returns the family's hand-picked config.
func (s *Space) Default() Config { panic("space: not implemented yet") }

// Check reports whether c is a complete config of s with values from each
// knob's list (an error naming the knob and the allowed values otherwise),
// then runs the constraints in order; a rejection is a *Rejection.
func (s *Space) Check(c Config) error { panic("space: not implemented yet") }

// Parse reads "k=v,k=v" (knobs not named take their default) into a
// config of s, refusing unknown knobs and values not in the knob's list. It
// does not run constraints.
func (s *Space) Parse(text string) (Config, error) { panic("space: not implemented yet") }

// Flags renders the -D flags for c (defines first, then knobs in declaration
// order). It is the only place flags are made; it fails unless every value
// comes from its knob's list.
func (s *Space) Flags(c Config) ([]string, error) { panic("space: not implemented yet") }

// Sample draws a uniformly random valid config.
func (s *Space) Sample(rng *rand.Rand) Config { panic("space: not implemented yet") }

// Neighbours returns every valid config that differs from c in exactly one knob.
func (s *Space) Neighbours(c Config) []Config { panic("space: not implemented yet") }

// Enumerate calls fn for every valid config in a fixed order until fn returns false.
func (s *Space) Enumerate(fn func(Config) bool) { panic("space: not implemented yet") }

// Size returns the number of raw configs (product of the knobs' list
// lengths) and of valid ones.
func (s *Space) Size() (raw, valid uint64) { panic("space: not implemented yet") }

// A Rejection says which constraint refused a config, and why.
type Rejection struct {
	Constraint string
	Reason     string
}

func (r *Rejection) Error() string { return r.Constraint + ": " + r.Reason }
