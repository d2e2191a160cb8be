package evo

import (
	"context"
	"fmt"

	"evotune/space"
)

// A search of a small space with the exhaustive strategy, against an
// evaluator that knows the objective in closed form and an in-memory store.
func ExampleSearch() {
	sp := gridSpace(1, 1, 3) // knobs m0 (macro) and u0 (micro), values 0..2
	ev := &fakeEvaluator{objective: func(c space.Config) float64 {
		return 1 + float64(c.Int("m0")) + 2*float64(c.Int("u0"))
	}}
	opts := DefaultOptions()
	opts.Strategy, opts.Population, opts.Elites = StrategyExhaustive, 4, 3
	s, err := New(sp, ev, newMemStore(), opts)
	if err != nil {
		fmt.Println(err)
		return
	}
	sum, err := s.Run(context.Background())
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("stopped: %s after %d evaluations in %d generations\n", sum.Stop, sum.Evals, sum.Generations)
	for _, r := range sum.Elites {
		fmt.Printf("%-9s %.0f\n", r.Key, r.Objective)
	}
	// Output:
	// stopped: exhausted after 9 evaluations in 3 generations
	// m0=0,u0=0 1
	// m0=1,u0=0 2
	// m0=0,u0=1 3
}
