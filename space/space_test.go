package space

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// toySpace is a small hand-made space: 24 raw configs, 18 valid.
//
//	tile_warps rejects tile=16 with warps=4 (4 configs),
//	pipe_tile rejects pipe=1 with tile=16 (2 more, warps=2).
func toySpace() *Space {
	return &Space{
		Family: "toy",
		Knobs: []Knob{
			{Name: "tile", Macro: "TOY_TILE", Values: []string{"16", "32", "64"}, Layer: Macro, Default: "32"},
			{Name: "warps", Macro: "TOY_WARPS", Values: []string{"2", "4"}, Layer: Micro, Default: "4"},
			{Name: "layout", Macro: "TOY_SWIZZLE", Values: []string{"pad", "swizzle"}, MacroValues: []string{"0", "1"}, Layer: Micro, Default: "swizzle"},
			{Name: "pipe", Macro: "TOY_PIPE", Values: []string{"0", "1"}, Layer: Macro, Default: "0"},
		},
		Constraints: []Constraint{
			{Name: "tile_warps", Check: func(c Config) error {
				if c.Int("tile") == 16 && c.Int("warps") == 4 {
					return errors.New("a 16-row tile feeds at most 2 warps")
				}
				return nil
			}},
			{Name: "pipe_tile", Check: func(c Config) error {
				if c["pipe"] == "1" && c.Int("tile") < 32 {
					return errors.New("pipelining needs tile >= 32")
				}
				return nil
			}},
		},
		Defines: []Define{{Macro: "TOY_D", Value: "64"}},
	}
}

// mustParse parses text in s or fails the test.
func mustParse(t *testing.T, s *Space, text string) Config {
	t.Helper()
	c, err := s.Parse(text)
	if err != nil {
		t.Fatalf("Parse(%q): %v", text, err)
	}
	return c
}

// wantErr fails the test unless err is non-nil and contains want (or, when
// want is empty, unless err is nil).
func wantErr(t *testing.T, err error, want string) {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Fatalf("unexpected error: %v", err)
	case want != "" && err == nil:
		t.Fatalf("got no error, want one containing %q", want)
	case want != "" && !strings.Contains(err.Error(), want):
		t.Fatalf("error %q does not contain %q", err, want)
	}
}

func TestToySpaceValidates(t *testing.T) {
	if err := toySpace().Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestKeyAndHash(t *testing.T) {
	tests := []struct {
		c    Config
		want string
	}{
		{Config{}, ""},
		{nil, ""},
		{Config{"a": "1"}, "a=1"},
		{Config{"warps": "4", "tile": "64", "layout": "pad"}, "layout=pad,tile=64,warps=4"},
		{Config{"b": "2", "a": "1", "c": ""}, "a=1,b=2,c="},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if got := tt.c.Key(); got != tt.want {
				t.Fatalf("Key() = %q, want %q", got, tt.want)
			}
			sum := sha256.Sum256([]byte(tt.want))
			if got, want := tt.c.Hash(), hex.EncodeToString(sum[:])[:16]; got != want {
				t.Fatalf("Hash() = %q, want %q", got, want)
			}
		})
	}
	if (Config{"a": "1"}).Hash() == (Config{"a": "2"}).Hash() {
		t.Fatal("different configs share a hash")
	}
}

func TestCloneIsIndependent(t *testing.T) {
	a := Config{"tile": "32"}
	b := a.Clone()
	b["tile"] = "64"
	if a["tile"] != "32" {
		t.Fatal("changing a clone changed the original")
	}
	if Config(nil).Clone() != nil {
		t.Fatal("clone of nil is not nil")
	}
}

func TestInt(t *testing.T) {
	if got := (Config{"tile": "64"}).Int("tile"); got != 64 {
		t.Fatalf("Int = %d, want 64", got)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("Int of a non-integer value did not panic")
		}
	}()
	(Config{"layout": "pad"}).Int("layout")
}

