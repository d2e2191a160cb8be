package runner

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"evotune/internal/durable"
)

// DefaultCacheBytes is the default cap of the cubin cache (--cache-size).
const DefaultCacheBytes int64 = 2 << 30

// CacheKey returns the content address of a candidate's cubin: everything
// that decides what nvcc produces. args is the nvcc command line rendered
// with placeholder directories, so the key does not depend on where the
// build ran.
func CacheKey(sourceHash, nvccVersion, arch string, flags, args []string) string {
	h := sha256.New()
	field := func(s string) {
		var n [8]byte
		binary.LittleEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		h.Write([]byte(s))
	}
	field("evotune cubin v1")
	field(sourceHash)
	field(nvccVersion)
	field(arch)
	field(fmt.Sprint(len(flags)))
	for _, f := range flags {
		field(f)
	}
	field(fmt.Sprint(len(args)))
	for _, a := range args {
		field(a)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// A CacheEntry is one cached compile: the cubin on disk and what ptxas
// said about it.
type CacheEntry struct {
	Key        string  `json:"key"`
	Cubin      string  `json:"-"` // path of the cubin in the cache
	Ptxas      string  `json:"ptxas"`
	CompileSec float64 `json:"compile_sec"` // what the compile that produced it took
}

// A Cache is a content-addressed store of compiled cubins on disk, shared
// by every evotune process that uses the same directory, so a repeated
// config or a resumed run compiles nothing twice. Each entry is two files,
// KEY.cubin and KEY.json (the ptxas text), each written durably (temp
// file, fsync, rename); an entry is complete once its .json exists. Past
// the size cap the least recently used entries (by mtime, touched on every
// hit) are removed. Within one process, concurrent requests for one key
// compile once.
type Cache struct {
	dir      string
	maxBytes int64

	mu      sync.Mutex
	flights map[string]*flight
	pins    map[string]int // keys handed out and not yet released: never evicted
}

// A flight is one build in progress that later requests for its key wait on.
type flight struct {
	done  chan struct{}
	entry CacheEntry
	err   error
}

// OpenCache opens (creating it if needed) the cache in dir, capped at
// maxBytes (a cap ≤ 0 means DefaultCacheBytes).
func OpenCache(dir string, maxBytes int64) (*Cache, error) {
	if maxBytes <= 0 {
		maxBytes = DefaultCacheBytes
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating cubin cache: %w", err)
	}
	return &Cache{dir: dir, maxBytes: maxBytes, flights: map[string]*flight{}, pins: map[string]int{}}, nil
}

// Dir returns the cache directory.
func (c *Cache) Dir() string { return c.dir }

func (c *Cache) path(key, ext string) string {
	return filepath.Join(c.dir, key[:2], key+ext)
}

// Lookup returns the entry for key if it is complete on disk, marking it
// recently used.
func (c *Cache) Lookup(key string) (CacheEntry, bool) {
	if len(key) < 2 {
		return CacheEntry{}, false
	}
	b, err := os.ReadFile(c.path(key, ".json"))
	if err != nil {
		return CacheEntry{}, false
	}
	var e CacheEntry
	if json.Unmarshal(b, &e) != nil || e.Key != key {
		return CacheEntry{}, false // a damaged entry is a miss; the next Put replaces it
	}
	e.Cubin = c.path(key, ".cubin")
	now := time.Now()
	if os.Chtimes(e.Cubin, now, now) != nil {
		return CacheEntry{}, false // evicted under our feet
	}
	return e, true
}

// Put stores cubin and its ptxas text under key and trims the cache to its
// cap (never removing pinned keys or this one).
func (c *Cache) Put(key string, cubin []byte, ptxas string, compileSec float64) (CacheEntry, error) {
	if len(key) < 2 {
		return CacheEntry{}, fmt.Errorf("cache key %q is too short", key)
	}
	e := CacheEntry{Key: key, Cubin: c.path(key, ".cubin"), Ptxas: ptxas, CompileSec: compileSec}
	meta, err := json.Marshal(e)
	if err != nil {
		return CacheEntry{}, err
	}
	if err := os.MkdirAll(filepath.Dir(e.Cubin), 0o755); err != nil {
		return CacheEntry{}, fmt.Errorf("writing cache entry %s: %w", key, err)
	}
	if err := durable.WriteFile(e.Cubin, cubin, 0o600); err != nil {
		return CacheEntry{}, fmt.Errorf("writing cache entry %s: %w", key, err)
	}
	if err := durable.WriteFile(c.path(key, ".json"), meta, 0o600); err != nil {
		return CacheEntry{}, fmt.Errorf("writing cache entry %s: %w", key, err)
	}
	if err := c.trim(key); err != nil {
		return e, fmt.Errorf("trimming cubin cache: %w", err)
	}
	return e, nil
}

// Do returns the entry for key, calling build to make it when it is not
// cached; callers asking for the same key meanwhile wait for that one
// build. The entry is pinned (safe from eviction) until Release(key).
// build's failures are returned and not cached.
func (c *Cache) Do(ctx context.Context, key string, build func(ctx context.Context) (cubin []byte, ptxas string, compileSec float64, err error)) (e CacheEntry, hit bool, err error) {
	for {
		c.mu.Lock()
		if f, ok := c.flights[key]; ok {
			c.mu.Unlock()
			select {
			case <-f.done:
			case <-ctx.Done():
				return CacheEntry{}, false, ctx.Err()
			}
			if f.err != nil && isCancel(f.err) && ctx.Err() == nil {
				continue // the caller that built it gave up; this one has not
			}
			if f.err != nil {
				return CacheEntry{}, false, f.err
			}
			c.pin(key)
			return f.entry, true, nil
		}
		// Look on disk with the lock held so that two callers cannot both
		// miss and both build.
		if e, ok := c.Lookup(key); ok {
			c.pins[key]++
			c.mu.Unlock()
			return e, true, nil
		}
		f := &flight{done: make(chan struct{})}
		c.flights[key] = f
		c.pins[key]++ // pinned before the entry exists, so trim cannot take it
		c.mu.Unlock()

		cubin, ptxas, sec, berr := build(ctx)
		if berr == nil {
			f.entry, f.err = c.Put(key, cubin, ptxas, sec)
			if f.entry.Key != "" {
				f.err = nil // a trim failure after a good write still leaves a usable entry
			}
		} else {
			f.err = berr
		}
		c.mu.Lock()
		delete(c.flights, key)
		if f.err != nil {
			c.unpinLocked(key)
		}
		c.mu.Unlock()
		close(f.done)
		if f.err != nil {
			return CacheEntry{}, false, f.err
		}
		return f.entry, false, nil
	}
}

func isCancel(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

func (c *Cache) pin(key string) {
	c.mu.Lock()
	c.pins[key]++
	c.mu.Unlock()
}

// Release unpins key, which Do pinned; the entry stays cached.
func (c *Cache) Release(key string) {
	c.mu.Lock()
	c.unpinLocked(key)
	c.mu.Unlock()
}

func (c *Cache) unpinLocked(key string) {
	if c.pins[key] <= 1 {
		delete(c.pins, key)
		return
	}
	c.pins[key]--
}

// Size returns the bytes the cache's entries take on disk.
func (c *Cache) Size() (int64, error) {
	entries, err := c.scan()
	var n int64
	for _, e := range entries {
		n += e.bytes
	}
	return n, err
}

type diskEntry struct {
	key   string
	bytes int64
	used  time.Time
}

// scan lists the entries on disk, grouping each key's files.
func (c *Cache) scan() ([]diskEntry, error) {
	byKey := map[string]*diskEntry{}
	err := filepath.WalkDir(c.dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // removed by another process meanwhile
			}
			return err
		}
		if d.IsDir() {
			return nil
		}
		name := d.Name()
		ext := filepath.Ext(name)
		if ext != ".cubin" && ext != ".json" {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		key := strings.TrimSuffix(name, ext)
		e := byKey[key]
		if e == nil {
			e = &diskEntry{key: key}
			byKey[key] = e
		}
		e.bytes += info.Size()
		if ext == ".cubin" || e.used.IsZero() {
			e.used = info.ModTime()
		}
		return nil
	})
	out := make([]diskEntry, 0, len(byKey))
	for _, e := range byKey {
		out = append(out, *e)
	}
	return out, err
}

// trim removes least recently used entries until the cache fits its cap,
// keeping keep and every pinned key.
func (c *Cache) trim(keep string) error {
	entries, err := c.scan()
	if err != nil {
		return err
	}
	var total int64
	for _, e := range entries {
		total += e.bytes
	}
	if total <= c.maxBytes {
		return nil
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].used.Before(entries[j].used) })
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range entries {
		if total <= c.maxBytes {
			break
		}
		if e.key == keep || c.pins[e.key] > 0 || len(e.key) < 2 {
			continue
		}
		// The .json goes first: without it the entry is a miss, never a
		// half-present hit.
		jerr := os.Remove(c.path(e.key, ".json"))
		cerr := os.Remove(c.path(e.key, ".cubin"))
		for _, err := range []error{jerr, cerr} {
			if err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
		}
		total -= e.bytes
	}
	return nil
}
