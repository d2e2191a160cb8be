package space

import (
	"fmt"
	"math/rand/v2"
	"slices"
)

// MemberConstraint names the constraint that a restricted space adds: a
// config outside the member list is refused with this name.
const MemberConstraint = "member"

// A memberSet is the explicit, finite list of configs a restricted space
// holds. It is built once by Restrict and read-only afterwards, so a
// restricted space is as safe for concurrent use as any other.
type memberSet struct {
	configs []Config       // the members in Enumerate order
	digits  []int32        // value index of every knob of every member, member-major
	index   map[string]int // key → position in configs
	// byDigits maps a member's digits, packed by pack, to its position:
	// the exact-hit test before any projection.
	byDigits map[string]int32
	// byValue lists, for each knob and each of its values, the positions
	// of the members holding that value, ascending.
	byValue [][][]int32
}

// Restrict returns a copy of s whose valid configs are exactly the given
// members that are valid in s (others are left out, duplicates count
// once). It is for a space known only at some points, such as a replay
// file that recorded a sample of the configs: the search then works on the
// members as it works on a dense space. Sample draws uniformly among them,
// Enumerate walks them in mixed-radix order (first knob slowest, as for a
// dense space), Size counts them, and Check refuses any other config with
// the constraint MemberConstraint.
//
// Mutate, Crossover and Neighbours project onto the members: a changed
// config that is not a member is replaced by the member nearest to it
// (fewest knobs that differ), so that a mutation means "the closest member
// with this change". On a real GPU every valid config can be evaluated, the
// space is dense, and no projection ever happens.
func (s *Space) Restrict(members []Config) *Space {
	nk := len(s.Knobs)
	valueIndex := make([]map[string]int32, nk)
	for i, k := range s.Knobs {
		valueIndex[i] = make(map[string]int32, len(k.Values))
		for j, v := range k.Values {
			valueIndex[i][v] = int32(j)
		}
	}
	type member struct {
		config Config
		digits []int32
	}
	var kept []member
	seen := make(map[string]bool, len(members))
	for _, c := range members {
		key := c.Key()
		if seen[key] || s.Check(c) != nil {
			continue
		}
		seen[key] = true
		d := make([]int32, nk)
		for i, k := range s.Knobs {
			d[i] = valueIndex[i][c[k.Name]]
		}
		kept = append(kept, member{c.Clone(), d})
	}
	slices.SortFunc(kept, func(a, b member) int { return slices.Compare(a.digits, b.digits) })

	m := &memberSet{
		configs:  make([]Config, len(kept)),
		digits:   make([]int32, 0, len(kept)*nk),
		index:    make(map[string]int, len(kept)),
		byDigits: make(map[string]int32, len(kept)),
		byValue:  make([][][]int32, nk),
	}
	for i, k := range s.Knobs {
		m.byValue[i] = make([][]int32, len(k.Values))
	}
	for p, mem := range kept {
		m.configs[p] = mem.config
		m.digits = append(m.digits, mem.digits...)
		m.index[mem.config.Key()] = p
		m.byDigits[string(pack(nil, mem.digits))] = int32(p)
		for i, v := range mem.digits {
			m.byValue[i][v] = append(m.byValue[i][v], int32(p))
		}
	}

	r := *s
	r.members = m
	r.Constraints = append(slices.Clip(slices.Clone(s.Constraints)), Constraint{
		Name: MemberConstraint,
		Check: func(c Config) error {
			if _, ok := m.index[c.Key()]; !ok {
				return fmt.Errorf("not one of the space's %d members", len(m.configs))
			}
			return nil
		},
	})
	return &r
}

// Restricted reports whether s was made by Restrict, and so holds an
// explicit member list.
func (s *Space) Restricted() bool { return s.members != nil }

// row returns the knob digits of member p.
func (m *memberSet) row(p int32, nk int) []int32 {
	return m.digits[int(p)*nk : int(p+1)*nk]
}

// digitsOf returns the value index of each knob of c, −1 for a value not in
// the knob's list (it then differs from every member).
func (s *Space) digitsOf(c Config) []int32 {
	d := make([]int32, len(s.Knobs))
	for i, k := range s.Knobs {
		d[i] = int32(slices.Index(k.Values, c[k.Name]))
	}
	return d
}

// pack appends the digits to buf as 4 bytes each, a map key.
func pack(buf []byte, digits []int32) []byte {
	for _, d := range digits {
		buf = append(buf, byte(d), byte(d>>8), byte(d>>16), byte(d>>24))
	}
	return buf
}

// lookup returns the position of the member with exactly these digits.
func (m *memberSet) lookup(digits []int32) (int32, bool) {
	var buf [64]byte
	p, ok := m.byDigits[string(pack(buf[:0], digits))]
	return p, ok
}