func TestParse(t *testing.T) {
	s := toySpace()
	tests := []struct {
		name, text, want, err string
	}{
		{"empty takes defaults", "", "layout=swizzle,pipe=0,tile=32,warps=4", ""},
		{"one knob", "tile=64", "layout=swizzle,pipe=0,tile=64,warps=4", ""},
		{"whitespace", "  tile = 64 ,\twarps=2 ,layout= pad ", "layout=pad,pipe=0,tile=64,warps=2", ""},
		{"empty items", ",tile=16,,warps=2,", "layout=swizzle,pipe=0,tile=16,warps=2", ""},
		{"constraints not run", "tile=16", "layout=swizzle,pipe=0,tile=16,warps=4", ""},
		{"unknown knob", "foo=1", "", `unknown knob "foo" (knobs: tile, warps, layout, pipe)`},
		{"bad value", "tile=48", "", `knob tile: value "48" not in [16 32 64]`},
		{"empty value", "tile=", "", `knob tile: value "" not in [16 32 64]`},
		{"duplicate", "tile=16, tile=16", "", "knob tile named twice"},
		{"no equals", "tile", "", `"tile": want knob=value`},
		{"macro value is not a value", "layout=1", "", `knob layout: value "1" not in [pad swizzle]`},
		{"case matters", "Tile=16", "", `unknown knob "Tile"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := s.Parse(tt.text)
			wantErr(t, err, tt.err)
			if err == nil && c.Key() != tt.want {
				t.Fatalf("Parse(%q) = %q, want %q", tt.text, c.Key(), tt.want)
			}
		})
	}
}

func TestCheck(t *testing.T) {
	s := toySpace()
	tests := []struct {
		name       string
		c          Config
		err        string
		constraint string // the *Rejection's constraint, when one is expected
	}{
		{"default", s.Default(), "", ""},
		{"valid", Config{"tile": "16", "warps": "2", "layout": "pad", "pipe": "0"}, "", ""},
		{"missing knob", Config{"tile": "16", "warps": "2", "layout": "pad"}, "knob pipe: missing (values [0 1])", ""},
		{"unknown knob", Config{"tile": "16", "warps": "2", "layout": "pad", "pipe": "0", "x": "1"}, `unknown knob "x"`, ""},
		{"bad value", Config{"tile": "16", "warps": "3", "layout": "pad", "pipe": "0"}, `knob warps: value "3" not in [2 4]`, ""},
		{"first constraint", Config{"tile": "16", "warps": "4", "layout": "pad", "pipe": "1"}, "tile_warps: a 16-row tile feeds at most 2 warps", "tile_warps"},
		{"second constraint", Config{"tile": "16", "warps": "2", "layout": "pad", "pipe": "1"}, "pipe_tile: pipelining needs tile >= 32", "pipe_tile"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := s.Check(tt.c)
			wantErr(t, err, tt.err)
			var rej *Rejection
			if got := errors.As(err, &rej); got != (tt.constraint != "") {
				t.Fatalf("error %v: is a rejection = %v, want %v", err, got, tt.constraint != "")
			}
			if rej != nil && rej.Constraint != tt.constraint {
				t.Fatalf("rejected by %q, want %q", rej.Constraint, tt.constraint)
			}
		})
	}
}

// TestComplete gives the toy space's pipe knob an Absent value, as if it
// had been added after configs were recorded without it: Complete fills
// pipe, and only pipe, where a config does not name it, never changes a
// value a config names, never modifies its argument, and leaves a knob
// without an Absent value missing, so that Check refuses the config with
// the message it always gave.
func TestComplete(t *testing.T) {
	s := toySpace()
	s.Knobs[3].Absent = "0"
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		c      Config
		want   Config
		filled bool
		check  string // Check's error on the completed config
	}{
		{"recorded before pipe", Config{"tile": "64", "warps": "2", "layout": "pad"},
			Config{"tile": "64", "warps": "2", "layout": "pad", "pipe": "0"}, true, ""},
		{"names pipe", Config{"tile": "64", "warps": "2", "layout": "pad", "pipe": "1"},
			Config{"tile": "64", "warps": "2", "layout": "pad", "pipe": "1"}, false, ""},
		{"value off the list kept", Config{"tile": "64", "warps": "2", "layout": "pad", "pipe": "7"},
			Config{"tile": "64", "warps": "2", "layout": "pad", "pipe": "7"}, false, `knob pipe: value "7" not in [0 1]`},
		{"required knob still missing", Config{"tile": "64", "layout": "pad"},
			Config{"tile": "64", "layout": "pad", "pipe": "0"}, true, "knob warps: missing (values [2 4])"},
		{"unknown knob kept", Config{"tile": "64", "warps": "2", "layout": "pad", "x": "1"},
			Config{"tile": "64", "warps": "2", "layout": "pad", "x": "1", "pipe": "0"}, true, `unknown knob "x"`},
		{"completed config refused by a constraint", Config{"tile": "16", "warps": "4", "layout": "pad"},
			Config{"tile": "16", "warps": "4", "layout": "pad", "pipe": "0"}, true, "tile_warps: a 16-row tile feeds at most 2 warps"},
		{"empty", nil, Config{"pipe": "0"}, true, "knob tile: missing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := tt.c.Clone()
			got, filled := s.Complete(tt.c)
			if filled != tt.filled || !maps.Equal(got, tt.want) {
				t.Fatalf("Complete(%v) = %v, %v; want %v, %v", tt.c, got, filled, tt.want, tt.filled)
			}
			if !maps.Equal(tt.c, before) {
				t.Fatalf("Complete modified its argument: %v, was %v", tt.c, before)
			}
			wantErr(t, s.Check(got), tt.check)
			if filled && len(tt.c) > 0 {
				got["tile"] = "changed"
				if tt.c["tile"] == "changed" {
					t.Fatal("the completed config shares its map with the argument")
				}
			}
		})
	}

	// A completed config has the key the space gives the same config when
	// it is named in full.
	old := Config{"tile": "32", "warps": "2", "layout": "swizzle"}
	got, _ := s.Complete(old)
	if full := mustParse(t, s, "tile=32,warps=2,layout=swizzle,pipe=0"); got.Key() != full.Key() {
		t.Errorf("completed key %s, want %s", got.Key(), full.Key())
	}

	// Without an Absent value a missing knob is not filled, and Check says
	// what it always said.
	plain := toySpace()
	got, filled := plain.Complete(old)
	if filled || !maps.Equal(got, old) {
		t.Errorf("a space without Absent values completed %v to %v", old, got)
	}
	wantErr(t, plain.Check(got), "knob pipe: missing (values [0 1])")
}

func TestFlags(t *testing.T) {
	s := toySpace()
	tests := []struct {
		name string
		c    Config
		want []string
		err  string
	}{
		{"default", s.Default(), []string{"-DTOY_D=64", "-DTOY_TILE=32", "-DTOY_WARPS=4", "-DTOY_SWIZZLE=1", "-DTOY_PIPE=0"}, ""},
		{"macro values", Config{"tile": "16", "warps": "2", "layout": "pad", "pipe": "1"}, []string{"-DTOY_D=64", "-DTOY_TILE=16", "-DTOY_WARPS=2", "-DTOY_SWIZZLE=0", "-DTOY_PIPE=1"}, ""},
		{"constraints not run", Config{"tile": "16", "warps": "4", "layout": "pad", "pipe": "1"}, []string{"-DTOY_D=64", "-DTOY_TILE=16", "-DTOY_WARPS=4", "-DTOY_SWIZZLE=0", "-DTOY_PIPE=1"}, ""},
		{"missing knob", Config{"tile": "16"}, nil, "knob warps: missing"},
		{"unknown knob", Config{"tile": "16", "warps": "2", "layout": "pad", "pipe": "1", "evil": "1"}, nil, `unknown knob "evil"`},
		{"injected flag", Config{"tile": "32 -Xptxas -O0", "warps": "2", "layout": "pad", "pipe": "1"}, nil, `knob tile: value "32 -Xptxas -O0" not in`},
		{"macro value as value", Config{"tile": "16", "warps": "2", "layout": "1", "pipe": "1"}, nil, `knob layout: value "1" not in`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := s.Flags(tt.c)
			wantErr(t, err, tt.err)
			if !slices.Equal(got, tt.want) {
				t.Fatalf("Flags = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestFlagsRefusesUnvalidatedDeclarations shows that Flags holds the line
// even for a space whose declaration was never validated.
func TestFlagsRefusesUnvalidatedDeclarations(t *testing.T) {
	tests := []struct {
		name   string
		modify func(*Space)
		err    string
	}{
		{"define value", func(s *Space) { s.Defines[0].Value = "64 -O0" }, `"-DTOY_D=64 -O0" is not of the form`},
		{"define macro", func(s *Space) { s.Defines[0].Macro = "X=1 -DY" }, "is not of the form"},
		{"knob value", func(s *Space) { s.Knobs[0].Values[1] = "32;rm" }, `"-DTOY_TILE=32;rm" is not of the form`},
		{"macro value", func(s *Space) { s.Knobs[2].MacroValues[1] = "$(id)" }, "is not of the form"},
		{"short macro values", func(s *Space) { s.Knobs[2].MacroValues = []string{"0"} }, `knob layout: no macro value for "swizzle"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := toySpace()
			tt.modify(s)
			if s.Validate() == nil {
				t.Fatal("Validate accepted the broken declaration")
			}
			c := s.Default()
			if tt.name == "knob value" {
				c["tile"] = "32;rm"
			}
			_, err := s.Flags(c)
			wantErr(t, err, tt.err)
		})
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		modify func(*Space)
		err    string
	}{
		{"no family", func(s *Space) { s.Family = "" }, "no family name"},
		{"no knobs", func(s *Space) { s.Knobs = nil }, "has no knobs"},
		{"bad name", func(s *Space) { s.Knobs[0].Name = "ti le" }, `name "ti le" is not an identifier`},
		{"name with comma", func(s *Space) { s.Knobs[0].Name = "a,b" }, "is not an identifier"},
		{"duplicate name", func(s *Space) { s.Knobs[1].Name = "tile" }, "knob tile: declared twice"},
		{"bad macro", func(s *Space) { s.Knobs[0].Macro = "1TILE" }, `macro "1TILE" is not a C identifier`},
		{"duplicate macro", func(s *Space) { s.Knobs[1].Macro = "TOY_TILE" }, "macro TOY_TILE already used by knob tile"},
		{"define clashes with knob", func(s *Space) { s.Defines[0].Macro = "TOY_PIPE" }, "define TOY_PIPE: macro already used by knob pipe"},
		{"bad layer", func(s *Space) { s.Knobs[0].Layer = 7 }, "unknown layer 7"},
		{"no values", func(s *Space) { s.Knobs[0].Values = nil; s.Knobs[0].Default = "" }, "knob tile: no values"},
		{"duplicate value", func(s *Space) { s.Knobs[0].Values = []string{"16", "16"}; s.Knobs[0].Default = "16" }, `value "16" listed twice`},
		{"value with space", func(s *Space) { s.Knobs[0].Values[0] = "1 6" }, `value "1 6" is not a plain literal`},
		{"value with equals", func(s *Space) { s.Knobs[0].Values[0] = "a=b" }, "is not a plain literal"},
		{"macro values length", func(s *Space) { s.Knobs[2].MacroValues = []string{"0"} }, "knob layout: 1 macro values for 2 values"},
		{"bad macro value", func(s *Space) { s.Knobs[2].MacroValues[0] = "0 1" }, `macro value "0 1" is not a plain literal`},
		{"default not in list", func(s *Space) { s.Knobs[0].Default = "48" }, `knob tile: default "48" not in [16 32 64]`},
		{"absent value not in list", func(s *Space) { s.Knobs[3].Absent = "off" }, `knob pipe: absent value "off" not in [0 1]`},
		{"bad define macro", func(s *Space) { s.Defines[0].Macro = "-O3" }, `define "-O3": not a C identifier`},
		{"bad define value", func(s *Space) { s.Defines[0].Value = "" }, `define TOY_D: value "" is not a plain literal`},
		{"nameless constraint", func(s *Space) { s.Constraints[0].Name = "" }, "constraint 0 has no name"},
		{"constraint without check", func(s *Space) { s.Constraints[1].Check = nil }, `constraint "pipe_tile" has no check`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := toySpace()
			tt.modify(s)
			wantErr(t, s.Validate(), tt.err)
		})
	}
}

