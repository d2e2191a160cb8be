package elites_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
	"testing/iotest"

	"evotune/elites"
	"evotune/space"
)

func TestReadLog(t *testing.T) {
	type warning struct {
		line   int
		offset int64
		reason string // a part of the reason
	}
	tests := []struct {
		name     string
		input    string
		keys     []string
		warnings []warning
	}{
		{name: "empty"},
		{name: "good", input: "{\"seq\":1,\"key\":\"a\"}\n{\"seq\":2,\"key\":\"b\"}\n", keys: []string{"a", "b"}},
		{name: "crlf", input: "{\"key\":\"a\"}\r\n", keys: []string{"a"}},
		{
			name:     "garbage",
			input:    "{\"key\":\"a\"}\nhello\n{\"key\":\"b\"}\n",
			keys:     []string{"a", "b"},
			warnings: []warning{{2, 12, "not a JSON object"}},
		},
		{
			name:  "not results",
			input: "[1,2]\nnull\n{}\n{\"key\":\"\"}\n{\"key\":\"x\",\"seq\":\"one\"}\n{\"key\":\"y\"} {\"key\":\"z\"}\n\n",
			warnings: []warning{
				{1, 0, "not a JSON object"},
				{2, 6, "not a JSON object"},
				{3, 11, "no key"},
				{4, 14, "no key"},
				{5, 25, "not a result"},
				{6, 49, "not a result"},
				{7, 73, "empty line"},
			},
		},
		{
			name:     "duplicate keeps the first",
			input:    "{\"seq\":1,\"key\":\"a\"}\n{\"seq\":2,\"key\":\"a\"}\n",
			keys:     []string{"a"},
			warnings: []warning{{2, 20, `key "a" already recorded on line 1`}},
		},
		{
			name:     "torn",
			input:    "{\"key\":\"a\"}\n{\"key\":\"b\"}",
			keys:     []string{"a"},
			warnings: []warning{{2, 12, "torn last line (11 bytes"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rs, ws := elites.ReadLog(strings.NewReader(tt.input))
			if got := keys(rs); !slices.Equal(got, tt.keys) && len(got)+len(tt.keys) > 0 {
				t.Errorf("keys = %v, want %v", got, tt.keys)
			}
			if len(ws) != len(tt.warnings) {
				t.Fatalf("warnings = %v, want %d", ws, len(tt.warnings))
			}
			for i, w := range tt.warnings {
				if ws[i].Line != w.line || ws[i].Offset != w.offset || !strings.Contains(ws[i].Reason, w.reason) {
					t.Errorf("warning %d = %v, want line %d byte %d %q", i, ws[i], w.line, w.offset, w.reason)
				}
			}
		})
	}
}

func TestReadLogReadError(t *testing.T) {
	boom := errors.New("device gone")
	r := io.MultiReader(strings.NewReader("{\"key\":\"a\"}\n{\"ke"), iotest.ErrReader(boom))
	rs, ws := elites.ReadLog(r)
	if !slices.Equal(keys(rs), []string{"a"}) {
		t.Errorf("keys = %v, want [a]", keys(rs))
	}
	if len(ws) != 2 || !strings.Contains(ws[0].Reason, "torn") || !strings.Contains(ws[1].Reason, "device gone") {
		t.Errorf("warnings = %v, want a torn line then the read error", ws)
	}
}

// TestReadLogTorn cuts a log of full results at every byte of its last line.
func TestReadLogTorn(t *testing.T) {
	var log bytes.Buffer
	enc := json.NewEncoder(&log)
	for _, r := range []any{okResult("a", 2), rejected("b"), okResult("c", 1)} {
		if err := enc.Encode(r); err != nil {
			t.Fatal(err)
		}
	}
	full := log.Bytes()
	start := bytes.LastIndexByte(full[:len(full)-1], '\n') + 1
	for cut := start; cut <= len(full); cut++ {
		rs, ws := elites.ReadLog(bytes.NewReader(full[:cut]))
		want, wantWarnings := []string{"a", "b"}, 1
		switch cut {
		case start:
			wantWarnings = 0
		case len(full):
			want, wantWarnings = []string{"a", "b", "c"}, 0
		}
		if !slices.Equal(keys(rs), want) || len(ws) != wantWarnings {
			t.Fatalf("cut %d of %d: keys %v warnings %v; want %v and %d warnings", cut, len(full), keys(rs), ws, want, wantWarnings)
		}
	}
}

// FuzzReadLog feeds arbitrary bytes to the log reader: it never panics, its
// warnings point inside the input, keys come out unique, and every result it
// returns encodes to JSON that reads back with the same key.
func FuzzReadLog(f *testing.F) {
	f.Add([]byte("{\"seq\":1,\"key\":\"a\"}\n"))
	f.Add([]byte("{\"key\":\"a\"}\ngarbage\n{\"key\":\"a\"}\n{\"key\":\"b\""))
	f.Fuzz(func(t *testing.T, data []byte) {
		rs, ws := elites.ReadLog(bytes.NewReader(data))
		seen := make(map[string]bool)
		for _, r := range rs {
			if r.Key == "" || seen[r.Key] {
				t.Fatalf("key %q empty or returned twice", r.Key)
			}
			seen[r.Key] = true
			enc, err := json.Marshal(r)
			if err != nil {
				t.Fatalf("result %q does not encode: %v", r.Key, err)
			}
			back, bws := elites.ReadLog(bytes.NewReader(append(enc, '\n')))
			if len(back) != 1 || len(bws) != 0 || back[0].Key != r.Key {
				t.Fatalf("result %q re-encoded as %s reads back as %v, warnings %v", r.Key, enc, keys(back), bws)
			}
		}
		for _, w := range ws {
			if w.Line < 1 || w.Offset < 0 || w.Offset > int64(len(data)) || w.Reason == "" {
				t.Fatalf("warning %v out of range for %d bytes", w, len(data))
			}
		}
	})
}

// TestReadLogParallel reads a log of a few thousand lines, some damaged,
// duplicated or torn, on several CPUs and on one: decoding is shared out
// among the CPUs, and what is read (results, warnings with their lines and
// offsets, the clean length) is the same.
func TestReadLogParallel(t *testing.T) {
	var b strings.Builder
	for i := range 3000 {
		r := okResult(fmt.Sprintf("k%d", i%2900), float64(1+i%97))
		r.Seq = i + 1
		line, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		switch i % 211 {
		case 5:
			line = line[:len(line)/2] // a damaged line
		case 7:
			line = nil // an empty line
		}
		b.Write(line)
		b.WriteByte('\n')
	}
	b.WriteString(`{"seq":3001,"key":"torn"`)
	read := func(procs int) ([]space.Result, []elites.LoadWarning) {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
		return elites.ReadLog(strings.NewReader(b.String()))
	}
	one, oneW := read(1)
	many, manyW := read(4)
	if len(one) < 2800 || len(oneW) < 100 {
		t.Fatalf("the log read as %d results and %d warnings; the test wants many of both", len(one), len(oneW))
	}
	if !reflect.DeepEqual(one, many) {
		t.Error("results read on 4 CPUs differ from those read on 1")
	}
	if !reflect.DeepEqual(oneW, manyW) {
		t.Errorf("warnings read on 4 CPUs differ from those read on 1:\n%v\n%v", manyW, oneW)
	}
	// Every warning names its line and that line's first byte.
	var starts []int64
	for off, text := 0, b.String(); off < len(text); {
		starts = append(starts, int64(off))
		n := strings.IndexByte(text[off:], '\n')
		if n < 0 {
			break
		}
		off += n + 1
	}
	for _, w := range manyW {
		if w.Offset != starts[w.Line-1] {
			t.Errorf("warning %v: line %d starts at byte %d", w, w.Line, starts[w.Line-1])
		}
	}
}