// nearest returns the candidate member (positions into the member list)
// with the fewest knobs differing from target. Ties are broken by rng, or
// by the first in Enumerate order when rng is nil. It returns −1 when
// there is no candidate; all is used when candidates is nil.
func (m *memberSet) nearest(rng *rand.Rand, target []int32, candidates []int32) int32 {
	nk := len(target)
	best := nk + 1
	var ties []int32
	visit := func(p int32) {
		row := m.row(p, nk)
		d := 0
		for i, v := range row {
			if v != target[i] {
				d++
				if d > best {
					return
				}
			}
		}
		switch {
		case d < best:
			best = d
			ties = append(ties[:0], p)
		case d == best:
			ties = append(ties, p)
		}
	}
	if candidates == nil {
		for p := range int32(len(m.configs)) {
			visit(p)
		}
	} else {
		for _, p := range candidates {
			visit(p)
		}
	}
	switch {
	case len(ties) == 0:
		return -1
	case len(ties) == 1 || rng == nil:
		return ties[0]
	}
	return ties[rng.IntN(len(ties))]
}

// restrictedSample draws a member uniformly; nil when there is none.
func (s *Space) restrictedSample(rng *rand.Rand) Config {
	m := s.members
	if len(m.configs) == 0 {
		return nil
	}
	return m.configs[rng.IntN(len(m.configs))].Clone()
}

// restrictedMutate is Mutate on a restricted space: a knob of the layer is
// drawn uniformly among those that some member holds at another value,
// then that value uniformly, and the result is the member nearest to c
// among those holding the new value.
func (s *Space) restrictedMutate(rng *rand.Rand, c Config, layer Layer) (Config, bool) {
	m := s.members
	var layerKnobs []int
	for i, k := range s.Knobs {
		if k.Layer == layer {
			layerKnobs = append(layerKnobs, i)
		}
	}
	d := s.digitsOf(c)
	for _, j := range rng.Perm(len(layerKnobs)) {
		i := layerKnobs[j]
		var values []int32
		for v, holders := range m.byValue[i] {
			if int32(v) != d[i] && len(holders) > 0 {
				values = append(values, int32(v))
			}
		}
		if len(values) == 0 {
			continue
		}
		v := values[rng.IntN(len(values))]
		// The one-knob change, when it is a member, is the only member
		// one knob away: no search needed.
		old := d[i]
		d[i] = v
		p, hit := m.lookup(d)
		d[i] = old
		if !hit {
			p = m.nearest(rng, d, m.byValue[i][v])
		}
		return m.configs[p].Clone(), true
	}
	return c, false
}

// restrictedCrossover is Crossover on a restricted space: a uniform
// crossover of a and b, projected onto the nearest member (ties broken by
// rng); a clone of a when the space has no member.
func (s *Space) restrictedCrossover(rng *rand.Rand, a, b Config) Config {
	m := s.members
	child := make([]int32, len(s.Knobs))
	da, db := s.digitsOf(a), s.digitsOf(b)
	for i := range s.Knobs {
		if rng.IntN(2) == 0 {
			child[i] = da[i]
		} else {
			child[i] = db[i]
		}
	}
	p, hit := m.lookup(child)
	if !hit {
		p = m.nearest(rng, child, nil)
	}
	if p < 0 {
		return a.Clone()
	}
	return m.configs[p].Clone()
}

// restrictedNeighbours is Neighbours on a restricted space: for each knob
// and each other value that some member holds, the member nearest to c
// among those holding it (ties: the first in Enumerate order), each member
// once, in knob declaration order and then value order.
func (s *Space) restrictedNeighbours(c Config) []Config {
	return s.projected(c, func(_ int32, held []int32) []int32 { return held })
}

// restrictedSteps is Steps on a restricted space: for each knob, the
// nearest value below and above c's that some member holds, each projected
// onto the nearest member holding it, each member once.
func (s *Space) restrictedSteps(c Config) []Config {
	return s.projected(c, func(at int32, held []int32) []int32 {
		var out []int32
		if i, _ := slices.BinarySearch(held, at); i > 0 {
			out = append(out, held[i-1])
		}
		if i, _ := slices.BinarySearch(held, at+1); i < len(held) {
			out = append(out, held[i])
		}
		return out
	})
}

// projected returns, for each knob in declaration order, the member nearest
// to c among those holding each value pick chooses, each member once. pick
// gets c's value index and the other values some member holds, ascending.
func (s *Space) projected(c Config, pick func(at int32, held []int32) []int32) []Config {
	m := s.members
	d := s.digitsOf(c)
	var out []Config
	taken := make(map[int32]bool)
	for i := range s.Knobs {
		var held []int32
		for v, holders := range m.byValue[i] {
			if int32(v) != d[i] && len(holders) > 0 {
				held = append(held, int32(v))
			}
		}
		for _, v := range pick(d[i], held) {
			p := m.nearest(nil, d, m.byValue[i][v])
			if !taken[p] {
				taken[p] = true
				out = append(out, m.configs[p].Clone())
			}
		}
	}
	return out
}