func TestNeighbours(t *testing.T) {
	s := toySpace()
	tests := []struct {
		from string
		want []string
	}{
		// tile=16 is refused with warps=4; pipe=1 is fine with tile=32.
		{"", []string{
			"layout=swizzle,pipe=0,tile=64,warps=4",
			"layout=swizzle,pipe=0,tile=32,warps=2",
			"layout=pad,pipe=0,tile=32,warps=4",
			"layout=swizzle,pipe=1,tile=32,warps=4",
		}},
		// From tile=16: warps=4 and pipe=1 are both refused.
		{"tile=16,warps=2,layout=pad", []string{
			"layout=pad,pipe=0,tile=32,warps=2",
			"layout=pad,pipe=0,tile=64,warps=2",
			"layout=swizzle,pipe=0,tile=16,warps=2",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.from, func(t *testing.T) {
			var got []string
			for _, n := range s.Neighbours(mustParse(t, s, tt.from)) {
				got = append(got, n.Key())
			}
			if !slices.Equal(got, tt.want) {
				t.Fatalf("Neighbours:\n got %q\nwant %q", got, tt.want)
			}
		})
	}
}

func TestSizeMatchesEnumerate(t *testing.T) {
	s := toySpace()
	raw, valid := s.Size()
	if raw != 24 || valid != 18 {
		t.Fatalf("Size() = %d, %d; want 24, 18", raw, valid)
	}
	var keys []string
	var prev []int
	s.Enumerate(func(c Config) bool {
		if err := s.Check(c); err != nil {
			t.Errorf("Enumerate yielded invalid %s: %v", c.Key(), err)
		}
		// Mixed-radix order, first knob slowest: the index vectors increase
		// lexicographically.
		idx := make([]int, len(s.Knobs))
		for i, k := range s.Knobs {
			idx[i] = slices.Index(k.Values, c[k.Name])
		}
		if prev != nil && slices.Compare(prev, idx) >= 0 {
			t.Errorf("Enumerate order: %v after %v", idx, prev)
		}
		prev = idx
		keys = append(keys, c.Key())
		c["tile"] = "mutated" // the config is ours to keep and change
		return true
	})
	if uint64(len(keys)) != valid {
		t.Fatalf("Enumerate yielded %d configs, Size says %d", len(keys), valid)
	}
	if keys[0] != "layout=pad,pipe=0,tile=16,warps=2" {
		t.Fatalf("first config %s", keys[0])
	}
	n := 0
	s.Enumerate(func(Config) bool { n++; return n < 5 })
	if n != 5 {
		t.Fatalf("Enumerate went on after fn returned false: %d calls", n)
	}
}

func TestValidConfigsIsEnumerate(t *testing.T) {
	s := toySpace()
	var want []string
	s.Enumerate(func(c Config) bool { want = append(want, c.Key()); return true })
	got := s.ValidConfigs()
	if len(got) != len(want) {
		t.Fatalf("ValidConfigs gave %d configs, Enumerate %d", len(got), len(want))
	}
	for i, c := range got {
		if c.Key() != want[i] {
			t.Fatalf("ValidConfigs[%d] = %s, Enumerate gave %s", i, c.Key(), want[i])
		}
	}
	none := toySpace()
	none.Constraints = append(none.Constraints, Constraint{Name: "none", Check: func(Config) error {
		return errors.New("nothing fits")
	}})
	if cs := none.ValidConfigs(); cs == nil || len(cs) != 0 {
		t.Fatalf("ValidConfigs of a space with no valid config = %#v, want an empty non-nil slice", cs)
	}
}

func TestSizeRaw(t *testing.T) {
	tests := []struct {
		name      string
		lens      []int
		raw       uint64
		saturated bool
	}{
		{"one knob", []int{3}, 3, false},
		{"product", []int{2, 3, 4}, 24, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := gridSpace(tt.lens)
			raw, valid := s.Size()
			if raw != tt.raw || valid != tt.raw {
				t.Fatalf("Size() = %d, %d; want %d, %d", raw, valid, tt.raw, tt.raw)
			}
		})
	}
}

