package space

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
)

// square returns n knobs of v values each, for gridSpace.
func square(n, v int) []int {
	return slices.Repeat([]int{v}, n)
}

// sparseMembers returns about share of the configs of s, drawn by rng, in
// a shuffled order.
func sparseMembers(s *Space, rng *rand.Rand, share float64) []Config {
	var out []Config
	s.Enumerate(func(c Config) bool {
		if rng.Float64() < share {
			out = append(out, c)
		}
		return true
	})
	rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// hamming counts the knobs of s on which a and b differ.
func hamming(s *Space, a, b Config) int {
	d := 0
	for _, k := range s.Knobs {
		if a[k.Name] != b[k.Name] {
			d++
		}
	}
	return d
}

// keys returns the keys of configs, in order.
func keys(cs []Config) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.Key()
	}
	return out
}

func TestRestrictMembersSizeEnumerateCheck(t *testing.T) {
	s := toySpace()
	members := []Config{
		mustParse(t, s, "tile=64,warps=2"),
		mustParse(t, s, "tile=32,pipe=1"),
		mustParse(t, s, "tile=16,warps=2,layout=pad"),
		mustParse(t, s, "tile=32,pipe=1"),             // a duplicate counts once
		mustParse(t, s, "tile=16,warps=4"),            // refused by tile_warps: left out
		{"tile": "32", "warps": "4", "layout": "pad"}, // incomplete: left out
	}
	r := s.Restrict(members)
	if !r.Restricted() || s.Restricted() {
		t.Fatalf("Restricted() = %v on the copy, %v on the original; want true, false", r.Restricted(), s.Restricted())
	}
	if len(s.Constraints) != 2 {
		t.Fatalf("Restrict changed the original's constraints: %d", len(s.Constraints))
	}
	raw, valid := r.Size()
	if raw != 24 || valid != 3 {
		t.Fatalf("Size() = %d, %d; want 24, 3", raw, valid)
	}
	// Enumerate walks the members in the dense space's order.
	var dense []string
	want := map[string]bool{}
	for _, c := range members[:3] {
		want[c.Key()] = true
	}
	s.Enumerate(func(c Config) bool {
		if want[c.Key()] {
			dense = append(dense, c.Key())
		}
		return true
	})
	var got []Config
	r.Enumerate(func(c Config) bool { got = append(got, c); return true })
	if !slices.Equal(keys(got), dense) {
		t.Fatalf("Enumerate = %q, want %q", keys(got), dense)
	}
	got[0]["tile"] = "changed" // each config is the caller's to keep
	var stop int
	r.Enumerate(func(c Config) bool { stop++; return c["tile"] == "changed" })
	if stop != 1 {
		t.Fatalf("Enumerate went on after fn returned false, or a config was shared (%d calls)", stop)
	}

	for _, c := range members[:3] {
		if err := r.Check(c); err != nil {
			t.Errorf("Check(%s) = %v, want nil for a member", c.Key(), err)
		}
	}
	var rej *Rejection
	err := r.Check(mustParse(t, s, "tile=64,warps=4"))
	if !errors.As(err, &rej) || rej.Constraint != MemberConstraint {
		t.Fatalf("Check(non-member) = %v, want a rejection by %q", err, MemberConstraint)
	}
	if err := s.Check(mustParse(t, s, "tile=64,warps=4")); err != nil {
		t.Fatalf("the original space refuses a valid config: %v", err)
	}
}

func TestRestrictSampleIsUniformOverMembers(t *testing.T) {
	s := gridSpace(square(4, 3))
	rng := rand.New(rand.NewPCG(1, 2))
	members := sparseMembers(s, rng, 0.2)
	r := s.Restrict(members)
	counts := map[string]int{}
	const draws = 20000
	for range draws {
		c := r.Sample(rng)
		if err := r.Check(c); err != nil {
			t.Fatalf("Sample drew a non-member %s: %v", c.Key(), err)
		}
		counts[c.Key()]++
	}
	if len(counts) != len(members) {
		t.Fatalf("Sample reached %d of %d members", len(counts), len(members))
	}
	mean := float64(draws) / float64(len(members))
	for key, n := range counts {
		if float64(n) < 0.7*mean || float64(n) > 1.3*mean {
			t.Errorf("member %s drawn %d times, want about %.0f", key, n, mean)
		}
	}
}

