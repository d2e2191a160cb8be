package evo

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"

	"golang.org/x/sync/errgroup"

	"evotune/space"
)

// Comparing strategies on a recorded space. Every config of the space has a
// recorded result, so the optimum is known and each strategy's best after n
// evaluations can be put against it. Quality is the fraction of the optimum
// reached, optimum/best (1 at the optimum). A failed config (any status but
// ok) uses an evaluation and yields nothing: a run that has found no OK
// config yet has reached fraction 0. The baseline is random search without
// replacement, whose expected best is computed exactly, not sampled.

// A Landscape is what a recorded space holds: how many configs, how many
// passed every gate, and the best objective among them.
type Landscape struct {
	Configs int     `json:"configs"`
	OK      int     `json:"ok"`
	Optimum float64 `json:"optimum"` // lowest objective of an OK config
	// losses are 1 − fraction for every config, ascending: 0 at the
	// optimum, 1 for a failure.
	losses []float64
	// objectives are the OK configs' objectives, ascending.
	objectives []float64
}

// NewLandscape returns the landscape of a space from the results of all its
// configs. It refuses an empty list and one in which no config passed.
func NewLandscape(results []space.Result) (Landscape, error) {
	if len(results) == 0 {
		return Landscape{}, errors.New("landscape: no results")
	}
	l := Landscape{Configs: len(results)}
	for _, r := range results {
		if r.OK() {
			l.objectives = append(l.objectives, r.Objective)
		}
	}
	if len(l.objectives) == 0 {
		return Landscape{}, fmt.Errorf("landscape: none of the %d configs passed every gate", len(results))
	}
	slices.Sort(l.objectives)
	l.OK, l.Optimum = len(l.objectives), l.objectives[0]
	l.losses = make([]float64, 0, len(results))
	for _, v := range l.objectives {
		l.losses = append(l.losses, 1-l.Optimum/v)
	}
	for range len(results) - l.OK {
		l.losses = append(l.losses, 1)
	}
	return l, nil
}

// Fraction is the fraction of the optimum that a best objective reaches,
// optimum/best; 0 when nothing was found (best ≤ 0).
func (l Landscape) Fraction(best float64) float64 {
	if best <= 0 {
		return 0
	}
	return l.Optimum / best
}

// Within returns how many configs have an objective within tol of the
// optimum (objective ≤ optimum·(1+tol)), the optimum included.
func (l Landscape) Within(tol float64) int {
	limit := l.Optimum * (1 + tol)
	n, _ := slices.BinarySearchFunc(l.objectives, limit, func(v, t float64) int {
		if v <= t {
			return -1
		}
		return 1
	})
	return n
}

// RandomFraction is the expected fraction of the optimum reached by random
// search without replacement after n evaluations, failures yielding
// nothing: 1 − E[min loss] over samples of size n.
func (l Landscape) RandomFraction(n int) float64 {
	return 1 - ExpectedMin(l.losses, n)
}

// RandomFractionSD is the standard deviation of the fraction that one run
// of random search without replacement reaches after n evaluations, also
// exact: losses are non-negative, so the least squared loss drawn is the
// square of the least loss, and E[min²] comes from ExpectedMin as E[min]
// does. A mean over r runs strays from RandomFraction by about SD/√r.
func (l Landscape) RandomFractionSD(n int) float64 {
	sq := make([]float64, len(l.losses))
	for i, v := range l.losses {
		sq[i] = v * v
	}
	m := ExpectedMin(l.losses, n)
	return math.Sqrt(max(ExpectedMin(sq, n)-m*m, 0))
}

// RandomReach returns how many evaluations random search without
// replacement needs to first draw a config within tol of the optimum: the
// median and the mean of that number, exactly. With k such configs among
// N, the number T of draws satisfies P(T > m) = C(N−k, m)/C(N, m) and
// E[T] = (N+1)/(k+1).
func (l Landscape) RandomReach(tol float64) (median int, mean float64) {
	n, k := l.Configs, l.Within(tol)
	mean = float64(n+1) / float64(k+1)
	tail := 1.0 // P(T > m)
	for m := 0; m < n; m++ {
		if tail <= 0.5 {
			return m, mean
		}
		tail *= float64(n-k-m) / float64(n-m)
	}
	return n, mean
}

// RandomReachedBy is the probability that random search without
// replacement draws a config within tol of the optimum in n evaluations:
// 1 − C(N−k, n)/C(N, n).
func (l Landscape) RandomReachedBy(tol float64, n int) float64 {
	total, k := l.Configs, l.Within(tol)
	miss := 1.0
	for m := range min(max(n, 0), total) {
		miss *= float64(total-k-m) / float64(total-m)
	}
	return 1 - miss
}

