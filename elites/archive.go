// Package elites owns the archive: the directory where a search keeps what it
// has learned so that it survives anything. It holds the append-only,
// fsync'd result log, the search state for exact resume, the archive's
// identity (problem and environment) that keeps results of different
// provenance apart, the top-K elites, and merging of archives; it reads
// results recorded before a knob existed as the configs they are now
// (Complete), leaving the log as it was. It computes nothing about kernels.
package elites

import (
	"cmp"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"evotune/internal/durable"
	"evotune/space"
)

// The files of an archive directory.
const (
	metaName = "meta.json"     // identity, written once
	logName  = "results.jsonl" // one result a line, append-only
	// indexName (results.idx) caches the decoded log; see index.go.
	gzLogName = logName + ".gz"    // a finished archive's log, compressed to be committed
	stateName = "state.json"       // search state, replaced atomically
	lockName  = "lock"             // flock'd by the process that writes
	tmpSuffix = durable.TempSuffix // a replacement being written
)

// metaFormat is the version of the archive layout that this code writes.
const metaFormat = 1

// ErrDuplicate is returned (wrapped) by Record for a key that the archive
// already holds: a config is evaluated once.
var ErrDuplicate = errors.New("key already recorded")

// mode says what an open archive may do.
type mode int

const (
	writable mode = iota // locked, identity checked
	readOnly             // a view for show, report, export: no lock
	seedOnly             // another problem's archive: its configs only
)

// appendFile is what appending to the log needs of an *os.File; a test puts
// a failing one in its place.
type appendFile interface {
	io.Writer
	Sync() error
	Truncate(size int64) error
	Close() error
}

// An Archive is an open archive directory. Its methods are safe for
// concurrent use. It satisfies the search's Store: Lookup, Record and
// SaveState.
type Archive struct {
	dir  string
	meta Meta
	mode mode
	lock *os.File // held while writable

	// files writes meta.json and state.json durably.
	files durable.Writer

	mu      sync.Mutex
	log     appendFile // nil unless writable
	size    int64      // length of the log's whole lines: where the next append starts
	nextSeq int
	results []space.Result
	byKey   map[string]int // key → index in results
	skipped []LoadWarning
	lines   int   // whole lines of the log
	lineOf  []int // the line of each result
	// spans are where each result's line lies in the log; with stripped
	// set, results hold no timing samples (see WithSamples).
	spans     []span
	stripped  bool
	indexed   int64  // length of the log prefix that results.idx covers
	indexNote string // why results.idx was rebuilt on open, if it was
	// lineWarnings are the warnings about whole lines of the log: what
	// results.idx keeps of skipped (a torn last line is cut off on open).
	lineWarnings []LoadWarning
	broken       error // set when a failed append could not be undone
	closed       bool
	// completion is the space Complete read the results with (nil before
	// it was called), logged what the log holds of each result it
	// completed, and repeats the results it left because another result
	// stands for their config; both by index in results.
	completion *space.Space
	logged     map[int]loggedConfig
	repeats    map[int]bool
}

// OpenOptions modify Open.
type OpenOptions struct {
	// Seed opens an archive made for another problem or environment (of the
	// same kernel family), read-only, to start a new search from its configs:
	// Seeds offers them; Lookup answers nothing, since its timings do not
	// hold for this run.
	Seed bool
}

// Exists reports whether dir holds an archive.
func Exists(dir string) (bool, error) {
	_, err := os.Stat(filepath.Join(dir, metaName))
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("looking for an archive in %s: %w", dir, err)
	}
	return true, nil
}

