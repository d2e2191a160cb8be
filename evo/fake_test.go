package evo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"evotune/space"
)

// gridSpace returns a space of knobs named by prefix+index with n values
// "0".."n-1" each, macro knobs first; the default is value 0 everywhere.
func gridSpace(macro, micro, n int, constraints ...space.Constraint) *space.Space {
	sp := &space.Space{Family: "grid", Constraints: constraints}
	add := func(name string, layer space.Layer) {
		k := space.Knob{Name: name, Macro: "GRID_" + name, Layer: layer, Default: "0"}
		for v := range n {
			k.Values = append(k.Values, strconv.Itoa(v))
		}
		sp.Knobs = append(sp.Knobs, k)
	}
	for i := range macro {
		add(fmt.Sprintf("m%d", i), space.Macro)
	}
	for i := range micro {
		add(fmt.Sprintf("u%d", i), space.Micro)
	}
	return sp
}

// sumBelow rejects configs whose m0+u0 exceeds limit, so that the test
// spaces have a constraint that couples the layers.
func sumBelow(limit int) space.Constraint {
	return space.Constraint{Name: "m0_u0", Check: func(c space.Config) error {
		if c.Int("m0")+c.Int("u0") > limit {
			return errors.New("m0+u0 too large")
		}
		return nil
	}}
}

// smallSpace has 4 knobs of 3 values (81 raw) minus the m0+u0>3 configs.
func smallSpace() *space.Space { return gridSpace(2, 2, 3, sumBelow(3)) }

// validKeys lists the keys of sp's valid configs in Enumerate order.
func validKeys(sp *space.Space) []string {
	var keys []string
	sp.Enumerate(func(c space.Config) bool {
		keys = append(keys, c.Key())
		return true
	})
	return keys
}

// hashOf is a deterministic pseudo-random number for a key.
func hashOf(key string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(key))
	return h.Sum64()
}

// A fakeEvaluator answers from a pure function of the config, so any run
// with the same proposals gets the same answers.
type fakeEvaluator struct {
	objective func(space.Config) float64
	// status, when set, may fail a config (a status other than ok).
	status func(space.Config) space.Status
	// jitter, when set, sleeps a key-dependent time to scramble the order
	// in which concurrent evaluations complete.
	jitter bool
	// after, when set, is called with the number of calls so far, before
	// the call returns (tests cancel from it).
	after func(n int)

	mu    sync.Mutex
	calls []string
}

func (f *fakeEvaluator) Evaluate(ctx context.Context, c space.Config) space.Result {
	key := c.Key()
	f.mu.Lock()
	f.calls = append(f.calls, key)
	n := len(f.calls)
	f.mu.Unlock()
	if f.jitter {
		time.Sleep(time.Duration(hashOf(key)%300) * time.Microsecond)
	}
	if f.after != nil {
		f.after(n)
	}
	// A cost with a fractional part, so that virtual time sums are
	// sensitive to rounding and order.
	cost := space.Cost{CompileSec: 1 + float64(hashOf(key)%7)/3, TimeSec: 0.1}
	r := space.Result{Key: key, Config: c, Status: space.StatusOK, Gate: space.GateTimed, Cost: cost}
	if f.status != nil {
		if st := f.status(c); st != space.StatusOK {
			r.Status, r.Gate = st, space.GateCorrectness
			return r
		}
	}
	if ctx.Err() != nil {
		r.Status, r.Gate = space.StatusTimeout, space.GateCompile
		return r
	}
	r.Objective = f.objective(c)
	return r
}

func (f *fakeEvaluator) callKeys() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

// A memStore keeps every recorded result and every saved state in memory.
type memStore struct {
	mu      sync.Mutex
	results map[string]space.Result
	log     []string
	states  [][]byte
	// afterSave, when set, is called with the number of saves so far.
	afterSave func(n int)
	// recordErr, when set, fails every Record.
	recordErr error
}

func newMemStore() *memStore { return &memStore{results: map[string]space.Result{}} }

func (m *memStore) Lookup(key string) (space.Result, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.results[key]
	return r, ok
}

func (m *memStore) Record(r space.Result) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.recordErr != nil {
		return m.recordErr
	}
	if _, dup := m.results[r.Key]; dup {
		return fmt.Errorf("memStore: %s recorded twice", r.Key)
	}
	r.Seq = len(m.log)
	m.results[r.Key] = r
	m.log = append(m.log, r.Key)
	return nil
}

