package elites

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"

	"evotune/space"
)

// indexName is the archive's index: the decoded results and the warnings of
// a prefix of the log, so that opening a large archive does not decode every
// line of JSON again. It is a cache of the log, never the truth: it is
// rebuilt whenever it does not match the log.
const indexName = "results.idx"

// indexMagic starts an index file; a change of layout changes it.
var indexMagic = []byte("evotune-index-4\n")

// indexCheck is how many bytes at each end of the covered prefix the index
// checksums. The log is only ever appended to or cut back to a whole line,
// so an index whose length and both ends still match covers the same bytes;
// a log edited in the middle by hand is the case this does not catch.
const indexCheck = 64 << 10

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// logIndex is what results.idx holds: after indexMagic, the head and the
// results in the layout of indexcodec.go, then a CRC-32C of that body.
type logIndex struct {
	indexHead
	Results []space.Result
	LineOf  []int  // the line of each result
	Spans   []span // where each result's line lies in the log
}

// indexHead is what an index says of the log prefix it covers.
type indexHead struct {
	Covered  int64  // length of the log prefix the index covers (whole lines)
	Lines    int    // lines in that prefix
	HeadCRC  uint32 // CRC-32C of the prefix's first indexCheck bytes
	TailCRC  uint32 // CRC-32C of its last indexCheck bytes
	Count    int    // results
	Warnings []LoadWarning
}

// prefixCRCs returns the checksums of the first and last indexCheck bytes of
// f's first n bytes.
func prefixCRCs(f io.ReaderAt, n int64) (head, tail uint32, err error) {
	buf := make([]byte, min(n, indexCheck))
	if _, err := f.ReadAt(buf, 0); err != nil {
		return 0, 0, err
	}
	head = crc32.Checksum(buf, castagnoli)
	if _, err := f.ReadAt(buf, n-int64(len(buf))); err != nil {
		return 0, 0, err
	}
	return head, crc32.Checksum(buf, castagnoli), nil
}

// readIndex reads dir's index and checks it against the log f of size
// bytes. It returns the index and nil when the index covers a prefix of the
// log; an error says why it cannot be used (os.ErrNotExist when there is
// none).
func readIndex(dir string, f io.ReaderAt, size int64) (logIndex, error) {
	file, err := os.Open(filepath.Join(dir, indexName))
	if err != nil {
		return logIndex{}, err
	}
	defer file.Close()
	fi, err := file.Stat()
	if err != nil {
		return logIndex{}, err
	}
	if fi.Size() < int64(len(indexMagic))+4 {
		return logIndex{}, errors.New("not an index of this evotune")
	}
	data := make([]byte, fi.Size())
	if _, err := io.ReadFull(file, data); err != nil {
		return logIndex{}, err
	}
	if !bytes.Equal(data[:len(indexMagic)], indexMagic) {
		return logIndex{}, errors.New("not an index of this evotune")
	}
	body, trailer := data[len(indexMagic):len(data)-4], data[len(data)-4:]
	if crc32.Checksum(body, castagnoli) != binary.LittleEndian.Uint32(trailer) {
		return logIndex{}, errors.New("index damaged (checksum)")
	}
	ix, err := decodeIndex(body)
	if err != nil {
		return logIndex{}, err
	}
	switch {
	case ix.Covered < 0 || ix.Lines < 0:
		return logIndex{}, errors.New("index damaged (negative length)")
	case ix.Covered > size:
		return logIndex{}, fmt.Errorf("the log (%d bytes) is shorter than the index covers (%d)", size, ix.Covered)
	case ix.Covered == 0:
		return ix, nil
	}
	head, tail, err := prefixCRCs(f, ix.Covered)
	if err != nil {
		return logIndex{}, fmt.Errorf("checking the index against the log: %v", err)
	}
	if head != ix.HeadCRC || tail != ix.TailCRC {
		return logIndex{}, errors.New("the log differs from what the index covers")
	}
	return ix, nil
}

// readIndexed loads the log f: the prefix its index covers from the index,
// the rest from the log, and writes the index again when it covered less
// than the whole lines of the log. An index that does not match the log is
// rebuilt from the log, said on stderr in one line.
func (a *Archive) readIndexed(f *os.File) loadedLog {
	fi, err := f.Stat()
	if err != nil {
		return readLogFrom(f, loadedLog{stripped: true})
	}
	ix, err := readIndex(a.dir, f, fi.Size())
	if err == nil {
		err = verifyElites(f, ix)
	}
	var l loadedLog
	switch {
	case err == nil:
		if _, err := f.Seek(ix.Covered, io.SeekStart); err != nil {
			return readLogFrom(io.NewSectionReader(f, 0, 1<<62), loadedLog{stripped: true})
		}
		l = readLogFrom(f, loadedLog{results: ix.Results, warnings: ix.Warnings, clean: ix.Covered,
			lines: ix.Lines, lineOf: ix.LineOf, spans: ix.Spans, stripped: true})
		l.indexed = ix.Covered
		if l.clean == ix.Covered {
			return l
		}
	default:
		l = readLogFrom(f, loadedLog{stripped: true})
		if !errors.Is(err, os.ErrNotExist) {
			l.indexNote = fmt.Sprintf("archive %s: rebuilding %s from the log: %v", a.dir, indexName, err)
		}
	}
	if l.err == nil {
		// Configs held as keys from here on (adopt would do it after the
		// encoder had checked each config against its key once already).
		for i := range l.results {
			compact(&l.results[i])
		}
		// A cache: an archive in a read-only place opens from its log.
		if a.writeIndex(f, l) == nil {
			l.indexed = l.clean
		}
	}
	return l
}

