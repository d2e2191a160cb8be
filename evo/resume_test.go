package evo

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"evotune/space"
)

// resumeOptions is a short search with a virtual clock, so that elapsed
// time is as exact as the evaluation count; evo screens its children.
func resumeOptions(strategy string, parallel int) Options {
	opts := DefaultOptions()
	opts.Strategy, opts.Seed, opts.Population, opts.Elites = strategy, 11, 8, 4
	opts.Parallel, opts.MaxEvals, opts.Stagnation, opts.Screen = parallel, 44, 2, 8
	return opts
}

// killedAndResumed runs a search on store until kill stops it, then a
// restored search to its end, and returns what the two did together.
func killedAndResumed(t *testing.T, sp *space.Space, store *memStore, opts Options, kill func(ev *fakeEvaluator, cancel func())) trace {
	t.Helper()
	_, gens := incarnation(t, sp, store, opts, kill)
	second, more := incarnation(t, sp, store, opts, func(*fakeEvaluator, func()) {})
	got := trace{gens: append(gens, more...)}
	got.finish(second)
	return got
}

// incarnation runs one life of a search on store: restored from the
// store's last state if there is one, killed when kill says so. It returns
// the run's summary and the generations it reported.
func incarnation(t *testing.T, sp *space.Space, store *memStore, opts Options, kill func(ev *fakeEvaluator, cancel func())) (Summary, [][]string) {
	t.Helper()
	var tr trace
	tr.recordGenerations(&opts)
	opts.Clock = NewVirtualClock(opts.Parallel)
	ev := &fakeEvaluator{objective: landscape(4), jitter: opts.Parallel > 1}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	store.afterSave = nil
	kill(ev, cancel)
	s := mustNew(t, sp, ev, store, opts)
	if state := store.lastState(); state != nil {
		if err := s.Restore(state); err != nil {
			t.Fatalf("Restore: %v", err)
		}
	}
	return mustRun(t, ctx, s), tr.gens
}

// compareTraces fails the test unless got ended as want did.
func compareTraces(t *testing.T, what string, got, want trace) {
	t.Helper()
	if !slices.EqualFunc(got.gens, want.gens, slices.Equal) {
		t.Fatalf("%s: generations differ from the uninterrupted run:\ngot  %v\nwant %v", what, got.gens, want.gens)
	}
	if !slices.Equal(got.elites, want.elites) || got.evals != want.evals || got.elapsed != want.elapsed || got.stop != want.stop {
		t.Fatalf("%s: ended with elites %v after %d evals, %v, stop %q;\nwant elites %v after %d evals, %v, stop %q",
			what, got.elites, got.evals, got.elapsed, got.stop, want.elites, want.evals, want.elapsed, want.stop)
	}
}