// TestRestrictProjectsOntoNearestMember checks Mutate, Crossover and
// Neighbours against a brute-force search of the member list.
func TestRestrictProjectsOntoNearestMember(t *testing.T) {
	s := gridSpace(square(8, 4)) // 65536 raw configs
	rng := rand.New(rand.NewPCG(3, 4))
	members := sparseMembers(s, rng, 0.03)
	r := s.Restrict(members)
	// nearestDistance is the smallest Hamming distance from c to a member
	// that keep accepts.
	nearestDistance := func(c Config, keep func(Config) bool) int {
		best := len(s.Knobs) + 1
		for _, m := range members {
			if keep(m) {
				best = min(best, hamming(s, c, m))
			}
		}
		return best
	}
	all := func(Config) bool { return true }

	for _, layer := range []Layer{Macro, Micro} {
		moved := map[string]bool{}
		for range 300 {
			from := r.Sample(rng)
			m, ok := r.Mutate(rng, from, layer)
			if !ok {
				t.Fatalf("Mutate(%s, layer %d) found no move", from.Key(), layer)
			}
			if err := r.Check(m); err != nil {
				t.Fatalf("Mutate returned a non-member %s", m.Key())
			}
			// Exactly one knob of the layer was chosen: find which by the
			// changed knobs of the layer; the result must be the nearest
			// member holding that knob's new value.
			var changed []Knob
			for _, k := range s.Knobs {
				if k.Layer == layer && m[k.Name] != from[k.Name] {
					changed = append(changed, k)
				}
			}
			if len(changed) == 0 {
				t.Fatalf("Mutate in layer %d changed no knob of that layer: %s → %s", layer, from.Key(), m.Key())
			}
			nearestForSome := false
			for _, k := range changed {
				want := nearestDistance(from, func(c Config) bool { return c[k.Name] == m[k.Name] })
				if hamming(s, from, m) == want {
					nearestForSome = true
					moved[k.Name] = true
				}
			}
			if !nearestForSome {
				t.Fatalf("Mutate(%s) = %s at distance %d: not the nearest member for any changed knob",
					from.Key(), m.Key(), hamming(s, from, m))
			}
		}
		for _, k := range s.Knobs {
			if k.Layer == layer && !moved[k.Name] {
				t.Errorf("Mutate in layer %d never moved %s", layer, k.Name)
			}
		}
	}

	distinct := map[string]bool{}
	for range 300 {
		a, b := r.Sample(rng), r.Sample(rng)
		c := r.Crossover(rng, a, b)
		if err := r.Check(c); err != nil {
			t.Fatalf("Crossover returned a non-member %s", c.Key())
		}
		// The child drawn is unknown here, but the member returned is no
		// farther from a and b together than a member can be: every knob
		// of c outside {a, b}'s values costs at least one difference.
		outside := 0
		for _, k := range s.Knobs {
			if c[k.Name] != a[k.Name] && c[k.Name] != b[k.Name] {
				outside++
			}
		}
		if outside > hamming(s, a, b) {
			t.Fatalf("Crossover(%s, %s) = %s strays on %d knobs", a.Key(), b.Key(), c.Key(), outside)
		}
		distinct[c.Key()] = true
	}
	if len(distinct) < 100 {
		t.Fatalf("Crossover gave only %d distinct members in 300 draws", len(distinct))
	}
	for range 20 {
		a := r.Sample(rng)
		if c := r.Crossover(rng, a, a); c.Key() != a.Key() {
			t.Fatalf("Crossover of a member with itself = %s, want %s", c.Key(), a.Key())
		}
	}

	from := r.Sample(rng)
	ns := r.Neighbours(from)
	seen := map[string]bool{}
	for _, n := range ns {
		if err := r.Check(n); err != nil {
			t.Fatalf("Neighbours gave a non-member %s", n.Key())
		}
		if seen[n.Key()] || n.Key() == from.Key() {
			t.Fatalf("Neighbours gave %s twice or gave the config itself", n.Key())
		}
		seen[n.Key()] = true
	}
	for _, k := range s.Knobs {
		for _, v := range k.Values {
			if v == from[k.Name] {
				continue
			}
			want := nearestDistance(from, func(c Config) bool { return c[k.Name] == v })
			found := false
			for _, n := range ns {
				if n[k.Name] == v && hamming(s, from, n) == want {
					found = true
				}
			}
			if want <= len(s.Knobs) && !found {
				t.Errorf("Neighbours has no member with %s=%s at distance %d", k.Name, v, want)
			}
		}
	}
	if nearestDistance(from, all) != 0 {
		t.Fatal("a sampled member is not a member")
	}
	if again := r.Neighbours(from); !slices.Equal(keys(again), keys(ns)) {
		t.Fatal("Neighbours is not deterministic")
	}
}

