package evo

import (
	"math"

	"evotune/space"
)

// Bounds on the retries that keep proposals new: past them the search takes
// a uniform sample, then an exact pick among the unseen valid configs, and
// if there is none the space is exhausted. No loop can spin.
const (
	childTries  = 16
	sampleTries = 32
)

// propose fills the state's batch for the next generation, drawing only from
// the search's random source, so that the batch is a function of the state.
// A config is proposed at most once per run. Configs the store already
// holds are marked Known and cost nothing; the others are limited by what is
// left of the budget.
func (s *Search) propose() {
	n := s.st.Params.Population
	budget := s.evalCap()
	inject, origin := 0, originInject
	if s.st.Strategy == StrategyEvo && s.ilsPropose() {
		return
	}
	if s.st.Strategy == StrategyEvo && s.st.Stagnant >= s.st.Params.stagnationLimit() {
		s.st.Stagnant = 0
		if s.st.Params.Restart {
			// The population has exhausted its basin: it starts again
			// from fresh configs beside its best, which the next
			// generations are free to leave behind.
			s.pop = s.pop[:min(len(s.pop), 1)]
			inject, origin = n, originRestart
			s.st.Restarts++
		} else {
			// Fresh configs pull a converged population out of its
			// basin without discarding the elites, which the
			// population keeps.
			inject = (n + 3) / 4
		}
	}
	if s.st.Strategy == StrategyEvo && s.st.Generation > 0 && s.st.Restarts == 0 && len(s.pop) < s.st.Params.minBreeders() {
		// Too few configs have passed to breed from: a whole generation
		// of children of one config is a walk around wherever the first
		// generation happened to pass, which on spaces where most
		// configs fail is worth less than as many fresh samples
		// (evo/NOTES.md, round 11). Until the population holds
		// minBreeders configs, or first restarts, each batch is uniform
		// samples.
		inject, origin = n, originRandom
	}
	if s.st.Strategy == StrategyEvo && inject == 0 && s.st.Generation > 0 {
		// A bred generation: Options.Batch children, each bred from
		// every result absorbed so far.
		n = s.st.Params.bredBatch()
	}
	var batch []proposal
	counted := 0
	for len(batch) < n && counted < budget {
		p, ok := s.next(len(batch) < inject, origin)
		if !ok {
			s.st.Exhausted = true
			break
		}
		if s.take(&p) {
			counted++
		}
		batch = append(batch, p)
	}
	s.st.Batch = batch
}

// take marks a proposal seen in this run, and Known when the store already
// holds its config; it reports whether the proposal costs an evaluation.
func (s *Search) take(p *proposal) bool {
	h := p.Config.Hash()
	s.seen[h] = true
	s.st.Seen = append(s.st.Seen, h)
	if r, hit := s.store.Lookup(p.Config.Key()); hit && !s.owned(r) {
		p.Known = true
		return false
	}
	return true
}

// evalCap is how many evaluations the next batch may spend: what is left of
// MaxEvals, and of MaxTime at the mean elapsed time per evaluation so far
// (at least one round of Parallel, so that the time budget is met or
// passed rather than approached forever).
func (s *Search) evalCap() int {
	c := math.MaxInt
	if s.opts.MaxEvals > 0 {
		c = s.opts.MaxEvals - s.st.Evals
	}
	if s.opts.MaxTime > 0 && s.st.Evals > 0 && s.st.ElapsedNS > 0 {
		per := float64(s.st.ElapsedNS) / float64(s.st.Evals)
		left := float64(int64(s.opts.MaxTime) - s.st.ElapsedNS)
		c = min(c, max(int(math.Ceil(left/per)), s.opts.Parallel))
	}
	return c
}

// next proposes one config that this run has not seen, by the strategy;
// fresh asks the evo strategy for a random sample of the given origin
// instead of a child. It reports false when no unseen valid config is left.
func (s *Search) next(fresh bool, origin string) (proposal, bool) {
	switch s.st.Strategy {
	case StrategyRandom:
		return s.sample(originRandom)
	case StrategyExhaustive:
		return s.enumerated()
	}
	if fresh {
		return s.sample(origin)
	}
	if len(s.pop) == 0 {
		// Nothing to breed from yet (the first generation, or every
		// config so far failed): start from the hand-picked default, where
		// the space has one (a Kernel Tuner file's first values are no
		// choice: starting there cost 0.003 at 50 evaluations, evo/NOTES.md
		// round 14).
		d := s.space.Default()
		if !s.space.PlaceholderDefaults && !s.seen[d.Hash()] && s.space.Check(d) == nil {
			return proposal{Config: d, Origin: originDefault}, true
		}
		if p, ok := s.seed(); ok {
			return p, true
		}
		return s.sample(originRandom)
	}
	if s.screening() {
		return s.screenedChild()
	}
	return s.child()
}