// ExpectedMin returns the expected minimum of a sample of n values drawn
// without replacement from sorted, which must be in ascending order:
//
//	E[min] = Σ_i v_(i) · C(N−i, n−1) / C(N, n),  i = 1..N,
//
// the weight being the probability that the i-th smallest value is the
// least one drawn. n is clamped to [1, N]; an empty list gives 0.
func ExpectedMin(sorted []float64, n int) float64 {
	total := len(sorted)
	if total == 0 {
		return 0
	}
	n = min(max(n, 1), total)
	// w_1 = n/N and w_(i+1) = w_i · (N−i−n+1)/(N−i): a running product of
	// factors below 1, which cannot overflow as the binomials would.
	w := float64(n) / float64(total)
	sum := 0.0
	for i := 1; i <= total-n+1; i++ {
		sum += sorted[i-1] * w
		w *= float64(total-i-n+1) / float64(total-i)
	}
	return sum
}

// A Trajectory is the best objective of a run after each evaluation:
// element i is the best after i+1 evaluations, 0 while none was OK.
type Trajectory []float64

// BestAt is the best objective after n evaluations; a run that ended sooner
// (its space exhausted) keeps its final best.
func (t Trajectory) BestAt(n int) float64 {
	if n <= 0 || len(t) == 0 {
		return 0
	}
	return t[min(n, len(t))-1]
}

// Reach returns the number of evaluations after which the best objective
// was at most target, and false if the run never got there.
func (t Trajectory) Reach(target float64) (int, bool) {
	for i, v := range t {
		if v > 0 && v <= target {
			return i + 1, true
		}
	}
	return 0, false
}

// RunTrajectory runs a search of sp with opts against ev, with a fresh
// in-memory store, until opts.MaxEvals evaluations ran (or the space is
// exhausted), and returns its trajectory. Results are read in proposal
// order, so the trajectory does not depend on opts.Parallel.
func RunTrajectory(ctx context.Context, sp *space.Space, ev Evaluator, opts Options) (Trajectory, error) {
	return runTrajectory(ctx, sp, nil, ev, opts)
}

// runTrajectory is RunTrajectory with the index of sp's valid configs, or
// nil to build one when the search needs it.
func runTrajectory(ctx context.Context, sp *space.Space, valid func() *validIndex, ev Evaluator, opts Options) (Trajectory, error) {
	if opts.MaxEvals <= 0 {
		return nil, errors.New("evo: a trajectory needs a budget of evaluations")
	}
	traj := make(Trajectory, 0, opts.MaxEvals)
	best := 0.0
	opts.OnGeneration = func(g Generation) {
		for _, r := range g.Results {
			if r.OK() && (best == 0 || r.Objective < best) {
				best = r.Objective
			}
			traj = append(traj, best)
		}
	}
	opts.OnProgress = nil
	s, err := New(sp, ev, &memoryStore{results: map[string]space.Result{}}, opts)
	if err != nil {
		return nil, err
	}
	s.sharedValid = valid
	sum, err := s.Run(ctx)
	if err != nil {
		return nil, err
	}
	if sum.Stop == StopCancelled {
		return nil, ctx.Err()
	}
	return traj, nil
}

// A memoryStore keeps a comparison run's results in memory and discards its
// states: nothing is resumed.
type memoryStore struct {
	mu      sync.Mutex
	results map[string]space.Result
}

func (m *memoryStore) Lookup(key string) (space.Result, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.results[key]
	return r, ok
}

func (m *memoryStore) Record(r space.Result) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.results[r.Key] = r
	return nil
}

func (m *memoryStore) SaveState([]byte) error { return nil }

// CompareOptions say what CompareStrategies runs.
type CompareOptions struct {
	// Base is the options of every run; CompareStrategies sets the strategy, the
	// seed and MaxEvals (the largest budget) of each, and drops the
	// callbacks.
	Base       Options
	Strategies []string
	// Seeds is how many runs each strategy gets, with seeds
	// FirstSeed..FirstSeed+Seeds−1. The exhaustive strategy runs once: its
	// order is fixed.
	Seeds int
	// FirstSeed is the seed of the first run; 0 means 1.
	FirstSeed uint64
	// Budgets are the evaluation counts at which runs are compared, read
	// off one trajectory per run; they are sorted by CompareStrategies.
	Budgets []int
	// Tolerance is how close to the optimum counts as reached, e.g. 0.02.
	Tolerance float64
	// Workers is how many runs go at once (at least 1).
	Workers int
}

