package evo

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"evotune/space"
)

func TestNewRejectsBadOptions(t *testing.T) {
	tests := []struct {
		name   string
		change func(*Options)
		want   string
	}{
		{"unknown strategy", func(o *Options) { o.Strategy = "annealing" }, `unknown strategy "annealing" (valid: evo, random, exhaustive)`},
		{"population", func(o *Options) { o.Population = 0 }, "population must be in [1, 65536]"},
		{"elites above population", func(o *Options) { o.Population, o.Elites = 24, 25 }, "elites must be in [1, population=24]"},
		{"tournament", func(o *Options) { o.Tournament = 0 }, "tournament size"},
		{"crossover", func(o *Options) { o.CrossoverRate = 1.5 }, "crossover rate must be in [0, 1]"},
		{"stagnation", func(o *Options) { o.Stagnation = 0 }, "stagnation"},
		{"batch", func(o *Options) { o.Batch = -1 }, "batch must be in [0, population=8] (0: the population), got -1"},
		{"batch above population", func(o *Options) { o.Batch = 9 }, "batch must be in [0, population=8]"},
		{"screen", func(o *Options) { o.Screen = 0 }, "screen must be in [1, 64] candidates per child (1: off), got 0"},
		{"screen too large", func(o *Options) { o.Screen = 65 }, "screen must be in [1, 64]"},
		{"parallel", func(o *Options) { o.Parallel = 0 }, "parallel must be at least 1"},
		{"max evals", func(o *Options) { o.MaxEvals = -1 }, "max evals"},
		{"max time", func(o *Options) { o.MaxTime = -time.Second }, "max time"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := DefaultOptions()
			tt.change(&opts)
			_, err := New(smallSpace(), &fakeEvaluator{}, newMemStore(), opts)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("New: got error %v, want one containing %q", err, tt.want)
			}
		})
	}
	if _, err := New(smallSpace(), &fakeEvaluator{}, newMemStore(), DefaultOptions()); err != nil {
		t.Fatalf("New with default options: %v", err)
	}
}

// runTrace runs one uninterrupted search and returns its trace.
func runTrace(t *testing.T, sp *space.Space, ev *fakeEvaluator, opts Options) (trace, *memStore) {
	t.Helper()
	var tr trace
	tr.recordGenerations(&opts)
	store := newMemStore()
	tr.finish(mustRun(t, context.Background(), mustNew(t, sp, ev, store, opts)))
	return tr, store
}

func TestDeterministicWhateverTheParallelism(t *testing.T) {
	sp := gridSpace(3, 3, 5)
	for _, strategy := range Strategies() {
		t.Run(strategy, func(t *testing.T) {
			opts := DefaultOptions()
			opts.Strategy, opts.Seed, opts.Population, opts.MaxEvals = strategy, 7, 12, 90
			var runs []trace
			for _, parallel := range []int{1, 8, 8} {
				opts.Parallel = parallel
				opts.Clock = NewVirtualClock(parallel)
				tr, _ := runTrace(t, sp, &fakeEvaluator{objective: landscape(5), jitter: parallel > 1}, opts)
				tr.elapsed = 0 // virtual time divides by Parallel
				runs = append(runs, tr)
			}
			if len(runs[0].elites) != opts.Elites || runs[0].evals != 90 {
				t.Fatalf("run kept %d elites after %d evals, want %d after 90", len(runs[0].elites), runs[0].evals, opts.Elites)
			}
			for i, tr := range runs[1:] {
				if !slices.EqualFunc(tr.gens, runs[0].gens, slices.Equal) {
					t.Errorf("run %d (Parallel=8) proposed a different sequence than Parallel=1:\n%v\n%v", i+1, tr.gens, runs[0].gens)
				}
				if !slices.Equal(tr.elites, runs[0].elites) {
					t.Errorf("run %d (Parallel=8) elites %v, want %v", i+1, tr.elites, runs[0].elites)
				}
			}
		})
	}
}

