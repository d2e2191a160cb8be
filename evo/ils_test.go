package evo

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"evotune/space"
)

// ilsOptions are resumeOptions with ILS epochs and a budget long enough for
// several of them.
func ilsOptions(parallel int) Options {
	opts := resumeOptions(StrategyEvo, parallel)
	opts.ILS, opts.MaxEvals = true, 160
	return opts
}

// ilsBatches runs an uninterrupted search and returns its batches.
func ilsBatches(t *testing.T, sp *space.Space, opts Options) [][]proposal {
	t.Helper()
	store := newMemStore()
	incarnation(t, sp, store, opts, func(*fakeEvaluator, func()) {})
	return store.batches(t)
}

func isILS(p proposal) bool { return p.Origin == originKick || p.Origin == originClimb }

// TestILSEpochs checks what an ILS epoch proposes: only after a bred epoch
// stagnated, full batches of kicks and climbs, one per climber; every kick
// a one-knob change of a config measured before, every climb a one-step
// neighbour of one; and a restart once the epoch is over. Without ILS there
// is none.
func TestILSEpochs(t *testing.T) {
	sp := gridSpace(3, 3, 4)
	for _, parallel := range []int{1, 4} {
		t.Run(fmt.Sprintf("parallel=%d", parallel), func(t *testing.T) {
			opts := ilsOptions(parallel)
			batches := ilsBatches(t, sp, opts)
			var before []space.Config
			epochs, ended, kicks, climbs := 0, 0, 0, 0
			for i, b := range batches {
				if !isILS(b[0]) {
					if i > 0 && isILS(batches[i-1][0]) {
						ended++
						if b[0].Origin != originRestart {
							t.Errorf("batch %d follows an ILS epoch with %q, not a restart", i, b[0].Origin)
						}
					}
				} else if i == 0 || !isILS(batches[i-1][0]) {
					epochs++
				}
				if isILS(b[0]) && len(b) != opts.Population && i != len(batches)-1 {
					t.Errorf("ILS batch %d holds %d configs, not one per climber (%d): the compile slots would idle", i, len(b), opts.Population)
				}
				climbers := map[int]bool{}
				for j, p := range b {
					if isILS(p) != isILS(b[0]) {
						t.Fatalf("batch %d mixes %q and %q", i, b[0].Origin, p.Origin)
					}
					if !isILS(p) {
						if p.Climber != 0 {
							t.Errorf("batch %d config %d: bred, yet climber %d", i, j, p.Climber)
						}
						continue
					}
					if p.Climber < 1 || p.Climber > opts.Population || climbers[p.Climber] {
						t.Errorf("batch %d config %d: climber %d (population %d, twice: %v)", i, j, p.Climber, opts.Population, climbers[p.Climber])
					}
					climbers[p.Climber] = true
					from := slices.IndexFunc(before, func(c space.Config) bool {
						if p.Origin == originKick {
							return knobsChanged(c, p.Config) == 1
						}
						return slices.ContainsFunc(sp.Steps(c), func(n space.Config) bool { return n.Key() == p.Config.Key() })
					})
					if from < 0 {
						t.Errorf("batch %d config %d: %s %s is no %s of any config measured before", i, j, p.Origin, p.Config.Key(),
							map[string]string{originKick: "one-knob change", originClimb: "one-step neighbour"}[p.Origin])
					}
					if p.Origin == originKick {
						kicks++
					} else {
						climbs++
					}
				}
				for _, p := range b {
					before = append(before, p.Config)
				}
			}
			if epochs < 2 || ended < 1 || kicks == 0 || climbs == 0 {
				t.Fatalf("%d ILS epochs (%d ended), %d kicks, %d climbs in %d evaluations; the test needs two epochs of both", epochs, ended, kicks, climbs, opts.MaxEvals)
			}
			opts.ILS = false
			for i, b := range ilsBatches(t, sp, opts) {
				if slices.ContainsFunc(b, isILS) {
					t.Fatalf("ILS off, yet batch %d holds %q", i, b[0].Origin)
				}
			}
		})
	}
}

