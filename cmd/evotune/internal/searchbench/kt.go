// Package searchbench measures search strategies on a recorded space
// without a GPU and renders what bench-search reports: the landscape of a
// replay file or a Kernel Tuner cache, and the comparison of evo with
// random search and with the strategies a published study measured on the
// same Kernel Tuner spaces.
package searchbench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"evotune/cmd/evotune/internal/textfmt"
	"evotune/evo"
	"evotune/runner"
	"evotune/space"
)

// Landscape is the landscape of a recorded space: every config's result,
// as ev answers it.
func Landscape(ctx context.Context, ev evo.Evaluator, sp *space.Space) (evo.Landscape, error) {
	var results []space.Result
	sp.Enumerate(func(cfg space.Config) bool {
		results = append(results, ev.Evaluate(ctx, cfg))
		return true
	})
	return evo.NewLandscape(results)
}

// KTBudgets are the budgets of the published study of tuning strategies on
// Kernel Tuner spaces; bench-search --kt-cache compares at them unless
// --budgets says otherwise.
var KTBudgets = []int{25, 50, 100, 200, 400, 800, 1600}

// A KTComparison is what bench-search adds for a Kernel Tuner cache: both
// exact random baselines and, with --kt-published, the published
// strategies' figures beside evo's.
type KTComparison struct {
	// Protocol is "published" (the full product, an absent config costing
	// an evaluation) or "valid-only" (--kt-valid-only).
	Protocol string `json:"protocol"`
	Product  int    `json:"product"` // configs in the product of the tune parameters
	Timed    int    `json:"timed"`   // configs with a time
	// RandomProduct and RandomValid are the exact expected fractions of
	// the optimum that random search without replacement reaches at each
	// budget, over the full product and over the timed configs alone.
	RandomProduct []float64  `json:"random_product"`
	RandomValid   []float64  `json:"random_valid"`
	Published     *Published `json:"published,omitempty"`
}

// A Published holds a study's published figures for one space:
// each strategy's mean fraction of the optimum at each budget.
type Published struct {
	Space  string `json:"space"`
	Source string `json:"source,omitempty"`
	// Strategies are sorted by name; Fractions parallel the comparison's
	// budgets, nil where the study has no figure.
	Strategies []PublishedStrategy `json:"strategies"`
	// Verdicts are evo's against the best published strategy, at each
	// budget with a published figure.
	Verdicts []Verdict `json:"verdicts"`
}

type PublishedStrategy struct {
	Name      string     `json:"name"`
	Fractions []*float64 `json:"fractions"`
}

// A Verdict says whether evo's mean fraction at a budget reaches the
// best that any published strategy reached there.
type Verdict struct {
	Budget   int     `json:"budget"`
	Evo      float64 `json:"evo"`
	Best     float64 `json:"best_published"`
	BestName string  `json:"best_published_strategy"`
	Pass     bool    `json:"pass"`
}

// PublishedFile is the format of --kt-published: per space, per strategy,
// per budget, the mean fraction of the optimum.
type PublishedFile struct {
	Source string                                   `json:"source"`
	Spaces map[string]map[string]map[string]float64 `json:"spaces"`
}

// KTSpaceName is the name a published file gives the space of a cache
// file: its base name without .json or .json.gz.
func KTSpaceName(path string) string {
	name := filepath.Base(path)
	name = strings.TrimSuffix(name, ".gz")
	return strings.TrimSuffix(name, ".json")
}

// NewKTComparison computes both random baselines of the Kernel Tuner cache
// kt at the budgets of cmp, whose landscape is that of the space searched
// (kt's full product, or with validOnly its timed configs), and, when
// published is not "", reads the published figures for the space of the
// cache file at path and sets evo's verdicts from cmp.
func NewKTComparison(ctx context.Context, kt *runner.KTCache, path string, validOnly bool, cmp evo.StrategyComparison, published string) (*KTComparison, error) {
	full, err := kt.Space(nil)
	if err != nil {
		return nil, err
	}
	raw, _ := full.Size()
	k := &KTComparison{Protocol: "published", Product: int(raw), Timed: kt.Timed()}
	product := cmp.Landscape
	if validOnly {
		k.Protocol = "valid-only"
		if product, err = Landscape(ctx, kt, full); err != nil {
			return nil, err
		}
	}
	var timed []space.Result
	for _, c := range kt.Valid() {
		timed = append(timed, kt.Evaluate(ctx, c))
	}
	valid, err := evo.NewLandscape(timed)
	if err != nil {
		return nil, err
	}
	for _, b := range cmp.Budgets {
		k.RandomProduct = append(k.RandomProduct, product.RandomFraction(b))
		k.RandomValid = append(k.RandomValid, valid.RandomFraction(b))
	}
	if published != "" {
		if k.Published, err = readPublished(published, KTSpaceName(path), cmp); err != nil {
			return nil, err
		}
	}
	return k, nil
}