// screenedChild breeds up to Screen distinct unseen children and returns
// the one the model rates best, the first bred among equals. Before the
// model can be fitted it returns the first child, as child would.
func (s *Search) screenedChild() (proposal, bool) {
	if s.modelGen != s.st.Generation {
		best := 0.0
		if b := s.bestResult(); b != nil {
			best = b.Objective
		}
		s.model, s.modelGen = fitSurrogate(s.feats, s.st.Model, best), s.st.Generation
	}
	if s.model == nil {
		return s.child()
	}
	var (
		pick     proposal
		found    bool
		bestRate float64
		bred     = make(map[string]bool, s.st.Params.Screen)
	)
	fallback := false
	for range s.st.Params.Screen {
		var p proposal
		ok := true
		if fallback {
			// Breeding found nothing unseen: the space is nearly spent
			// around the population, and each further child would fail
			// every try before falling back too. The other candidates are
			// drawn among the unseen configs at once.
			p.Origin = originRandom
			p.Config, ok = s.pickUnseen()
			if ok {
				p.Config = p.Config.Clone()
			}
		} else {
			p, ok = s.child()
			fallback = p.Origin == originRandom
		}
		if !ok {
			break
		}
		h := p.Config.Hash()
		if bred[h] {
			continue
		}
		bred[h] = true
		if r := s.model.rate(p.Config); !found || r > bestRate {
			pick, found, bestRate = p, true, r
		}
	}
	return pick, found
}

// seed returns the first of Options.Seeds that is valid in the space and
// not yet seen, while the first generation is being proposed; later
// generations breed from what the seeds became.
func (s *Search) seed() (proposal, bool) {
	if s.st.Generation > 0 {
		return proposal{}, false
	}
	for _, c := range s.opts.Seeds {
		if !s.seen[c.Hash()] && s.space.Check(c) == nil {
			return proposal{Config: c.Clone(), Origin: originSeed}, true
		}
	}
	return proposal{}, false
}

// sample draws a uniform valid config not seen in this run.
func (s *Search) sample(origin string) (proposal, bool) {
	for range sampleTries {
		c := s.space.Sample(s.rng)
		if !s.seen[c.Hash()] {
			return proposal{Config: c, Origin: origin}, true
		}
	}
	// Rejection sampling is slow once most of the space is seen; pick
	// uniformly among what is left instead.
	c, ok := s.pickUnseen()
	if !ok {
		return proposal{}, false
	}
	return proposal{Config: c.Clone(), Origin: origin}, true
}

// A validIndex lists a space's valid configs in Enumerate order and maps
// each one's hash to its position. It is read-only once built, so the runs
// of a comparison share one: building it hashes the whole space.
type validIndex struct {
	configs []space.Config
	pos     map[string]int // config hash → index in configs
}

func newValidIndex(sp *space.Space) *validIndex {
	configs := sp.ValidConfigs()
	ix := &validIndex{configs: configs, pos: make(map[string]int, len(configs))}
	for i, c := range configs {
		ix.pos[c.Hash()] = i
	}
	return ix
}

// unseenIndex keeps which of a space's valid configs a search has not
// seen, in Enumerate order, so that a uniform pick among them costs
// O(log n) instead of hashing the whole space again: near the end of a
// space every bred child falls back to that pick. It follows the state's
// Seen list, which only grows, so it is a function of the state.
type unseenIndex struct {
	pos    map[string]int // config hash → index in the valid configs
	marked []bool         // per index: seen already
	tree   []int          // Fenwick tree of 1 (unseen) or 0 (seen) per index
	left   int            // unseen configs
	synced int            // entries of the state's Seen applied
}

func newUnseenIndex(ix *validIndex) *unseenIndex {
	n := len(ix.configs)
	u := &unseenIndex{pos: ix.pos, marked: make([]bool, n), tree: make([]int, n+1), left: n}
	for i := range n {
		u.tree[i+1]++
		if j := i + 1 + (i+1)&-(i+1); j <= n {
			u.tree[j] += u.tree[i+1]
		}
	}
	return u
}