// Create makes a new archive in dir (created if missing) with identity meta,
// and opens it for writing. It refuses a directory that is already an
// archive, and a non-empty one that is not.
func Create(dir string, meta Meta) (*Archive, error) {
	if err := meta.Problem.Validate(); err != nil {
		return nil, fmt.Errorf("creating archive %s: %w", dir, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating archive: %w", err)
	}
	if err := checkEmpty(dir); err != nil {
		return nil, err
	}
	lock, err := lockDir(dir)
	if err != nil {
		return nil, err
	}
	// Another process may have created the archive before we held the lock.
	if err := checkEmpty(dir); err != nil {
		lock.Close()
		return nil, err
	}
	if meta.Created.IsZero() {
		meta.Created = time.Now().UTC()
	}
	a := newArchive(dir, meta, writable)
	a.lock = lock
	data, err := json.MarshalIndent(metaFile{Format: metaFormat, Meta: meta}, "", "  ")
	if err == nil {
		err = a.replace(metaName, append(data, '\n'))
	}
	if err != nil {
		lock.Close()
		return nil, fmt.Errorf("creating archive %s: %w", dir, err)
	}
	if err := a.openLog(); err != nil {
		lock.Close()
		return nil, err
	}
	return a, nil
}

// checkEmpty refuses a directory that holds an archive or anything but what
// an interrupted Create leaves behind (the lock, a temporary file).
func checkEmpty(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("creating archive: %w", err)
	}
	for _, e := range entries {
		switch name := e.Name(); {
		case name == metaName:
			return fmt.Errorf("creating archive: %s is already an archive (open it to resume)", dir)
		case name == lockName || strings.HasSuffix(name, tmpSuffix):
		default:
			return fmt.Errorf("creating archive: directory %s is not empty and is not an archive (it holds %q)", dir, name)
		}
	}
	return nil
}

// Open opens the archive in dir for writing, checking that it was made for
// the problem and environment in want (family, kernel source hash, shapes and
// weights, dtype, causal, GPU, arch, nvcc version); a difference is a
// *MismatchError naming every field. With opts.Seed it opens an archive of
// another problem read-only instead, refusing only another kernel family.
// A torn last line left by a killed process is cut off, so the next append
// starts on a clean line; other damaged lines are skipped (see Skipped).
func Open(dir string, want Meta, opts OpenOptions) (*Archive, error) {
	if opts.Seed {
		a, err := load(dir, seedOnly)
		if err != nil {
			return nil, err
		}
		if a.meta.Problem.Family != want.Problem.Family {
			return nil, fmt.Errorf("seeding from archive %s: it was made for family %s, this run is %s: configs do not carry across families",
				dir, orNone(a.meta.Problem.Family), orNone(want.Problem.Family))
		}
		return a, nil
	}
	lock, err := lockDir(dir)
	if err != nil {
		return nil, err
	}
	meta, err := readMeta(dir)
	if err != nil {
		lock.Close()
		return nil, err
	}
	if diffs := identityDiffs(meta, want); len(diffs) > 0 {
		lock.Close()
		return nil, &MismatchError{Dir: dir, Diffs: diffs, Hint: "use --seed-from to start a new search from it"}
	}
	a := newArchive(dir, meta, writable)
	a.lock = lock
	if err := a.openLog(); err != nil {
		lock.Close()
		return nil, err
	}
	return a, nil
}

// Read opens the archive in dir read-only, whatever it was made for, for
// show, report and export. It takes no lock, so it may read an archive that a
// search is writing; a torn last line is skipped, not cut off. A log kept as
// results.jsonl.gz (a finished archive, compressed to be committed) is read
// the same way; Open refuses to write to one.
func Read(dir string) (*Archive, error) {
	return load(dir, readOnly)
}

func load(dir string, m mode) (*Archive, error) {
	meta, err := readMeta(dir)
	if err != nil {
		return nil, err
	}
	a := newArchive(dir, meta, m)
	r, closeLog, err := openLogReader(dir)
	if errors.Is(err, os.ErrNotExist) {
		return a, nil // created, nothing recorded yet
	}
	if err != nil {
		return nil, fmt.Errorf("reading archive: %w", err)
	}
	defer closeLog()
	var l loadedLog
	if f, ok := r.(*os.File); ok {
		l = a.readIndexed(f)
	} else {
		l = readLog(r) // a compressed log is read whole
	}
	if err := a.adopt(l); err != nil {
		return nil, err
	}
	return a, nil
}