// TestResumeAfterKill cancels a run at every evaluation and at every state
// save, discarding what was in flight, then restores a new search from the
// last saved state over the store that kept every recorded result: it must
// end exactly as the uninterrupted run, elites, evaluation count and
// (virtual) elapsed time included.
func TestResumeAfterKill(t *testing.T) {
	sp := gridSpace(3, 3, 4)
	type variant struct {
		strategy string
		screen   int
		restart  bool
		interact bool
		// sparse fails all configs but the default and one in 64, so
		// that the first generations are samples (params.minBreeders).
		sparse bool
		// batch is Options.Batch: bred generations of one child.
		batch int
	}
	variants := []variant{{StrategyEvo, 1, false, false, false, 0}, {StrategyEvo, 8, false, false, false, 0}, {StrategyEvo, 8, true, false, false, 0}}
	for _, strategy := range Strategies() {
		variants = append(variants, variant{strategy, 8, true, true, false, 0})
	}
	variants = append(variants, variant{StrategyEvo, 8, true, true, true, 0}, variant{StrategyEvo, 8, true, true, false, 1})
	sparse := fewPass(sp, 64)
	for _, v := range variants {
		setup := func(ev *fakeEvaluator) {
			if v.sparse {
				ev.status = sparse
			}
		}
		for _, parallel := range []int{1, 4} {
			t.Run(fmt.Sprintf("%s/screen=%d/restart=%v/interact=%v/sparse=%v/batch=%d/parallel=%d", v.strategy, v.screen, v.restart, v.interact, v.sparse, v.batch, parallel), func(t *testing.T) {
				opts := resumeOptions(v.strategy, parallel)
				opts.Screen, opts.Restart, opts.Interact, opts.Batch = v.screen, v.restart, v.interact, v.batch
				if v.strategy == StrategyEvo && v.restart {
					// Long enough for the population to stagnate and
					// restart, with kills on either side.
					opts.MaxEvals = 100
				}
				var want trace
				refStore := newMemStore()
				sum, gens := incarnation(t, sp, refStore, opts, func(ev *fakeEvaluator, _ func()) { setup(ev) })
				want.gens = gens
				want.finish(sum)
				if want.stop != StopBudget || want.evals != opts.MaxEvals {
					t.Fatalf("uninterrupted run stopped by %q after %d evals", want.stop, want.evals)
				}
				if sampled := sampledBeforeBreeding(t, refStore); v.strategy == StrategyEvo && sampled != v.sparse {
					t.Fatalf("uninterrupted run proposed samples in place of children: %v, want %v", sampled, v.sparse)
				}
				if restarts := refStore.restarts(t); (restarts > 0) != (v.strategy == StrategyEvo && v.restart) {
					t.Fatalf("uninterrupted run restarted its population %d times with restart %v", restarts, v.restart)
				}
				saves := len(refStore.states)

				cuts := map[string]func(ev *fakeEvaluator, store *memStore, cut int, cancel func()){
					"evaluation": func(ev *fakeEvaluator, _ *memStore, cut int, cancel func()) {
						ev.after = func(n int) {
							if n == cut {
								cancel()
							}
						}
					},
					"save": func(_ *fakeEvaluator, store *memStore, cut int, cancel func()) {
						store.afterSave = func(n int) {
							if n == cut {
								cancel()
							}
						}
					},
				}
				limits := map[string]int{"evaluation": want.evals, "save": saves}
				for kind, arm := range cuts {
					for cut := 1; cut <= limits[kind]; cut++ {
						store := newMemStore()
						first, gens := incarnation(t, sp, store, opts, func(ev *fakeEvaluator, cancel func()) {
							setup(ev)
							arm(ev, store, cut, cancel)
						})
						if kind == "evaluation" && first.Stop != StopCancelled {
							t.Fatalf("cut at evaluation %d: first run stopped by %q, not cancelled", cut, first.Stop)
						}
						second, more := incarnation(t, sp, store, opts, func(ev *fakeEvaluator, _ func()) { setup(ev) })
						got := trace{gens: append(gens, more...)}
						got.finish(second)
						compareTraces(t, fmt.Sprintf("killed at %s %d", kind, cut), got, want)
					}
				}
			})
		}
	}
}

// TestResumeAfterManyKills kills every life of a search at its n-th
// evaluation until it ends; the end is that of an uninterrupted run. Each
// life records at least one result as long as n exceeds Parallel (the n-th
// evaluation starts only once an earlier one is recorded).
func TestResumeAfterManyKills(t *testing.T) {
	sp := gridSpace(3, 3, 4)
	for _, parallel := range []int{1, 4} {
		for _, every := range []int{parallel + 1, parallel + 2, 7} {
			opts := resumeOptions(StrategyEvo, parallel)
			var want trace
			sum, gens := incarnation(t, sp, newMemStore(), opts, func(*fakeEvaluator, func()) {})
			want.gens = gens
			want.finish(sum)

			store := newMemStore()
			var got trace
			lives := 0
			for {
				lives++
				if lives > 10*opts.MaxEvals {
					t.Fatalf("every %d, parallel %d: no end after %d lives", every, parallel, lives)
				}
				o := opts
				if lives > 1 {
					// A restored search continues the saved search
					// whatever these options say.
					o.Seed, o.Population, o.Elites, o.CrossoverRate = 999, 5, 5, 0.9
				}
				sum, gens := incarnation(t, sp, store, o, func(ev *fakeEvaluator, cancel func()) {
					ev.after = func(n int) {
						if n == every {
							cancel()
						}
					}
				})
				got.gens = append(got.gens, gens...)
				if sum.Stop != StopCancelled {
					got.finish(sum)
					break
				}
			}
			compareTraces(t, fmt.Sprintf("killed every %d evaluations, parallel %d, %d lives", every, parallel, lives), got, want)
		}
	}
}

