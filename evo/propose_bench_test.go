package evo

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"evotune/space"
)

// BenchmarkScreenedChild times one screened proposal of the evo strategy
// over a space of 46,656 configs with a given share already proposed: near
// the end of a space most bred children are seen, and the search falls back
// to a pick among the unseen configs.
func BenchmarkScreenedChild(b *testing.B) {
	sp := gridSpace(3, 3, 6)
	valid := sp.ValidConfigs()
	for _, seenShare := range []float64{0.1, 0.9, 0.999} {
		b.Run(fmt.Sprintf("seen=%v", seenShare), func(b *testing.B) {
			opts := DefaultOptions()
			s := mustNew(b, sp, &fakeEvaluator{objective: landscape(6)}, newMemStore(), opts)
			obj := landscape(6)
			for i, c := range valid {
				if float64(i) >= seenShare*float64(len(valid)) {
					break
				}
				s.seen[c.Hash()] = true
				s.st.Seen = append(s.st.Seen, c.Hash())
				r := space.Result{Key: c.Key(), Config: c, Status: space.StatusOK, Gate: space.GateTimed, Objective: obj(c)}
				if i < opts.Population {
					s.pop = append(s.pop, member{key: r.Key, config: c, objective: r.Objective})
				}
				x := s.feats.active(c, nil)
				s.st.Model.add(x, s.feats.bilinOff, nil, r)
			}
			// The first proposal that falls back to a pick among the unseen
			// configs indexes the space once, a cost of the run, not of
			// each proposal.
			s.screenedChild()
			for b.Loop() {
				if _, ok := s.screenedChild(); !ok {
					b.Fatal("no proposal")
				}
			}
		})
	}
}

// TestPickUnseen checks the unseen index against a scan of the space: the
// k-th unseen config in Enumerate order, for every k, as Seen grows.
func TestPickUnseen(t *testing.T) {
	sp := gridSpace(2, 2, 4, sumBelow(4))
	ix := newValidIndex(sp)
	valid := ix.configs
	u := newUnseenIndex(ix)
	var seen []string
	seenSet := map[string]bool{}
	rng := rand.New(rand.NewPCG(3, 4))
	for len(seen) < len(valid) {
		for range 1 + rng.IntN(5) {
			h := valid[rng.IntN(len(valid))].Hash()
			if !seenSet[h] {
				seenSet[h] = true
				seen = append(seen, h)
			}
		}
		u.sync(seen)
		var want []int
		for i, c := range valid {
			if !seenSet[c.Hash()] {
				want = append(want, i)
			}
		}
		if u.left != len(want) {
			t.Fatalf("%d seen: %d left, want %d", len(seen), u.left, len(want))
		}
		for k, i := range want {
			if got := u.nth(k); got != i {
				t.Fatalf("%d seen: unseen #%d is config %d, want %d", len(seen), k, got, i)
			}
		}
	}
}
