package evo

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"evotune/space"
)

// The strategies a Search can run, by name.
const (
	// StrategyEvo is the evolutionary search: population, tournament
	// selection, uniform crossover, two-layer adaptive mutation, elites.
	StrategyEvo = "evo"
	// StrategyRandom samples valid configs uniformly without replacement.
	StrategyRandom = "random"
	// StrategyExhaustive visits every valid config once, in the space's
	// Enumerate order (fixed, so the seed plays no part).
	StrategyExhaustive = "exhaustive"
)

// Strategies returns the valid strategy names: the search, then its two
// baselines. It is the one list; the command line's flags and help take it
// from here.
func Strategies() []string {
	return []string{StrategyEvo, StrategyRandom, StrategyExhaustive}
}

// Options configure a Search. Start from DefaultOptions and change what is
// needed.
type Options struct {
	// Strategy is one of Strategies().
	Strategy string
	// Seed seeds the search's random source (a PCG).
	Seed uint64
	// Population is the number of configs proposed in each generation, for
	// every strategy, and the evo population's size.
	Population int
	// Batch is how many children the evo strategy proposes in each bred
	// generation after the first, at most Population; 0 means Population.
	// A generation's results are absorbed before the next is proposed, so
	// a smaller batch breeds and screens each child from more results (one
	// at a time, the default, gained most at 25-100 evaluations on the
	// Kernel Tuner spaces: evo/NOTES.md, rounds 13 and 14) and keeps fewer
	// evaluations in flight: with Parallel above it, evaluation slots idle,
	// so a caller that evaluates several at once breeds whole generations
	// (DefaultOptionsInFlight, which tune uses). The first generation and every generation that takes fresh
	// configs (a restart's, a top-up's, the uniform ones before two configs
	// have passed) stay Population, and stagnation counts Stagnation
	// generations' worth of evaluations.
	Batch int
	// Elites is how many of the best OK results the search keeps (K); the
	// elites are always carried into the next generation.
	Elites int
	// Tournament is the number of population members drawn (with
	// replacement) to pick each parent; the best of them wins. The default
	// 8, with a population of 8, makes the best member a parent about two
	// times in three (evo/NOTES.md, round 13).
	Tournament int
	// CrossoverRate is the probability that a child is made by uniform
	// crossover of two parents before it is mutated.
	CrossoverRate float64
	// Stagnation is the number of generations without a new best after
	// which the evo population takes fresh uniform configs: a quarter of
	// the next batch, or all of it when Restart is set. With a Batch below
	// Population it is that many generations' worth of evaluations.
	Stagnation int
	// Restart makes stagnation restart the evo population instead of
	// topping it up: the population keeps only its best member, the next
	// batch is entirely fresh uniform configs, and from then on the
	// population is elitist within its own epoch (its best results since
	// the restart), not over the whole run, so that it can leave a basin it
	// has exhausted for another; the elites and the screening model keep
	// everything learnt before. Fresh configs are uniform, not screened:
	// the model draws them back to the basins it knows (evo/NOTES.md,
	// round 5).
	Restart bool
	// Screen is how many candidates the evo strategy breeds for each child
	// it proposes: a model fitted to the results absorbed so far rates
	// them, and the best rated is proposed (see surrogate.go). 1 turns
	// screening off. Breeding and rating cost no evaluation. The default
	// 4 trusts the model less than 8 did with children bred one at a time
	// (evo/NOTES.md, round 14).
	Screen int
	// Interact adds to the screening model one feature for each pair of
	// knobs (of two or more values) that are not both macro knobs: the
	// product of the two knobs' centred positions in their value lists,
	// an ordinal interaction such as block size against tile size. A
	// Kernel Tuner file's knobs are all micro, so without it their model
	// is additive (evo/NOTES.md, round 7).
	Interact bool
	// ILS turns some restarts into epochs of iterated local search (with
	// Restart): when a bred epoch stagnates, Population climbers each
	// climb, one evaluation at a time, over the one-step neighbours of
	// their config (space.Steps: the next value below or above of one
	// knob), first improvement in a random order, and from a local optimum
	// are kicked to a one-knob mutation of the run's best; after
	// ilsFruitless local optima in a row that left the run's best where it
	// was, the epoch ends with the usual restart. It reaches optima that
	// only a poor intermediate leads to (evo/NOTES.md, round 9).
	ILS bool
	// Seeds are configs to start from, best first, for instance the elites
	// of another archive (evo only). The first generation proposes the
	// space's default, then each seed that is valid in this space, then
	// random configs; seeds that are not valid here are skipped, and those
	// past the first generation's size are not used. Seeds shape only the
	// first generation, which the saved state holds, so a restored search
	// does not need them.
	Seeds []space.Config
	// Parallel is how many candidates are evaluated at once.
	Parallel int
	// MaxEvals bounds the evaluations that really ran: results recorded
	// by this search, across resumed runs. Configs the store held before
	// they were proposed cost nothing; results of a batch that a restored
	// search finds recorded were counted when they ran and count once. 0
	// means no bound.
	MaxEvals int
	// MaxTime bounds the elapsed time of the search, as told by Clock and
	// summed over resumed runs; 0 means no bound. It is checked at
	// generation boundaries, and a generation near the end is shortened to
	// what the time left is expected to allow, so a run ends within about
	// one round of Parallel evaluations after the limit. Elapsed time is
	// saved with the state; after a kill, a wall clock loses the time spent
	// on the unfinished generation, while a virtual clock is charged again
	// by the results replayed from the store, so its total stays exact.
	MaxTime time.Duration
	// Clock tells the time; nil means WallClock.
	Clock Clock
	// OnProgress, when set, is called after each result arrives, one call
	// at a time.
	OnProgress func(Progress)
	// OnGeneration, when set, is called after each generation is absorbed,
	// with its results in proposal order.
	OnGeneration func(Generation)
	// Confirmer, when set, re-measures a challenger beside the elite it
	// would displace, and the incumbent stays unless the challenger is
	// faster beyond the noise; nil ranks by recorded objective alone.
	Confirmer Confirmer
}