func TestSeedsDiffer(t *testing.T) {
	sp := gridSpace(3, 3, 5)
	opts := DefaultOptions()
	opts.MaxEvals = 48
	a, _ := runTrace(t, sp, &fakeEvaluator{objective: landscape(5)}, opts)
	opts.Seed = 2
	b, _ := runTrace(t, sp, &fakeEvaluator{objective: landscape(5)}, opts)
	if slices.EqualFunc(a.gens, b.gens, slices.Equal) {
		t.Fatal("seeds 1 and 2 proposed the same configs")
	}
}

// TestEveryValidConfigOnce exhausts a small space with each strategy: every
// valid config is evaluated exactly once, and nothing else.
func TestEveryValidConfigOnce(t *testing.T) {
	sp := smallSpace()
	want := validKeys(sp)
	for _, strategy := range Strategies() {
		for _, parallel := range []int{1, 4} {
			t.Run(strategy+"/parallel="+string(rune('0'+parallel)), func(t *testing.T) {
				opts := DefaultOptions()
				opts.Strategy, opts.Population, opts.Elites, opts.Parallel = strategy, 8, 4, parallel
				ev := &fakeEvaluator{objective: landscape(3)}
				tr, store := runTrace(t, sp, ev, opts)
				if tr.stop != StopExhausted {
					t.Errorf("stop = %q, want %q", tr.stop, StopExhausted)
				}
				calls := ev.callKeys()
				if tr.evals != len(want) || len(calls) != len(want) || len(store.log) != len(want) {
					t.Errorf("evals %d, calls %d, recorded %d; want %d each", tr.evals, len(calls), len(store.log), len(want))
				}
				got := slices.Clone(calls)
				slices.Sort(got)
				sorted := slices.Clone(want)
				slices.Sort(sorted)
				if !slices.Equal(got, sorted) {
					t.Errorf("evaluated configs differ from the valid ones:\ngot  %v\nwant %v", got, sorted)
				}
				var order []string
				for _, g := range tr.gens {
					order = append(order, g...)
				}
				switch strategy {
				case StrategyExhaustive:
					if !slices.Equal(order, want) {
						t.Errorf("exhaustive order is not Enumerate order:\ngot  %v\nwant %v", order, want)
					}
				case StrategyRandom:
					if slices.Equal(order, want) {
						t.Error("random proposed configs in Enumerate order")
					}
				}
			})
		}
	}
}

// TestStoreAnswersKnownConfigs pre-fills the store: those configs are never
// evaluated, do not count against MaxEvals, and still inform the search.
func TestStoreAnswersKnownConfigs(t *testing.T) {
	sp := smallSpace()
	obj := landscape(3)
	for _, strategy := range Strategies() {
		t.Run(strategy, func(t *testing.T) {
			store := newMemStore()
			known := validKeys(sp)[:10]
			known = append(known, sp.Default().Key())
			for _, key := range known {
				c, err := sp.Parse(key)
				if err != nil {
					t.Fatal(err)
				}
				if _, dup := store.results[key]; !dup {
					store.Record(space.Result{Key: key, Config: c, Status: space.StatusOK, Objective: obj(c)})
				}
			}
			before := len(store.log)
			ev := &fakeEvaluator{objective: obj}
			opts := DefaultOptions()
			opts.Strategy, opts.Population, opts.Elites = strategy, 8, 4
			sum := mustRun(t, context.Background(), mustNew(t, sp, ev, store, opts))
			for _, key := range ev.callKeys() {
				if slices.Contains(known, key) {
					t.Errorf("%s was in the store but evaluated again", key)
				}
			}
			if sum.StoreHits != before || sum.Evals != len(ev.callKeys()) || sum.Evals+sum.StoreHits != len(validKeys(sp)) {
				t.Errorf("store hits %d, evals %d, calls %d; want %d hits and the rest of %d valid configs evaluated",
					sum.StoreHits, sum.Evals, len(ev.callKeys()), before, len(validKeys(sp)))
			}
		})
	}
}