// openLogReader opens the archive's log for reading: results.jsonl, or
// when there is none, results.jsonl.gz (how committed archives keep it).
// An error wraps os.ErrNotExist when there is neither.
func openLogReader(dir string) (io.Reader, func(), error) {
	f, err := os.Open(filepath.Join(dir, logName))
	if err == nil {
		return f, func() { f.Close() }, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, nil, err
	}
	gz, gzErr := os.Open(filepath.Join(dir, gzLogName))
	if errors.Is(gzErr, os.ErrNotExist) {
		return nil, nil, err
	}
	if gzErr != nil {
		return nil, nil, gzErr
	}
	zr, gzErr := gzip.NewReader(gz)
	if gzErr != nil {
		gz.Close()
		return nil, nil, fmt.Errorf("%s: %w", gz.Name(), gzErr)
	}
	return zr, func() { zr.Close(); gz.Close() }, nil
}

func newArchive(dir string, meta Meta, m mode) *Archive {
	return &Archive{
		dir:     dir,
		meta:    meta,
		mode:    m,
		nextSeq: 1,
		byKey:   make(map[string]int),
	}
}

// metaFile is the content of meta.json.
type metaFile struct {
	Format int `json:"format"`
	Meta
}

func readMeta(dir string) (Meta, error) {
	path := filepath.Join(dir, metaName)
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return Meta{}, fmt.Errorf("%s is not an archive: it has no %s", dir, metaName)
	}
	if err != nil {
		return Meta{}, fmt.Errorf("reading archive identity: %w", err)
	}
	var mf metaFile
	if err := json.Unmarshal(data, &mf); err != nil {
		return Meta{}, fmt.Errorf("reading archive identity %s: %w", path, err)
	}
	if mf.Format != metaFormat {
		return Meta{}, fmt.Errorf("reading archive identity %s: format %d, this evotune reads format %d", path, mf.Format, metaFormat)
	}
	return mf.Meta, nil
}

// openLog opens (creating it if missing) and loads the log for appending,
// cutting off a torn last line, and removes the temporary files of
// replacements that a killed process left behind.
func (a *Archive) openLog() error {
	if err := removeTemps(a.dir); err != nil {
		return err
	}
	path := filepath.Join(a.dir, logName)
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		if _, err := os.Stat(filepath.Join(a.dir, gzLogName)); err == nil {
			// Appending to a fresh log would start the search over beside
			// the compressed one.
			return fmt.Errorf("archive %s keeps its log compressed (%s): gunzip it to go on writing to the archive", a.dir, gzLogName)
		}
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("opening archive log: %w", err)
	}
	l := a.readIndexed(f)
	if l.err != nil {
		f.Close()
		return fmt.Errorf("reading archive log %s: %w", path, l.err)
	}
	if fi, err := f.Stat(); err != nil {
		f.Close()
		return fmt.Errorf("opening archive log: %w", err)
	} else if fi.Size() > l.clean {
		if err := f.Truncate(l.clean); err == nil {
			err = f.Sync()
		}
		if err != nil {
			f.Close()
			return fmt.Errorf("cutting the torn last line off %s at byte %d: %w", path, l.clean, err)
		}
	}
	if err := durable.SyncDir(a.dir); err != nil {
		f.Close()
		return err
	}
	if err := a.adopt(l); err != nil {
		f.Close()
		return err
	}
	a.log = f
	return nil
}

// removeTemps removes dir's temporary files: a replacement killed before
// its rename leaves one, and only the lock holder writes them, so none is
// in use.
func removeTemps(dir string) error {
	temps, err := filepath.Glob(filepath.Join(dir, "*"+tmpSuffix))
	if err != nil {
		return err
	}
	for _, t := range temps {
		if err := os.Remove(t); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("removing a leftover temporary file: %w", err)
		}
	}
	return nil
}