func (m *memStore) SaveState(state []byte) error {
	m.mu.Lock()
	m.states = append(m.states, slices.Clone(state))
	n := len(m.states)
	m.mu.Unlock()
	if m.afterSave != nil {
		m.afterSave(n)
	}
	return nil
}

func (m *memStore) lastState() []byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.states) == 0 {
		return nil
	}
	return m.states[len(m.states)-1]
}

// batches returns the batch of every state saved with one, in order: the
// proposals of each generation, a batch saved again (on a resumed run)
// counted again.
func (m *memStore) batches(t testing.TB) [][]proposal {
	t.Helper()
	var out [][]proposal
	for _, st := range m.proposedStates(t) {
		out = append(out, st.Batch)
	}
	return out
}

// proposedStates returns every state saved with a batch, in order: the
// search as it stood when it proposed each generation.
func (m *memStore) proposedStates(t testing.TB) []state {
	t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []state
	for _, data := range m.states {
		var st state
		if err := json.Unmarshal(data, &st); err != nil {
			t.Fatal(err)
		}
		if len(st.Batch) > 0 {
			out = append(out, st)
		}
	}
	return out
}

// fewPass fails every config of sp but its default and about one in
// every: a space where most configs fail, as in a Kernel Tuner file.
func fewPass(sp *space.Space, every uint64) func(space.Config) space.Status {
	def := sp.Default().Key()
	return func(c space.Config) space.Status {
		if c.Key() == def || hashOf(c.Key())%every == 0 {
			return space.StatusOK
		}
		return space.StatusCompileError
	}
}

// restarts counts the batches that restarted the population.
func (m *memStore) restarts(t testing.TB) int {
	t.Helper()
	n := 0
	for _, b := range m.batches(t) {
		if b[0].Origin == originRestart {
			n++
		}
	}
	return n
}

// A trace is what a run did, in the terms that must not depend on timing.
type trace struct {
	gens    [][]string // keys of each absorbed generation, in proposal order
	elites  []string
	evals   int
	elapsed time.Duration
	stop    StopReason
}

// recordGenerations sets opts.OnGeneration to append to t.gens.
func (tr *trace) recordGenerations(opts *Options) {
	opts.OnGeneration = func(g Generation) {
		var keys []string
		for _, r := range g.Results {
			keys = append(keys, r.Key)
		}
		tr.gens = append(tr.gens, keys)
	}
}

func (tr *trace) finish(sum Summary) {
	tr.elites = eliteKeys(sum)
	tr.evals, tr.elapsed, tr.stop = sum.Evals, sum.Elapsed, sum.Stop
}

func eliteKeys(sum Summary) []string {
	var keys []string
	for _, r := range sum.Elites {
		keys = append(keys, r.Key)
	}
	return keys
}

// mustNew returns a new search or fails the test.
func mustNew(t testing.TB, sp *space.Space, ev Evaluator, st Store, opts Options) *Search {
	t.Helper()
	s, err := New(sp, ev, st, opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return s
}

// mustRun runs s to its end or fails the test.
func mustRun(t testing.TB, ctx context.Context, s *Search) Summary {
	t.Helper()
	sum, err := s.Run(ctx)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return sum
}

// landscape is a separable objective with interactions over a grid space
// of n values: each knob has its own target and weight, and pairs of knobs
// are rewarded for agreeing, so good configs share building blocks that
// crossover and mutation can combine.
func landscape(n int) func(space.Config) float64 {
	return func(c space.Config) float64 {
		v := func(name string) float64 { return float64(c.Int(name)) }
		f := 1.0
		targets := map[string]float64{"m0": 1, "m1": float64(n - 1), "m2": 2, "u0": 0, "u1": float64(n - 2), "u2": 3}
		weights := map[string]float64{"m0": 3, "m1": 2, "m2": 1, "u0": 1.5, "u1": 1, "u2": 0.5}
		for name, tgt := range targets {
			if _, ok := c[name]; ok {
				d := v(name) - tgt
				f += weights[name] * d * d
			}
		}
		if c["m2"] != c["u2"] {
			f += 6
		}
		if c["m0"] != c["u1"] {
			f += 4
		}
		return f
	}
}

// Results lists the recorded results in the order they were recorded: a
// memStore is a Log.
func (m *memStore) Results() []space.Result {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]space.Result, len(m.log))
	for i, k := range m.log {
		out[i] = m.results[k]
	}
	return out
}

// Keys lists the recorded results' keys in the order they were recorded.
func (m *memStore) Keys() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.log)
}