// DefaultOptions returns the default options: the evo strategy with a
// population of 8, 8 elites (the top K), children bred one at a time
// (Batch 1), tournaments of 8, crossover rate 0.5, a screen of 4 with
// ordinal interactions in its model, a restart from fresh configs after
// 4 stagnant generations' worth of evaluations, no ILS epochs, one
// evaluation at a time and no budget. The batch, tournament and screen
// were chosen on Kernel Tuner spaces and checked on the recordings
// (evo/NOTES.md, rounds 13 and 14); DefaultOptionsInFlight has the
// defaults for several evaluations at once. The population and elites were chosen with
// bench-search on the H100 recording and the synthetic file, the restart
// on those and on public Kernel Tuner spaces (evo/NOTES.md, round 5), the
// interactions on those and on held-out subspaces of Kernel Tuner files
// (round 7). ILS epochs stay off: they gain on a needle at large budgets
// and cost the held-out spaces and the recordings at 200 evaluations
// (round 9).
func DefaultOptions() Options {
	return Options{
		Strategy:      StrategyEvo,
		Seed:          1,
		Population:    8,
		Elites:        8,
		Batch:         1,
		Tournament:    8,
		CrossoverRate: 0.5,
		Stagnation:    4,
		Screen:        4,
		Restart:       true,
		Interact:      true,
		Parallel:      1,
	}
}

// DefaultOptionsInFlight returns the defaults for a search that keeps
// parallel evaluations in flight. One at a time (parallel ≤ 1) they are
// DefaultOptions: each child bred from every result before it. With more,
// each generation is bred whole, so that no evaluation slot idles: the
// population is raised to parallel, and the tournament and screen are the
// ones chosen for whole generations (3 and 8), which did better there than
// the one-at-a-time 8 and 4 on evotune's recordings (evo/NOTES.md, round
// 14).
func DefaultOptionsInFlight(parallel int) Options {
	o := DefaultOptions()
	if parallel <= 1 {
		return o
	}
	o.Parallel = parallel
	o.Population = max(o.Population, parallel)
	o.Batch, o.Tournament, o.Screen = 0, 3, 8
	return o
}

// Upper bounds that keep a search's work per generation sane whatever the
// options (or a saved state) say.
const (
	maxPopulation = 1 << 16
	maxTournament = 64
)

// MaxScreen is the most candidates the search breeds for one child.
const MaxScreen = 64

// Validate reports the first option that is out of range, as New would.
func (o Options) Validate() error { return o.validate() }

// validate reports the first option that is out of range.
func (o Options) validate() error {
	if !slices.Contains(Strategies(), o.Strategy) {
		return fmt.Errorf("unknown strategy %q (valid: %s)", o.Strategy, strings.Join(Strategies(), ", "))
	}
	switch {
	case o.Population < 1 || o.Population > maxPopulation:
		return fmt.Errorf("population must be in [1, %d], got %d", maxPopulation, o.Population)
	case o.Batch < 0 || o.Batch > o.Population:
		return fmt.Errorf("batch must be in [0, population=%d] (0: the population), got %d", o.Population, o.Batch)
	case o.Elites < 1 || o.Elites > o.Population:
		return fmt.Errorf("elites must be in [1, population=%d], got %d", o.Population, o.Elites)
	case o.Tournament < 1 || o.Tournament > maxTournament:
		return fmt.Errorf("tournament size must be in [1, %d], got %d", maxTournament, o.Tournament)
	case math.IsNaN(o.CrossoverRate) || o.CrossoverRate < 0 || o.CrossoverRate > 1:
		return fmt.Errorf("crossover rate must be in [0, 1], got %v", o.CrossoverRate)
	case o.Stagnation < 1:
		return fmt.Errorf("stagnation must be at least 1 generation, got %d", o.Stagnation)
	case o.Screen < 1 || o.Screen > MaxScreen:
		return fmt.Errorf("screen must be in [1, %d] candidates per child (1: off), got %d", MaxScreen, o.Screen)
	case o.Parallel < 1:
		return fmt.Errorf("parallel must be at least 1, got %d", o.Parallel)
	case o.MaxEvals < 0:
		return fmt.Errorf("max evals must not be negative, got %d", o.MaxEvals)
	case o.MaxTime < 0:
		return fmt.Errorf("max time must not be negative, got %v", o.MaxTime)
	}
	return nil
}