// A space restricted to all of its valid configs keeps the dense moves:
// its neighbours one knob away are exactly the dense neighbours, and the
// others are projections of a change that the constraints refuse (tile=16
// with warps=4 goes to the nearest member with warps=4).
func TestRestrictToEverythingKeepsDenseMoves(t *testing.T) {
	s := toySpace()
	all := s.ValidConfigs()
	r := s.Restrict(all)
	if _, v := r.Size(); v != 18 {
		t.Fatalf("Size valid = %d, want 18", v)
	}
	rng := rand.New(rand.NewPCG(9, 10))
	for _, c := range all {
		var near []string
		for _, n := range r.Neighbours(c) {
			if hamming(s, c, n) == 1 {
				near = append(near, n.Key())
			}
		}
		if want := keys(s.Neighbours(c)); !slices.Equal(near, want) {
			t.Fatalf("Neighbours(%s) one knob away:\n got %q\nwant %q", c.Key(), near, want)
		}
		for _, layer := range []Layer{Macro, Micro} {
			m, ok := r.Mutate(rng, c, layer)
			if !ok {
				t.Fatalf("Mutate(%s, %d) found no move", c.Key(), layer)
			}
			if err := s.Check(m); err != nil {
				t.Fatalf("Mutate(%s) = %s, invalid: %v", c.Key(), m.Key(), err)
			}
		}
	}
	from := mustParse(t, s, "tile=16,warps=2,layout=pad")
	want := "layout=pad,pipe=0,tile=32,warps=4"
	if !slices.Contains(keys(r.Neighbours(from)), want) {
		t.Fatalf("Neighbours(%s) = %q, want the projection %s among them", from.Key(), keys(r.Neighbours(from)), want)
	}
}

func TestRestrictEmpty(t *testing.T) {
	s := toySpace()
	r := s.Restrict(nil)
	rng := rand.New(rand.NewPCG(1, 1))
	if _, v := r.Size(); v != 0 {
		t.Fatalf("Size valid = %d, want 0", v)
	}
	if c := r.Sample(rng); c != nil {
		t.Fatalf("Sample = %s, want nil", c.Key())
	}
	d := s.Default()
	if m, ok := r.Mutate(rng, d, Macro); ok || m.Key() != d.Key() {
		t.Fatalf("Mutate = %s, %v; want the config back and false", m.Key(), ok)
	}
	if c := r.Crossover(rng, d, d); c.Key() != d.Key() {
		t.Fatalf("Crossover = %s, want a clone of a", c.Key())
	}
	if ns := r.Neighbours(d); len(ns) != 0 {
		t.Fatalf("Neighbours = %q, want none", keys(ns))
	}
}

// Restricting a restricted space keeps what both allow.
func TestRestrictTwiceIntersects(t *testing.T) {
	s := gridSpace(square(3, 3))
	rng := rand.New(rand.NewPCG(5, 5))
	first := sparseMembers(s, rng, 0.5)
	second := sparseMembers(s, rng, 0.5)
	r := s.Restrict(first).Restrict(second)
	in := map[string]bool{}
	for _, c := range first {
		in[c.Key()] = true
	}
	n := 0
	for _, c := range second {
		if in[c.Key()] {
			n++
		}
	}
	if _, v := r.Size(); int(v) != n {
		t.Fatalf("Size valid = %d, want the %d configs in both lists", v, n)
	}
}

func BenchmarkRestrictedMutate(b *testing.B) {
	s := gridSpace(square(12, 4))
	rng := rand.New(rand.NewPCG(1, 2))
	var members []Config
	for range 2600 {
		members = append(members, s.Sample(rng))
	}
	r := s.Restrict(members)
	from := r.Sample(rng)
	for b.Loop() {
		r.Mutate(rng, from, Macro)
	}
}

// TestRestrictedSteps checks Steps on a restricted space against the
// member list: for each knob, the nearest value below and above that some
// member holds, projected onto a member holding it at the least Hamming
// distance.
func TestRestrictedSteps(t *testing.T) {
	s := gridSpace(square(5, 5))
	rng := rand.New(rand.NewPCG(5, 6))
	members := sparseMembers(s, rng, 0.05)
	r := s.Restrict(members)
	held := make([]map[int]bool, len(s.Knobs))
	for i, k := range s.Knobs {
		held[i] = map[int]bool{}
		for _, m := range members {
			held[i][slices.Index(k.Values, m[k.Name])] = true
		}
	}
	for range 200 {
		from := r.Sample(rng)
		steps := r.Steps(from)
		want := 0
		for i, k := range s.Knobs {
			at := slices.Index(k.Values, from[k.Name])
			for _, dir := range []int{-1, 1} {
				v := at + dir
				for v >= 0 && v < len(k.Values) && !held[i][v] {
					v += dir
				}
				if v < 0 || v >= len(k.Values) {
					continue
				}
				want++
				value := k.Values[v]
				best := len(s.Knobs) + 1
				for _, m := range members {
					if m[k.Name] == value {
						best = min(best, hamming(s, from, m))
					}
				}
				if !slices.ContainsFunc(steps, func(c Config) bool { return c[k.Name] == value && hamming(s, from, c) == best }) {
					t.Fatalf("Steps(%s) lacks a nearest member with %s=%s (distance %d): %d steps", from.Key(), k.Name, value, best, len(steps))
				}
			}
		}
		for _, c := range steps {
			if err := r.Check(c); err != nil {
				t.Fatalf("Steps(%s) gave a non-member %s", from.Key(), c.Key())
			}
		}
		if len(steps) > want {
			t.Fatalf("Steps(%s) gave %d configs, at most %d expected", from.Key(), len(steps), want)
		}
	}
}