// A StrategyComparison is the outcome of CompareStrategies.
type StrategyComparison struct {
	Landscape Landscape `json:"landscape"`
	Budgets   []int     `json:"budgets"`
	Tolerance float64   `json:"tolerance"`
	// RandomFraction is the exact expected fraction of random search at
	// each budget.
	RandomFraction []float64 `json:"random_fraction"`
	// Within is the number of configs within Tolerance of the optimum;
	// RandomReachMedian and RandomReachMean are the exact evaluations
	// random search needs to draw one.
	Within            int     `json:"within"`
	RandomReachMedian int     `json:"random_reach_median"`
	RandomReachMean   float64 `json:"random_reach_mean"`
	// RandomReached is the exact probability that random search gets
	// there within the largest budget.
	RandomReached float64         `json:"random_reached"`
	Strategies    []StrategyStats `json:"strategies"`
}

// StrategyStats is how one strategy did over its runs.
type StrategyStats struct {
	Strategy string        `json:"strategy"`
	Runs     int           `json:"runs"`
	Budgets  []BudgetStats `json:"budgets"` // in the order of StrategyComparison.Budgets
	// ReachMedian is the median over runs of the evaluations needed to
	// come within Tolerance of the optimum, runs that never did counting
	// as infinitely many; -1 when that median is not reached. With an even
	// number of runs it is the upper of the two middle values.
	ReachMedian int `json:"reach_median"`
	// Reached is the fraction of runs that came within Tolerance within
	// the largest budget.
	Reached float64 `json:"reached"`
}

// BudgetStats is a strategy's quality after Budget evaluations.
type BudgetStats struct {
	Budget         int     `json:"budget"`
	MeanFraction   float64 `json:"mean_fraction"`
	MedianFraction float64 `json:"median_fraction"`
	// SDFraction is the standard deviation of the fraction over the runs:
	// the spread of one run, not of the mean.
	SDFraction float64 `json:"sd_fraction"`
	// Score is (mean − random)/(1 − random) in fractions of the optimum,
	// random being the exact expectation: 0 is as good as random search,
	// 1 always finds the optimum. NaN when random search is sure to find
	// the optimum.
	Score float64 `json:"score"`
}

