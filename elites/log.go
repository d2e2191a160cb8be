package elites

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

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
}

func readLog(r io.Reader) loadedLog {
	var l loadedLog
	seen := make(map[string]int) // key → line of its first record
	br := bufio.NewReader(r)
	for line := 1; ; line++ {
		text, err := br.ReadBytes('\n')
		offset := l.clean
		if err != nil {
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
		res, reason := parseLine(text)
		if reason == "" {
			if first, dup := seen[res.Key]; dup {
				reason = fmt.Sprintf("key %q already recorded on line %d: kept the first", res.Key, first)
			} else {
				seen[res.Key] = line
				l.results = append(l.results, res)
				continue
			}
		}
		w := LoadWarning{Line: line, Offset: offset, Reason: reason}
		if res.Key == "" && len(bytes.TrimSpace(text)) > 0 {
			w.Damaged = true
			w.Key, w.Status, w.Objective = salvage(text)
		}
		l.warnings = append(l.warnings, w)
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
