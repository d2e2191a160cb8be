package elites_test

import (
	"fmt"
	"log"
	"os"
	"path/filepath"

	"evotune/elites"
	"evotune/space"
)

func Example() {
	tmp, err := os.MkdirTemp("", "archive")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	dir := filepath.Join(tmp, "l4-night")

	meta := elites.NewMeta(space.Problem{
		Family: "sdpa",
		Shapes: []space.Shape{{B: 1, H: 8, S: 512, D: 64}},
		Dtype:  "fp16",
	}, space.Env{GPU: "NVIDIA L4", Arch: "sm_89", NVCC: "13.0.88", SourceHash: "c0ffee"})
	meta.Strategy, meta.Seed = "evo", 1

	a, err := elites.Create(dir, meta)
	if err != nil {
		log.Fatal(err)
	}
	for _, r := range []space.Result{
		{Key: "block_m=64", Status: space.StatusOK, Gate: space.GateTimed, Objective: 11.2},
		{Key: "block_m=128", Status: space.StatusPtxasReject, Gate: space.GatePtxas, Reason: "spills"},
		{Key: "block_m=32", Status: space.StatusOK, Gate: space.GateTimed, Objective: 9.8},
	} {
		if err := a.Record(r); err != nil {
			log.Fatal(err)
		}
	}
	if err := a.SaveState([]byte(`{"generation":1}`)); err != nil {
		log.Fatal(err)
	}
	a.Close()

	// The next night resumes the same search.
	a, err = elites.Open(dir, meta, elites.OpenOptions{})
	if err != nil {
		log.Fatal(err)
	}
	defer a.Close()
	state, _ := a.State()
	fmt.Printf("state %s\n", state)
	for _, r := range a.Top(2) {
		fmt.Printf("seq %d %s %.1f us\n", r.Seq, r.Key, r.Objective)
	}

	// Another dtype is another archive.
	meta.Problem.Dtype = "bf16"
	_, err = elites.Open(dir, meta, elites.OpenOptions{})
	fmt.Println(err != nil)
	// Output:
	// state {"generation":1}
	// seq 3 block_m=32 9.8 us
	// seq 1 block_m=64 11.2 us
	// true
}
