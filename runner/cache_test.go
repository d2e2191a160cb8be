package runner

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func openCache(t *testing.T, dir string, max int64) *Cache {
	t.Helper()
	c, err := OpenCache(dir, max)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestCacheKey(t *testing.T) {
	base := CacheKey("src", "11.8.89", "sm_89", []string{"-DA=1"}, []string{"-O3"})
	if len(base) != 64 {
		t.Fatalf("key %q is not a sha256 hex", base)
	}
	tests := map[string]string{
		"source": CacheKey("src2", "11.8.89", "sm_89", []string{"-DA=1"}, []string{"-O3"}),
		"nvcc":   CacheKey("src", "13.0.88", "sm_89", []string{"-DA=1"}, []string{"-O3"}),
		"arch":   CacheKey("src", "11.8.89", "sm_90", []string{"-DA=1"}, []string{"-O3"}),
		"flags":  CacheKey("src", "11.8.89", "sm_89", []string{"-DA=2"}, []string{"-O3"}),
		"args":   CacheKey("src", "11.8.89", "sm_89", []string{"-DA=1"}, []string{"-O2"}),
		// Moving a string between flags and args must change the key.
		"split": CacheKey("src", "11.8.89", "sm_89", nil, []string{"-DA=1", "-O3"}),
	}
	for name, k := range tests {
		if k == base {
			t.Errorf("changing %s kept the key", name)
		}
	}
	if again := CacheKey("src", "11.8.89", "sm_89", []string{"-DA=1"}, []string{"-O3"}); again != base {
		t.Error("key is not stable")
	}
}

func TestCachePutLookupAcrossProcesses(t *testing.T) {
	dir := t.TempDir()
	c := openCache(t, dir, 0)
	key := CacheKey("s", "v", "sm_89", nil, nil)
	if _, ok := c.Lookup(key); ok {
		t.Fatal("hit in an empty cache")
	}
	if _, err := c.Put(key, []byte("CUBIN"), "ptxas text", 1.5); err != nil {
		t.Fatal(err)
	}
	// A second Cache on the same directory stands for a later process.
	e, ok := openCache(t, dir, 0).Lookup(key)
	if !ok {
		t.Fatal("entry not found by a second cache on the same dir")
	}
	b, err := os.ReadFile(e.Cubin)
	if err != nil || !bytes.Equal(b, []byte("CUBIN")) {
		t.Errorf("cubin = %q, %v", b, err)
	}
	if e.Ptxas != "ptxas text" || e.CompileSec != 1.5 {
		t.Errorf("entry = %+v", e)
	}
	// A damaged .json is a miss, not an error.
	if err := os.WriteFile(c.path(key, ".json"), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.Lookup(key); ok {
		t.Error("damaged entry was a hit")
	}
}

func TestCacheEvictsLeastRecentlyUsed(t *testing.T) {
	dir := t.TempDir()
	c := openCache(t, dir, 1<<20)
	blob := bytes.Repeat([]byte{1}, 300<<10)
	keys := make([]string, 3)
	old := time.Now().Add(-time.Hour)
	for i := range keys {
		keys[i] = CacheKey(fmt.Sprint(i), "v", "a", nil, nil)
		if _, err := c.Put(keys[i], blob, "", 0); err != nil {
			t.Fatal(err)
		}
		// Give each a distinct age: key 0 oldest.
		at := old.Add(time.Duration(i) * time.Minute)
		os.Chtimes(c.path(keys[i], ".cubin"), at, at)
	}
	// A hit on key 0 makes it the most recently used.
	if _, ok := c.Lookup(keys[0]); !ok {
		t.Fatal("key 0 missing before the cap is reached")
	}
	// The fourth entry passes the 1 MiB cap: key 1 (now the oldest) goes.
	k3 := CacheKey("3", "v", "a", nil, nil)
	if _, err := c.Put(k3, blob, "", 0); err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]bool{keys[0]: true, keys[1]: false, keys[2]: true, k3: true} {
		if _, ok := c.Lookup(key); ok != want {
			t.Errorf("after eviction, present(%s…) = %v, want %v", key[:8], ok, want)
		}
	}
	if n, err := c.Size(); err != nil || n > 1<<20 {
		t.Errorf("size %d after trim (err %v), cap 1 MiB", n, err)
	}
}

func TestCacheKeepsPinned(t *testing.T) {
	c := openCache(t, t.TempDir(), 1000)
	ctx := context.Background()
	build := func(b byte) func(context.Context) ([]byte, string, float64, error) {
		return func(context.Context) ([]byte, string, float64, error) {
			return bytes.Repeat([]byte{b}, 800), "", 0, nil
		}
	}
	a, _, err := c.Do(ctx, "aa01", build(1))
	if err != nil {
		t.Fatal(err)
	}
	// "aa01" is pinned (not released): a second entry over the cap must not evict it.
	if _, _, err := c.Do(ctx, "bb02", build(2)); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(a.Cubin); err != nil {
		t.Fatalf("pinned cubin evicted: %v", err)
	}
	c.Release("aa01")
	c.Release("bb02")
	if _, _, err := c.Do(ctx, "cc03", build(3)); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(a.Cubin); err == nil {
		t.Error("released, oldest cubin kept past the cap")
	}
}

func TestCacheDoCompilesOnce(t *testing.T) {
	c := openCache(t, t.TempDir(), 0)
	var builds atomic.Int32
	gate := make(chan struct{})
	build := func(context.Context) ([]byte, string, float64, error) {
		builds.Add(1)
		<-gate // hold the build so that every caller arrives while it runs
		return []byte("x"), "p", 2, nil
	}
	const n = 8
	var wg sync.WaitGroup
	hits := make([]bool, n)
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, hits[i], errs[i] = c.Do(context.Background(), "k0123", build)
		}()
	}
	time.Sleep(50 * time.Millisecond)
	close(gate)
	wg.Wait()
	if b := builds.Load(); b != 1 {
		t.Errorf("%d builds for one key, want 1", b)
	}
	misses := 0
	for i := range n {
		if errs[i] != nil {
			t.Errorf("caller %d: %v", i, errs[i])
		}
		if !hits[i] {
			misses++
		}
	}
	if misses != 1 {
		t.Errorf("%d callers saw a miss, want 1 (the builder)", misses)
	}
}

