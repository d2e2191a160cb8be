package evo

import (
	"context"
	"fmt"

	"evotune/space"
)

// A Verdict is the outcome of re-measuring a challenger beside the elite it
// would displace.
type Verdict struct {
	Challenger string `json:"challenger"` // result keys
	Incumbent  string `json:"incumbent"`
	// Displace says the challenger is faster beyond the noise; when it is
	// false the incumbent keeps its place.
	Displace bool `json:"displace"`
	// ChallengerUS and IncumbentUS are the re-measured objectives; PValue
	// is the test's p-value. They are evidence for people, not used by the
	// search.
	ChallengerUS float64 `json:"challenger_us,omitempty"`
	IncumbentUS  float64 `json:"incumbent_us,omitempty"`
	PValue       float64 `json:"p_value,omitempty"`
	Reason       string  `json:"reason,omitempty"`
}

// A Confirmer re-measures a challenger and an incumbent (both OK results)
// and says whether the challenger really is faster. Recorded objectives
// are one measurement each; two configs within the noise of each other
// would otherwise swap places on a lucky sample. An error stops the search
// (a cancelled context stops it cleanly).
type Confirmer interface {
	Confirm(ctx context.Context, challenger, incumbent space.Result) (Verdict, error)
}

// ConfirmerFunc adapts a function to a Confirmer.
type ConfirmerFunc func(ctx context.Context, challenger, incumbent space.Result) (Verdict, error)

// Confirm calls f.
func (f ConfirmerFunc) Confirm(ctx context.Context, challenger, incumbent space.Result) (Verdict, error) {
	return f(ctx, challenger, incumbent)
}

// admit reports whether r, an OK result not among the elites, takes a
// place among them. By recorded objective it must rank within the best
// Elites; with a Confirmer, a challenger that would become the new best is
// confirmed against the best, and one that would push the last elite out
// of a full list against that one. A verdict is kept in the search state,
// so a restored search never asks for the same pair again and decides as
// the saved search did.
func (s *Search) admit(ctx context.Context, r space.Result) (bool, error) {
	k := s.st.Params.Elites
	pos := 0
	for pos < len(s.elites) && compareResults(s.elites[pos], r) < 0 {
		pos++
	}
	if pos >= k {
		return false, nil
	}
	if s.opts.Confirmer == nil {
		return true, nil
	}
	var incumbent *space.Result
	switch {
	case pos == 0 && len(s.elites) > 0:
		incumbent = &s.elites[0]
	case len(s.elites) >= k:
		incumbent = &s.elites[len(s.elites)-1]
	default:
		return true, nil // a free place: nobody is displaced
	}
	v, err := s.verdict(ctx, r, *incumbent)
	if err != nil {
		return false, err
	}
	return v.Displace, nil
}

// verdict returns the recorded verdict for the pair, or asks the Confirmer
// and records its answer.
func (s *Search) verdict(ctx context.Context, challenger, incumbent space.Result) (Verdict, error) {
	for _, v := range s.st.Verdicts {
		if v.Challenger == challenger.Key && v.Incumbent == incumbent.Key {
			return v, nil
		}
	}
	v, err := s.opts.Confirmer.Confirm(ctx, challenger, incumbent)
	if err != nil {
		return Verdict{}, fmt.Errorf("confirming %s against the elite %s: %w", challenger.Key, incumbent.Key, err)
	}
	v.Challenger, v.Incumbent = challenger.Key, incumbent.Key
	s.st.Verdicts = append(s.st.Verdicts, v)
	return v, nil
}

// Verdicts returns the confirmations the search has made, oldest first.
func (s *Search) Verdicts() []Verdict {
	return append([]Verdict(nil), s.st.Verdicts...)
}