// sync marks seen the configs of seen[u.synced:].
func (u *unseenIndex) sync(seen []string) {
	for _, h := range seen[u.synced:] {
		i, ok := u.pos[h]
		if !ok || u.marked[i] {
			continue
		}
		u.marked[i] = true // a config is marked once
		for j := i + 1; j < len(u.tree); j += j & -j {
			u.tree[j]--
		}
		u.left--
	}
	u.synced = len(seen)
}

// nth returns the index of the k-th (from 0) unseen config.
func (u *unseenIndex) nth(k int) int {
	i, step := 0, 1
	for step*2 < len(u.tree) {
		step *= 2
	}
	for ; step > 0; step /= 2 {
		if j := i + step; j < len(u.tree) && u.tree[j] <= k {
			i, k = j, k-u.tree[j]
		}
	}
	return i // tree positions are 1-based: i+1 holds the pick, index i
}

// pickUnseen picks uniformly among the valid configs not seen in this run,
// as the k-th of them in Enumerate order; false when none is left.
func (s *Search) pickUnseen() (space.Config, bool) {
	if s.unseen == nil {
		s.unseen = newUnseenIndex(s.validIndex())
	}
	s.unseen.sync(s.st.Seen)
	if s.unseen.left == 0 {
		return nil, false
	}
	return s.valid.configs[s.unseen.nth(s.rng.IntN(s.unseen.left))], true
}

// enumerated returns the next unseen config in Enumerate order.
func (s *Search) enumerated() (proposal, bool) {
	valid := s.validIndex().configs
	for s.st.Cursor < len(valid) {
		c := valid[s.st.Cursor]
		s.st.Cursor++
		if !s.seen[c.Hash()] {
			return proposal{Config: c.Clone(), Origin: originEnumerate}, true
		}
	}
	return proposal{}, false
}

// validIndex returns the index of the space's valid configs, built on
// first need or given by the comparison the search is part of.
func (s *Search) validIndex() *validIndex {
	switch {
	case s.valid != nil:
	case s.sharedValid != nil:
		s.valid = s.sharedValid()
	default:
		s.valid = newValidIndex(s.space)
	}
	return s.valid
}

// child breeds an unseen config from the population: tournament parents,
// uniform crossover at CrossoverRate, then a mutation whose layer is macro
// with probability MacroShare (the other layer if that one cannot change).
// The proposal's Parent is the objective of the config the mutation
// changed, or 0 when that config is a new mix with no objective yet.
func (s *Search) child() (proposal, bool) {
	for range childTries {
		a := s.tournament()
		c, parent := a.config, a.objective
		if len(s.pop) > 1 && s.rng.Float64() < s.st.Params.CrossoverRate {
			b := s.tournament()
			c = s.space.Crossover(s.rng, a.config, b.config)
			// The mutation earns its layer credit only against the
			// config it changed; a new mix of both parents has no
			// measured objective to compare with.
			switch c.Key() {
			case a.key:
			case b.key:
				parent = b.objective
			default:
				parent = 0
			}
		}
		m, layer, ok := s.mutate(c)
		if ok && !s.seen[m.Hash()] {
			return proposal{Config: m, Origin: layerOrigin(layer), Parent: parent}, true
		}
	}
	// Every try bred a config already seen: the space is spent around the
	// population. A uniform pick among the unseen configs is what
	// rejection sampling would find, without its tries.
	c, ok := s.pickUnseen()
	if !ok {
		return proposal{}, false
	}
	return proposal{Config: c.Clone(), Origin: originRandom}, true
}

// mutate changes one knob of c, of the macro layer with probability
// MacroShare (the other layer if that one cannot change), and reports the
// layer it changed; false when no knob can change.
func (s *Search) mutate(c space.Config) (space.Config, space.Layer, bool) {
	layer := space.Micro
	if s.rng.Float64() < s.st.MacroShare {
		layer = space.Macro
	}
	m, ok := s.space.Mutate(s.rng, c, layer)
	if !ok {
		layer = 1 - layer
		m, ok = s.space.Mutate(s.rng, c, layer)
	}
	return m, layer, ok
}

// tournament draws Tournament members with replacement and returns the
// best; the population is sorted, so the best is the lowest index.
func (s *Search) tournament() member {
	best := len(s.pop)
	for range s.st.Params.Tournament {
		best = min(best, s.rng.IntN(len(s.pop)))
	}
	return s.pop[best]
}
