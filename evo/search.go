package evo

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"evotune/space"
)

// StopReason says why a run ended.
type StopReason string

const (
	StopBudget    StopReason = "budget"    // MaxEvals evaluations ran
	StopTime      StopReason = "time"      // MaxTime elapsed
	StopExhausted StopReason = "exhausted" // no unseen valid config is left
	StopCancelled StopReason = "cancelled" // the context was cancelled
)

// Progress is a snapshot of a running search, given to Options.OnProgress.
type Progress struct {
	Generation int
	Evals      int // evaluations that ran, this run and the runs it resumed
	MaxEvals   int // 0: no bound
	StoreHits  int // configs answered from the store without evaluation
	Elapsed    time.Duration
	MaxTime    time.Duration // 0: no bound
	// ETA estimates the time left until a budget runs out; 0 when no
	// budget is set or nothing has been evaluated yet.
	ETA        time.Duration
	Best       float64 // objective of the best OK result; 0 while there is none
	BestKey    string
	ByStatus   map[space.Status]int // evaluations by status (a copy)
	MacroShare float64
}

// Generation reports one absorbed generation.
type Generation struct {
	Number     int
	Results    []space.Result // in proposal order
	Best       float64        // best objective after the generation; 0 while there is none
	BestKey    string
	MacroShare float64 // the share of macro mutations for the next generation
}

// A Summary is what a run ended with.
type Summary struct {
	Strategy    string
	Seed        uint64
	Stop        StopReason
	Elites      []space.Result // best first
	Evals       int            // evaluations that ran, counted as MaxEvals counts them
	StoreHits   int
	Generations int // generations absorbed
	Elapsed     time.Duration
	ByStatus    map[space.Status]int
	MacroShare  float64
	Macro       LayerStats
	Micro       LayerStats
}

// A member is an OK result in the evo population.
type member struct {
	key       string
	config    space.Config
	objective float64
}

// pcgStream is the PCG's second seed word; the first is Options.Seed.
const pcgStream = 0x9e3779b97f4a7c15

// A Search explores a space with one strategy. Create it with New, call
// Restore to continue a saved search, then Run. A Search is not safe for
// concurrent use; Run drives its own goroutines.
type Search struct {
	space *space.Space
	eval  Evaluator
	store Store
	opts  Options
	clock Clock

	st     state
	pcg    *rand.PCG
	rng    *rand.Rand
	seen   map[string]bool // hashes of configs proposed in this run
	pop    []member        // best first
	elites []space.Result  // best first
	valid  *validIndex     // the valid configs in Enumerate order, built on first need
	// sharedValid, when set, gives valid: the index a comparison's runs share.
	sharedValid func() *validIndex
	// unseen tracks which of valid are not seen yet, built on first need.
	unseen *unseenIndex
	// feats maps configs to the screening model's features (Screen > 1).
	feats *features
	// model is the screening model fitted for the batch being proposed;
	// modelGen is the generation it was fitted for, −1 when none.
	model    *surrogate
	modelGen int
	mark     time.Time // the clock reading up to which st.ElapsedNS counts
	// cancelled is set when a run stopped mid-batch: the counts then hold
	// part of a batch that a restored search would count again.
	cancelled bool
	// proposing holds the hashes of the ILS batch being filled.
	proposing map[string]bool
}

