package elites

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"runtime"
	"slices"
	"sync"

	"evotune/space"
)

// A LoadWarning describes a line of a result log that was skipped on load.
type LoadWarning struct {
	Line   int    // 1-based line number
	Offset int64  // byte offset of the line's first byte
	Reason string // why it was skipped
	// Damaged is set for a line that was written whole but does not read as
	// a result (not a torn last line, a duplicate or a read error): it may
	// hide a result. Key, Status and Objective are what could still be read
	// of it; empty (0) where nothing could.
	Damaged   bool
	Key       string
	Status    space.Status
	Objective float64
}

func (w LoadWarning) String() string {
	return fmt.Sprintf("line %d (byte %d): %s", w.Line, w.Offset, w.Reason)
}

// ReadLog reads a result log: one JSON result a line. It keeps every good
// line and skips, with a warning, lines that are not a result, results with
// no key, later duplicates of a key, and a last line with no newline (a write
// that was cut short: a record exists only once its newline is written). It
// never panics and stops at the first read error, reported as a warning.
func ReadLog(r io.Reader) ([]space.Result, []LoadWarning) {
	l := readLog(r)
	return l.results, l.warnings
}

// loadedLog is what readLog found.
type loadedLog struct {
	results  []space.Result
	warnings []LoadWarning
	// clean is the length of the prefix made of whole lines: where the next
	// append must start.
	clean int64
	// err is the read error that stopped the reading early, if any: then
	// the bytes after clean were never seen and must not be cut off.
	err error
	// lines is the number of whole lines in the clean prefix, and lineOf
	// the line of each result.
	lines  int
	lineOf []int
	// spans are where each result's line lies in the log. With stripped
	// set, the results hold no timing samples: they are read from the log
	// by span when asked for (see Archive.WithSamples).
	spans    []span
	stripped bool
	// indexed is the length of the log prefix that results.idx covers;
	// indexNote says why the index was rebuilt, when it was.
	indexed   int64
	indexNote string
}

// logBatch is how many lines readLog decodes at once, spread over the
// CPUs: decoding is what opening a large archive costs (a GPU result with
// its samples is about 6 KB of JSON), and lines decode independently.
const logBatch = 512

func readLog(r io.Reader) loadedLog { return readLogFrom(r, loadedLog{}) }

// A span is where a line lies in the log, and the CRC-32C of its bytes (its
// newline included), by which a reader that trusts an index can tell the
// line is still what was indexed (see verifyElites).
type span struct {
	Offset int64
	Len    int32
	CRC    uint32
}

// spanOf returns the span of line, read at offset.
func spanOf(offset int64, line []byte) span {
	return span{offset, int32(len(line)), crc32.Checksum(line, castagnoli)}
}

// stripSamples drops r's timing samples, which share nothing with the
// caller's result after it.
func stripSamples(r *space.Result) {
	if len(r.Timings) == 0 {
		return
	}
	ts := slices.Clone(r.Timings)
	for i := range ts {
		ts[i].SamplesUS = nil
	}
	r.Timings = ts
}