// loadPublishedFile reads a file of published figures (--kt-published).
func loadPublishedFile(path string) (PublishedFile, error) {
	var f PublishedFile
	data, err := os.ReadFile(path)
	if err != nil {
		return f, fmt.Errorf("--kt-published: %w", err)
	}
	if err := json.Unmarshal(data, &f); err != nil {
		return f, fmt.Errorf("--kt-published %s: %w", path, err)
	}
	return f, nil
}

// readPublished reads the figures for space from a published file and
// judges evo's means in cmp against the best of them at each budget.
func readPublished(path, spaceName string, cmp evo.StrategyComparison) (*Published, error) {
	f, err := loadPublishedFile(path)
	if err != nil {
		return nil, err
	}
	figures, ok := f.Spaces[spaceName]
	if !ok {
		names := slices.Sorted(maps.Keys(f.Spaces))
		return nil, fmt.Errorf("--kt-published %s: no figures for space %s (it has %s)", path, spaceName, strings.Join(names, ", "))
	}
	p := &Published{Space: spaceName, Source: f.Source}
	for _, name := range slices.Sorted(maps.Keys(figures)) {
		st := PublishedStrategy{Name: name}
		for _, b := range cmp.Budgets {
			var v *float64
			if x, ok := figures[name][strconv.Itoa(b)]; ok {
				v = &x
			}
			st.Fractions = append(st.Fractions, v)
		}
		p.Strategies = append(p.Strategies, st)
	}
	evoAt := -1
	for i, st := range cmp.Strategies {
		if st.Strategy == evo.StrategyEvo {
			evoAt = i
		}
	}
	for bi, b := range cmp.Budgets {
		v := Verdict{Budget: b, Best: -1}
		for _, st := range p.Strategies {
			if x := st.Fractions[bi]; x != nil && *x > v.Best {
				v.Best, v.BestName = *x, st.Name
			}
		}
		if v.Best < 0 || evoAt < 0 {
			continue
		}
		v.Evo = cmp.Strategies[evoAt].Budgets[bi].MeanFraction
		v.Pass = v.Evo >= v.Best
		p.Verdicts = append(p.Verdicts, v)
	}
	return p, nil
}

// write renders the comparison after bench-search's own tables: one row
// per strategy (evo and random as measured here, both exact random
// baselines, each published strategy), one column per budget, then a
// PASS/FAIL line per budget.
func (k *KTComparison) Write(w io.Writer, format string, cmp evo.StrategyComparison) error {
	title := "Kernel Tuner space: mean fraction of the optimum at each budget"
	if k.Published != nil {
		title += ", beside the published strategies (" + k.Published.Space + ")"
	}
	if format == "markdown" {
		fmt.Fprintf(w, "**%s**\n\n", title)
	} else {
		fmt.Fprintln(w, title)
	}
	header := []string{"strategy"}
	for _, b := range cmp.Budgets {
		header = append(header, strconv.Itoa(b))
	}
	var rows [][]string
	for _, st := range cmp.Strategies {
		row := []string{"evotune " + st.Strategy + " (" + k.Protocol + ", ± SD)"}
		for _, bs := range st.Budgets {
			row = append(row, textfmt.Fixed(bs.MeanFraction, 3)+" ± "+textfmt.Fixed(bs.SDFraction, 3))
		}
		rows = append(rows, row)
	}
	exact := func(name string, xs []float64) {
		row := []string{name}
		for _, x := range xs {
			row = append(row, textfmt.Fixed(x, 3))
		}
		rows = append(rows, row)
	}
	exact(fmt.Sprintf("random, exact (published: all %d)", k.Product), k.RandomProduct)
	exact(fmt.Sprintf("random, exact (valid only: %d)", k.Timed), k.RandomValid)
	if k.Published != nil {
		for _, st := range k.Published.Strategies {
			row := []string{"published: " + st.Name}
			for _, x := range st.Fractions {
				if x == nil {
					row = append(row, "-")
				} else {
					row = append(row, textfmt.Fixed(*x, 3))
				}
			}
			rows = append(rows, row)
		}
	}
	if err := textfmt.Table(w, format, header, rows); err != nil {
		return err
	}
	if k.Published == nil {
		return nil
	}
	fmt.Fprintln(w)
	for _, v := range k.Published.Verdicts {
		verdict, cmpSign := "FAIL", "<"
		if v.Pass {
			verdict, cmpSign = "PASS", "≥"
		}
		line := fmt.Sprintf("%s at %d: evo %s %s %s, the best published (%s)", verdict, v.Budget, textfmt.Fixed(v.Evo, 4), cmpSign, textfmt.Fixed(v.Best, 4), v.BestName)
		if format == "markdown" {
			line = "**" + verdict + "**" + strings.TrimPrefix(line, verdict) + "  "
		}
		fmt.Fprintln(w, line)
	}
	return nil
}