func TestCancelledSearchIsSpent(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	ev := &fakeEvaluator{objective: landscape(3), after: func(n int) {
		if n == 3 {
			cancel()
		}
	}}
	s := mustNew(t, smallSpace(), ev, newMemStore(), DefaultOptions())
	if sum := mustRun(t, ctx, s); sum.Stop != StopCancelled {
		t.Fatalf("stop %q, want cancelled", sum.Stop)
	}
	if _, err := s.Run(context.Background()); err == nil {
		t.Fatal("a cancelled search ran again; it would count its partial batch twice")
	}
}

func TestRestoreRejectsBadStates(t *testing.T) {
	sp := gridSpace(2, 2, 3)
	store := newMemStore()
	opts := DefaultOptions()
	opts.Population, opts.Elites, opts.MaxEvals = 4, 2, 8
	mustRun(t, context.Background(), mustNew(t, sp, &fakeEvaluator{objective: landscape(3)}, store, opts))
	good := string(store.lastState())
	tests := []struct {
		name, state, want string
	}{
		{"not json", "{", "restoring search state"},
		{"version", `{"version": 99}`, "version 99"},
		{"strategy", `{"version": 1, "strategy": "hill", "params": {"population": 4, "elites": 2, "tournament": 3, "stagnation": 4}}`, `unknown strategy "hill"`},
		{"random source", `{"version": 1, "strategy": "evo", "macro_share": 0.5, "params": {"population": 4, "elites": 2, "tournament": 3, "stagnation": 4}, "rng": "AAAA"}`, "random source"},
		{"elite not stored", good[:len(good)-1] + `, "elites": ["m0=9"]}`, "m0=9 is not in the store"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := mustNew(t, sp, &fakeEvaluator{}, store, opts).Restore([]byte(tt.state))
			if err == nil || !containsAll(err.Error(), "restoring search state", tt.want) {
				t.Fatalf("Restore: got %v, want an error containing %q", err, tt.want)
			}
		})
	}
	if err := mustNew(t, sp, &fakeEvaluator{}, store, opts).Restore([]byte(good)); err != nil {
		t.Fatalf("Restore of a saved state: %v", err)
	}
}

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

// FuzzRestore feeds arbitrary bytes to Restore: it returns an error or a
// search that runs, never panics.
func FuzzRestore(f *testing.F) {
	sp := gridSpace(2, 2, 3)
	store := newMemStore()
	opts := DefaultOptions()
	opts.Population, opts.Elites, opts.MaxEvals = 4, 2, 10
	mustRun(f, context.Background(), mustNew(f, sp, &fakeEvaluator{objective: landscape(3)}, store, opts))
	for _, s := range store.states {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, state []byte) {
		st := newMemStore()
		for k, r := range store.results {
			st.results[k] = r
		}
		st.log = slices.Clone(store.log)
		o := opts
		o.MaxEvals = 14
		o.Clock = NewVirtualClock(1)
		s := mustNew(t, sp, &fakeEvaluator{objective: landscape(3)}, st, o)
		if err := s.Restore(state); err != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := s.Run(ctx); err != nil {
			t.Fatalf("Run after Restore: %v", err)
		}
	})
}

// sampledBeforeBreeding reports whether a run on store proposed a batch of
// uniform samples after its first generation and before any restart, as
// it does while fewer than params.minBreeders configs have passed.
func sampledBeforeBreeding(t *testing.T, store *memStore) bool {
	t.Helper()
	for _, st := range store.proposedStates(t) {
		if st.Restarts > 0 {
			return false
		}
		if st.Generation > 0 && !slices.ContainsFunc(st.Batch, func(p proposal) bool { return p.Origin != originRandom }) {
			return true
		}
	}
	return false
}
