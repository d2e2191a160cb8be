package evo

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"

	"evotune/space"
)

// additiveLog is a landscape whose log objective is a sum of one effect
// per knob value, with an effect for a pair of macro values on top.
func additiveLog(c space.Config) float64 {
	effect := map[string][]float64{
		"m0": {0.4, 0, 0.2, 0.6},
		"m1": {0.1, 0.3, 0, 0.5},
		"u0": {0.2, 0.05, 0, 0.3},
		"u1": {0, 0.15, 0.25, 0.1},
	}
	y := 1.0
	for name, e := range effect {
		y += e[c.Int(name)]
	}
	if c["m0"] == "1" && c["m1"] == "2" {
		y -= 0.3 // an interaction of the two macro knobs
	}
	return y
}

// fitOn absorbs the results of configs into fresh model sums and fits them.
func fitOn(t *testing.T, sp *space.Space, configs []space.Config, fail func(space.Config) bool) *surrogate {
	t.Helper()
	f := newFeatures(sp, false)
	st := newModelStats(f.n)
	best := math.Inf(1)
	var x []int
	for _, c := range configs {
		r := space.Result{Key: c.Key(), Config: c, Status: space.StatusOK, Objective: math.Exp(additiveLog(c))}
		if fail != nil && fail(c) {
			r.Status, r.Objective = space.StatusPtxasReject, 0
		} else {
			best = min(best, r.Objective)
		}
		x = f.active(c, x)
		st.add(x, f.bilinOff, nil, r)
	}
	m := fitSurrogate(f, st, best)
	if m == nil {
		t.Fatal("fitSurrogate: no model")
	}
	return m
}

// TestSurrogateLearnsAdditiveLandscape fits the model to half the configs
// of a space whose log objective is additive in the knob values plus one
// macro pair: it predicts the other half closely and ranks them right, and
// its failure model separates the configs that fail from those that pass.
func TestSurrogateLearnsAdditiveLandscape(t *testing.T) {
	sp := gridSpace(2, 2, 4)
	all := sp.ValidConfigs()
	rng := rand.New(rand.NewPCG(3, 4))
	rng.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
	train, test := all[:len(all)/2], all[len(all)/2:]

	m := fitOn(t, sp, train, nil)
	bestPred, bestTrue := 0, 0
	var preds []float64
	sumErr := 0.0
	for i, c := range test {
		mean, sd, fail := m.predict(c)
		// The ridge prior shrinks each effect by 1/(k+1), k its
		// observations: most visibly the interaction, seen least.
		d := math.Abs(mean - additiveLog(c))
		sumErr += d
		if d > 0.1 {
			t.Errorf("%s: predicted log objective %.3f, true %.3f", c.Key(), mean, additiveLog(c))
		}
		if !(sd > 0) || fail != 0 {
			t.Errorf("%s: predictive sd %v, failure chance %v; want sd > 0 and no failure", c.Key(), sd, fail)
		}
		preds = append(preds, mean)
		if mean < preds[bestPred] {
			bestPred = i
		}
		if additiveLog(c) < additiveLog(test[bestTrue]) {
			bestTrue = i
		}
	}
	if e := sumErr / float64(len(test)); e > 0.03 {
		t.Errorf("mean absolute error of the predicted log objective %.3f, want ≤ 0.03", e)
	}
	if bestPred != bestTrue {
		t.Errorf("predicted best %s, true best %s", test[bestPred].Key(), test[bestTrue].Key())
	}
	// The rating ranks as the prediction does when the spread is alike:
	// the true best of the held-out half is rated highest.
	rated := slices.IndexFunc(test, func(c space.Config) bool {
		return !slices.ContainsFunc(test, func(o space.Config) bool { return m.rate(o) > m.rate(c) })
	})
	if rated != bestTrue {
		t.Errorf("rated best %s, true best %s", test[rated].Key(), test[bestTrue].Key())
	}

	// u1=3 always fails.
	fails := func(c space.Config) bool { return c["u1"] == "3" }
	m = fitOn(t, sp, train, fails)
	for _, c := range test {
		_, _, fail := m.predict(c)
		if fails(c) && fail < 0.8 || !fails(c) && fail > 0.2 {
			t.Errorf("%s: predicted failure chance %.2f, fails: %v", c.Key(), fail, fails(c))
		}
		if fails(c) {
			if r := m.rate(c); r > 0.2*ratedMax(m, test) {
				t.Errorf("%s fails but is rated %v", c.Key(), r)
			}
		}
	}
}