// gridSpace returns an unconstrained space with one knob per length.
func gridSpace(lens []int) *Space {
	s := &Space{Family: "grid"}
	for i, n := range lens {
		k := Knob{Name: fmt.Sprintf("k%d", i), Macro: fmt.Sprintf("K%d", i), Layer: Layer(i % 2)}
		for v := range n {
			k.Values = append(k.Values, fmt.Sprint(v))
		}
		k.Default = k.Values[0]
		s.Knobs = append(s.Knobs, k)
	}
	return s
}

func TestSampleIsValidAndCovers(t *testing.T) {
	s := toySpace()
	rng := rand.New(rand.NewPCG(1, 2))
	counts := make(map[string]int)
	values := make(map[string]bool)
	const draws = 3600
	for range draws {
		c := s.Sample(rng)
		if err := s.Check(c); err != nil {
			t.Fatalf("Sample returned invalid %s: %v", c.Key(), err)
		}
		counts[c.Key()]++
		for name, v := range c {
			values[name+"="+v] = true
		}
	}
	for _, k := range s.Knobs {
		for _, v := range k.Values {
			if !values[k.Name+"="+v] {
				t.Errorf("Sample never drew %s=%s", k.Name, v)
			}
		}
	}
	if len(counts) != 18 {
		t.Fatalf("Sample drew %d distinct configs, want all 18", len(counts))
	}
	// 200 expected each; a uniform draw stays well within [120, 280].
	for key, n := range counts {
		if n < 120 || n > 280 {
			t.Errorf("config %s drawn %d times of %d: not uniform", key, n, draws)
		}
	}
}

