package evo

import (
	"sync"
	"time"

	"evotune/space"
)

// A Clock tells the search the time, for the wall-time budget, elapsed time
// and ETA. Charge is told the cost of every evaluation that counts against
// the budget, once, as it completes; a clock that measures real time ignores
// it. Implementations must be safe for concurrent use.
type Clock interface {
	Now() time.Time
	Charge(cost space.Cost)
}

// WallClock is real time.
type WallClock struct{}

// Now returns time.Now().
func (WallClock) Now() time.Time { return time.Now() }

// Charge does nothing: real time passes by itself.
func (WallClock) Charge(space.Cost) {}

// A VirtualClock advances only when charged: each evaluation moves it by its
// Cost.Total() divided by the number of evaluations that run at once. Replaying
// recorded results through it makes a wall-time budget behave as it did on
// the GPU. Time is kept in whole nanoseconds so that the sum does not depend
// on the order in which concurrent results arrive.
type VirtualClock struct {
	mu       sync.Mutex
	now      time.Time
	parallel int
}

// NewVirtualClock returns a virtual clock that starts at the Unix epoch and
// divides each cost by parallel (values below 1 count as 1).
func NewVirtualClock(parallel int) *VirtualClock {
	if parallel < 1 {
		parallel = 1
	}
	return &VirtualClock{now: time.Unix(0, 0).UTC(), parallel: parallel}
}

// Now returns the virtual time.
func (c *VirtualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Charge advances the virtual time by cost.Total()/parallel seconds.
func (c *VirtualClock) Charge(cost space.Cost) {
	d := time.Duration(cost.Total() / float64(c.parallel) * float64(time.Second))
	if d < 0 {
		d = 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}