func ratedMax(m *surrogate, cs []space.Config) float64 {
	best := 0.0
	for _, c := range cs {
		best = max(best, m.rate(c))
	}
	return best
}

// TestScreenedChildPicksTheBestRated breeds children as screenedChild does
// from the same random state and checks that it proposed the one the model
// rates highest (the first bred among equals), and that this is often not
// the first child bred, which an unscreened search would have proposed.
func TestScreenedChildPicksTheBestRated(t *testing.T) {
	sp := gridSpace(3, 3, 5)
	opts := DefaultOptions()
	opts.Seed, opts.Screen, opts.MaxEvals = 5, 8, 40
	s := mustNew(t, sp, &fakeEvaluator{objective: landscape(5)}, newMemStore(), opts)
	mustRun(t, context.Background(), s)
	notFirst := 0
	for i := range 20 {
		before, err := s.pcg.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		got, ok := s.screenedChild()
		if !ok || s.model == nil {
			t.Fatalf("call %d: no child or no model", i)
		}
		after, _ := s.pcg.MarshalBinary()

		if err := s.pcg.UnmarshalBinary(before); err != nil {
			t.Fatal(err)
		}
		var want proposal
		bestRate := math.Inf(-1)
		bred := map[string]bool{}
		var first string
		for range opts.Screen {
			p, _ := s.child()
			if first == "" {
				first = p.Config.Key()
			}
			if bred[p.Config.Key()] {
				continue
			}
			bred[p.Config.Key()] = true
			if r := s.model.rate(p.Config); r > bestRate {
				want, bestRate = p, r
			}
		}
		if again, _ := s.pcg.MarshalBinary(); string(again) != string(after) {
			t.Fatalf("call %d: screenedChild drew a different number of random numbers than %d children", i, opts.Screen)
		}
		if got.Config.Key() != want.Config.Key() || got.Origin != want.Origin || got.Parent != want.Parent {
			t.Fatalf("call %d: screenedChild proposed %s (%s), the best rated is %s (%s)", i, got.Config.Key(), got.Origin, want.Config.Key(), want.Origin)
		}
		if got.Config.Key() != first {
			notFirst++
		}
		s.seen[got.Config.Hash()] = true
	}
	if notFirst == 0 {
		t.Fatal("screening always proposed the first child bred: it changed nothing")
	}
}

// TestScreeningFindsTheOptimumSooner runs screened and unscreened searches
// on a landscape that a model of knob values can learn: with the default
// screen the median run reaches the optimum in fewer evaluations.
func TestScreeningFindsTheOptimumSooner(t *testing.T) {
	sp := gridSpace(3, 3, 5)
	obj := landscape(5)
	optimum := math.Inf(1)
	for _, c := range sp.ValidConfigs() {
		optimum = min(optimum, obj(c))
	}
	reach := func(screen int) int {
		var evals []int
		// The spread between seeds is wide (a run's count ranges over
		// several hundred): 25 seeds keep the medians apart.
		for seed := range 25 {
			opts := DefaultOptions()
			opts.Seed, opts.Screen, opts.MaxEvals = uint64(seed+1), screen, 600
			traj, err := RunTrajectory(context.Background(), sp, &fakeEvaluator{objective: obj}, opts)
			if err != nil {
				t.Fatal(err)
			}
			n, ok := traj.Reach(optimum)
			if !ok {
				n = math.MaxInt
			}
			evals = append(evals, n)
		}
		slices.Sort(evals)
		return evals[len(evals)/2]
	}
	plain, screened := reach(1), reach(DefaultOptions().Screen)
	if !(screened < plain) {
		t.Fatalf("median evaluations to the optimum: %d screened, %d unscreened; want fewer screened", screened, plain)
	}
	t.Logf("median evaluations to the optimum of %d configs: %d screened, %d unscreened", len(sp.ValidConfigs()), screened, plain)
}