func TestSampleSparseAndEmpty(t *testing.T) {
	only := "k0=3,k1=1,k2=4,k3=1,k4=5"
	s := gridSpace([]int{10, 10, 10, 10, 10})
	s.Constraints = []Constraint{{Name: "one", Check: func(c Config) error {
		if c.Key() != only {
			return errors.New("not the one")
		}
		return nil
	}}}
	rng := rand.New(rand.NewPCG(3, 4))
	if got := s.Sample(rng); got.Key() != only {
		t.Fatalf("Sample on a one-config space = %q, want %q", got.Key(), only)
	}
	s.Constraints[0].Check = func(Config) error { return errors.New("never") }
	if got := s.Sample(rng); got != nil {
		t.Fatalf("Sample on an empty space = %q, want nil", got.Key())
	}
}

func TestMutate(t *testing.T) {
	s := toySpace()
	rng := rand.New(rand.NewPCG(5, 6))
	for _, layer := range []Layer{Macro, Micro} {
		changed := make(map[string]bool)
		for range 200 {
			from := s.Sample(rng)
			m, ok := s.Mutate(rng, from, layer)
			if !ok {
				t.Fatalf("Mutate(%s, layer %d) found no move", from.Key(), layer)
			}
			if err := s.Check(m); err != nil {
				t.Fatalf("Mutate returned invalid %s: %v", m.Key(), err)
			}
			var diff []string
			for _, k := range s.Knobs {
				if m[k.Name] != from[k.Name] {
					diff = append(diff, k.Name)
					if k.Layer != layer {
						t.Fatalf("Mutate in layer %d changed %s (layer %d)", layer, k.Name, k.Layer)
					}
				}
			}
			if len(diff) != 1 {
				t.Fatalf("Mutate changed %v, want exactly one knob", diff)
			}
			changed[diff[0]] = true
		}
		for _, k := range s.Knobs {
			if k.Layer == layer && !changed[k.Name] {
				t.Errorf("Mutate in layer %d never changed %s", layer, k.Name)
			}
		}
	}
	// From tile=16,warps=2,pipe=0 the only macro move is the tile: pipe=1
	// is refused. Pinned tile: no macro move at all.
	s.Constraints = append(s.Constraints, Constraint{Name: "pin", Check: func(c Config) error {
		if c["tile"] != "16" {
			return errors.New("pinned")
		}
		return nil
	}})
	from := mustParse(t, s, "tile=16,warps=2")
	if m, ok := s.Mutate(rng, from, Macro); ok {
		t.Fatalf("Mutate found %s, want no move", m.Key())
	}
	if m, ok := s.Mutate(rng, from, Micro); !ok || m["layout"] != "pad" {
		t.Fatalf("Mutate(Micro) = %s, %v; want layout=pad", m.Key(), ok)
	}
}