// New returns a search of sp that evaluates with ev and keeps what it learns
// in store. The options are checked; an unknown strategy is an error that
// lists the valid ones.
func New(sp *space.Space, ev Evaluator, store Store, opts Options) (*Search, error) {
	if sp == nil || ev == nil || store == nil {
		return nil, errors.New("evo: a search needs a space, an evaluator and a store")
	}
	if err := opts.validate(); err != nil {
		return nil, fmt.Errorf("evo: %w", err)
	}
	clock := opts.Clock
	if clock == nil {
		clock = WallClock{}
	}
	pcg := rand.NewPCG(opts.Seed, pcgStream)
	s := &Search{
		space: sp,
		eval:  ev,
		store: store,
		opts:  opts,
		clock: clock,
		st: state{
			Version:  stateVersion,
			Strategy: opts.Strategy,
			Seed:     opts.Seed,
			Params: params{
				Population:    opts.Population,
				Elites:        opts.Elites,
				Tournament:    opts.Tournament,
				CrossoverRate: opts.CrossoverRate,
				Stagnation:    opts.Stagnation,
				Batch:         opts.Batch,
				Screen:        opts.Screen,
				Restart:       opts.Restart,
				Interact:      opts.Interact,
				ILS:           opts.ILS,
			},
			ByStatus:   map[space.Status]int{},
			Macro:      LayerStats{Rate: layerPrior},
			Micro:      LayerStats{Rate: layerPrior},
			MacroShare: 0.5,
		},
		pcg:      pcg,
		rng:      rand.New(pcg),
		seen:     map[string]bool{},
		modelGen: -1,
	}
	if s.screening() {
		s.feats = newFeatures(sp, opts.Interact)
		s.st.Model = newModelStats(s.feats.n)
	}
	return s, nil
}

// screening reports whether the search screens its children with a model.
func (s *Search) screening() bool { return screens(&s.st) }

// screens reports whether a search in state st screens its children.
func screens(st *state) bool { return st.Strategy == StrategyEvo && st.Params.Screen > 1 }

// Restore replaces the search's state with one saved by a search of the same
// space and store, so that Run continues it exactly: a batch that was
// proposed is run again, its configs already in the store answered from
// there. The state's strategy, seed, population size, elites, tournament
// size, crossover rate, stagnation, batch, screen and restart replace those of the
// options; the budgets, Parallel, Clock and callbacks stay as given. A
// state saved before screening existed continues unscreened. Over a store
// that is a Log, a state that disagrees with the log (it absorbed a config
// the log does not hold, or counts more evaluations than the log holds) is
// refused: Rebuild a new search instead. Call it before Run.
func (s *Search) Restore(data []byte) error {
	var st state
	if err := json.Unmarshal(data, &st); err != nil {
		return fmt.Errorf("restoring search state: %w", err)
	}
	if st.Version != stateVersion {
		return fmt.Errorf("restoring search state: version %d, this evotune reads version %d", st.Version, stateVersion)
	}
	opts := s.opts
	opts.Strategy, opts.Seed = st.Strategy, st.Seed
	opts.Population, opts.Elites, opts.Tournament = st.Params.Population, st.Params.Elites, st.Params.Tournament
	opts.CrossoverRate, opts.Stagnation, opts.Batch = st.Params.CrossoverRate, st.Params.Stagnation, st.Params.Batch
	if st.Params.Screen == 0 {
		st.Params.Screen = 1
	}
	opts.Screen, opts.Restart, opts.Interact = st.Params.Screen, st.Params.Restart, st.Params.Interact
	opts.ILS = st.Params.ILS
	if err := opts.validate(); err != nil {
		return fmt.Errorf("restoring search state: %w", err)
	}
	switch {
	case st.Generation < 0 || st.Evals < 0 || st.StoreHits < 0 || st.Cursor < 0 || st.ElapsedNS < 0 || st.Restarts < 0:
		return errors.New("restoring search state: negative generation, counts, cursor or elapsed time")
	case len(st.Batch) > st.Params.Population:
		return fmt.Errorf("restoring search state: batch of %d configs exceeds population %d", len(st.Batch), st.Params.Population)
	case !(st.MacroShare >= minMacroShare && st.MacroShare <= maxMacroShare):
		return fmt.Errorf("restoring search state: macro share %v outside [%v, %v]", st.MacroShare, minMacroShare, maxMacroShare)
	}
	if log, ok := s.store.(Log); ok {
		if err := checkLog(&st, log); err != nil {
			return fmt.Errorf("restoring search state: %w", err)
		}
	}
	if err := s.checkILS(&st); err != nil {
		return fmt.Errorf("restoring search state: %w", err)
	}
	pcg := &rand.PCG{}
	if err := pcg.UnmarshalBinary(st.RNG); err != nil {
		return fmt.Errorf("restoring search state: random source: %w", err)
	}
	inBatch := map[string]bool{}
	for i, p := range st.Batch {
		if err := s.space.Check(p.Config); err != nil {
			return fmt.Errorf("restoring search state: batch config %d: %w", i, err)
		}
		key := p.Config.Key()
		if inBatch[key] {
			return fmt.Errorf("restoring search state: batch config %d repeats %s", i, key)
		}
		inBatch[key] = true
	}
	pop := make([]member, 0, len(st.Population))
	for _, key := range st.Population {
		r, err := s.lookupOK(key)
		if err != nil {
			return fmt.Errorf("restoring search state: population: %w", err)
		}
		pop = append(pop, member{key: key, config: r.Config, objective: r.Objective})
	}
	elites := make([]space.Result, 0, len(st.Elites))
	for _, key := range st.Elites {
		r, err := s.lookupOK(key)
		if err != nil {
			return fmt.Errorf("restoring search state: elites: %w", err)
		}
		elites = append(elites, r)
	}
	if st.ByStatus == nil {
		st.ByStatus = map[space.Status]int{}
	}
	var feats *features
	if screens(&st) {
		feats = newFeatures(s.space, st.Params.Interact)
		if st.Model == nil {
			return errors.New("restoring search state: screening is on but the state holds no model sums")
		}
		if err := st.Model.check(feats.n); err != nil {
			return fmt.Errorf("restoring search state: %w", err)
		}
	} else {
		st.Model = nil
	}
	seen := make(map[string]bool, len(st.Seen))
	for _, h := range st.Seen {
		seen[h] = true
	}
	s.opts, s.st, s.pcg, s.rng, s.seen, s.pop, s.elites = opts, st, pcg, rand.New(pcg), seen, pop, elites
	s.feats, s.model, s.modelGen = feats, nil, -1
	slices.SortFunc(s.pop, compareMembers)
	slices.SortFunc(s.elites, compareResults)
	return nil
}

