package space

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// What may reach the compiler. Knob and define macros are C identifiers and
// every rendered value is a plain literal, so no value read from a file can
// turn into another compiler flag or a shell word.
var (
	identifierRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	literalRE    = regexp.MustCompile(`^[A-Za-z0-9_.+-]+$`)
	flagRE       = regexp.MustCompile(`^-D[A-Za-z_][A-Za-z0-9_]*=[A-Za-z0-9_.+-]+$`)
)

// Knob returns the knob with that name.
func (s *Space) Knob(name string) (Knob, bool) {
	for _, k := range s.Knobs {
		if k.Name == name {
			return k, true
		}
	}
	return Knob{}, false
}

// Default returns the family's hand-picked config.
func (s *Space) Default() Config {
	c := make(Config, len(s.Knobs))
	for _, k := range s.Knobs {
		c[k.Name] = k.Default
	}
	return c
}

// Check reports whether c is a complete config of s with values from each
// knob's list (an error naming the knob and the allowed values otherwise),
// then runs the constraints in order; a rejection is a *Rejection.
func (s *Space) Check(c Config) error {
	if err := s.checkValues(c); err != nil {
		return err
	}
	return s.checkConstraints(c)
}

// Complete returns c with every knob of s that c does not name and that
// declares an Absent value set to that value, and whether it set any: a
// config recorded before those knobs existed becomes the config of s that
// compiles the same code, with the key a search of s gives it. It never
// changes a value c names and never modifies c (what it returns is a new
// config when it set any, c itself otherwise). A knob without an Absent
// value stays missing, so Check refuses the config as it did.
func (s *Space) Complete(c Config) (Config, bool) {
	var out Config
	for _, k := range s.Knobs {
		if k.Absent == "" {
			continue
		}
		if _, named := c[k.Name]; named {
			continue
		}
		if out == nil {
			out = make(Config, len(c)+1)
			for name, value := range c {
				out[name] = value
			}
		}
		out[k.Name] = k.Absent
	}
	if out == nil {
		return c, false
	}
	return out, true
}

// checkValues checks that c names every knob of s and no other, each with a
// value from its list.
func (s *Space) checkValues(c Config) error {
	for _, k := range s.Knobs {
		v, ok := c[k.Name]
		if !ok {
			return fmt.Errorf("knob %s: missing (values %v)", k.Name, k.Values)
		}
		if !slices.Contains(k.Values, v) {
			return s.valueError(k, v)
		}
	}
	if len(c) != len(s.Knobs) {
		for name := range c {
			if _, ok := s.Knob(name); !ok {
				return s.unknownError(name)
			}
		}
	}
	return nil
}

// checkConstraints runs the constraints of s in order.
func (s *Space) checkConstraints(c Config) error {
	for _, con := range s.Constraints {
		if err := con.Check(c); err != nil {
			return &Rejection{Constraint: con.Name, Reason: err.Error()}
		}
	}
	return nil
}

func (s *Space) valueError(k Knob, v string) error {
	return fmt.Errorf("knob %s: value %q not in %v", k.Name, v, k.Values)
}

func (s *Space) unknownError(name string) error {
	names := make([]string, len(s.Knobs))
	for i, k := range s.Knobs {
		names[i] = k.Name
	}
	return fmt.Errorf("unknown knob %q (knobs: %s)", name, strings.Join(names, ", "))
}

// Parse reads "k=v,k=v" (knobs not named take their default) into a
// config of s, refusing unknown knobs and values not in the knob's list. It
// does not run constraints. Spaces around names, values and commas are
// ignored, and so are empty items ("a=1,,b=2", a trailing comma).
func (s *Space) Parse(text string) (Config, error) {
	c := s.Default()
	named := make(map[string]bool)
	for item := range strings.SplitSeq(text, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, value, ok := strings.Cut(item, "=")
		if !ok {
			return nil, fmt.Errorf("%q: want knob=value", item)
		}
		name, value = strings.TrimSpace(name), strings.TrimSpace(value)
		k, ok := s.Knob(name)
		if !ok {
			return nil, s.unknownError(name)
		}
		if named[name] {
			return nil, fmt.Errorf("knob %s named twice", name)
		}
		named[name] = true
		if !slices.Contains(k.Values, value) {
			return nil, s.valueError(k, value)
		}
		c[name] = value
	}
	return c, nil
}