// wholeLineWarnings returns l's warnings about whole lines, leaving out
// those about the bytes after them (a torn last line, a read error): the
// next load reads those bytes again.
func wholeLineWarnings(l loadedLog) []LoadWarning {
	var ws []LoadWarning
	for _, w := range l.warnings {
		if w.Offset < l.clean {
			ws = append(ws, w)
		}
	}
	return ws
}

// writeIndex replaces dir's index durably with one covering l, the load of
// the log f's first l.clean bytes.
func (a *Archive) writeIndex(f io.ReaderAt, l loadedLog) error {
	ix := logIndex{indexHead{Covered: l.clean, Lines: l.lines, Warnings: wholeLineWarnings(l)}, l.results, l.lineOf, l.spans}
	if l.clean > 0 {
		var err error
		if ix.HeadCRC, ix.TailCRC, err = prefixCRCs(f, l.clean); err != nil {
			return err
		}
	}
	body, err := encodeIndex(ix.indexHead, ix.Results, ix.LineOf, ix.Spans)
	if err != nil {
		return err
	}
	data := make([]byte, 0, len(indexMagic)+len(body)+4)
	data = append(append(data, indexMagic...), body...)
	data = binary.LittleEndian.AppendUint32(data, crc32.Checksum(body, castagnoli))
	return a.replace(indexName, data)
}

// WithSamples returns r, a result of the archive, with its timing samples.
// An archive whose log is a plain file holds its results without them (at
// 100,000 results they are most of its memory) and reads them here from the
// result's line in the log; the log is append-only, so a line stays where
// it was read.
func (a *Archive) WithSamples(r space.Result) (space.Result, error) {
	a.mu.Lock()
	i, ok := a.byKey[r.Key]
	stripped := a.stripped
	var sp span
	logged := r.Key
	if ok && stripped {
		sp, logged = a.spans[i], a.loggedKey(i)
	}
	a.mu.Unlock()
	if !ok || !stripped {
		return r, nil
	}
	f, err := os.Open(filepath.Join(a.dir, logName))
	if err != nil {
		return r, fmt.Errorf("reading the samples of result %s: %w", r.Key, err)
	}
	defer f.Close()
	line := make([]byte, sp.Len)
	if _, err := f.ReadAt(line, sp.Offset); err != nil {
		return r, fmt.Errorf("reading the samples of result %s at byte %d of %s: %w", r.Key, sp.Offset, logName, err)
	}
	full, reason := parseLine(line)
	if reason != "" || full.Key != logged || len(full.Timings) != len(r.Timings) {
		return r, fmt.Errorf("reading the samples of result %s: the log's line at byte %d is not that result (%s)", r.Key, sp.Offset, reason)
	}
	out := r
	out.Timings = slices.Clone(r.Timings)
	for i := range out.Timings {
		out.Timings[i].SamplesUS = full.Timings[i].SamplesUS
	}
	return out, nil
}

// verifiedElites is how many of the best results' lines verifyElites reads
// back on every open: more than show's table and export's dispatch use.
const verifiedElites = 32

// verifyElites checks the log lines of the index's best results against
// the checksums the index holds for them. readIndex trusts the rest of the
// log by its length and its two ends; an elite is what show and export
// print, so a line changed in place (by hand, or by the disk) is caught
// where it matters, and the index is rebuilt from the log.
func verifyElites(f io.ReaderAt, ix logIndex) error {
	var ok []int
	for i := range ix.Results {
		if ix.Results[i].OK() {
			ok = append(ok, i)
		}
	}
	slices.SortFunc(ok, func(i, j int) int {
		return cmp.Or(cmp.Compare(ix.Results[i].Objective, ix.Results[j].Objective), cmp.Compare(i, j))
	})
	var buf []byte
	for _, i := range ok[:min(verifiedElites, len(ok))] {
		sp := ix.Spans[i]
		buf = slices.Grow(buf[:0], int(sp.Len))[:sp.Len]
		if _, err := f.ReadAt(buf, sp.Offset); err != nil || crc32.Checksum(buf, castagnoli) != sp.CRC {
			return fmt.Errorf("line %d of the log (result %s, among the best) is not what the index holds", ix.LineOf[i], ix.Results[i].Key)
		}
	}
	return nil
}