// knobsChanged counts the knobs whose values differ.
func knobsChanged(a, b space.Config) int {
	n := 0
	for k, v := range a {
		if b[k] != v {
			n++
		}
	}
	return n
}

// TestILSResumeAndRebuild: a search with ILS epochs killed at any
// evaluation, or whose state is lost, ends as the uninterrupted run, so an
// epoch's climbers are all in the state and a climber never knows a result
// before the search has absorbed it.
func TestILSResumeAndRebuild(t *testing.T) {
	sp := gridSpace(3, 3, 4)
	for _, parallel := range []int{1, 4} {
		t.Run(fmt.Sprintf("parallel=%d", parallel), func(t *testing.T) {
			opts := ilsOptions(parallel)
			ref := newMemStore()
			var want trace
			sum, gens := incarnation(t, sp, ref, opts, func(*fakeEvaluator, func()) {})
			want.gens = gens
			want.finish(sum)
			for cut := 1; cut <= want.evals; cut += 7 {
				got := killedAndResumed(t, sp, newMemStore(), opts, func(ev *fakeEvaluator, cancel func()) {
					ev.after = func(n int) {
						if n == cut {
							cancel()
						}
					}
				})
				compareTraces(t, fmt.Sprintf("killed at evaluation %d", cut), got, want)
			}
			for _, keep := range []int{-1, len(ref.log) / 2} {
				o := opts
				var got trace
				got.recordGenerations(&o)
				o.Clock = NewVirtualClock(o.Parallel)
				ev := &fakeEvaluator{objective: landscape(4), jitter: parallel > 1}
				s := mustNew(t, sp, ev, logCopy(ref, keep), o)
				if err := s.Rebuild(nil); err != nil {
					t.Fatalf("Rebuild: %v", err)
				}
				got.finish(mustRun(t, context.Background(), s))
				compareTraces(t, fmt.Sprintf("rebuilt from a log of %d results", keep), got, want)
			}
		})
	}
}

// TestRestoreRejectsBadILS: a saved ILS epoch the search could not continue
// is refused in one line.
func TestRestoreRejectsBadILS(t *testing.T) {
	sp := gridSpace(2, 2, 3)
	for _, tt := range []struct {
		name string
		edit func(st *state)
		want string
	}{
		{"epoch without ILS", func(st *state) {
			st.Params.ILS = false
			st.ILS = &ilsEpoch{Climbers: make([]climber, st.Params.Population)}
		}, "does not run them"},
		{"climbers", func(st *state) { st.ILS = &ilsEpoch{Climbers: make([]climber, 1)} }, "climbers, population"},
		{"climber outside the space", func(st *state) {
			st.ILS = &ilsEpoch{Climbers: make([]climber, st.Params.Population)}
			st.ILS.Climbers[0].Config = space.Config{"m0": "7"}
		}, "ILS climber 0"},
		{"batch names a climber", func(st *state) { st.Batch[0].Climber = 3 }, "no ILS epoch is in progress"},
		{"negative fruitless", func(st *state) {
			st.ILS = &ilsEpoch{Climbers: make([]climber, st.Params.Population), Fruitless: -1}
		}, "negative fruitless"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			store := newMemStore()
			opts := DefaultOptions()
			opts.Population, opts.Elites, opts.MaxEvals, opts.ILS = 4, 2, 8, true
			s := mustNew(t, sp, &fakeEvaluator{objective: landscape(3)}, store, opts)
			s.propose()
			if err := s.save(); err != nil {
				t.Fatal(err)
			}
			var st state
			if err := json.Unmarshal(store.lastState(), &st); err != nil {
				t.Fatal(err)
			}
			tt.edit(&st)
			data, err := json.Marshal(st)
			if err != nil {
				t.Fatal(err)
			}
			err = mustNew(t, sp, &fakeEvaluator{objective: landscape(3)}, store, opts).Restore(data)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Restore: %v, want an error containing %q", err, tt.want)
			}
		})
	}
}