// readLogFrom goes on reading a log whose first l.clean bytes were loaded
// into l: r reads the log from byte l.clean on.
func readLogFrom(r io.Reader, l loadedLog) loadedLog {
	seen := make(map[string]int, len(l.results)) // key → line of its first record
	for i := range l.results {
		seen[l.results[i].Key] = l.lineOf[i]
	}
	// Results given from the index already share their strings.
	in := newInterner()
	br := bufio.NewReaderSize(r, 1<<20)
	var (
		texts   [][]byte
		results = make([]space.Result, logBatch)
		reasons = make([]string, logBatch)
	)
	// absorb takes in the batch's decoded lines in order; first is the
	// line number of texts[0].
	absorb := func(first int, offset int64) {
		parseLines(texts, results[:len(texts)], reasons[:len(texts)])
		for k, text := range texts {
			line, res, reason := first+k, results[k], reasons[k]
			results[k] = space.Result{}
			if reason == "" {
				if at, dup := seen[res.Key]; dup {
					reason = fmt.Sprintf("key %q already recorded on line %d: kept the first", res.Key, at)
				} else {
					seen[res.Key] = line
					in.result(&res)
					if l.stripped {
						for i := range res.Timings {
							res.Timings[i].SamplesUS = nil
						}
					}
					l.results = append(l.results, res)
					l.lineOf = append(l.lineOf, line)
					l.spans = append(l.spans, spanOf(offset, text))
					offset += int64(len(text))
					continue
				}
			}
			w := LoadWarning{Line: line, Offset: offset, Reason: reason}
			if res.Key == "" && len(bytes.TrimSpace(text)) > 0 {
				w.Damaged = true
				w.Key, w.Status, w.Objective = salvage(text)
			}
			l.warnings = append(l.warnings, w)
			offset += int64(len(text))
		}
		texts = texts[:0]
	}
	batchLine, batchOffset := l.lines+1, l.clean
	for line := l.lines + 1; ; line++ {
		text, err := br.ReadBytes('\n')
		if err != nil {
			absorb(batchLine, batchOffset)
			offset := l.clean
			if len(text) > 0 {
				l.warnings = append(l.warnings, LoadWarning{Line: line, Offset: offset,
					Reason: fmt.Sprintf("torn last line (%d bytes, no newline): dropped", len(text))})
			}
			if !errors.Is(err, io.EOF) {
				l.err = err
				l.warnings = append(l.warnings, LoadWarning{Line: line, Offset: offset + int64(len(text)),
					Reason: fmt.Sprintf("reading stopped: %v", err)})
			}
			return l
		}
		l.clean += int64(len(text))
		l.lines = line
		texts = append(texts, text)
		if len(texts) == logBatch {
			absorb(batchLine, batchOffset)
			batchLine, batchOffset = line+1, l.clean
		}
	}
}

// parseLines decodes texts into results and reasons (see parseLine), the
// lines shared out among the CPUs.
func parseLines(texts [][]byte, results []space.Result, reasons []string) {
	workers := min(runtime.GOMAXPROCS(0), (len(texts)+63)/64)
	if workers <= 1 {
		for k, text := range texts {
			results[k], reasons[k] = parseLine(text)
		}
		return
	}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for k := w; k < len(texts); k += workers {
				results[k], reasons[k] = parseLine(texts[k])
			}
		})
	}
	wg.Wait()
}

// An interner makes the results of one log share the strings and problems
// that repeat from line to line (flags, the environment, the problem), so
// that a large archive holds each once. Configs are left alone: the archive
// holds them as their keys (compact).
type interner struct {
	strings map[string]string
	problem *space.Problem
}

func newInterner() *interner { return &interner{strings: make(map[string]string)} }

func (in *interner) str(s string) string {
	if t, ok := in.strings[s]; ok {
		return t
	}
	in.strings[s] = s
	return s
}

// result makes r share what it repeats of the results before it.
func (in *interner) result(r *space.Result) {
	for i, f := range r.Flags {
		r.Flags[i] = in.str(f)
	}
	e := &r.Env
	e.GPU, e.GPUUUID, e.ComputeCap, e.Driver = in.str(e.GPU), in.str(e.GPUUUID), in.str(e.ComputeCap), in.str(e.Driver)
	e.Arch, e.NVCC, e.SourceHash, e.Replay = in.str(e.Arch), in.str(e.NVCC), in.str(e.SourceHash), in.str(e.Replay)
	r.Reason = in.str(r.Reason)
	if r.Problem != nil {
		if in.problem != nil && sameProblem(*in.problem, *r.Problem) {
			r.Problem = in.problem
		} else {
			in.problem = r.Problem
		}
	}
}

// parseLine decodes one line (newline included); a non-empty reason says why
// it is not a result.
func parseLine(text []byte) (space.Result, string) {
	text = bytes.TrimSpace(text)
	if len(text) == 0 {
		return space.Result{}, "empty line"
	}
	if text[0] != '{' {
		return space.Result{}, "not a JSON object"
	}
	var res space.Result
	if err := json.Unmarshal(text, &res); err != nil {
		return space.Result{}, fmt.Sprintf("not a result: %v", err)
	}
	if res.Key == "" {
		return space.Result{}, "result has no key"
	}
	return res, ""
}