func TestFailuresNeverEnterThePopulation(t *testing.T) {
	sp := gridSpace(2, 2, 4)
	bad := func(c space.Config) space.Status {
		switch c["u1"] {
		case "1":
			return space.StatusIncorrect
		case "2":
			return space.StatusFault
		case "3":
			return space.StatusConstraint // should not happen; must be survived
		}
		return space.StatusOK
	}
	ev := &fakeEvaluator{objective: landscape(4), status: bad}
	opts := DefaultOptions()
	opts.Population, opts.MaxEvals = 8, 80
	var popSeen []member
	s := mustNew(t, sp, ev, newMemStore(), opts)
	s.opts.OnGeneration = func(Generation) { popSeen = append(popSeen, s.pop...) }
	sum := mustRun(t, context.Background(), s)
	for _, m := range popSeen {
		if m.config["u1"] != "0" {
			t.Errorf("population held failed config %s", m.key)
		}
	}
	for _, r := range sum.Elites {
		if !r.OK() {
			t.Errorf("elite %s has status %s", r.Key, r.Status)
		}
	}
	total := 0
	for _, n := range sum.ByStatus {
		total += n
	}
	if total != sum.Evals || sum.ByStatus[space.StatusFault] == 0 || sum.ByStatus[space.StatusOK] == 0 {
		t.Errorf("by status %v does not account for %d evals with both faults and OK results", sum.ByStatus, sum.Evals)
	}
}

func TestBudgetByEvals(t *testing.T) {
	for _, strategy := range Strategies() {
		t.Run(strategy, func(t *testing.T) {
			ev := &fakeEvaluator{objective: landscape(5)}
			opts := DefaultOptions()
			opts.Strategy, opts.Population, opts.MaxEvals, opts.Parallel = strategy, 8, 37, 3
			opts.Batch = 0 // whole generations, so that the budget cuts the last one short
			tr, store := runTrace(t, gridSpace(3, 3, 5), ev, opts)
			if tr.stop != StopBudget || tr.evals != 37 || len(ev.callKeys()) != 37 || len(store.log) != 37 {
				t.Errorf("stop %q after %d evals (%d calls, %d recorded), want budget after 37", tr.stop, tr.evals, len(ev.callKeys()), len(store.log))
			}
			if got := len(tr.gens[len(tr.gens)-1]); got != 37%8 {
				t.Errorf("last generation has %d configs, want the %d the budget left", got, 37%8)
			}
		})
	}
}

// constCost evaluates everything at the same cost.
type constCost struct {
	fakeEvaluator
	seconds float64
}

func (c *constCost) Evaluate(ctx context.Context, cfg space.Config) space.Result {
	r := c.fakeEvaluator.Evaluate(ctx, cfg)
	r.Cost = space.Cost{TimeSec: c.seconds}
	return r
}

func TestBudgetByVirtualTime(t *testing.T) {
	tests := []struct {
		parallel  int
		maxTime   time.Duration
		wantEvals int // 8 + 8 + what the time left allows
	}{
		{1, 200 * time.Second, 20},
		{4, 50 * time.Second, 20},
		{1, 165 * time.Second, 17},
		{4, 45 * time.Second, 20}, // the last batch is at least one round of 4
	}
	for _, tt := range tests {
		ev := &constCost{fakeEvaluator: fakeEvaluator{objective: landscape(5)}, seconds: 10}
		opts := DefaultOptions()
		opts.Population, opts.Parallel, opts.MaxTime = 8, tt.parallel, tt.maxTime
		opts.Batch = 0 // generations of 8, as the wanted counts are
		opts.Clock = NewVirtualClock(tt.parallel)
		sum := mustRun(t, context.Background(), mustNew(t, gridSpace(3, 3, 5), ev, newMemStore(), opts))
		wantElapsed := time.Duration(tt.wantEvals) * 10 * time.Second / time.Duration(tt.parallel)
		if sum.Stop != StopTime || sum.Evals != tt.wantEvals || sum.Elapsed != wantElapsed {
			t.Errorf("parallel %d, max time %v: stop %q after %d evals and %v, want time after %d evals and %v",
				tt.parallel, tt.maxTime, sum.Stop, sum.Evals, sum.Elapsed, tt.wantEvals, wantElapsed)
		}
	}
}

