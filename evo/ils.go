package evo

import (
	"errors"
	"fmt"

	"evotune/space"
)

// The iterated local search's settings (Options.ILS; evo/NOTES.md, round 9).
const (
	// ilsFruitless local optima in a row that leave the run's best where
	// it was end an ILS epoch.
	ilsFruitless = 10
	// ilsFreeMoves bounds the moves a climber makes over configs the run
	// has already measured before it proposes one: each move improves, so
	// it is never reached on a finite space, and no loop can spin.
	ilsFreeMoves = 1 << 20
	// ilsFreeOptima bounds the local optima a climber reaches at no cost
	// (kicks and climbs over configs already measured) before it proposes
	// one: past it, the neighbourhood of the run's best is spent and the
	// climber proposes nothing until the epoch ends.
	ilsFreeOptima = ilsFruitless
)

// Origins of the ILS epoch's proposals.
const (
	originKick  = "kick"  // a one-knob mutation of the run's best, where a climber starts
	originClimb = "climb" // a one-step neighbour of a climber's config
)

// A climber is a first-improvement climb over one-step neighbours.
type climber struct {
	// Config is where the climber stands; nil when a kick is due.
	Config    space.Config `json:"config,omitempty"`
	Objective float64      `json:"objective,omitempty"`
	Failed    bool         `json:"failed,omitempty"` // Config failed: any OK neighbour is better
	// Best is the run's best objective when the climber was kicked.
	Best float64 `json:"best,omitempty"`
}

// An ilsEpoch is an epoch of iterated local search in progress: Population
// climbers, each proposing one config a batch.
type ilsEpoch struct {
	Climbers []climber `json:"climbers"`
	// Fruitless counts the local optima in a row that left the run's best
	// where it was when their climber was kicked.
	Fruitless int `json:"fruitless,omitempty"`
}

// ilsPropose fills the batch from the ILS epoch in progress, or starts one
// when the bred epoch has stagnated (an epoch after every second bred one
// only moved the cost later: evo/NOTES.md, round 9). It reports false, the
// epoch over or none due, when the breeding proposes instead.
func (s *Search) ilsPropose() bool {
	if !s.st.Params.ILS || !s.st.Params.Restart {
		return false
	}
	switch {
	case s.st.ILS == nil && s.st.Stagnant < s.st.Params.stagnationLimit():
		return false
	case s.st.ILS == nil:
		s.st.ILS = &ilsEpoch{Climbers: make([]climber, s.st.Params.Population)}
	case s.st.ILS.Fruitless >= ilsFruitless:
		// Checked between batches, not while one is filled, so that
		// every climber proposes in every batch of the epoch: a batch
		// cut short would leave the tuner's compile slots idle.
		return s.endILS()
	}
	budget, counted := s.evalCap(), 0
	var batch []proposal
	s.proposing = map[string]bool{}
	defer func() { s.proposing = nil }()
	for i := range s.st.ILS.Climbers {
		if counted >= budget {
			break
		}
		p, ok := s.climb(&s.st.ILS.Climbers[i])
		if !ok {
			continue
		}
		p.Climber = i + 1
		s.proposing[p.Config.Hash()] = true
		if s.take(&p) {
			counted++
		}
		batch = append(batch, p)
	}
	if len(batch) == 0 {
		return s.endILS()
	}
	s.st.Stagnant = 0
	s.st.Batch = batch
	return true
}

// endILS ends the epoch: the restart follows, as after a bred epoch. It
// returns false, for ilsPropose.
func (s *Search) endILS() bool {
	s.st.ILS = nil
	s.st.Stagnant = s.st.Params.stagnationLimit()
	return false
}

