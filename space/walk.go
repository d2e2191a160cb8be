package space

import (
	"math"
	"math/rand/v2"
	"slices"
)

// Bounds on random draws. Rejection sampling is exact and fast while valid
// configs are not rare; past these many misses the space is sparse enough
// that an exact enumeration is the cheaper way to a uniform draw.
const (
	sampleTries    = 1000
	crossoverTries = 32
)

// walk visits the valid configs of s in mixed-radix order (first knob
// slowest), calling fn with one scratch config that it updates in place
// between calls: fn must copy it to keep it. It stops when fn returns false.
// Only the digits that change are rewritten, so a whole space costs one map
// and one constraint pass per raw config.
func (s *Space) walk(fn func(Config) bool) {
	n := len(s.Knobs)
	idx := make([]int, n)
	c := make(Config, n)
	for _, k := range s.Knobs {
		if len(k.Values) == 0 {
			return // no config at all
		}
		c[k.Name] = k.Values[0]
	}
	for {
		if s.allowed(c) && !fn(c) {
			return
		}
		i := n - 1
		for ; i >= 0; i-- {
			k := s.Knobs[i]
			idx[i]++
			if idx[i] < len(k.Values) {
				c[k.Name] = k.Values[idx[i]]
				break
			}
			idx[i] = 0
			c[k.Name] = k.Values[0]
		}
		if i < 0 {
			return
		}
	}
}

// allowed reports whether every constraint accepts c, without building
// the rejection that Check would report.
func (s *Space) allowed(c Config) bool {
	for _, con := range s.Constraints {
		if con.Check(c) != nil {
			return false
		}
	}
	return true
}

// Enumerate calls fn for every valid config in a fixed order until fn
// returns false. The order is mixed-radix over the knobs' value lists, the
// first knob changing slowest (a restricted space walks its members in that
// order). Each config passed to fn is fn's to keep.
func (s *Space) Enumerate(fn func(Config) bool) {
	if s.members != nil {
		for _, c := range s.members.configs {
			if !fn(c.Clone()) {
				return
			}
		}
		return
	}
	s.walk(func(c Config) bool { return fn(c.Clone()) })
}

// ValidConfigs returns every valid config, in Enumerate order (an empty,
// non-nil slice when there is none).
func (s *Space) ValidConfigs() []Config {
	out := []Config{}
	s.Enumerate(func(c Config) bool {
		out = append(out, c)
		return true
	})
	return out
}

// Size returns the number of raw configs (product of the knobs' list
// lengths) and of valid ones. The valid count runs every constraint on every
// raw config; raw saturates at the largest uint64. A restricted space's
// valid count is its number of members.
func (s *Space) Size() (raw, valid uint64) {
	raw = 1
	for _, k := range s.Knobs {
		n := uint64(len(k.Values))
		if n != 0 && raw > math.MaxUint64/n {
			raw = math.MaxUint64
			continue
		}
		raw *= n
	}
	if s.members != nil {
		return raw, uint64(len(s.members.configs))
	}
	s.walk(func(Config) bool { valid++; return true })
	return raw, valid
}

// Sample draws a uniformly random valid config. It returns nil only when the
// space has no valid config. It draws raw configs until one passes the
// constraints; when sampleTries draws all fail it falls back to picking a
// uniform index among the enumerated valid configs, which is just as
// uniform but costs a walk over the space. A restricted space draws one
// of its members.
func (s *Space) Sample(rng *rand.Rand) Config {
	if s.members != nil {
		return s.restrictedSample(rng)
	}
	c := make(Config, len(s.Knobs))
	for range sampleTries {
		for _, k := range s.Knobs {
			if len(k.Values) == 0 {
				return nil
			}
			c[k.Name] = k.Values[rng.IntN(len(k.Values))]
		}
		if s.allowed(c) {
			return c
		}
	}
	_, valid := s.Size()
	if valid == 0 {
		return nil
	}
	target := rng.Uint64N(valid)
	var picked Config
	s.walk(func(c Config) bool {
		if target == 0 {
			picked = c.Clone()
			return false
		}
		target--
		return true
	})
	return picked
}

