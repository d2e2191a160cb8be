package evo

import (
	"context"

	"evotune/space"
)

// An Evaluator turns a config into a Result. It must be safe for concurrent
// use: the search keeps several candidates in flight at once. It never
// returns an error for a bad candidate: the Result's Status and Gate say
// where and why the candidate stopped. ctx cancellation makes it return
// promptly with whatever status it had reached (the search discards such
// results and does not record them).
type Evaluator interface {
	Evaluate(ctx context.Context, c space.Config) space.Result
}

// A Store is where the search keeps what it has learned: the elite archive.
// Lookup answers for configs already evaluated (they are never evaluated
// again), Record appends a new result durably, SaveState replaces the
// search state durably. The search's state is opaque bytes to the store.
type Store interface {
	Lookup(key string) (space.Result, bool)
	Record(r space.Result) error
	SaveState(state []byte) error
}