// climb returns the climber's next config to evaluate, moving at no cost
// over better configs the run has already measured; false when it has
// nothing to propose (no kick can change the run's best, or ilsFreeOptima
// local optima were reached at no cost).
func (s *Search) climb(c *climber) (proposal, bool) {
	e := s.st.ILS
	optima := 0
	for range ilsFreeMoves {
		if c.Config == nil {
			if optima >= ilsFreeOptima {
				return proposal{}, false
			}
			best := s.bestResult()
			if best == nil {
				return proposal{}, false
			}
			m, _, ok := s.mutate(best.Config)
			if !ok {
				return proposal{}, false
			}
			c.Best = best.Objective
			if !s.seen[m.Hash()] {
				return proposal{Config: m, Origin: originKick}, true
			}
			obj, ok := s.measured(m)
			c.Config, c.Objective, c.Failed = m, obj, !ok
			continue
		}
		steps := s.space.Steps(c.Config)
		moved := false
		for _, i := range s.rng.Perm(len(steps)) {
			n := steps[i]
			if !s.seen[n.Hash()] {
				return proposal{Config: n, Origin: originClimb}, true
			}
			if obj, ok := s.measured(n); ok && (c.Failed || obj < c.Objective) {
				c.Config, c.Objective, c.Failed = n, obj, false
				moved = true
				break
			}
		}
		if moved {
			continue
		}
		// A local optimum: it was fruitful if the run's best improved
		// since the kick, by this climb or by any other.
		if b := s.bestResult(); b != nil && b.Objective < c.Best {
			e.Fruitless = 0
		} else {
			e.Fruitless++
		}
		c.Config = nil
		optima++
	}
	return proposal{}, false
}

// measured is the objective of a config this run has proposed and
// absorbed, when its result is OK. A config that failed, or one proposed
// by another climber for the batch being filled, is better than none: the
// search must not know a result before it absorbs it, or a search rebuilt
// from a log holding every result would climb otherwise.
func (s *Search) measured(c space.Config) (float64, bool) {
	if s.proposing[c.Hash()] {
		return 0, false
	}
	r, ok := s.store.Lookup(c.Key())
	if !ok || !r.OK() {
		return 0, false
	}
	return r.Objective, true
}

// ilsAbsorb moves each climber to its result: a kick's whatever it is, a
// neighbour's when it is better.
func (s *Search) ilsAbsorb(results []space.Result) {
	e := s.st.ILS
	if e == nil {
		return
	}
	for i, p := range s.st.Batch {
		if p.Climber < 1 || p.Climber > len(e.Climbers) {
			continue
		}
		c, r := &e.Climbers[p.Climber-1], results[i]
		switch {
		case p.Origin == originKick:
			c.Config, c.Objective, c.Failed = p.Config, r.Objective, !r.OK()
		case r.OK() && (c.Failed || r.Objective < c.Objective):
			c.Config, c.Objective, c.Failed = p.Config, r.Objective, false
		}
	}
}

// checkILS refuses a saved ILS epoch that this search could not continue.
func (s *Search) checkILS(st *state) error {
	e := st.ILS
	if e == nil {
		for i, p := range st.Batch {
			if p.Climber != 0 {
				return fmt.Errorf("batch config %d names climber %d, but no ILS epoch is in progress", i, p.Climber)
			}
		}
		return nil
	}
	switch {
	case !st.Params.ILS || !st.Params.Restart || st.Strategy != StrategyEvo:
		return errors.New("an ILS epoch is in progress, but the search does not run them")
	case len(e.Climbers) != st.Params.Population:
		return fmt.Errorf("an ILS epoch of %d climbers, population %d", len(e.Climbers), st.Params.Population)
	case e.Fruitless < 0:
		return errors.New("negative fruitless local optima")
	}
	for i, c := range e.Climbers {
		if c.Config != nil {
			if err := s.space.Check(c.Config); err != nil {
				return fmt.Errorf("ILS climber %d: %w", i, err)
			}
		}
	}
	for i, p := range st.Batch {
		if p.Climber < 0 || p.Climber > len(e.Climbers) {
			return fmt.Errorf("batch config %d names climber %d of %d", i, p.Climber, len(e.Climbers))
		}
	}
	return nil
}
