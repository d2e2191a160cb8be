package evo

import "evotune/space"

// stateVersion is bumped when the saved state's meaning changes.
const stateVersion = 1

// Origins of a proposed config.
const (
	originDefault   = "default"   // the space's hand-picked config
	originSeed      = "seed"      // a config of Options.Seeds
	originRandom    = "random"    // a uniform sample
	originInject    = "inject"    // a uniform sample injected after stagnation
	originRestart   = "restart"   // a uniform sample of a restarted population
	originEnumerate = "enumerate" // the next config in Enumerate order
	originMacro     = "macro"     // a child whose mutation changed a macro knob
	originMicro     = "micro"     // a child whose mutation changed a micro knob
)

// A proposal is one config of a generation's batch.
type proposal struct {
	Config space.Config `json:"config"`
	Origin string       `json:"origin"`
	// Known is set when the store already held the config when it was
	// proposed: it is answered from the store and costs no evaluation.
	// Without it, a store hit while the batch runs is a result recorded by
	// this batch before a restart, and counts against the budget.
	Known bool `json:"known,omitempty"`
	// Parent is the objective of the config that the mutation changed, for
	// credit assignment; 0 when there is none to compare with.
	Parent float64 `json:"parent,omitempty"`
	// Climber is 1 + the index of the ILS climber that proposed it, 0
	// for a proposal of the breeding.
	Climber int `json:"climber,omitempty"`
}

// params are the options that shape the search itself; a restored search
// takes them from its state so that it continues the same search.
type params struct {
	Population    int     `json:"population"`
	Elites        int     `json:"elites"`
	Tournament    int     `json:"tournament"`
	CrossoverRate float64 `json:"crossover_rate"`
	Stagnation    int     `json:"stagnation"`
	// Batch is Options.Batch; 0, as in a state saved before it existed,
	// means Population.
	Batch int `json:"batch,omitempty"`
	// Screen is Options.Screen; 0, in a state saved before screening
	// existed, means 1 (off), so such a search continues as it began.
	Screen int `json:"screen,omitempty"`
	// Restart is Options.Restart; false in a state saved before restarts
	// existed, so such a search continues as it began.
	Restart bool `json:"restart,omitempty"`
	// Interact is Options.Interact; false in a state saved before the
	// ordinal interactions existed, so such a search continues as it
	// began (its model sums have no room for them).
	Interact bool `json:"interact,omitempty"`
	// ILS is Options.ILS; false in a state saved before it existed.
	ILS bool `json:"ils,omitempty"`
}

// state is everything a search needs to continue exactly: it is saved as
// JSON at every generation boundary and again once a batch is proposed.
// Evals, StoreHits, ByStatus and ElapsedNS count what was absorbed before
// the batch; results of the batch are counted again when it is re-run.
type state struct {
	Version    int        `json:"version"`
	Strategy   string     `json:"strategy"`
	Seed       uint64     `json:"seed"`
	Params     params     `json:"params"`
	Generation int        `json:"generation"`
	RNG        []byte     `json:"rng"` // the PCG source, MarshalBinary
	Batch      []proposal `json:"batch,omitempty"`
	// Population and Elites are keys of results in the store, best first.
	Population []string `json:"population"`
	Elites     []string `json:"elites"`
	// Seen holds the hash of every config proposed in this run, in order.
	Seen      []string             `json:"seen"`
	Evals     int                  `json:"evals"`
	StoreHits int                  `json:"store_hits"`
	ByStatus  map[space.Status]int `json:"by_status"`
	ElapsedNS int64                `json:"elapsed_ns"`
	Macro     LayerStats           `json:"macro"`
	Micro     LayerStats           `json:"micro"`
	// MacroShare is the probability that a mutation changes a macro knob.
	MacroShare float64 `json:"macro_share"`
	// LayerEvals counts the configs absorbed since the layers' rates last
	// moved; they move once it reaches the population.
	LayerEvals int `json:"layer_evals,omitempty"`
	// Stagnant counts generations (batches, whatever their size) since the
	// best objective last improved; see params.stagnationLimit.
	Stagnant int `json:"stagnant"`
	// Restarts counts the population's restarts (Params.Restart). Once
	// it has restarted, the population keeps the best of its own epoch
	// instead of the elites.
	Restarts int `json:"restarts,omitempty"`
	// ILS is the epoch of iterated local search in progress
	// (Params.ILS); nil while the population breeds.
	ILS *ilsEpoch `json:"ils,omitempty"`
	// Cursor is how many configs of the Enumerate order were proposed
	// (exhaustive only).
	Cursor int `json:"cursor"`
	// Exhausted is set once no unseen valid config is left.
	Exhausted bool `json:"exhausted,omitempty"`
	// Verdicts are the Confirmer's answers, oldest first: a pair is never
	// asked twice.
	Verdicts []Verdict `json:"verdicts,omitempty"`
	// Model holds the sums the screening model is fitted from, over every
	// result absorbed so far; set when Params.Screen > 1 (evo only).
	Model *modelStats `json:"model,omitempty"`
	// Owned is set by Rebuild: the store's results whose Seq is below it
	// were recorded by this search before its state was lost, so a config
	// proposed again that the store holds with such a Seq is answered from
	// there and counted as the evaluation it was, not marked Known.
	Owned int `json:"owned,omitempty"`
}

// bredBatch is how many children a bred generation after the first
// proposes.
func (p params) bredBatch() int {
	if p.Batch > 0 {
		return p.Batch
	}
	return p.Population
}

// minBreeders is the least population that a generation is bred from
// before the first restart; below it the generation is uniform samples.
// With whole generations it is 2 (round 11); children bred one batch at a
// time below the population are each bred and screened from every result
// so far, and breeding them from the first config that passed gained at 25
// evaluations over sampling until a second did (round 14), so it is 1.
func (p params) minBreeders() int {
	if p.bredBatch() < p.Population {
		return 1
	}
	return 2
}

// stagnationLimit is how many batches without a new best make the evo
// population stagnant: Stagnation generations' worth of evaluations, in
// bred batches (rounded up).
func (p params) stagnationLimit() int {
	b := p.bredBatch()
	return (p.Stagnation*p.Population + b - 1) / b
}
