package runner

import (
	"context"
	"slices"
	"strings"
	"testing"

	"evotune/space"
)

func TestReplayConfigs(t *testing.T) {
	rp, err := LoadReplay("testdata/replay/h100-1x8x512x64-fp16.jsonl.gz")
	if err != nil {
		t.Fatal(err)
	}
	cs := rp.Configs()
	if len(cs) != rp.Len() || len(cs) == 0 {
		t.Fatalf("Configs() has %d configs, Len() = %d", len(cs), rp.Len())
	}
	if !slices.IsSortedFunc(cs, func(a, b space.Config) int { return strings.Compare(a.Key(), b.Key()) }) {
		t.Fatal("Configs() is not in key order")
	}
	for _, c := range cs[:50] {
		if r := rp.Evaluate(context.Background(), c); r.Gate == space.GateConstraint {
			t.Fatalf("recorded config %s evaluates as not recorded: %s", c.Key(), r.Reason)
		}
	}
	key := cs[0].Key()
	for name := range cs[0] {
		cs[0][name] = "changed" // the copy is the caller's
	}
	if again := rp.Configs(); again[0].Key() != key {
		t.Fatalf("changing a returned config changed the replay: %s", again[0].Key())
	}
}