func TestProgress(t *testing.T) {
	var ps []Progress
	ev := &constCost{fakeEvaluator: fakeEvaluator{objective: landscape(5)}, seconds: 2}
	opts := DefaultOptions()
	opts.Population, opts.MaxEvals, opts.Parallel = 8, 40, 4
	opts.Clock = NewVirtualClock(4)
	opts.OnProgress = func(p Progress) { ps = append(ps, p) }
	sum := mustRun(t, context.Background(), mustNew(t, gridSpace(3, 3, 5), ev, newMemStore(), opts))
	if len(ps) != 40 {
		t.Fatalf("%d progress calls, want one per result (40)", len(ps))
	}
	for i, p := range ps {
		if p.Evals != i+1 || p.MaxEvals != 40 || p.ByStatus[space.StatusOK] != p.Evals {
			t.Fatalf("progress %d: evals %d/%d, ok %d", i, p.Evals, p.MaxEvals, p.ByStatus[space.StatusOK])
		}
		if p.Best <= 0 || p.BestKey == "" || (i > 0 && p.Best > ps[i-1].Best) {
			t.Fatalf("progress %d: best %v (%q) after %v", i, p.Best, p.BestKey, ps[max(i-1, 0)].Best)
		}
		// Each evaluation costs 2s/4 of virtual time, so the ETA for
		// the evaluations left is exact.
		if want := time.Duration(40-p.Evals) * 500 * time.Millisecond; p.ETA != want || p.Elapsed != time.Duration(p.Evals)*500*time.Millisecond {
			t.Fatalf("progress %d: elapsed %v, ETA %v; want %v left", i, p.Elapsed, p.ETA, want)
		}
	}
	if last := ps[len(ps)-1]; last.Best != sum.Elites[0].Objective || last.BestKey != sum.Elites[0].Key {
		t.Errorf("last progress best %v %s, summary best %v %s", last.Best, last.BestKey, sum.Elites[0].Objective, sum.Elites[0].Key)
	}
}

func TestETA(t *testing.T) {
	tests := []struct {
		evals, maxEvals  int
		elapsed, maxTime time.Duration
		want             time.Duration
	}{
		{0, 10, 0, 0, 0},
		{5, 10, 50 * time.Second, 0, 50 * time.Second},
		{5, 10, 50 * time.Second, 60 * time.Second, 10 * time.Second},
		{5, 0, 50 * time.Second, 40 * time.Second, 0},
		{5, 0, 50 * time.Second, 0, 0},
	}
	for _, tt := range tests {
		if got := eta(tt.evals, tt.maxEvals, tt.elapsed, tt.maxTime); got != tt.want {
			t.Errorf("eta(%d, %d, %v, %v) = %v, want %v", tt.evals, tt.maxEvals, tt.elapsed, tt.maxTime, got, tt.want)
		}
	}
}

func TestRecordFailureStopsTheRun(t *testing.T) {
	store := newMemStore()
	store.recordErr = errors.New("disk full")
	opts := DefaultOptions()
	opts.Parallel = 4
	_, err := mustNew(t, smallSpace(), &fakeEvaluator{objective: landscape(3)}, store, opts).Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "disk full") || !strings.Contains(err.Error(), "recording the result of") {
		t.Fatalf("Run: got %v, want the store's error with what was being recorded", err)
	}
}