// Flags renders the -D flags for c (defines first, then knobs in declaration
// order). It is the only place flags are made; it fails unless every value
// comes from its knob's list. Every flag it returns has the form
// -DIDENTIFIER=literal, even for a space that was never validated.
func (s *Space) Flags(c Config) ([]string, error) {
	if err := s.checkValues(c); err != nil {
		return nil, fmt.Errorf("rendering flags: %w", err)
	}
	flags := make([]string, 0, len(s.Defines)+len(s.Knobs))
	for _, d := range s.Defines {
		flags = append(flags, "-D"+d.Macro+"="+d.Value)
	}
	for _, k := range s.Knobs {
		v := c[k.Name]
		if k.MacroValues != nil {
			i := slices.Index(k.Values, v)
			if i >= len(k.MacroValues) {
				return nil, fmt.Errorf("rendering flags: knob %s: no macro value for %q", k.Name, v)
			}
			v = k.MacroValues[i]
		}
		flags = append(flags, "-D"+k.Macro+"="+v)
	}
	for _, f := range flags {
		if !flagRE.MatchString(f) {
			return nil, fmt.Errorf("rendering flags: %q is not of the form -DIDENTIFIER=literal", f)
		}
	}
	return flags, nil
}

// Validate checks the declaration of s itself: a family name; knobs with
// unique identifier names and macros, non-empty value lists without
// duplicates whose values are plain literals, a default and an Absent value
// (when set) from the list, and MacroValues (when set) parallel to Values;
// defines with identifier macros and literal values; constraints with a
// name and a check. A space built from a declaration should be validated
// once, before any search uses it.
func (s *Space) Validate() error {
	var errs []error
	fail := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf(format, args...))
	}
	if s.Family == "" {
		fail("space has no family name")
	}
	if len(s.Knobs) == 0 {
		fail("space %s has no knobs", s.Family)
	}
	names := make(map[string]bool)
	macros := make(map[string]string) // macro → what declares it
	for i, k := range s.Knobs {
		if !identifierRE.MatchString(k.Name) {
			fail("knob %d: name %q is not an identifier", i, k.Name)
		}
		if names[k.Name] {
			fail("knob %s: declared twice", k.Name)
		}
		names[k.Name] = true
		if !identifierRE.MatchString(k.Macro) {
			fail("knob %s: macro %q is not a C identifier", k.Name, k.Macro)
		} else if other, dup := macros[k.Macro]; dup {
			fail("knob %s: macro %s already used by %s", k.Name, k.Macro, other)
		}
		macros[k.Macro] = "knob " + k.Name
		if k.Layer != Macro && k.Layer != Micro {
			fail("knob %s: unknown layer %d", k.Name, k.Layer)
		}
		if len(k.Values) == 0 {
			fail("knob %s: no values", k.Name)
		}
		seen := make(map[string]bool)
		for _, v := range k.Values {
			if !literalRE.MatchString(v) {
				fail("knob %s: value %q is not a plain literal", k.Name, v)
			}
			if seen[v] {
				fail("knob %s: value %q listed twice", k.Name, v)
			}
			seen[v] = true
		}
		if k.MacroValues != nil {
			if len(k.MacroValues) != len(k.Values) {
				fail("knob %s: %d macro values for %d values", k.Name, len(k.MacroValues), len(k.Values))
			}
			for _, v := range k.MacroValues {
				if !literalRE.MatchString(v) {
					fail("knob %s: macro value %q is not a plain literal", k.Name, v)
				}
			}
		}
		if !seen[k.Default] {
			fail("knob %s: default %q not in %v", k.Name, k.Default, k.Values)
		}
		if k.Absent != "" && !seen[k.Absent] {
			fail("knob %s: absent value %q not in %v", k.Name, k.Absent, k.Values)
		}
	}
	for _, d := range s.Defines {
		if !identifierRE.MatchString(d.Macro) {
			fail("define %q: not a C identifier", d.Macro)
		} else if other, dup := macros[d.Macro]; dup {
			fail("define %s: macro already used by %s", d.Macro, other)
		}
		macros[d.Macro] = "define " + d.Macro
		if !literalRE.MatchString(d.Value) {
			fail("define %s: value %q is not a plain literal", d.Macro, d.Value)
		}
	}
	for i, con := range s.Constraints {
		if con.Name == "" {
			fail("constraint %d has no name", i)
		}
		if con.Check == nil {
			fail("constraint %q has no check", con.Name)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("space %s: %w", s.Family, err)
	}
	return nil
}