// CompareStrategies runs each strategy with each seed on sp against ev, whose every
// config's result is summarised by land, once to the largest budget, and
// measures them at each budget against the optimum and against random
// search.
func CompareStrategies(ctx context.Context, sp *space.Space, ev Evaluator, land Landscape, opts CompareOptions) (StrategyComparison, error) {
	budgets := slices.Clone(opts.Budgets)
	slices.Sort(budgets)
	budgets = slices.Compact(budgets)
	switch {
	case len(budgets) == 0 || budgets[0] < 1:
		return StrategyComparison{}, fmt.Errorf("compare: budgets must be positive, got %v", opts.Budgets)
	case opts.Seeds < 1:
		return StrategyComparison{}, fmt.Errorf("compare: seeds must be at least 1, got %d", opts.Seeds)
	case len(opts.Strategies) == 0:
		return StrategyComparison{}, errors.New("compare: no strategy to run")
	case !(opts.Tolerance >= 0):
		return StrategyComparison{}, fmt.Errorf("compare: tolerance must not be negative, got %v", opts.Tolerance)
	}
	for _, s := range opts.Strategies {
		if !slices.Contains(Strategies(), s) {
			return StrategyComparison{}, fmt.Errorf("compare: unknown strategy %q", s)
		}
	}

	first := max(opts.FirstSeed, 1)
	type job struct{ strategy, seed int }
	var jobs []job
	runs := make([][]Trajectory, len(opts.Strategies))
	for i, s := range opts.Strategies {
		n := opts.Seeds
		if s == StrategyExhaustive {
			n = 1
		}
		runs[i] = make([]Trajectory, n)
		for seed := range n {
			jobs = append(jobs, job{i, seed})
		}
	}
	// The runs share one index of the valid configs, built by the first
	// that needs it: on a large space, building it was a tenth of a run.
	valid := sync.OnceValue(func() *validIndex { return newValidIndex(sp) })
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(opts.Workers, 1))
	for _, j := range jobs {
		g.Go(func() error {
			o := opts.Base
			o.Strategy, o.Seed, o.MaxEvals = opts.Strategies[j.strategy], first+uint64(j.seed), budgets[len(budgets)-1]
			o.MaxTime, o.OnGeneration, o.OnProgress = 0, nil, nil
			o.Clock = NewVirtualClock(o.Parallel)
			traj, err := runTrajectory(gctx, sp, valid, ev, o)
			if err != nil {
				return fmt.Errorf("compare: %s seed %d: %w", o.Strategy, o.Seed, err)
			}
			runs[j.strategy][j.seed] = traj
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return StrategyComparison{}, err
	}

	c := StrategyComparison{Landscape: land, Budgets: budgets, Tolerance: opts.Tolerance, Within: land.Within(opts.Tolerance)}
	c.RandomReachMedian, c.RandomReachMean = land.RandomReach(opts.Tolerance)
	c.RandomReached = land.RandomReachedBy(opts.Tolerance, budgets[len(budgets)-1])
	for _, b := range budgets {
		c.RandomFraction = append(c.RandomFraction, land.RandomFraction(b))
	}
	target := land.Optimum * (1 + opts.Tolerance)
	for i, s := range opts.Strategies {
		st := StrategyStats{Strategy: s, Runs: len(runs[i])}
		for bi, b := range budgets {
			fr := make([]float64, len(runs[i]))
			for r, traj := range runs[i] {
				fr[r] = land.Fraction(traj.BestAt(b))
			}
			mean := meanOf(fr)
			rnd := c.RandomFraction[bi]
			st.Budgets = append(st.Budgets, BudgetStats{
				Budget: b, MeanFraction: mean, MedianFraction: medianOf(fr), SDFraction: sdOf(fr, mean),
				Score: (mean - rnd) / (1 - rnd),
			})
		}
		reach := make([]int, len(runs[i]))
		got := 0
		for r, traj := range runs[i] {
			if n, ok := traj.Reach(target); ok {
				reach[r] = n
				got++
			} else {
				reach[r] = math.MaxInt
			}
		}
		slices.Sort(reach)
		st.ReachMedian = reach[len(reach)/2]
		if st.ReachMedian == math.MaxInt {
			st.ReachMedian = -1
		}
		st.Reached = float64(got) / float64(len(reach))
		c.Strategies = append(c.Strategies, st)
	}
	return c, nil
}

// A GoalCheck is the verdict of StrategyComparison.Goal.
type GoalCheck struct {
	Pass bool `json:"pass"`
	// ReachMedian is the strategy's median evaluations to come within
	// tolerance (-1: not reached), Share that as a part of the space.
	ReachMedian int     `json:"reach_median"`
	Share       float64 `json:"share"`
	// Speedup is random search's exact median over the strategy's.
	Speedup float64 `json:"speedup"`
	Why     string  `json:"why"`
}

// Goal checks that strategy came within the tolerance of the optimum in at
// most maxShare of the space's configs (median over runs) and in at least
// minSpeedup times fewer evaluations than random search needs (its exact
// median).
func (c StrategyComparison) Goal(strategy string, maxShare, minSpeedup float64) GoalCheck {
	i := slices.IndexFunc(c.Strategies, func(s StrategyStats) bool { return s.Strategy == strategy })
	if i < 0 {
		return GoalCheck{ReachMedian: -1, Why: strategy + " was not run"}
	}
	st := c.Strategies[i]
	g := GoalCheck{ReachMedian: st.ReachMedian}
	if st.ReachMedian < 0 {
		g.Why = fmt.Sprintf("%s came within %g%% of the optimum in only %.0f%% of runs within %d evaluations",
			strategy, 100*c.Tolerance, 100*st.Reached, c.Budgets[len(c.Budgets)-1])
		return g
	}
	g.Share = float64(st.ReachMedian) / float64(c.Landscape.Configs)
	g.Speedup = float64(c.RandomReachMedian) / float64(st.ReachMedian)
	g.Pass = g.Share <= maxShare && g.Speedup >= minSpeedup
	g.Why = fmt.Sprintf("%s median %d evaluations = %.2f%% of %d configs (goal ≤ %g%%), %.1fx fewer than random's %d (goal ≥ %gx)",
		strategy, st.ReachMedian, 100*g.Share, c.Landscape.Configs, 100*maxShare, g.Speedup, c.RandomReachMedian, minSpeedup)
	return g
}

func meanOf(xs []float64) float64 {
	sum := 0.0
	for _, x := range xs {
		sum += x
	}
	return sum / float64(len(xs))
}

// sdOf is the sample standard deviation of xs about their mean; 0 for
// fewer than two values.
func sdOf(xs []float64, mean float64) float64 {
	if len(xs) < 2 {
		return 0
	}
	ss := 0.0
	for _, x := range xs {
		ss += (x - mean) * (x - mean)
	}
	return math.Sqrt(ss / float64(len(xs)-1))
}

func medianOf(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
