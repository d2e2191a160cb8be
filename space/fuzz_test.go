package space

import (
	"encoding/json"
	"reflect"
	"regexp"
	"testing"
)

// FuzzConfigJSON feeds arbitrary bytes to the Config decoder: it either
// refuses them or decodes a config that survives a round trip unchanged.
func FuzzConfigJSON(f *testing.F) {
	f.Add([]byte(`{"block_m":"64","ws":"1"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var c Config
		if err := json.Unmarshal(data, &c); err != nil {
			return
		}
		again, err := json.Marshal(c)
		if err != nil {
			t.Fatalf("re-encoding %#v: %v", c, err)
		}
		var d Config
		if err := json.Unmarshal(again, &d); err != nil {
			t.Fatalf("decoding re-encoded %s: %v", again, err)
		}
		if !reflect.DeepEqual(c, d) {
			t.Fatalf("round trip changed the config: %#v became %#v", c, d)
		}
		if c.Key() != d.Key() || c.Hash() != d.Hash() {
			t.Fatalf("round trip changed the key: %q became %q", c.Key(), d.Key())
		}
	})
}

// FuzzParse feeds arbitrary text to Parse: it never panics, and what it
// accepts always renders to plain -D flags.
func FuzzParse(f *testing.F) {
	flag := regexp.MustCompile(`^-D[A-Za-z_][A-Za-z0-9_]*=[A-Za-z0-9_.+-]+$`)
	s := toySpace()
	f.Add("tile=64,warps=2")
	f.Fuzz(func(t *testing.T, text string) {
		c, err := s.Parse(text)
		if err != nil {
			return
		}
		flags, err := s.Flags(c)
		if err != nil {
			t.Fatalf("Parse(%q) accepted %s but Flags refused it: %v", text, c.Key(), err)
		}
		if len(flags) != len(s.Defines)+len(s.Knobs) {
			t.Fatalf("Flags(%s) = %q: want %d flags", c.Key(), flags, len(s.Defines)+len(s.Knobs))
		}
		for _, fl := range flags {
			if !flag.MatchString(fl) {
				t.Fatalf("Parse(%q): flag %q is not -DIDENTIFIER=literal", text, fl)
			}
		}
	})
}