func TestCrossover(t *testing.T) {
	s := toySpace()
	rng := rand.New(rand.NewPCG(7, 8))
	a := mustParse(t, s, "tile=16,warps=2,layout=pad,pipe=0")
	b := mustParse(t, s, "tile=64,warps=4,layout=swizzle,pipe=1")
	seen := make(map[string]bool)
	for range 200 {
		c := s.Crossover(rng, a, b)
		if err := s.Check(c); err != nil {
			t.Fatalf("Crossover returned invalid %s: %v", c.Key(), err)
		}
		for _, k := range s.Knobs {
			if c[k.Name] != a[k.Name] && c[k.Name] != b[k.Name] {
				t.Fatalf("Crossover %s: knob %s from neither parent", c.Key(), k.Name)
			}
		}
		seen[c.Key()] = true
	}
	// Of the 16 mixes, the ones with tile=16 and warps=4 or pipe=1 are refused.
	if len(seen) != 10 {
		t.Fatalf("Crossover produced %d distinct children, want 10", len(seen))
	}
	s.Constraints = append(s.Constraints, Constraint{Name: "none", Check: func(Config) error { return errors.New("no") }})
	c := s.Crossover(rng, a, b)
	if !reflect.DeepEqual(c, a) {
		t.Fatalf("Crossover with no valid child = %s, want a clone of a", c.Key())
	}
	c["tile"] = "64"
	if a["tile"] != "16" {
		t.Fatal("Crossover returned a itself, not a clone")
	}
}

