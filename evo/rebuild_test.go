package evo

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"evotune/space"
)

// logCopy returns a store holding the first n results of src's log (all
// when n < 0) and no state, without the keys in drop: what is left of a log
// cut short or with damaged lines.
func logCopy(src *memStore, n int, drop ...string) *memStore {
	dst := newMemStore()
	if n < 0 {
		n = len(src.log)
	}
	for _, k := range src.log[:n] {
		if slices.Contains(drop, k) {
			continue
		}
		dst.results[k] = src.results[k]
		dst.log = append(dst.log, k)
	}
	return dst
}

// TestRebuildFromLog loses or damages the state or the log of a finished
// search in every way the archive can be found, and continues it: Restore
// refuses every state that disagrees with its log, and a rebuilt search ends
// as the uninterrupted run did (generations, elites, evaluation count,
// virtual elapsed time), evaluating exactly the configs the log lacks.
func TestRebuildFromLog(t *testing.T) {
	sp := gridSpace(3, 3, 4)
	for _, strategy := range Strategies() {
		for _, parallel := range []int{1, 4} {
			t.Run(fmt.Sprintf("%s/parallel=%d", strategy, parallel), func(t *testing.T) {
				opts := resumeOptions(strategy, parallel)
				ref := newMemStore()
				var want trace
				sum, gens := incarnation(t, sp, ref, opts, func(*fakeEvaluator, func()) {})
				want.gens = gens
				want.finish(sum)
				final := ref.lastState()
				best := sum.Elites[0].Key

				tests := []struct {
					name  string
					store *memStore
					state []byte // nil: state.json deleted
					// restoreErr is what Restore must say; "" when it
					// must accept the state.
					restoreErr string
					rerun      []string // configs evaluated again
				}{
					{name: "state deleted", store: logCopy(ref, -1)},
					{name: "state corrupt", store: logCopy(ref, -1), state: final[:len(final)/2], restoreErr: "unexpected end of JSON input"},
					{name: "log cut to a third", store: logCopy(ref, len(ref.log)/3), state: final,
						restoreErr: "the log lacks", rerun: ref.log[len(ref.log)/3:]},
					{name: "best line damaged", store: logCopy(ref, -1, best), state: final,
						restoreErr: "the log lacks 1 of", rerun: []string{best}},
					{name: "state counts more than the log", store: logCopy(ref, -1),
						state:      []byte(strings.Replace(string(final), fmt.Sprintf(`"evals":%d,`, opts.MaxEvals), `"evals":99,`, 1)),
						restoreErr: fmt.Sprintf("it counts 99 evaluations, the log holds %d results", len(ref.log))},
				}
				for _, tt := range tests {
					t.Run(tt.name, func(t *testing.T) {
						o := opts
						var got trace
						got.recordGenerations(&o)
						o.Clock = NewVirtualClock(o.Parallel)
						ev := &fakeEvaluator{objective: landscape(4), jitter: parallel > 1}
						if tt.state != nil {
							err := mustNew(t, sp, ev, tt.store, o).Restore(tt.state)
							if err == nil || !strings.Contains(err.Error(), tt.restoreErr) {
								t.Fatalf("Restore: %v, want an error containing %q", err, tt.restoreErr)
							}
						}
						s := mustNew(t, sp, ev, tt.store, o)
						if err := s.Rebuild(tt.state); err != nil {
							t.Fatalf("Rebuild: %v", err)
						}
						got.finish(mustRun(t, context.Background(), s))
						compareTraces(t, tt.name, got, want)
						calls := ev.callKeys()
						slices.Sort(calls)
						rerun := slices.Sorted(slices.Values(tt.rerun))
						if !slices.Equal(calls, rerun) {
							t.Errorf("evaluated %v again, want exactly the configs the log lacks %v", calls, rerun)
						}
						if !slices.Equal(slices.Sorted(slices.Values(tt.store.log)), slices.Sorted(slices.Values(ref.log))) {
							t.Errorf("the log holds %d configs, the uninterrupted run's %d, or others", len(tt.store.log), len(ref.log))
						}
					})
				}
			})
		}
	}
}

// TestRebuildTwiceKilled kills a rebuilding search, then restores the state
// it saved: the search goes on counting the log's results as its own.
func TestRebuildTwiceKilled(t *testing.T) {
	sp := gridSpace(3, 3, 4)
	opts := resumeOptions(StrategyEvo, 4)
	ref := newMemStore()
	var want trace
	sum, gens := incarnation(t, sp, ref, opts, func(*fakeEvaluator, func()) {})
	want.gens, want.elites, want.evals, want.stop = gens, eliteKeys(sum), sum.Evals, sum.Stop

	store := logCopy(ref, len(ref.log)/2)
	o := opts
	o.Clock = NewVirtualClock(o.Parallel)
	ctx, cancel := context.WithCancel(context.Background())
	ev := &fakeEvaluator{objective: landscape(4), after: func(n int) {
		if n == 3 {
			cancel()
		}
	}}
	s := mustNew(t, sp, ev, store, o)
	if err := s.Rebuild(nil); err != nil {
		t.Fatal(err)
	}
	if first := mustRun(t, ctx, s); first.Stop != StopCancelled {
		t.Fatalf("the rebuilding run stopped by %q, not cancelled", first.Stop)
	}
	second, _ := incarnation(t, sp, store, opts, func(*fakeEvaluator, func()) {})
	if got := eliteKeys(second); !slices.Equal(got, want.elites) || second.Evals != want.evals || second.Stop != want.stop {
		t.Fatalf("after a rebuild, a kill and a restore: elites %v after %d evals (%s); want %v after %d (%s)",
			got, second.Evals, second.Stop, want.elites, want.evals, want.stop)
	}
	if !slices.Equal(slices.Sorted(slices.Values(store.log)), slices.Sorted(slices.Values(ref.log))) {
		t.Errorf("the log holds other configs than the uninterrupted run's")
	}
}

// TestRebuildKeepsSettings: a rebuilt search runs with the settings it is
// created with, and Settings round-trips through options and a saved state,
// whichever way restart is set, with bred generations of the population or
// smaller.
func TestRebuildKeepsSettings(t *testing.T) {
	for i, restart := range []bool{false, true} {
		opts := resumeOptions(StrategyEvo, 2)
		opts.Seeds = []space.Config{{"m0": "1"}}
		opts.Restart = restart
		opts.Batch = 3 * i
		st := opts.Settings()
		from := DefaultOptions()
		from.Restart = !restart
		if back := from.WithSettings(st).Settings(); !slices.EqualFunc(back.Seeds, st.Seeds, func(a, b space.Config) bool { return a.Key() == b.Key() }) ||
			back.Strategy != st.Strategy || back.Seed != st.Seed || back.Population != st.Population || back.Screen != st.Screen || back.Restart != st.Restart || back.Batch != opts.Batch {
			t.Fatalf("settings %+v came back as %+v", st, back)
		}
		store := newMemStore()
		mustRun(t, context.Background(), mustNew(t, gridSpace(2, 2, 3), &fakeEvaluator{objective: landscape(3)}, store, opts))
		saved, ok := StateSettings(store.lastState())
		if !ok || saved.Seed != opts.Seed || saved.Population != opts.Population || saved.Screen != opts.Screen || saved.Elites != opts.Elites || saved.Restart != opts.Restart || saved.Batch != opts.Batch {
			t.Fatalf("settings read from the state: %+v (%v), want those of %+v", saved, ok, st)
		}
	}
	if _, ok := StateSettings([]byte("{")); ok {
		t.Error("settings read from a state that is not JSON")
	}
}