// lookupOK returns the stored OK result for key.
func (s *Search) lookupOK(key string) (space.Result, error) {
	r, ok := s.store.Lookup(key)
	switch {
	case !ok:
		return r, fmt.Errorf("%s is not in the store", key)
	case !r.OK():
		return r, fmt.Errorf("%s is stored with status %s, not ok", key, r.Status)
	}
	if err := s.space.Check(r.Config); err != nil {
		return r, fmt.Errorf("%s is not a valid config of this space: %w", key, err)
	}
	return r, nil
}

// Run searches until a budget is spent, the space is exhausted or ctx is
// cancelled. Cancellation is a clean stop, not an error: in-flight
// evaluations are cancelled and their results discarded, and the state
// saved when the current batch was proposed is where a restored search
// continues. Errors come from the store (a result or the state could not
// be saved); the search stops at the first one. After a cancelled run the
// Search is spent: a new Search restored from the saved state continues.
func (s *Search) Run(ctx context.Context) (Summary, error) {
	if s.cancelled {
		return s.summary(StopCancelled), errors.New("evo: this search was cancelled mid-generation; restore its saved state into a new search to continue")
	}
	s.mark = s.clock.Now()
	for {
		if len(s.st.Batch) == 0 {
			if stop, done := s.stopReason(ctx); done {
				return s.summary(stop), nil
			}
			s.propose()
			if len(s.st.Batch) == 0 {
				err := s.save()
				return s.summary(StopExhausted), err
			}
			if err := s.save(); err != nil {
				return s.summary(""), err
			}
		}
		results, err := s.evaluate(ctx)
		if err != nil {
			return s.summary(""), err
		}
		if results == nil {
			s.cancelled = true
			return s.summary(StopCancelled), nil
		}
		gen, err := s.absorb(ctx, results)
		if err != nil {
			if ctx.Err() != nil {
				// Cancelled while confirming: the batch is absorbed again,
				// from the store, by a restored search.
				s.cancelled = true
				return s.summary(StopCancelled), nil
			}
			return s.summary(""), err
		}
		if err := s.save(); err != nil {
			return s.summary(""), err
		}
		// Reported only once saved: a generation reported is never
		// replayed by a restored search.
		if s.opts.OnGeneration != nil {
			s.opts.OnGeneration(gen)
		}
	}
}