// adopt takes in a loaded log, refusing one whose results disagree with
// the archive's identity.
func (a *Archive) adopt(l loadedLog) error {
	if err := checkIdentity(a.dir, a.meta, l.results); err != nil {
		return err
	}
	for i := range l.results {
		compact(&l.results[i])
	}
	a.results = l.results
	a.skipped = l.warnings
	a.size = l.clean
	a.lines, a.lineOf, a.indexed = l.lines, l.lineOf, l.indexed
	a.spans, a.stripped, a.indexNote = l.spans, l.stripped, l.indexNote
	a.lineWarnings = wholeLineWarnings(l)
	for i, r := range l.results {
		a.byKey[r.Key] = i
		a.nextSeq = max(a.nextSeq, r.Seq+1)
	}
	return nil
}

// Dir returns the archive's directory.
func (a *Archive) Dir() string { return a.dir }

// Meta returns the archive's identity.
func (a *Archive) Meta() Meta { return a.meta }

// Skipped returns the log lines that were skipped on load, and why.
func (a *Archive) Skipped() []LoadWarning { return slices.Clone(a.skipped) }

// IndexNote says, in one line, why the archive's index (results.idx) was
// rebuilt from the log when it was opened; "" when it was not.
func (a *Archive) IndexNote() string { return a.indexNote }

