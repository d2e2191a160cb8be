package elites

import (
	"cmp"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"evotune/space"
)

// Meta is an archive's identity: what its results were measured for and
// with, and how the search that made it was started. It is written once, when
// the archive is created.
type Meta struct {
	Problem    space.Problem `json:"problem"`
	SourceHash string        `json:"source_hash"` // hash of the kernel family's source
	GPU        string        `json:"gpu"`         // e.g. "NVIDIA L4"
	Arch       string        `json:"arch"`        // e.g. "sm_89"
	NVCC       string        `json:"nvcc"`        // nvcc release, e.g. "13.0.88"
	Created    time.Time     `json:"created"`
	Version    string        `json:"version"` // the evotune that created the archive
	Strategy   string        `json:"strategy"`
	Seed       uint64        `json:"seed"`
	// Search holds the settings the search was started with, as the search
	// encodes them (strategy, seed, population, screen, seed configs...):
	// with the log, they are all it takes to rebuild a lost search state.
	// Archives made before it was written have none.
	Search json.RawMessage `json:"search,omitempty"`
}

// NewMeta returns the identity of a search for problem p in environment env.
// The caller fills in Version, Strategy and Seed; Create fills in Created when
// it is zero.
func NewMeta(p space.Problem, env space.Env) Meta {
	return Meta{Problem: p, SourceHash: env.SourceHash, GPU: env.GPU, Arch: env.Arch, NVCC: env.NVCC}
}

// A Diff is one identity field on which an archive and a run disagree.
type Diff struct {
	Field   string // e.g. "dtype", "GPU"
	Archive string // the archive's value, rendered for people
	Run     string // this run's value
}

// A MismatchError says that an archive was made for another problem or
// environment than the one a run asks for, naming every field that differs.
type MismatchError struct {
	Dir   string
	Diffs []Diff
	Hint  string // what to do instead, e.g. "use --seed-from to start a new search from it"
	// Against names, for people, what the archive was compared with and
	// whose values the diffs' Run fields hold: "this run" when empty.
	Against string
}

func (e *MismatchError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "archive %s was made for ", e.Dir)
	for i, d := range e.Diffs {
		if i > 0 {
			b.WriteString("; for ")
		}
		fmt.Fprintf(&b, "%s %s, %s is %s", d.Field, d.Archive, cmp.Or(e.Against, "this run"), d.Run)
	}
	if e.Hint != "" {
		fmt.Fprintf(&b, " (%s)", e.Hint)
	}
	return b.String()
}

// identityDiffs lists the identity fields on which archive and run differ, in
// a fixed order. Created, Version, Strategy and Seed are not identity: a
// search may be resumed by another evotune build or with other settings.
func identityDiffs(archive, run Meta) []Diff {
	var diffs []Diff
	add := func(field, a, r string) {
		if a != r {
			diffs = append(diffs, Diff{Field: field, Archive: orNone(a), Run: orNone(r)})
		}
	}
	add("family", archive.Problem.Family, run.Problem.Family)
	add("kernel source hash", archive.SourceHash, run.SourceHash)
	add("shapes", shapesText(archive.Problem), shapesText(run.Problem))
	if sameShapes(archive.Problem, run.Problem) {
		// Weights are compared only for the same shapes: otherwise the shapes
		// difference already says it all.
		add("weights", weightsText(archive.Problem), weightsText(run.Problem))
	}
	add("dtype", archive.Problem.Dtype, run.Problem.Dtype)
	add("causal", strconv.FormatBool(archive.Problem.Causal), strconv.FormatBool(run.Problem.Causal))
	add("GPU", archive.GPU, run.GPU)
	add("arch", archive.Arch, run.Arch)
	add("nvcc version", archive.NVCC, run.NVCC)
	return diffs
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

func sameShapes(a, b space.Problem) bool {
	return shapesText(a) == shapesText(b)
}

func shapesText(p space.Problem) string {
	parts := make([]string, len(p.Shapes))
	for i, s := range p.Shapes {
		parts[i] = s.String()
	}
	return strings.Join(parts, ",")
}

// weightsText renders the effective weight of every shape, so that no weights
// and all weights 1 read the same.
func weightsText(p space.Problem) string {
	parts := make([]string, len(p.Shapes))
	for i := range p.Shapes {
		parts[i] = strconv.FormatFloat(p.Weight(i), 'g', -1, 64)
	}
	return strings.Join(parts, ",")
}