func TestLayerShareFollowsImprovements(t *testing.T) {
	sp := gridSpace(4, 4, 10)
	// Only one layer's knobs move the objective, with room to improve for
	// several generations; the other layer's mutations never improve, so
	// the share should move away from it.
	onlyLayer := func(prefix string) func(space.Config) float64 {
		return func(c space.Config) float64 {
			f := 1.0
			for name := range c {
				if strings.HasPrefix(name, prefix) {
					d := float64(c.Int(name)) - 7
					f += d * d
				}
			}
			return f
		}
	}
	const seeds = 8
	for _, tt := range []struct {
		prefix            string
		batch, tournament int
		lo, hi            float64 // bounds on the mean macro share
	}{
		{"u", 0, 3, 0, 0.42},
		{"m", 0, 3, 0.58, 1},
		// Bred one at a time, the rates move once every 24 children.
		{"u", 1, 3, 0, 0.42},
		{"m", 1, 3, 0.58, 1},
		// The default tournament makes the best member the parent of most
		// children: improving on it is rarer in either layer, so the rates
		// and the share move less, but the same way.
		{"u", 1, 8, 0, 0.49},
		{"m", 1, 8, 0.51, 1},
	} {
		t.Run(fmt.Sprintf("only %s, batch %d, tournament %d", tt.prefix, tt.batch, tt.tournament), func(t *testing.T) {
			var shareSum float64
			var shares int
			var useful, useless LayerStats
			for seed := uint64(1); seed <= seeds; seed++ {
				opts := DefaultOptions()
				// Generations of 24 give each layer enough trials per
				// generation for its rate to tell the layers apart.
				opts.Population, opts.Elites = 24, 8
				opts.Seed, opts.MaxEvals, opts.Batch, opts.Tournament = seed, 24*7, tt.batch, tt.tournament
				// Unscreened: the test is of the layer credit alone. A
				// screen prefers a neutral mutation of the layer that
				// cannot matter to one of the other layer that its model
				// predicts worse, which changes the mutation counts.
				opts.Screen = 1
				opts.OnGeneration = func(g Generation) {
					if g.Number > 0 { // generation 0 has no mutations to learn from
						shareSum += g.MacroShare
						shares++
					}
				}
				sum := mustRun(t, context.Background(), mustNew(t, sp, &fakeEvaluator{objective: onlyLayer(tt.prefix)}, newMemStore(), opts))
				u, v := sum.Micro, sum.Macro
				if tt.prefix == "m" {
					u, v = v, u
				}
				if v.Successes != 0 {
					t.Errorf("seed %d: the layer that cannot matter was credited with %d successes", seed, v.Successes)
				}
				useful.Trials += u.Trials
				useless.Trials += v.Trials
			}
			mean := shareSum / float64(shares)
			t.Logf("mean macro share %.2f; mutations of the layer that matters %d, of the other %d", mean, useful.Trials, useless.Trials)
			if mean < tt.lo || mean > tt.hi {
				t.Errorf("mean macro share %.2f, want it in [%.2f, %.2f]", mean, tt.lo, tt.hi)
			}
			if useful.Trials <= useless.Trials {
				t.Errorf("the layer that matters was mutated %d times, the other %d", useful.Trials, useless.Trials)
			}
		})
	}
}

func TestMacroShareIsClamped(t *testing.T) {
	tests := []struct {
		macro, micro float64
		want         float64
	}{
		{0.5, 0.5, 0.5},
		{0, 0.3, minMacroShare},
		{0.3, 0, maxMacroShare},
		{0, 0, 0.5},
		{0.2, 0.6, 0.25},
	}
	for _, tt := range tests {
		if got := macroShare(LayerStats{Rate: tt.macro}, LayerStats{Rate: tt.micro}); got != tt.want {
			t.Errorf("macroShare(%v, %v) = %v, want %v", tt.macro, tt.micro, got, tt.want)
		}
	}
}