// Neighbours returns every valid config that differs from c in exactly one
// knob, in knob declaration order and then value order. On a restricted
// space each such change is projected onto the nearest member (see
// Restrict), so a neighbour may differ in more than one knob.
func (s *Space) Neighbours(c Config) []Config {
	if s.members != nil {
		return s.restrictedNeighbours(c)
	}
	var out []Config
	for _, k := range s.Knobs {
		for _, v := range s.moves(c, k) {
			n := c.Clone()
			n[k.Name] = v
			out = append(out, n)
		}
	}
	return out
}

// moves returns the values, in list order, that knob k can take instead of
// its value in c while the config stays valid.
func (s *Space) moves(c Config, k Knob) []string {
	old, had := c[k.Name]
	if had && len(s.Constraints) == 0 && s.Check(c) == nil {
		// With no constraint, changing one knob of a valid config to
		// another of its values keeps it valid: no trial needed (a
		// Kernel Tuner product space, searched a million moves a run).
		out := make([]string, 0, len(k.Values))
		for _, v := range k.Values {
			if v != old {
				out = append(out, v)
			}
		}
		return out
	}
	trial := c.Clone()
	var out []string
	for _, v := range k.Values {
		if had && v == old {
			continue
		}
		trial[k.Name] = v
		if s.Check(trial) == nil {
			out = append(out, v)
		}
	}
	return out
}

// Mutate changes one knob of the given layer to another value and returns
// the new valid config. The knob is drawn uniformly among the layer's knobs
// that have a valid alternative, then the value uniformly among those
// alternatives. It reports false, returning c unchanged, when no knob of
// that layer can change while keeping the config valid. On a restricted
// space the new config is the member nearest to c that holds the new value
// (see Restrict).
func (s *Space) Mutate(rng *rand.Rand, c Config, layer Layer) (Config, bool) {
	if s.members != nil {
		return s.restrictedMutate(rng, c, layer)
	}
	var layerKnobs []Knob
	for _, k := range s.Knobs {
		if k.Layer == layer {
			layerKnobs = append(layerKnobs, k)
		}
	}
	for _, i := range rng.Perm(len(layerKnobs)) {
		k := layerKnobs[i]
		if values := s.moves(c, k); len(values) > 0 {
			m := c.Clone()
			m[k.Name] = values[rng.IntN(len(values))]
			return m, true
		}
	}
	return c, false
}

// Crossover returns a uniform crossover of a and b: each knob's value comes
// from a or b with equal chance. It draws up to crossoverTries children and
// returns the first valid one; when none is valid it returns a clone of a.
// On a restricted space one child is drawn and projected onto the nearest
// member (see Restrict).
func (s *Space) Crossover(rng *rand.Rand, a, b Config) Config {
	if s.members != nil {
		return s.restrictedCrossover(rng, a, b)
	}
	child := make(Config, len(s.Knobs))
	for range crossoverTries {
		for _, k := range s.Knobs {
			if rng.IntN(2) == 0 {
				child[k.Name] = a[k.Name]
			} else {
				child[k.Name] = b[k.Name]
			}
		}
		if s.Check(child) == nil {
			return child
		}
	}
	return a.Clone()
}

// Steps returns the valid configs one step from c: for each knob, the
// nearest valid value below and the nearest above c's in the knob's value
// order, in knob declaration order. On a restricted space each step is
// projected onto the nearest member holding the new value (see Restrict),
// so a step may change more than one knob.
func (s *Space) Steps(c Config) []Config {
	if s.members != nil {
		return s.restrictedSteps(c)
	}
	var out []Config
	for _, k := range s.Knobs {
		old := slices.Index(k.Values, c[k.Name])
		lo, hi := "", ""
		for _, v := range s.moves(c, k) {
			if i := slices.Index(k.Values, v); i < old {
				lo = v
			} else if hi == "" {
				hi = v
			}
		}
		for _, v := range []string{lo, hi} {
			if v != "" {
				n := c.Clone()
				n[k.Name] = v
				out = append(out, n)
			}
		}
	}
	return out
}
