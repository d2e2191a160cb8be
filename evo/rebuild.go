package evo

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"evotune/space"
)

// A Log is a Store that can list every result it holds, in the order it
// recorded them. Restore checks a saved state against it, and Rebuild
// replays a search over it.
type Log interface {
	Store
	Results() []space.Result
	Keys() []string // the results' keys in log order: what Results costs, without the copies
}

// Settings are what decides a search's proposals besides the answers: its
// strategy, seed, the parameters that shape it and the configs it started
// from. A restored search takes them from its saved state and a rebuilt one
// from wherever the caller kept them, never from the options it was created
// with.
type Settings struct {
	Strategy      string  `json:"strategy"`
	Seed          uint64  `json:"seed"`
	Population    int     `json:"population"`
	Elites        int     `json:"elites"`
	Tournament    int     `json:"tournament"`
	CrossoverRate float64 `json:"crossover_rate"`
	Stagnation    int     `json:"stagnation"`
	Screen        int     `json:"screen"`
	// Batch is Options.Batch; 0 (the population) also in settings
	// written before it existed.
	Batch    int            `json:"batch,omitempty"`
	Restart  bool           `json:"restart,omitempty"`
	Interact bool           `json:"interact,omitempty"`
	ILS      bool           `json:"ils,omitempty"`
	Seeds    []space.Config `json:"seeds,omitempty"`
}

// Settings returns the settings of o.
func (o Options) Settings() Settings {
	return Settings{Strategy: o.Strategy, Seed: o.Seed, Population: o.Population, Elites: o.Elites,
		Tournament: o.Tournament, CrossoverRate: o.CrossoverRate, Stagnation: o.Stagnation, Screen: o.Screen,
		Batch: o.Batch, Restart: o.Restart, Interact: o.Interact, ILS: o.ILS, Seeds: o.Seeds}
}

// WithSettings returns o with the settings of st in place of its own.
func (o Options) WithSettings(st Settings) Options {
	o.Strategy, o.Seed = st.Strategy, st.Seed
	o.Population, o.Elites, o.Tournament = st.Population, st.Elites, st.Tournament
	o.CrossoverRate, o.Stagnation, o.Screen, o.Restart = st.CrossoverRate, st.Stagnation, st.Screen, st.Restart
	o.Interact, o.ILS = st.Interact, st.ILS
	o.Batch = st.Batch
	if o.Screen == 0 {
		o.Screen = 1 // saved before screening existed
	}
	o.Seeds = st.Seeds
	return o
}

// Settings returns the settings the search runs with: after Restore, those
// of the saved state (its seeds are not saved, so none are returned).
func (s *Search) Settings() Settings { return s.opts.Settings() }

// StateSettings reads the settings from a saved state, when the state is
// readable enough to hold them.
func StateSettings(data []byte) (Settings, bool) {
	var st state
	if json.Unmarshal(data, &st) != nil || st.Version != stateVersion || st.Strategy == "" {
		return Settings{}, false
	}
	p := st.Params
	return Settings{Strategy: st.Strategy, Seed: st.Seed, Population: p.Population, Elites: p.Elites,
		Tournament: p.Tournament, CrossoverRate: p.CrossoverRate, Stagnation: p.Stagnation, Screen: max(p.Screen, 1),
		Batch: p.Batch, Restart: p.Restart, Interact: p.Interact, ILS: p.ILS}, true
}

// Rebuild makes a new search (not yet run) the continuation of the search
// that wrote the store's log, when its saved state is lost, damaged or
// disagrees with the log. The state is a cache of the log: a search's
// outcome depends only on its settings and the answers, so a search started
// afresh with the same settings proposes what the lost one proposed, and Run
// answers from the log every config it holds, counting each as the
// evaluation it was (and, on a wall clock, charging its recorded cost as a
// virtual clock would), until the search proposes a config the log lacks:
// from there it evaluates, so results missing from the log are run again.
// The Confirmer's verdicts of a damaged state that still reads are kept
// (they are measurements); otherwise a pair is confirmed again. Call it on a
// search created with the lost search's settings, instead of Restore.
func (s *Search) Rebuild(damaged []byte) error {
	log, ok := s.store.(Log)
	if !ok {
		return errors.New("evo: rebuilding a search state needs a store that lists its results")
	}
	if s.st.Generation > 0 || len(s.st.Batch) > 0 {
		return errors.New("evo: rebuild a new search, before it runs")
	}
	owned := 0
	for _, r := range log.Results() {
		owned = max(owned, r.Seq+1)
	}
	s.st.Owned = owned
	var old state
	if json.Unmarshal(damaged, &old) == nil {
		s.st.Verdicts = old.Verdicts
	}
	return nil
}

// owned reports whether r was recorded by this search before a rebuild.
func (s *Search) owned(r space.Result) bool { return r.Seq < s.st.Owned }

// wallCharge is what a result answered from the log while rebuilding adds
// to the elapsed time of a search on a wall clock: its recorded cost over
// the candidates in flight, as a virtual clock charges it.
func (s *Search) wallCharge(r space.Result) time.Duration {
	if _, wall := s.clock.(WallClock); !wall {
		return 0
	}
	return time.Duration(r.Cost.Total() / float64(s.opts.Parallel) * float64(time.Second))
}

// checkLog refuses a state that disagrees with the log it was saved beside:
// one that counts more results than the log holds, or that proposed and
// absorbed a config the log does not hold (a lost or damaged line).
func checkLog(st *state, log Log) error {
	keys := log.Keys()
	logged := make(map[string]bool, len(keys))
	for _, k := range keys {
		logged[space.HashKey(k)] = true
	}
	inBatch := make(map[string]bool, len(st.Batch))
	for _, p := range st.Batch {
		inBatch[p.Config.Hash()] = true
	}
	missing := 0
	for _, h := range st.Seen {
		if !logged[h] && !inBatch[h] {
			missing++
		}
	}
	if missing > 0 {
		return fmt.Errorf("the log lacks %d of the %d configs it absorbed", missing, len(st.Seen)-len(st.Batch))
	}
	if st.Evals > len(keys) {
		return fmt.Errorf("it counts %d evaluations, the log holds %d results", st.Evals, len(keys))
	}
	return nil
}