func TestConfigJSON(t *testing.T) {
	tests := []struct {
		name, in string
		want     Config
		err      string
	}{
		{"object", `{"tile":"64","warps":"2"}`, Config{"tile": "64", "warps": "2"}, ""},
		{"empty", `{}`, Config{}, ""},
		{"null", `null`, nil, ""},
		{"spaces", " { \"a\" : \"1\" } ", Config{"a": "1"}, ""},
		{"number", `{"tile":64}`, nil, `knob "tile": value must be a string, got a number`},
		{"bool", `{"ws":true}`, nil, `knob "ws": value must be a string, got a boolean`},
		{"null value", `{"ws":null}`, nil, `knob "ws": value must be a string, got null`},
		{"nested", `{"ws":{"a":"b"}}`, nil, `knob "ws": value must be a string, got an object`},
		{"array", `["a"]`, nil, "want an object of knob names to string values, got an array"},
		{"string", `"a=1"`, nil, `got "a=1"`},
		{"duplicate", `{"a":"1","a":"1"}`, nil, `knob "a" named twice`},
		{"torn", `{"a":"1"`, nil, "unexpected end of JSON input"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c Config
			err := json.Unmarshal([]byte(tt.in), &c)
			wantErr(t, err, tt.err)
			if err == nil && !reflect.DeepEqual(c, tt.want) {
				t.Fatalf("decoded %#v, want %#v", c, tt.want)
			}
		})
	}
}

func TestConfigJSONInsideResult(t *testing.T) {
	in := Result{Key: "a=1", Config: Config{"a": "1"}, Status: StatusOK, Gate: GateTimed}
	data, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	var out Result
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(out.Config, in.Config) {
		t.Fatalf("round trip: %v, want %v", out.Config, in.Config)
	}
	err = json.Unmarshal([]byte(`{"key":"a=1","config":{"a":1}}`), &out)
	wantErr(t, err, `knob "a": value must be a string`)
}

// bigSpace has the shape of the SDPA space (110,592 raw configs) with a few
// constraints of the same cost, to measure enumeration.
func bigSpace() *Space {
	s := gridSpace([]int{2, 2, 4, 4, 3, 3, 2, 2, 2, 2, 4, 3})
	s.Constraints = []Constraint{
		{Name: "a", Check: func(c Config) error {
			if c.Int("k0") == 0 && c.Int("k1") == 1 {
				return errors.New("k1 needs k0")
			}
			return nil
		}},
		{Name: "b", Check: func(c Config) error {
			if c.Int("k3")*c.Int("k2") > 3 {
				return errors.New("too big")
			}
			return nil
		}},
	}
	return s
}

func TestSizeBig(t *testing.T) {
	raw, valid := bigSpace().Size()
	// k0,k1: 3 of 4 pairs; k2*k3 <= 3 over 0..3 x 0..3: 12 of 16 pairs.
	if raw != 110592 || valid != 110592*3/4*12/16 {
		t.Fatalf("Size() = %d, %d; want 110592, %d", raw, valid, 110592*3/4*12/16)
	}
}