// stopReason reports whether the search must stop before the next batch.
func (s *Search) stopReason(ctx context.Context) (StopReason, bool) {
	switch {
	case ctx.Err() != nil:
		return StopCancelled, true
	case s.opts.MaxEvals > 0 && s.st.Evals >= s.opts.MaxEvals:
		return StopBudget, true
	case s.opts.MaxTime > 0 && time.Duration(s.st.ElapsedNS) >= s.opts.MaxTime:
		return StopTime, true
	case s.st.Exhausted:
		return StopExhausted, true
	}
	return "", false
}

// save brings the elapsed time up to date and hands the state to the store.
func (s *Search) save() error {
	s.tick()
	if _, ok := s.store.(*memoryStore); ok {
		// A comparison run's store discards states: encoding one for it,
		// twice a generation, took a third of a run of one-child
		// generations.
		return nil
	}
	rng, err := s.pcg.MarshalBinary()
	if err != nil {
		return fmt.Errorf("saving search state: random source: %w", err)
	}
	s.st.RNG = rng
	s.st.Population = s.st.Population[:0]
	for _, m := range s.pop {
		s.st.Population = append(s.st.Population, m.key)
	}
	s.st.Elites = s.st.Elites[:0]
	for _, r := range s.elites {
		s.st.Elites = append(s.st.Elites, r.Key)
	}
	data, err := json.Marshal(s.st)
	if err != nil {
		return fmt.Errorf("saving search state at generation %d: %w", s.st.Generation, err)
	}
	if err := s.store.SaveState(data); err != nil {
		return fmt.Errorf("saving search state at generation %d: %w", s.st.Generation, err)
	}
	return nil
}

// tick adds the time passed since the last tick to the state.
func (s *Search) tick() {
	now := s.clock.Now()
	s.st.ElapsedNS += int64(max(now.Sub(s.mark), 0))
	s.mark = now
}

// elapsed is the search's elapsed time now.
func (s *Search) elapsed() time.Duration {
	return time.Duration(s.st.ElapsedNS) + max(s.clock.Now().Sub(s.mark), 0)
}

// evaluate answers every config of the batch, from the store where it can,
// by the evaluator otherwise, with up to Parallel evaluations at once. It
// returns the results in proposal order, or nil if ctx was cancelled first.
func (s *Search) evaluate(ctx context.Context) ([]space.Result, error) {
	batch := s.st.Batch
	results := make([]space.Result, len(batch))
	var mu sync.Mutex // guards the state's counts, results and the progress callback
	best := s.bestResult()
	arrived := func(r space.Result, counted bool) {
		if counted {
			s.st.Evals++
			s.st.ByStatus[r.Status]++
			s.clock.Charge(r.Cost)
		} else {
			s.st.StoreHits++
		}
		if r.OK() && (best == nil || compareResults(r, *best) < 0) {
			best = &r
		}
		s.progress(best)
	}

	var todo []int
	for i, p := range batch {
		key := p.Config.Key()
		r, ok := s.store.Lookup(key)
		if !ok {
			todo = append(todo, i)
			continue
		}
		// A hit on a config that was new when proposed was recorded by
		// this very batch before a restart: it was counted then, so it
		// counts now, exactly once, as the state predates it.
		results[i] = r
		if !p.Known && s.owned(r) {
			s.st.ElapsedNS += int64(s.wallCharge(r))
		}
		arrived(r, !p.Known)
	}

	evalCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg       sync.WaitGroup
		sem      = make(chan struct{}, s.opts.Parallel)
		firstErr error
	)
