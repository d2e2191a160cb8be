package runner

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"evotune/space"
)

//go:generate go run ./internal/mkreplay -o testdata/replay/synthetic-1x8x512x64-fp16.jsonl.gz
//go:generate go run ./internal/mkreplay --dtype fp8 --configs 16000 -o testdata/replay/synthetic-1x8x512x64-fp8.jsonl.gz

// A ReplayHeader says where a replay file's results come from. It is the
// optional first line of the file, {"replay_header": {...}}.
type ReplayHeader struct {
	Problem *space.Problem `json:"problem,omitempty"`
	Env     space.Env      `json:"env"`
	// Recorded says how the results were produced: a real tuning run, or a
	// model (then Synthetic is set and no figure in the file is a measurement).
	Recorded  string `json:"recorded"`
	Synthetic bool   `json:"synthetic,omitempty"`
	Seed      uint64 `json:"seed,omitempty"` // of a synthetic file's generator
	Configs   int    `json:"configs,omitempty"`
}

// replayHeaderLine is the wrapper of the header line.
type replayHeaderLine struct {
	Header *ReplayHeader `json:"replay_header"`
}

// Replay is an evaluator that answers from a recorded file instead of a GPU:
// each config recorded in the file gets its recorded result back, with its
// recorded cost, and any other config is refused. A search run against a
// replay is fast, repeatable and needs no GPU. A Replay is read-only after
// LoadReplay, so it is safe for concurrent use.
type Replay struct {
	name    string // the file's base name, set as Env.Replay
	header  ReplayHeader
	results map[string]space.Result
	best    *space.Result
}

// maxReplayLine bounds one line of a replay file: a result with its timing
// samples is a few kilobytes, so anything near this is not a result.
const maxReplayLine = 16 << 20

// LoadReplay reads a replay file: JSON lines of space.Result, gzip-compressed
// when the name ends in .gz, with an optional header line first. It refuses
// a file with no results, a line that is not a result, a result whose key
// does not match its config, and a config recorded twice; errors name the
// file and line.
func LoadReplay(path string) (*Replay, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("loading replay: %w", err)
	}
	defer f.Close()
	var in io.Reader = f
	if strings.HasSuffix(path, ".gz") {
		zr, err := gzip.NewReader(f)
		if err != nil {
			return nil, fmt.Errorf("loading replay %s: %w", path, err)
		}
		defer zr.Close()
		in = zr
	}
	r, err := readReplay(in, path)
	if err != nil {
		return nil, err
	}
	r.name = filepath.Base(path)
	return r, nil
}

// readReplay parses the lines of a replay file named path (for errors).
func readReplay(in io.Reader, path string) (*Replay, error) {
	r := &Replay{results: make(map[string]space.Result)}
	firstLine := make(map[string]int) // key → line it was recorded on
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 0, 64<<10), maxReplayLine)
	line := 0
	sawHeader := false
	for sc.Scan() {
		line++
		text := bytes.TrimSpace(sc.Bytes())
		if len(text) == 0 {
			continue
		}
		if len(firstLine) == 0 && !sawHeader {
			// Only the first non-blank line may be a header; a result line decodes
			// to no header at all.
			var h replayHeaderLine
			if err := json.Unmarshal(text, &h); err == nil && h.Header != nil {
				if h.Header.Recorded == "" {
					return nil, fmt.Errorf("%s:%d: replay header does not say how the results were recorded", path, line)
				}
				r.header = *h.Header
				sawHeader = true
				continue
			}
		}
		var res space.Result
		if err := json.Unmarshal(text, &res); err != nil {
			return nil, fmt.Errorf("%s:%d: decoding result: %w", path, line, err)
		}
		if len(res.Config) == 0 {
			var h replayHeaderLine
			if json.Unmarshal(text, &h) == nil && h.Header != nil {
				return nil, fmt.Errorf("%s:%d: a replay header is only allowed on the first line", path, line)
			}
			return nil, fmt.Errorf("%s:%d: result has no config", path, line)
		}
		if !knownStatus(res.Status) {
			return nil, fmt.Errorf("%s:%d: unknown status %q", path, line, res.Status)
		}
		key := res.Config.Key()
		if res.Key != "" && res.Key != key {
			return nil, fmt.Errorf("%s:%d: key %q does not match config %q", path, line, res.Key, key)
		}
		res.Key = key
		if first, dup := firstLine[key]; dup {
			return nil, fmt.Errorf("%s:%d: config %s recorded twice (first on line %d)", path, line, key, first)
		}
		firstLine[key] = line
		r.results[key] = res
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s:%d: reading replay: %w", path, line+1, err)
	}
	if len(r.results) == 0 {
		return nil, fmt.Errorf("%s: replay file holds no results", path)
	}
	for key := range r.results {
		res := r.results[key]
		if res.OK() && (r.best == nil || res.Objective < r.best.Objective ||
			res.Objective == r.best.Objective && res.Key < r.best.Key) {
			r.best = &res
		}
	}
	return r, nil
}