// TestRestoreOldStateContinuesUnscreened restores a state that predates
// screening (no screen, no model) into a search whose options ask for
// screening: it continues unscreened, exactly as the search that saved it.
func TestRestoreOldStateContinuesUnscreened(t *testing.T) {
	sp := gridSpace(3, 3, 4)
	opts := resumeOptions(StrategyEvo, 1)
	opts.Screen = 1
	var want trace
	sum, gens := incarnation(t, sp, newMemStore(), opts, func(*fakeEvaluator, func()) {})
	want.gens = gens
	want.finish(sum)

	store := newMemStore()
	first, gens := incarnation(t, sp, store, opts, func(ev *fakeEvaluator, cancel func()) {
		ev.after = func(n int) {
			if n == 13 {
				cancel()
			}
		}
	})
	if first.Stop != StopCancelled {
		t.Fatalf("first run stopped by %q", first.Stop)
	}
	var st map[string]any
	if err := json.Unmarshal(store.lastState(), &st); err != nil {
		t.Fatal(err)
	}
	delete(st["params"].(map[string]any), "screen")
	delete(st, "model")
	old, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	store.states = append(store.states, old)
	o := opts
	o.Screen = 8
	second, more := incarnation(t, sp, store, o, func(*fakeEvaluator, func()) {})
	got := trace{gens: append(gens, more...)}
	got.finish(second)
	compareTraces(t, "old state restored with --screen 8", got, want)
}