dispatch:
	for _, i := range todo {
		select {
		case sem <- struct{}{}:
		case <-evalCtx.Done():
			break dispatch
		}
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			defer func() { <-sem }()
			c := batch[i].Config
			r := s.eval.Evaluate(evalCtx, c.Clone())
			mu.Lock()
			defer mu.Unlock()
			if evalCtx.Err() != nil {
				return // cancelled: the result may be partial, so it is dropped
			}
			if r.Key == "" {
				r.Key = c.Key()
			}
			if r.Config == nil {
				r.Config = c.Clone()
			}
			if err := s.store.Record(r); err != nil {
				firstErr = fmt.Errorf("recording the result of %s: %w", r.Key, err)
				cancel()
				return
			}
			results[i] = r
			arrived(r, true)
		}(i)
	}
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	if ctx.Err() != nil {
		return nil, nil
	}
	return results, nil
}

// progress calls OnProgress, if set, with the current figures.
func (s *Search) progress(best *space.Result) {
	if s.opts.OnProgress == nil {
		return
	}
	p := Progress{
		Generation: s.st.Generation,
		Evals:      s.st.Evals,
		MaxEvals:   s.opts.MaxEvals,
		StoreHits:  s.st.StoreHits,
		Elapsed:    s.elapsed(),
		MaxTime:    s.opts.MaxTime,
		ByStatus:   maps.Clone(s.st.ByStatus),
		MacroShare: s.st.MacroShare,
	}
	p.ETA = eta(p.Evals, p.MaxEvals, p.Elapsed, p.MaxTime)
	if best != nil {
		p.Best, p.BestKey = best.Objective, best.Key
	}
	s.opts.OnProgress(p)
}

// eta estimates the time until the first budget runs out, assuming each
// further evaluation takes the mean time of those so far; 0 when unknown.
func eta(evals, maxEvals int, elapsed, maxTime time.Duration) time.Duration {
	left := time.Duration(math.MaxInt64)
	if maxEvals > 0 && evals > 0 {
		left = elapsed / time.Duration(evals) * time.Duration(max(maxEvals-evals, 0))
	}
	if maxTime > 0 {
		left = min(left, max(maxTime-elapsed, 0))
	}
	if left == time.Duration(math.MaxInt64) {
		return 0
	}
	return left
}

// absorb takes a generation's results in proposal order: layer credit,
// elites, stagnation and the next population. It returns the generation's
// report; an error comes from the Confirmer.
func (s *Search) absorb(ctx context.Context, results []space.Result) (Generation, error) {
	before := s.bestResult()
	s.ilsAbsorb(results)
	var kids []member
	var trials, successes [2]int // by layer: macro, micro
	var x, xb []int
	for i, p := range s.st.Batch {
		r := results[i]
		if s.st.Model != nil {
			x, xb = s.feats.active(p.Config, x), s.feats.bilinear(p.Config, xb)
			s.st.Model.add(x, s.feats.bilinOff, xb, r)
		}
		if l := slices.Index([]string{originMacro, originMicro}, p.Origin); l >= 0 && p.Parent > 0 {
			trials[l]++
			if r.OK() && r.Objective < p.Parent {
				successes[l]++
			}
		}
		if !r.OK() {
			continue // failures are recorded in the store, never in the population
		}
		kids = append(kids, member{key: r.Key, config: r.Config, objective: r.Objective})
		if err := s.offerElite(ctx, r); err != nil {
			return Generation{}, err
		}
	}
	s.st.Macro.add(trials[0], successes[0])
	s.st.Micro.add(trials[1], successes[1])
	// The rates move once a population's worth of evaluations: with
	// batches of one, each move on a single trial swung the share to and
	// fro around its start.
	s.st.LayerEvals += len(s.st.Batch)
	if s.st.LayerEvals >= s.st.Params.Population {
		s.st.Macro.update()
		s.st.Micro.update()
		s.st.MacroShare = macroShare(s.st.Macro, s.st.Micro)
		s.st.LayerEvals = 0
	}
	after := s.bestResult()
	if after != nil && (before == nil || compareResults(*after, *before) < 0) {
		s.st.Stagnant = 0
	} else {
		s.st.Stagnant++
	}
	if s.st.Strategy == StrategyEvo {
		elites := s.elites
		if s.st.Restarts > 0 {
			elites = epochElites(s.pop, kids, s.st.Params.Elites)
		}
		s.pop = nextPopulation(elites, kids, s.pop, s.st.Params.Population)
	}
	gen := Generation{Number: s.st.Generation, Results: results, MacroShare: s.st.MacroShare}
	if after != nil {
		gen.Best, gen.BestKey = after.Objective, after.Key
	}
	s.st.Batch = nil
	s.st.Generation++
	return gen, nil
}