// Lookup returns the recorded result for a config key. A seed archive
// answers nothing: its results were measured for another problem.
func (a *Archive) Lookup(key string) (space.Result, bool) {
	if a.mode == seedOnly {
		return space.Result{}, false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	i, ok := a.byKey[key]
	if !ok {
		return space.Result{}, false
	}
	return full(a.results[i]), true
}

// compact drops r's config when its key gives it back (space.FromKey): an
// archive holds its results' configs as their keys, since at 100,000
// results the maps would be a third of its memory. full undoes it.
func compact(r *space.Result) {
	if derivable(*r) {
		r.Config = nil
	}
}

// derivable reports whether r's config is what its key gives back.
func derivable(r space.Result) bool {
	if len(r.Config) == 0 {
		return false
	}
	c, ok := space.FromKey(r.Key)
	return ok && maps.Equal(c, r.Config)
}

// full returns r with its config, parsed from its key where compact
// dropped it: every result the archive hands out is full.
func full(r space.Result) space.Result {
	if r.Config == nil && r.Key != "" {
		r.Config, _ = space.FromKey(r.Key)
	}
	return r
}

// Record appends r to the log durably (one write of the whole line, then
// fsync), numbering it with the next Seq. It refuses a result with no key, a
// key already recorded (ErrDuplicate), and a result whose problem or
// environment differs from the archive's. A failed write or fsync is undone
// by cutting the log back to its last whole line, so the log stays readable
// and the result counts as not recorded.
func (a *Archive) Record(r space.Result) error {
	if r.Key == "" {
		return fmt.Errorf("archive %s: recording a result with no key", a.dir)
	}
	if err := a.checkProvenance(r); err != nil {
		return err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := a.writableLocked(); err != nil {
		return fmt.Errorf("recording result %s: %w", r.Key, err)
	}
	if i, dup := a.byKey[r.Key]; dup {
		return fmt.Errorf("archive %s: recording result %s: %w as seq %d", a.dir, r.Key, ErrDuplicate, a.results[i].Seq)
	}
	r.Seq = a.nextSeq
	line, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("archive %s: encoding result %s: %w", a.dir, r.Key, err)
	}
	line = append(line, '\n')
	if err := a.appendLocked(line); err != nil {
		return fmt.Errorf("archive %s: appending result %s (seq %d) to %s: %w", a.dir, r.Key, r.Seq, logName, err)
	}
	if a.stripped {
		stripSamples(&r)
	}
	compact(&r)
	a.byKey[r.Key] = len(a.results)
	a.results = append(a.results, r)
	a.spans = append(a.spans, spanOf(a.size-int64(len(line)), line))
	a.lines++
	a.lineOf = append(a.lineOf, a.lines)
	a.nextSeq++
	return nil
}

// appendLocked writes line at the end of the log and syncs it, or leaves the
// log as it was.
func (a *Archive) appendLocked(line []byte) error {
	n, err := a.log.Write(line)
	if err == nil && n < len(line) {
		err = io.ErrShortWrite
	}
	if err == nil {
		err = a.log.Sync()
	}
	if err == nil {
		a.size += int64(len(line))
		return nil
	}
	// Part of the line may be in the file: cut it off, or the next append
	// would be glued to it and both records lost.
	if terr := a.log.Truncate(a.size); terr != nil {
		a.broken = fmt.Errorf("a failed append could not be undone (%v); reopen the archive to repair it", terr)
		return fmt.Errorf("%w; undoing it: %v", err, terr)
	}
	if serr := a.log.Sync(); serr != nil {
		a.broken = fmt.Errorf("a failed append could not be undone (%v); reopen the archive to repair it", serr)
		return fmt.Errorf("%w; undoing it: %v", err, serr)
	}
	return err
}

func (a *Archive) writableLocked() error {
	switch {
	case a.closed:
		return fmt.Errorf("archive %s is closed", a.dir)
	case a.mode != writable:
		return fmt.Errorf("archive %s is open read-only", a.dir)
	case a.broken != nil:
		return fmt.Errorf("archive %s: %w", a.dir, a.broken)
	}
	return nil
}

// checkProvenance refuses a result measured for another problem or in
// another environment than the archive's; fields the result leaves empty
// (a config refused before any compile has no GPU) are not compared.
func (a *Archive) checkProvenance(r space.Result) error {
	diffs := identityDiffs(a.meta, provenanceOf(a.meta, r))
	if len(diffs) == 0 {
		return nil
	}
	parts := make([]string, len(diffs))
	for i, d := range diffs {
		parts[i] = fmt.Sprintf("its %s is %s, the archive's is %s", d.Field, d.Run, d.Archive)
	}
	return fmt.Errorf("archive %s: refusing result %s: %s", a.dir, r.Key, strings.Join(parts, "; "))
}

// SaveState replaces the search state durably: a temporary file, fsync,
// rename over state.json, fsync of the directory. A crash at any point
// leaves the old state or the new one, never a mix.
func (a *Archive) SaveState(state []byte) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := a.writableLocked(); err != nil {
		return fmt.Errorf("saving search state: %w", err)
	}
	if err := a.replace(stateName, state); err != nil {
		return fmt.Errorf("archive %s: saving search state: %w", a.dir, err)
	}
	return nil
}

// State returns the saved search state, or nil if none was saved.
func (a *Archive) State() ([]byte, error) {
	data, err := os.ReadFile(filepath.Join(a.dir, stateName))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading search state: %w", err)
	}
	return data, nil
}

// replace writes data to dir/name durably: the old file or the new one
// survives a crash, never a mix.
func (a *Archive) replace(name string, data []byte) error {
	return a.files.WriteFile(filepath.Join(a.dir, name), data, 0o644)
}

// Results returns every result in log order. Results share their configs
// and slices with the archive: treat them as read-only, as those of Lookup
// and Top.
func (a *Archive) Results() []space.Result {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]space.Result, len(a.results))
	for i, r := range a.results {
		out[i] = full(r)
	}
	return out
}

// each calls fn on every result in log order, under the archive's lock and
// without copies: fn must not keep r, call the archive, or rely on r.Config
// (see full).
func (a *Archive) each(fn func(r *space.Result)) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for i := range a.results {
		fn(&a.results[i])
	}
}

// Len returns the number of results.
func (a *Archive) Len() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.results)
}

