package evo

import (
	"context"
	"slices"
	"testing"

	"evotune/space"
)

// TestSeedsShapeTheFirstGeneration checks the first generation: the
// default, then the valid unseen seeds in their order (an invalid seed, a
// config of another space and a repeat of the default are skipped), then
// a seed past the generation's size is not used.
func TestSeedsShapeTheFirstGeneration(t *testing.T) {
	sp := smallSpace() // m0+u0 ≤ 3
	parse := func(key string) space.Config {
		t.Helper()
		c, err := sp.Parse(key)
		if err != nil {
			t.Fatalf("parsing %s: %v", key, err)
		}
		return c
	}
	opts := DefaultOptions()
	opts.Population, opts.Elites, opts.MaxEvals = 4, 2, 4
	opts.Seeds = []space.Config{
		parse("m0=2,m1=1,u0=1,u1=2"),
		{"m0": "2", "m1": "0", "u0": "2", "u1": "0"}, // m0+u0 = 4: not valid here
		{"a": "1"}, // knobs of another space
		sp.Default(),
		parse("m0=1,m1=1,u0=1,u1=1"),
		parse("m0=0,m1=2,u0=0,u1=2"),
		parse("m0=0,m1=1,u0=0,u1=1"), // past the first generation's size
	}
	var tr trace
	tr.recordGenerations(&opts)
	mustRun(t, context.Background(), mustNew(t, sp, &fakeEvaluator{objective: landscape(3)}, newMemStore(), opts))
	if len(tr.gens) != 1 {
		t.Fatalf("%d generations, want 1", len(tr.gens))
	}
	want := []string{"m0=0,m1=0,u0=0,u1=0", "m0=2,m1=1,u0=1,u1=2", "m0=1,m1=1,u0=1,u1=1", "m0=0,m1=2,u0=0,u1=2"}
	if !slices.Equal(tr.gens[0], want) {
		t.Fatalf("first generation %v, want %v", tr.gens[0], want)
	}
}

// TestSeedsOnlyShapeTheFirstGeneration checks that seeds change nothing but
// the first generation's proposals: a search restored from a saved state
// after the first generation continues exactly without them, and the
// random and exhaustive strategies ignore them.
func TestSeedsOnlyShapeTheFirstGeneration(t *testing.T) {
	sp := gridSpace(3, 3, 4)
	seeds := []space.Config{{"m0": "1", "m1": "3", "m2": "2", "u0": "0", "u1": "1", "u2": "2"}}
	for _, strategy := range Strategies() {
		t.Run(strategy, func(t *testing.T) {
			opts := resumeOptions(strategy, 2)
			opts.Seeds = seeds
			ref := newMemStore()
			want, wantGens := incarnation(t, sp, ref, opts, func(*fakeEvaluator, func()) {})
			seeded := slices.Contains(wantGens[0], seeds[0].Key())
			if seeded != (strategy == StrategyEvo) {
				t.Fatalf("seed in the first generation: %v, want %v", seeded, strategy == StrategyEvo)
			}

			// Kill after the second save (generation 0 absorbed), then
			// resume without the seeds.
			store := newMemStore()
			_, gens := incarnation(t, sp, store, opts, func(_ *fakeEvaluator, cancel func()) {
				store.afterSave = func(n int) {
					if n == 2 {
						cancel()
					}
				}
			})
			opts.Seeds = nil
			sum, more := incarnation(t, sp, store, opts, func(*fakeEvaluator, func()) {})
			var got, ref2 trace
			got.gens = append(gens, more...)
			got.finish(sum)
			ref2.gens = wantGens
			ref2.finish(want)
			compareTraces(t, "resumed without seeds", got, ref2)
		})
	}
}