// offerElite keeps r if it is among the best Elites OK results (see admit).
func (s *Search) offerElite(ctx context.Context, r space.Result) error {
	for _, e := range s.elites {
		if e.Key == r.Key {
			return nil
		}
	}
	if ok, err := s.admit(ctx, r); !ok || err != nil {
		return err
	}
	s.elites = append(s.elites, r)
	slices.SortFunc(s.elites, compareResults)
	if len(s.elites) > s.st.Params.Elites {
		s.elites = s.elites[:s.st.Params.Elites]
	}
	return nil
}

// bestResult is the best OK result so far, or nil.
func (s *Search) bestResult() *space.Result {
	if len(s.elites) == 0 {
		return nil
	}
	r := s.elites[0]
	return &r
}

// nextPopulation is the elites, then the generation's best children, then
// the best survivors of the old population, up to n members.
func nextPopulation(elites []space.Result, kids, old []member, n int) []member {
	next := make([]member, 0, n)
	in := map[string]bool{}
	add := func(m member) {
		if len(next) < n && !in[m.key] {
			in[m.key] = true
			next = append(next, m)
		}
	}
	for _, e := range elites {
		add(member{key: e.Key, config: e.Config, objective: e.Objective})
	}
	kids = slices.Clone(kids)
	slices.SortFunc(kids, compareMembers)
	for _, k := range kids {
		add(k)
	}
	for _, m := range old {
		add(m)
	}
	slices.SortFunc(next, compareMembers)
	return next
}

// epochElites is the best k of a restarted population's members and the
// generation's children: the best results of its epoch (the restart's
// batch and the best it kept, and what they became), since the population
// holds them from one generation to the next.
func epochElites(pop, kids []member, k int) []space.Result {
	all := slices.Concat(pop, kids)
	slices.SortFunc(all, compareMembers)
	all = slices.CompactFunc(all, func(a, b member) bool { return a.key == b.key })
	out := make([]space.Result, 0, min(k, len(all)))
	for _, m := range all[:min(k, len(all))] {
		out = append(out, space.Result{Key: m.key, Config: m.config, Status: space.StatusOK, Objective: m.objective})
	}
	return out
}

// compareResults orders OK results best first, ties broken by key so that
// the order never depends on arrival.
func compareResults(a, b space.Result) int {
	return cmp.Or(cmp.Compare(a.Objective, b.Objective), cmp.Compare(a.Key, b.Key))
}

func compareMembers(a, b member) int {
	return cmp.Or(cmp.Compare(a.objective, b.objective), cmp.Compare(a.key, b.key))
}

// summary describes the search as it stands.
func (s *Search) summary(stop StopReason) Summary {
	return Summary{
		Strategy:    s.st.Strategy,
		Seed:        s.st.Seed,
		Stop:        stop,
		Elites:      slices.Clone(s.elites),
		Evals:       s.st.Evals,
		StoreHits:   s.st.StoreHits,
		Generations: s.st.Generation,
		Elapsed:     s.elapsed(),
		ByStatus:    maps.Clone(s.st.ByStatus),
		MacroShare:  s.st.MacroShare,
		Macro:       s.st.Macro,
		Micro:       s.st.Micro,
	}
}
