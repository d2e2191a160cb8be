// Package evo owns the search: which configs of a space to try, in which
// order, and when to stop. It keeps a population and the top-K elites,
// varies configs by tournament selection, uniform crossover and a two-layer
// mutation whose macro/micro share adapts to where improvements come from,
// and offers two baselines (random sampling without replacement and
// exhaustive enumeration). It never runs processes: candidates go to an
// Evaluator, and everything learned goes to a Store, together with the
// search state that lets a killed run resume exactly.
//
// A run proceeds in generations. Each generation's batch is proposed from
// the random state at its start, saved, evaluated with up to Parallel
// candidates in flight, and absorbed in proposal order, so the outcome
// depends only on the seed and the evaluator's answers, never on timing.
package evo