// TestEvoBeatsRandom compares the best objective found with the same
// budget (300 of 262144 configs), averaged over seeds, on a landscape with
// building blocks: evo must come several times closer to the optimum.
func TestEvoBeatsRandom(t *testing.T) {
	sp := gridSpace(3, 3, 8)
	obj := landscape(8)
	optimum := math.Inf(1)
	sp.Enumerate(func(c space.Config) bool {
		optimum = min(optimum, obj(c))
		return true
	})
	const seeds = 12
	excess := func(strategy string) float64 {
		sum := 0.0
		for seed := uint64(1); seed <= seeds; seed++ {
			opts := DefaultOptions()
			opts.Strategy, opts.Seed, opts.MaxEvals = strategy, seed, 300
			s := mustRun(t, context.Background(), mustNew(t, sp, &fakeEvaluator{objective: obj}, newMemStore(), opts))
			sum += s.Elites[0].Objective - optimum
		}
		return sum / seeds
	}
	evo, random := excess(StrategyEvo), excess(StrategyRandom)
	t.Logf("mean excess over the optimum %.2f after 300 evaluations, over %d seeds: evo %.2f, random %.2f", optimum, seeds, evo, random)
	if !(evo < random/3) {
		t.Errorf("evo's mean excess %.2f is not under a third of random's %.2f", evo, random)
	}
}

// TestStagnationInjectsFreshConfigs runs on a flat landscape: after the
// first generation nothing improves, so every Stagnation generations a
// quarter of the batch is fresh random configs.
func TestStagnationInjectsFreshConfigs(t *testing.T) {
	store := newMemStore()
	opts := DefaultOptions()
	opts.Population, opts.Stagnation, opts.Restart, opts.MaxEvals = 8, 2, false, 8*7
	opts.Batch = 0 // generations of 8: the test counts generations
	flat := func(space.Config) float64 { return 5 }
	mustRun(t, context.Background(), mustNew(t, gridSpace(3, 3, 5), &fakeEvaluator{objective: flat}, store, opts))
	var injected []int // per proposed generation
	for _, st := range store.proposedStates(t) {
		n := 0
		for _, p := range st.Batch {
			if p.Origin == originInject {
				n++
			}
		}
		injected = append(injected, n)
	}
	// Generation 0 finds the first best; 1 and 2 stagnate, so 3 injects;
	// 3 and 4 stagnate, so 5 injects.
	want := []int{0, 0, 0, 2, 0, 2, 0}
	if !slices.Equal(injected, want) {
		t.Errorf("injected configs by generation %v, want %v", injected, want)
	}
}

// TestRestartAfterStagnantGenerations runs on a landscape where only the
// default (proposed first) is fast: after the first generation nothing
// improves, so every Stagnation generations the whole batch is fresh configs
// and the population keeps only its best member besides that batch, while
// the elites stay.
func TestRestartAfterStagnantGenerations(t *testing.T) {
	store := newMemStore()
	opts := DefaultOptions()
	opts.Population, opts.Elites, opts.Stagnation, opts.Restart, opts.MaxEvals = 8, 8, 2, true, 8*8
	opts.Batch = 0 // generations of 8: the test counts generations
	sp := gridSpace(3, 3, 5)
	def := sp.Default().Key()
	obj := func(c space.Config) float64 {
		if c.Key() == def {
			return 1
		}
		return 5
	}
	sum := mustRun(t, context.Background(), mustNew(t, sp, &fakeEvaluator{objective: obj}, store, opts))
	var restarted []int // per generation: configs of origin restart
	var batches []map[string]bool
	var pops [][]string // the population when each batch was proposed
	for _, st := range store.proposedStates(t) {
		n := 0
		keys := map[string]bool{}
		for _, p := range st.Batch {
			keys[p.Config.Key()] = true
			if p.Origin == originRestart {
				n++
			}
		}
		restarted = append(restarted, n)
		batches = append(batches, keys)
		pops = append(pops, st.Population)
	}
	// Generation 0 finds the best; 1 and 2 stagnate, so 3 restarts; 3
	// and 4 stagnate, so 5 restarts, and so on.
	want := []int{0, 0, 0, 8, 0, 8, 0, 8}
	if !slices.Equal(restarted, want) {
		t.Fatalf("restart configs by generation %v, want %v", restarted, want)
	}
	for _, g := range []int{3, 5} {
		if !slices.Equal(pops[g], []string{def}) {
			t.Errorf("generation %d restarts with the population %v, want only its best %s", g, pops[g], def)
		}
		// The next population is the best and the restart batch's
		// results: nothing of the population before the restart.
		if len(pops[g+1]) != opts.Population {
			t.Errorf("generation %d restarted and left a population of %d", g, len(pops[g+1]))
		}
		for _, k := range pops[g+1] {
			if k != def && !batches[g][k] {
				t.Errorf("after the restart of generation %d the population holds %s, neither the best nor of that batch", g, k)
			}
		}
	}
	if len(sum.Elites) != opts.Elites || sum.Elites[0].Key != def {
		t.Errorf("after restarts the elites are %v, want %d led by the default %s", sum.Elites, opts.Elites, def)
	}
}