func TestRestoreRejectsBadModel(t *testing.T) {
	sp := gridSpace(2, 2, 3)
	store := newMemStore()
	opts := DefaultOptions()
	opts.Population, opts.Elites, opts.MaxEvals, opts.Screen = 4, 2, 12, 4
	mustRun(t, context.Background(), mustNew(t, sp, &fakeEvaluator{objective: landscape(3)}, store, opts))
	edit := func(f func(st map[string]any)) []byte {
		var st map[string]any
		if err := json.Unmarshal(store.lastState(), &st); err != nil {
			t.Fatal(err)
		}
		f(st)
		b, _ := json.Marshal(st)
		return b
	}
	tests := []struct {
		name  string
		state []byte
		want  string
	}{
		{"no model", edit(func(st map[string]any) { delete(st, "model") }), "holds no model sums"},
		{"features", edit(func(st map[string]any) { st["model"].(map[string]any)["features"] = 3 }), "model of 3 features"},
		{"size", edit(func(st map[string]any) { st["model"].(map[string]any)["ok_sum"] = []float64{1} }), "wrong size"},
		{"too many counts", edit(func(st map[string]any) {
			// 100 zeros then a 1: more than the 19 features of this space.
			st["model"].(map[string]any)["fail"] = base64.StdEncoding.EncodeToString([]byte{100, 1})
		}), "wrong size"},
		{"truncated varint", edit(func(st map[string]any) {
			st["model"].(map[string]any)["ok_gram"] = base64.StdEncoding.EncodeToString([]byte{0x80})
		}), "bad varint"},
		{"huge run of zeros", edit(func(st map[string]any) {
			st["model"].(map[string]any)["all_gram"] = base64.StdEncoding.EncodeToString(binary.AppendUvarint(binary.AppendUvarint(nil, 1<<40), 1))
		}), "out of range"},
		{"screen", edit(func(st map[string]any) { st["params"].(map[string]any)["screen"] = 65 }), "screen must be in [1, 64]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := mustNew(t, sp, &fakeEvaluator{}, store, opts).Restore(tt.state)
			if err == nil || !containsAll(err.Error(), "restoring search state", tt.want) {
				t.Fatalf("Restore: got %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

// TestFeatures checks the feature map: intercept, one per knob value, one
// per value pair of each pair of macro knobs, ascending and distinct.
func TestFeatures(t *testing.T) {
	sp := gridSpace(3, 2, 3)
	f := newFeatures(sp, false)
	if want := 1 + 5*3 + 3*9; f.n != want {
		t.Fatalf("%d features, want %d", f.n, want)
	}
	seen := map[string]bool{}
	for _, c := range sp.ValidConfigs() {
		x := f.active(c, nil)
		if len(x) != 1+5+3 || x[0] != 0 {
			t.Fatalf("%s: features %v", c.Key(), x)
		}
		for i := 1; i < len(x); i++ {
			if x[i] <= x[i-1] {
				t.Fatalf("%s: features %v not strictly ascending", c.Key(), x)
			}
		}
		if x[len(x)-1] >= f.n {
			t.Fatalf("%s: feature %d of %d", c.Key(), x[len(x)-1], f.n)
		}
		key := ""
		for _, i := range x {
			key += strconv.Itoa(i) + ","
		}
		if seen[key] {
			t.Fatalf("%s: same features as another config", c.Key())
		}
		seen[key] = true
	}
}

// TestInteractSums checks the ordinal interactions' sums: the Gram and
// sums the stats hold, in raw integer features, mapped by dense and
// transform, equal those of the fitted features computed directly
// (one-hots, macro pairs, centred position products).
func TestInteractSums(t *testing.T) {
	sp := gridSpace(2, 2, 4)
	f := newFeatures(sp, true)
	// 4 knobs: one macro pair, so 5 of the 6 knob pairs get an interaction.
	if len(f.bilin) != 5 || f.n != 1+4*4+16+5 {
		t.Fatalf("%d interactions, %d features", len(f.bilin), f.n)
	}
	st := newModelStats(f.n)
	n := f.n
	want := make([]float64, n*n)
	wantSum := make([]float64, n)
	var x, xb []int
	var z []float64
	for i, c := range sp.ValidConfigs() {
		if i%3 == 0 {
			continue
		}
		y := additiveLog(c)
		r := space.Result{Key: c.Key(), Config: c, Status: space.StatusOK, Objective: math.Exp(y)}
		x, xb = f.active(c, x), f.bilinear(c, xb)
		st.add(x, f.bilinOff, xb, r)
		row := make([]float64, n)
		for _, j := range x {
			row[j] = 1
		}
		z = f.interact(c, z)
		copy(row[f.bilinOff:], z)
		for a := range n {
			wantSum[a] += row[a] * math.Log(r.Objective)
			for b := range n {
				want[a*n+b] += row[a] * row[b]
			}
		}
	}
	got := f.dense(st.OKGram)
	for i := range want {
		if math.Abs(got[i]-want[i]) > 1e-9*max(1, math.Abs(want[i])) {
			t.Fatalf("Gram entry (%d, %d): %v, want %v", i/n, i%n, got[i], want[i])
		}
	}
	gotSum := f.transform(st.OKSum)
	for i := range wantSum {
		if math.Abs(gotSum[i]-wantSum[i]) > 1e-9*max(1, math.Abs(wantSum[i])) {
			t.Fatalf("sum %d: %v, want %v", i, gotSum[i], wantSum[i])
		}
	}
}

// TestInteractLearnsOrdinalInteraction fits the model with and without
// the ordinal interactions to half the configs of a landscape whose two
// micro knobs interact as block and tile sizes do (their product's
// distance from a target), and checks that the interactions cut the
// held-out error.
func TestInteractLearnsOrdinalInteraction(t *testing.T) {
	sp := gridSpace(1, 2, 6)
	logObj := func(c space.Config) float64 {
		d := float64(c.Int("u0")+c.Int("u1")) - 5
		return 1 + 0.1*float64(c.Int("m0")) + 0.05*d*d
	}
	var train, test []space.Config
	for i, c := range sp.ValidConfigs() {
		if i%2 == 0 {
			train = append(train, c)
		} else {
			test = append(test, c)
		}
	}
	rmse := func(interact bool) float64 {
		f := newFeatures(sp, interact)
		st := newModelStats(f.n)
		var x, xb []int
		best := math.Inf(1)
		for _, c := range train {
			r := space.Result{Key: c.Key(), Config: c, Status: space.StatusOK, Objective: math.Exp(logObj(c))}
			best = min(best, r.Objective)
			x, xb = f.active(c, x), f.bilinear(c, xb)
			st.add(x, f.bilinOff, xb, r)
		}
		m := fitSurrogate(f, st, best)
		if m == nil {
			t.Fatal("no model")
		}
		sum := 0.0
		for _, c := range test {
			mean, _, _ := m.predict(c)
			sum += (mean - logObj(c)) * (mean - logObj(c))
		}
		return math.Sqrt(sum / float64(len(test)))
	}
	without, with := rmse(false), rmse(true)
	if !(with < 0.5*without) {
		t.Errorf("held-out RMSE %.4f with interactions, %.4f without: want less than half", with, without)
	}
}