func BenchmarkSize(b *testing.B) {
	s := bigSpace()
	for b.Loop() {
		s.Size()
	}
}

func BenchmarkSample(b *testing.B) {
	s := bigSpace()
	rng := rand.New(rand.NewPCG(1, 1))
	for b.Loop() {
		s.Sample(rng)
	}
}

func TestFromKey(t *testing.T) {
	for _, c := range []Config{
		nil,
		{"a": "1"},
		{"block_m": "64", "block_n": "128", "kv_layout": "swizzle", "ws": "0", "x": ""},
		{"": "v", "b": "2"},
	} {
		got, ok := FromKey(c.Key())
		if !ok || !maps.Equal(got, c) || (got == nil) != (c == nil) {
			t.Errorf("FromKey(%q) = %v, %v; want %v", c.Key(), got, ok, c)
		}
	}
	for _, key := range []string{"a", "a=1,a=2", "b=1,a=2", "a=1,,b=2", "a=1=2", "a=1,b"} {
		if c, ok := FromKey(key); ok {
			t.Errorf("FromKey(%q) = %v: a key Key cannot produce was taken", key, c)
		}
	}
	// A value holding "," makes the key ambiguous: FromKey gives another
	// config or none, never the same one by luck; callers compare.
	c := Config{"a": "1,b=2"}
	if got, ok := FromKey(c.Key()); ok && maps.Equal(got, c) {
		t.Errorf("FromKey(%q) = %v: an ambiguous key round-tripped", c.Key(), got)
	}
}

func TestSetKeyReuses(t *testing.T) {
	c := Config{"old": "1"}
	if !c.SetKey("a=1,b=2") || !maps.Equal(c, Config{"a": "1", "b": "2"}) {
		t.Fatalf("SetKey gave %v", c)
	}
	if !c.SetKey("") || len(c) != 0 {
		t.Fatalf("SetKey of the empty key left %v", c)
	}
	if c.SetKey("b=1,a=2") {
		t.Fatal("SetKey took names out of order")
	}
}

// TestSteps checks the one-step neighbours: for each knob the nearest valid
// value below and above, a refused value skipped for the next one.
func TestSteps(t *testing.T) {
	s := &Space{
		Family: "steps",
		Knobs: []Knob{
			{Name: "a", Macro: "S_A", Values: []string{"1", "2", "3", "4"}, Layer: Macro, Default: "1"},
			{Name: "b", Macro: "S_B", Values: []string{"0", "1"}, Layer: Micro, Default: "0"},
		},
		Constraints: []Constraint{{Name: "a_b", Check: func(c Config) error {
			if c["a"] == "3" && c["b"] == "1" {
				return errors.New("a=3 needs b=0")
			}
			return nil
		}}},
	}
	tests := []struct {
		s    *Space
		from string
		want []string
	}{
		{s, "a=2,b=0", []string{"a=1,b=0", "a=3,b=0", "a=2,b=1"}},
		{s, "a=2,b=1", []string{"a=1,b=1", "a=4,b=1", "a=2,b=0"}}, // a=3 refused: the next value up
		{s, "a=4,b=1", []string{"a=2,b=1", "a=4,b=0"}},
		{s, "a=1,b=0", []string{"a=2,b=0", "a=1,b=1"}},
		{s, "a=3,b=0", []string{"a=2,b=0", "a=4,b=0"}}, // b=1 refused
		// Neighbours would also give tile=64: a step is the next value only.
		{toySpace(), "tile=16,warps=2,layout=pad", []string{
			"layout=pad,pipe=0,tile=32,warps=2",
			"layout=swizzle,pipe=0,tile=16,warps=2",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.from, func(t *testing.T) {
			var got []string
			for _, n := range tt.s.Steps(mustParse(t, tt.s, tt.from)) {
				if err := tt.s.Check(n); err != nil {
					t.Errorf("step %s is invalid: %v", n.Key(), err)
				}
				got = append(got, n.Key())
			}
			if !slices.Equal(got, tt.want) {
				t.Fatalf("Steps:\n got %q\nwant %q", got, tt.want)
			}
		})
	}
}