// Keys returns the results' config keys in log order.
func (a *Archive) Keys() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	keys := make([]string, len(a.results))
	for i, r := range a.results {
		keys[i] = r.Key
	}
	return keys
}

// StatusCounts returns how many results the archive holds of each status.
func (a *Archive) StatusCounts() map[space.Status]int {
	a.mu.Lock()
	defer a.mu.Unlock()
	counts := map[space.Status]int{}
	for _, r := range a.results {
		counts[r.Status]++
	}
	return counts
}

// Top returns the k best results that passed every gate, by objective
// (lower is better), ties broken by Seq (the earlier wins). A result that
// Complete found repeated is not ranked: the other stands for its config.
func (a *Archive) Top(k int) []space.Result {
	a.mu.Lock()
	defer a.mu.Unlock()
	var ok []*space.Result
	for i := range a.results {
		if a.results[i].OK() && !a.repeats[i] {
			ok = append(ok, &a.results[i])
		}
	}
	slices.SortFunc(ok, func(x, y *space.Result) int {
		return cmp.Or(cmp.Compare(x.Objective, y.Objective), cmp.Compare(x.Seq, y.Seq))
	})
	top := make([]space.Result, min(max(k, 0), len(ok)))
	for i := range top {
		top[i] = full(*ok[i])
	}
	return top
}

// Best returns the best result that passed every gate, if any did.
func (a *Archive) Best() (space.Result, bool) {
	top := a.Top(1)
	if len(top) == 0 {
		return space.Result{}, false
	}
	return top[0], true
}

// Seeds returns the configs of the k best results, best first, to start a
// new search from; their measurements are not carried over.
func (a *Archive) Seeds(k int) []space.Config {
	top := a.Top(k)
	configs := make([]space.Config, len(top))
	for i, r := range top {
		configs[i] = r.Config
	}
	return configs
}

// Close closes the log and releases the lock. Closing twice is harmless.
func (a *Archive) Close() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return nil
	}
	a.closed = true
	var errs []error
	if a.log != nil && a.broken == nil && a.size != a.indexed {
		// The index is a cache: a failure to write it costs the next open
		// a full read of the log, nothing more.
		if f, err := os.Open(filepath.Join(a.dir, logName)); err == nil {
			_ = a.writeIndex(f, loadedLog{results: a.loggedResults(), warnings: a.lineWarnings, clean: a.size, lines: a.lines, lineOf: a.lineOf, spans: a.spans})
			f.Close()
		}
	}
	if a.log != nil {
		errs = append(errs, a.log.Close())
	}
	if a.lock != nil {
		errs = append(errs, a.lock.Close()) // closing drops the flock
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("closing archive %s: %w", a.dir, err)
	}
	return nil
}

// Merge records into dst every result of the archive in src whose key dst
// does not hold yet, each with a new Seq, and returns how many it added. The
// two archives must have the same identity (a *MismatchError otherwise);
// src's damaged lines are skipped as on any load. When dst was completed
// (Complete), src is read with the same space, and its completed results
// are recorded with their completed configs and keys.
func Merge(dst *Archive, src string) (added int, err error) {
	s, err := Read(src)
	if err != nil {
		return 0, fmt.Errorf("merging: %w", err)
	}
	if diffs := identityDiffs(s.meta, dst.meta); len(diffs) > 0 {
		return 0, &MismatchError{Dir: src, Diffs: diffs, Against: "the destination " + dst.dir,
			Hint: "only archives of the same problem and environment merge"}
	}
	if sp := dst.completionSpace(); sp != nil {
		s.Complete(sp)
	}
	for _, r := range s.Results() {
		if _, ok := dst.Lookup(r.Key); ok {
			continue
		}
		r, err := s.WithSamples(r) // src holds its results without them
		if err != nil {
			return added, fmt.Errorf("merging %s: %w", src, err)
		}
		if err := dst.Record(r); err != nil {
			return added, fmt.Errorf("merging %s: %w", src, err)
		}
		added++
	}
	return added, nil
}
