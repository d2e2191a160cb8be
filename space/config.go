package space

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// A Config assigns a value to every knob of a space: knob name → value.
// Values are strings drawn from the knob's list ("64", "swizzle").
type Config map[string]string

// Key returns the canonical key: "name=value" pairs sorted by name, joined by ",".
func (c Config) Key() string {
	names := make([]string, 0, len(c))
	n := 0
	for name, value := range c {
		names = append(names, name)
		n += len(name) + len(value) + 2
	}
	slices.Sort(names)
	var b strings.Builder
	b.Grow(n)
	for i, name := range names {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(name)
		b.WriteByte('=')
		b.WriteString(c[name])
	}
	return b.String()
}

// FromKey returns the config whose Key is key, and whether there is one:
// a key that Key could not have produced (a pair without "=", names out of
// order or repeated, a name or value holding "," or "=" that makes the key
// ambiguous) gives false. FromKey(c.Key()) is c whenever no name or value of
// c holds "," or "=" (the empty key gives a nil config).
func FromKey(key string) (Config, bool) {
	if key == "" {
		return nil, true
	}
	c := make(Config, strings.Count(key, ",")+1)
	if !c.SetKey(key) {
		return nil, false
	}
	return c, true
}

// SetKey makes c the config whose Key is key, reusing c's storage (a loop
// over many keys need not allocate a map for each), and reports whether
// there is one, as FromKey does; on false c holds what could be read.
func (c Config) SetKey(key string) bool {
	clear(c)
	if key == "" {
		return true
	}
	prev := ""
	for pair := range strings.SplitSeq(key, ",") {
		name, value, ok := strings.Cut(pair, "=")
		if !ok || strings.Contains(value, "=") || (len(c) > 0 && name <= prev) {
			return false
		}
		c[name], prev = value, name
	}
	return true
}

// Hash returns a short stable hash of Key (16 hex digits).
func (c Config) Hash() string { return HashKey(c.Key()) }

// HashKey returns the Hash of the config whose Key is key.
func HashKey(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:8])
}

// Clone returns a copy.
func (c Config) Clone() Config {
	if c == nil {
		return nil
	}
	out := make(Config, len(c))
	for name, value := range c {
		out[name] = value
	}
	return out
}

// Int returns the value of knob name as an integer; it panics if the value
// is not an integer (a space's own declaration error).
func (c Config) Int(name string) int {
	v, err := strconv.Atoi(c[name])
	if err != nil {
		panic(fmt.Sprintf("space: knob %s: value %q is not an integer", name, c[name]))
	}
	return v
}

// UnmarshalJSON decodes a JSON object of string values. It refuses any other
// value type and a knob named twice, so that a config read from a file means
// exactly one thing.
func (c *Config) UnmarshalJSON(data []byte) error {
	// Fast path: a flat object of strings decodes directly, and counting
	// its strings tells whether a knob was named twice. Anything else takes
	// the token-by-token path, which says exactly what is wrong.
	var m map[string]string
	if json.Unmarshal(data, &m) == nil && 2*len(m) == countStrings(data) {
		*c = m
		return nil
	}
	return c.decodeTokens(data)
}

// countStrings counts the JSON strings in data, which holds valid JSON.
func countStrings(data []byte) int {
	n := 0
	in, escaped := false, false
	for _, b := range data {
		switch {
		case escaped:
			escaped = false
		case in && b == '\\':
			escaped = true
		case b == '"':
			if !in {
				n++
			}
			in = !in
		}
	}
	return n
}

// decodeTokens decodes data token by token, refusing with a precise
// message what the fast path could not take.
func (c *Config) decodeTokens(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	if err != nil {
		return fmt.Errorf("decoding config: %w", err)
	}
	if tok == nil {
		*c = nil
		return nil
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return fmt.Errorf("decoding config: want an object of knob names to string values, got %s", describeToken(tok))
	}
	out := Config{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return fmt.Errorf("decoding config: %w", err)
		}
		name, ok := tok.(string)
		if !ok {
			return fmt.Errorf("decoding config: want a knob name, got %s", describeToken(tok))
		}
		tok, err = dec.Token()
		if err != nil {
			return fmt.Errorf("decoding config: knob %q: %w", name, err)
		}
		value, ok := tok.(string)
		if !ok {
			// A nested value would otherwise leave the decoder mid-structure;
			// the message is all that matters, so stop here.
			return fmt.Errorf("decoding config: knob %q: value must be a string, got %s", name, describeToken(tok))
		}
		if _, dup := out[name]; dup {
			return fmt.Errorf("decoding config: knob %q named twice", name)
		}
		out[name] = value
	}
	if _, err := dec.Token(); err != nil { // the closing '}'
		return fmt.Errorf("decoding config: %w", err)
	}
	*c = out
	return nil
}

// describeToken names a JSON token's kind for an error message.
func describeToken(tok json.Token) string {
	switch v := tok.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case float64, json.Number:
		return "a number"
	case string:
		return strconv.Quote(v)
	case json.Delim:
		switch v {
		case '{':
			return "an object"
		case '[':
			return "an array"
		}
		return "'" + v.String() + "'"
	}
	return fmt.Sprintf("%T", tok)
}

// A Rejection says which constraint refused a config, and why.
type Rejection struct {
	Constraint string
	Reason     string
}

func (r *Rejection) Error() string { return r.Constraint + ": " + r.Reason }
