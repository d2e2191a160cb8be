package space_test

// Hostile input: a config string, a config decoded from JSON or one built
// by hand with values no knob lists must never become compiler flags.

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"evotune/kernels"
	"evotune/space"
)

// hostileValues are values that would do harm if they reached a shell or
// nvcc's command line.
var hostileValues = []string{
	"64 -Xcompiler -fplugin=x",
	"64 -Xcompiler=-fplugin=/tmp/x.so",
	"$(touch /tmp/pwn)",
	"`touch /tmp/pwn`",
	"64; rm -rf /",
	"64 && touch /tmp/pwn",
	"64\n-DSDPA_EVIL=1",
	"64\r\n",
	"64\x00",
	"-DSDPA_BLOCK_M=64",
	"64 ",
	"0x40",
	"",
}

func sdpaSpace(t *testing.T) *space.Space {
	t.Helper()
	target, err := kernels.TargetFor("sm_89")
	if err != nil {
		t.Fatal(err)
	}
	sp, err := kernels.SDPASpace(space.Problem{Family: kernels.DefaultFamily, Shapes: []space.Shape{{B: 1, H: 8, S: 512, D: 64}}, Dtype: "fp16"}, target)
	if err != nil {
		t.Fatal(err)
	}
	return sp
}

// plainFlag is the only form a rendered flag may take.
var plainFlag = regexp.MustCompile(`^-D[A-Za-z_][A-Za-z0-9_]*=[A-Za-z0-9_.+-]+$`)

func TestHostileConfigString(t *testing.T) {
	sp := sdpaSpace(t)
	var texts []string
	for _, v := range hostileValues {
		texts = append(texts, "block_m="+v)
	}
	texts = append(texts,
		"evil=1",
		"block_m=64,-DSDPA_EVIL=1",
		"block_m=64,evil=$(touch /tmp/pwn)",
		"block_m=64\nwarps=8 -Xcompiler -fplugin=x",
		"block_m=64,block_m=128",
		"SDPA_BLOCK_M=64",
		"block_m",
		"=64",
	)
	for _, text := range texts {
		c, err := sp.Parse(text)
		if err == nil {
			// Parse trims spaces around a value ("64 " is 64): what it
			// accepts must still be a listed value.
			if flags, ferr := sp.Flags(c); ferr != nil || !allPlain(flags) {
				t.Errorf("Parse(%q) accepted %v, which renders to %q (%v)", text, c, flags, ferr)
			}
			continue
		}
		if msg := err.Error(); msg == "" || strings.ContainsAny(msg, "\n\r") {
			t.Errorf("Parse(%q): error %q; want one line", text, msg)
		}
	}
}

func TestHostileConfigValues(t *testing.T) {
	sp := sdpaSpace(t)
	for _, v := range hostileValues {
		for _, k := range sp.Knobs {
			c := sp.Default()
			c[k.Name] = v
			if err := sp.Check(c); err == nil {
				t.Errorf("Check accepts %s=%q", k.Name, v)
			}
			if flags, err := sp.Flags(c); err == nil {
				t.Errorf("Flags renders %s=%q as %q", k.Name, v, flags)
			}
		}
	}
	// Unknown knobs, including ones named like flags, are refused too.
	for _, name := range []string{"evil", "-Xcompiler", "block_m -fplugin=x", "SDPA_BLOCK_M", ""} {
		c := sp.Default()
		c[name] = "1"
		if err := sp.Check(c); err == nil {
			t.Errorf("Check accepts unknown knob %q", name)
		}
		if flags, err := sp.Flags(c); err == nil && !allPlain(flags) {
			t.Errorf("Flags renders unknown knob %q as %q", name, flags)
		}
	}
}

// TestHostileConfigJSON decodes hostile configs as they would arrive in an
// archive or a replay file: whatever decodes is refused by Check and Flags.
func TestHostileConfigJSON(t *testing.T) {
	sp := sdpaSpace(t)
	for _, v := range hostileValues {
		raw, err := json.Marshal(map[string]string{"block_m": v})
		if err != nil {
			t.Fatal(err)
		}
		var c space.Config
		if err := json.Unmarshal(raw, &c); err != nil {
			continue // refused by the decoder: fine
		}
		full := sp.Default()
		for k, val := range c {
			full[k] = val
		}
		if err := sp.Check(full); err == nil {
			t.Errorf("a decoded config with block_m=%q passes Check", v)
		}
		if flags, err := sp.Flags(full); err == nil {
			t.Errorf("a decoded config with block_m=%q renders to %q", v, flags)
		}
	}
}

// TestFlagsOnlyFromTheSpace renders every knob value: each flag is plain and
// names a macro of the space.
func TestFlagsOnlyFromTheSpace(t *testing.T) {
	sp := sdpaSpace(t)
	macros := map[string]bool{}
	for _, d := range sp.Defines {
		macros[d.Macro] = true
	}
	for _, k := range sp.Knobs {
		macros[k.Macro] = true
	}
	for _, k := range sp.Knobs {
		for _, v := range k.Values {
			c := sp.Default()
			c[k.Name] = v
			flags, err := sp.Flags(c)
			if err != nil {
				t.Fatalf("%s=%s: %v", k.Name, v, err)
			}
			for _, f := range flags {
				macro, _, _ := strings.Cut(strings.TrimPrefix(f, "-D"), "=")
				if !plainFlag.MatchString(f) || !macros[macro] {
					t.Errorf("%s=%s renders %q", k.Name, v, f)
				}
			}
		}
	}
}

func allPlain(flags []string) bool {
	for _, f := range flags {
		if !plainFlag.MatchString(f) {
			return false
		}
	}
	return true
}