func TestCacheDoFailuresNotCached(t *testing.T) {
	c := openCache(t, t.TempDir(), 0)
	boom := errors.New("boom")
	calls := 0
	build := func(context.Context) ([]byte, string, float64, error) {
		calls++
		if calls == 1 {
			return nil, "", 0, boom
		}
		return []byte("x"), "", 0, nil
	}
	if _, _, err := c.Do(context.Background(), "k1", build); !errors.Is(err, boom) {
		t.Fatalf("first Do: %v, want boom", err)
	}
	if _, hit, err := c.Do(context.Background(), "k1", build); err != nil || hit {
		t.Fatalf("second Do: hit %v, err %v; want a fresh build", hit, err)
	}
	if calls != 2 {
		t.Errorf("%d builds, want 2", calls)
	}
}

func TestCacheDoWaiterOutlivesCancelledBuilder(t *testing.T) {
	c := openCache(t, t.TempDir(), 0)
	leaderCtx, cancelLeader := context.WithCancel(context.Background())
	started := make(chan struct{})
	var builds atomic.Int32
	build := func(ctx context.Context) ([]byte, string, float64, error) {
		if builds.Add(1) == 1 {
			close(started)
			<-ctx.Done()
			return nil, "", 0, ctx.Err()
		}
		return []byte("x"), "", 0, nil
	}
	leaderErr := make(chan error, 1)
	go func() {
		_, _, err := c.Do(leaderCtx, "k2", build)
		leaderErr <- err
	}()
	<-started
	waiter := make(chan error, 1)
	go func() {
		_, _, err := c.Do(context.Background(), "k2", build)
		waiter <- err
	}()
	time.Sleep(20 * time.Millisecond)
	cancelLeader()
	if err := <-leaderErr; !errors.Is(err, context.Canceled) {
		t.Errorf("leader: %v, want canceled", err)
	}
	if err := <-waiter; err != nil {
		t.Errorf("waiter: %v, want it to build again", err)
	}
	if b := builds.Load(); b != 2 {
		t.Errorf("%d builds, want 2", b)
	}
}