// TestPlaceholderDefaultsAreNotProposed: a space whose defaults are
// stand-ins (a Kernel Tuner file's first values) starts from uniform
// samples, never from its default, which a space with a chosen default
// proposes first.
func TestPlaceholderDefaultsAreNotProposed(t *testing.T) {
	for _, placeholder := range []bool{false, true} {
		sp := gridSpace(3, 3, 5)
		sp.PlaceholderDefaults = placeholder
		for seed := uint64(1); seed <= 4; seed++ {
			store := newMemStore()
			opts := DefaultOptions()
			opts.Seed, opts.MaxEvals = seed, 40
			// Every config fails: the search keeps asking for a config
			// to start from, which is where the default is proposed.
			ev := &fakeEvaluator{objective: landscape(5), status: func(space.Config) space.Status { return space.StatusCompileError }}
			mustRun(t, context.Background(), mustNew(t, sp, ev, store, opts))
			states := store.proposedStates(t)
			first := states[0].Batch[0]
			defaults := 0
			for _, st := range states {
				for _, p := range st.Batch {
					if p.Origin == originDefault {
						defaults++
					}
				}
			}
			switch {
			case placeholder && defaults > 0:
				t.Errorf("seed %d: placeholder defaults proposed %d times", seed, defaults)
			case placeholder && first.Origin != originRandom:
				t.Errorf("seed %d: placeholder defaults: the first proposal is %s, want a uniform sample", seed, first.Origin)
			case !placeholder && (first.Origin != originDefault || first.Config.Key() != sp.Default().Key()):
				t.Errorf("seed %d: the first proposal is %s (%s), want the default", seed, first.Config.Key(), first.Origin)
			}
		}
	}
}

// TestOneAtATimeBreedsFromTheFirstPass: with children bred one at a time,
// the generation after the first breeds from the one config that passed
// (the default, where almost nothing else passes) instead of sampling.
func TestOneAtATimeBreedsFromTheFirstPass(t *testing.T) {
	sp := gridSpace(3, 3, 5)
	for seed := uint64(1); seed <= 4; seed++ {
		store := newMemStore()
		opts := DefaultOptions()
		opts.Seed, opts.MaxEvals = seed, 8+4
		ev := &fakeEvaluator{objective: landscape(5), status: fewPass(sp, 1<<30)}
		mustRun(t, context.Background(), mustNew(t, sp, ev, store, opts))
		states := store.proposedStates(t)
		if len(states) < 2 || len(states[1].Population) != 1 {
			t.Fatalf("seed %d: %d generations, population after the first %v; want one config that passed", seed, len(states), states[min(1, len(states)-1)].Population)
		}
		if p := states[1].Batch[0]; p.Origin != originMacro && p.Origin != originMicro || len(states[1].Batch) != 1 {
			t.Errorf("seed %d: the second generation is %d configs starting with a %s, want one child", seed, len(states[1].Batch), p.Origin)
		}
	}
}