// knownStatus reports whether a recorded result's status is one evotune
// writes, so that a misspelt status is not silently taken for a failure.
func knownStatus(s space.Status) bool {
	switch s {
	case space.StatusOK, space.StatusConstraint, space.StatusCompileError, space.StatusPtxasReject,
		space.StatusIncorrect, space.StatusFault, space.StatusTimeout:
		return true
	}
	return false
}

// Evaluate returns the result recorded for c: a copy, with Env.Replay set to
// the file's name and Seq cleared (the archive numbers what it records). Its
// Cost is the recorded cost, so budgets count the time the recording spent.
// A config not in the file is refused at the constraint gate with the
// reason "recorded: not in replay file", at no cost.
func (r *Replay) Evaluate(ctx context.Context, c space.Config) space.Result {
	key := c.Key()
	rec, ok := r.results[key]
	if !ok {
		return space.Result{
			Key:     key,
			Config:  c.Clone(),
			Status:  space.StatusConstraint,
			Gate:    space.GateConstraint,
			Reason:  "recorded: not in replay file",
			Env:     space.Env{Replay: r.name},
			Problem: cloneProblem(r.header.Problem),
		}
	}
	out := cloneResult(rec)
	out.Seq = 0
	out.Env.Replay = r.name
	return out
}

// Constraint returns the constraint "recorded", which allows only the
// configs present in the file, so that a search over a replay draws only
// configs it can answer for.
func (r *Replay) Constraint() space.Constraint {
	return space.Constraint{Name: "recorded", Check: func(c space.Config) error {
		if _, ok := r.results[c.Key()]; !ok {
			return errors.New("not in replay file")
		}
		return nil
	}}
}

// Optimum returns the best recorded result that passed every gate (lowest
// Objective, ties broken by key), and false when none did.
func (r *Replay) Optimum() (space.Result, bool) {
	if r.best == nil {
		return space.Result{}, false
	}
	out := cloneResult(*r.best)
	out.Seq = 0
	out.Env.Replay = r.name
	return out, true
}

// Configs returns a copy of every recorded config, in key order: the
// members of a space restricted to the recording (space.Space.Restrict).
func (r *Replay) Configs() []space.Config {
	out := make([]space.Config, 0, len(r.results))
	for _, res := range r.results {
		out = append(out, res.Config.Clone())
	}
	slices.SortFunc(out, func(a, b space.Config) int { return strings.Compare(a.Key(), b.Key()) })
	return out
}

// Len returns the number of recorded configs.
func (r *Replay) Len() int { return len(r.results) }

// Header returns the file's header; its zero value when the file had none.
func (r *Replay) Header() ReplayHeader {
	h := r.header
	h.Problem = cloneProblem(h.Problem)
	return h
}

// cloneResult copies r deeply enough that the copy shares nothing mutable
// with it: callers may change what Evaluate returns.
func cloneResult(r space.Result) space.Result {
	r.Config = r.Config.Clone()
	r.Flags = append([]string(nil), r.Flags...)
	if r.Ptxas != nil {
		p := *r.Ptxas
		r.Ptxas = &p
	}
	if r.Accuracy != nil {
		a := *r.Accuracy
		r.Accuracy = &a
	}
	if r.Timings != nil {
		ts := make([]space.Timing, len(r.Timings))
		for i, t := range r.Timings {
			t.SamplesUS = append([]float64(nil), t.SamplesUS...)
			t.ThrottleReasons = append([]string(nil), t.ThrottleReasons...)
			ts[i] = t
		}
		r.Timings = ts
	}
	r.Problem = cloneProblem(r.Problem)
	return r
}

func cloneProblem(p *space.Problem) *space.Problem {
	if p == nil {
		return nil
	}
	q := *p
	q.Shapes = append([]space.Shape(nil), p.Shapes...)
	q.Weights = append([]float64(nil), p.Weights...)
	return &q
}