// TestFewPassingSamplesBeforeBreeding runs where the default passes and
// almost nothing else does: with whole generations, while the population
// holds fewer than two configs and has not restarted, each batch after the
// first is uniform samples rather than children of the one config that
// passed; once a second config passes, the search breeds.
func TestFewPassingSamplesBeforeBreeding(t *testing.T) {
	sp := gridSpace(3, 3, 5)
	sampled, bred := 0, 0
	for seed := uint64(1); seed <= 8; seed++ {
		store := newMemStore()
		opts := DefaultOptions()
		opts.Seed, opts.MaxEvals = seed, 8*12
		opts.Batch = 0 // whole generations: with smaller batches one config is bred from
		ev := &fakeEvaluator{objective: landscape(5), status: fewPass(sp, 16)}
		mustRun(t, context.Background(), mustNew(t, sp, ev, store, opts))
		for _, st := range store.proposedStates(t) {
			if st.Generation == 0 {
				if st.Batch[0].Origin != originDefault {
					t.Errorf("seed %d: the first batch starts with %s, want the default", seed, st.Batch[0].Origin)
				}
				continue
			}
			if st.Restarts > 0 || slices.ContainsFunc(st.Batch, func(p proposal) bool { return p.Origin == originRestart }) {
				break
			}
			few := len(st.Population) < st.Params.minBreeders()
			for _, p := range st.Batch {
				child := p.Origin == originMacro || p.Origin == originMicro
				switch {
				case few && child:
					t.Errorf("seed %d generation %d: a child (%s) bred from a population of %d", seed, st.Generation, p.Origin, len(st.Population))
				case few && p.Origin == originRandom:
					sampled++
				case !few && child:
					bred++
				}
			}
		}
	}
	if sampled == 0 || bred == 0 {
		t.Errorf("over 8 seeds, %d samples proposed from a population below 2 and %d children from one at or above: the test saw only one side", sampled, bred)
	}
}

// TestBatchSizesTheBredGenerations checks Options.Batch: the first
// generation and a restart's fresh batch are Population configs, every
// bred generation after the first is Batch children, and the population
// restarts only after Stagnation generations' worth of evaluations
// without a new best, counted in batches (at least that many batches lie
// between two restarts).
func TestBatchSizesTheBredGenerations(t *testing.T) {
	sp := gridSpace(3, 3, 4)
	for _, batch := range []int{0, 1, 3} {
		opts := DefaultOptions()
		opts.Seed, opts.MaxEvals, opts.Stagnation, opts.Batch = 5, 300, 2, batch
		p := params{Population: opts.Population, Stagnation: opts.Stagnation, Batch: batch}
		want := map[int]int{0: opts.Stagnation, 1: 16, 3: 6}[batch]
		if got := p.stagnationLimit(); got != want {
			t.Fatalf("batch %d: stagnation limit %d batches, want %d", batch, got, want)
		}
		_, store := runTrace(t, sp, &fakeEvaluator{objective: landscape(4)}, opts)
		states := store.proposedStates(t)
		bred, restarts, since := 0, 0, 0
		for i, st := range states {
			n, last := len(st.Batch), i == len(states)-1
			switch {
			case i == 0 || st.Batch[0].Origin == originRestart:
				if n != opts.Population && !last {
					t.Fatalf("batch %d, generation %d (%s): %d configs, want the population, %d", batch, st.Generation, st.Batch[0].Origin, n, opts.Population)
				}
				if i > 0 {
					restarts++
					if since < want {
						t.Fatalf("batch %d: restart after %d batches, want at least %d", batch, since, want)
					}
				}
				since = 1 // a generation that found no new best counts
			default:
				bred++
				since++
				if want := p.bredBatch(); n != want && !last {
					t.Fatalf("batch %d, generation %d: %d children, want %d", batch, st.Generation, n, want)
				}
			}
		}
		if bred < 10 || restarts == 0 {
			t.Fatalf("batch %d: %d bred generations and %d restarts in %d evaluations; the test needs both", batch, bred, restarts, opts.MaxEvals)
		}
	}
}
