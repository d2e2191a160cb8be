// Command ktsubspace writes subspaces of a Kernel Tuner cache file: the
// same file with one tune parameter fixed at one value, its tune_params
// holding only that value and its cache only the entries that have it.
// Every other field, of the file and of each entry, is kept as it is, and
// entries keep their keys, so evotune (and Kernel Tuner) read a subspace as
// they read the file. A subspace is a space of the same kind with an
// optimum of its own, which is what evo's defaults can be checked on when
// they were chosen on the whole file.
//
// One subspace:
//
//	go run ./runner/internal/ktsubspace -in FILE.json.gz -fix KNOB=VALUE -out SUB.json.gz
//
// Every subspace of the file, one per value of every tune parameter with
// two or more values, that holds at least -min-valid timed configs and at
// least -min-product configs in its full product, and whose optimum is not
// the file's (the subspace of the optimum's own value would repeat the
// file's search); with -largest, for each parameter only the one with the
// most timed configs:
//
//	go run ./runner/internal/ktsubspace -in FILE.json.gz -split DIR [-min-valid N] [-min-product N] [-largest]
//
// The file without the value that holds its optimum, for each tune
// parameter of three or more values (spaces nearly as large as the file,
// each with an optimum of its own, for budgets at which a one-value
// subspace is largely swept):
//
//	go run ./runner/internal/ktsubspace -in FILE.json.gz -drop DIR
//
// The split mode names its files FILE-KNOB-VALUE.json.gz, the drop mode
// FILE-without-KNOB-VALUE.json.gz; both print a table of what they wrote. Each file written is read back through runner's Kernel
// Tuner reader and compared with the configs of the whole file that have
// the value, so a subspace that evotune would read differently is an
// error, not a silent difference.
package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"evotune/runner"
	"evotune/space"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "ktsubspace:", err)
		os.Exit(1)
	}
}

// options are the command's flags.
type options struct {
	in, fix, out string
	split        string
	drop         string
	minValid     int
	minProduct   uint64
	largest      bool
}

func run(args []string, stdout, stderr io.Writer) error {
	var opt options
	flags := flag.NewFlagSet("ktsubspace", flag.ContinueOnError)
	flags.SetOutput(stderr)
	flags.StringVar(&opt.in, "in", "", "Kernel Tuner cache `file` to take the subspace of (JSON, .gz: gzip-compressed)")
	flags.StringVar(&opt.fix, "fix", "", "the tune parameter to fix and its value, as `KNOB=VALUE`")
	flags.StringVar(&opt.out, "out", "", "subspace `file` to write (.gz: gzip-compressed)")
	flags.StringVar(&opt.split, "split", "", "write every subspace that qualifies into `dir` instead of one")
	flags.StringVar(&opt.drop, "drop", "", "write into `dir`, for each tune parameter of three or more values, the file without the value that holds its optimum")
	flags.IntVar(&opt.minValid, "min-valid", 100, "with -split: the fewest timed configs a subspace may hold")
	flags.Uint64Var(&opt.minProduct, "min-product", 0, "with -split: the fewest configs a subspace's full product may hold")
	flags.BoolVar(&opt.largest, "largest", false, "with -split: for each tune parameter, only the qualifying subspace with the most timed configs")
	if err := flags.Parse(args); err != nil {
		return err
	}
	if flags.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q: give the file with -in", flags.Arg(0))
	}
	if opt.in == "" {
		return errors.New("-in is required: the Kernel Tuner cache file to take subspaces of")
	}
	if opt.drop != "" {
		if opt.split != "" || opt.fix != "" || opt.out != "" {
			return errors.New("-drop DIR writes its own files: give it without -fix, -out or -split")
		}
		f, err := readCacheFile(opt.in)
		if err != nil {
			return err
		}
		return drop(f, opt.drop, stdout)
	}
	if (opt.split == "") == (opt.fix == "") {
		return errors.New("give either -fix KNOB=VALUE with -out FILE, or -split DIR")
	}
	if opt.minValid < 1 {
		return errors.New("-min-valid must be at least 1")
	}
	f, err := readCacheFile(opt.in)
	if err != nil {
		return err
	}
	if opt.split != "" {
		if opt.out != "" {
			return errors.New("-out names one subspace's file: -split writes one per subspace into its directory")
		}
		return split(f, opt, stdout)
	}
	if opt.out == "" {
		return errors.New("-fix needs -out FILE: the subspace file to write")
	}
	knob, value, ok := strings.Cut(opt.fix, "=")
	if !ok {
		return fmt.Errorf("-fix %q: want KNOB=VALUE", opt.fix)
	}
	sub, err := f.subspace(knob, value)
	if err != nil {
		return err
	}
	st, err := sub.write(opt.out, f, knob, value)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s: %s=%s of %s: %d configs in the product, %d timed, optimum %.1f µs (%.3f of the file's), %d within 2%% of it\n",
		opt.out, knob, value, filepath.Base(opt.in), st.product, st.timed, st.optimum, f.optimum/st.optimum, st.within)
	return nil
}

// A cacheFile is a Kernel Tuner cache file as written, its fields kept raw
// so that a subspace keeps every one of them, and the same file as evotune
// reads it.
type cacheFile struct {
	path    string
	top     map[string]json.RawMessage
	keys    []string
	params  map[string][]json.RawMessage
	entries map[string]json.RawMessage
	configs map[string]space.Config // by entry key, as runner reads each entry
	full    *runner.KTCache
	valid   []space.Config // full.Valid(), which sorts: once per file
	optimum float64        // µs, the file's best timed config
	best    space.Config
}

func readCacheFile(path string) (*cacheFile, error) {
	data, err := readMaybeGzip(path)
	if err != nil {
		return nil, err
	}
	full, err := runner.ReadKTCache(bytes.NewReader(data), path)
	if err != nil {
		return nil, err
	}
	f := &cacheFile{path: path, full: full}
	if err := json.Unmarshal(data, &f.top); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	for field, into := range map[string]any{"tune_params_keys": &f.keys, "tune_params": &f.params, "cache": &f.entries} {
		if err := json.Unmarshal(f.top[field], into); err != nil {
			return nil, fmt.Errorf("%s: reading %s: %w", path, field, err)
		}
	}
	f.configs = make(map[string]space.Config, len(f.entries))
	for key, raw := range f.entries {
		var entry map[string]json.RawMessage
		if err := json.Unmarshal(raw, &entry); err != nil {
			return nil, fmt.Errorf("%s: cache entry %q: %w", path, key, err)
		}
		if f.configs[key], err = runner.KTConfig(f.keys, key, entry); err != nil {
			return nil, fmt.Errorf("%s: cache entry %q: %w", path, key, err)
		}
	}
	f.valid = full.Valid()
	f.best, f.optimum = best(full, f.valid)
	return f, nil
}

// readMaybeGzip reads a file whole, decompressing it when its name ends in .gz.
func readMaybeGzip(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil || !strings.HasSuffix(path, ".gz") {
		return data, err
	}
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	defer zr.Close()
	if data, err = io.ReadAll(zr); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return data, nil
}

// best returns the best of a cache's timed configs, valid, and its time in µs.
func best(k *runner.KTCache, valid []space.Config) (space.Config, float64) {
	var c space.Config
	opt := 0.0
	for _, v := range valid {
		r := k.Evaluate(context.Background(), v)
		if c == nil || r.Objective < opt {
			c, opt = v, r.Objective
		}
	}
	return c, opt
}

// subspace returns the file with knob fixed at value: its tune_params list
// only that value, and its cache holds only the entries whose config (read
// as runner reads it) has it. The subspace holds what writing it needs;
// write reads it back as evotune does.
func (f *cacheFile) subspace(knob, value string) (*cacheFile, error) {
	return f.restrict(knob, value, true)
}

// without returns the file with value dropped from knob's values: its
// tune_params list the others, and its cache holds only the entries whose
// config does not have it.
func (f *cacheFile) without(knob, value string) (*cacheFile, error) {
	return f.restrict(knob, value, false)
}

// restrict keeps, of knob's values, value alone (keep) or every other one.
func (f *cacheFile) restrict(knob, value string, keep bool) (*cacheFile, error) {
	raws, ok := f.params[knob]
	if !ok || !slices.Contains(f.keys, knob) {
		return nil, fmt.Errorf("%s: %s is not a tune parameter (%s)", f.path, knob, strings.Join(f.keys, ", "))
	}
	var kept []json.RawMessage
	var values []string
	found := false
	for _, raw := range raws {
		v, err := runner.KTValue(raw)
		if err != nil {
			return nil, fmt.Errorf("%s: tune parameter %s: %w", f.path, knob, err)
		}
		values = append(values, v)
		found = found || v == value
		if (v == value) == keep {
			kept = append(kept, raw)
		}
	}
	if !found {
		return nil, fmt.Errorf("%s: %s has no value %s (its values: %s)", f.path, knob, value, strings.Join(values, ", "))
	}
	if len(kept) == 0 {
		return nil, fmt.Errorf("%s: %s has no value but %s", f.path, knob, value)
	}
	sub := &cacheFile{path: f.path, keys: f.keys, top: maps.Clone(f.top), params: maps.Clone(f.params),
		entries: make(map[string]json.RawMessage), configs: make(map[string]space.Config)}
	sub.params[knob] = kept
	for key, raw := range f.entries {
		if (f.configs[key][knob] == value) == keep {
			sub.entries[key], sub.configs[key] = raw, f.configs[key]
		}
	}
	return sub, nil
}

// stats describes a subspace as evotune reads it.
type stats struct {
	product uint64
	timed   int
	optimum float64 // µs
	within  int     // timed configs within 2% of the optimum
}

// encode renders the file as JSON, gzip-compressed when gz is set.
func (f *cacheFile) encode(gz bool) ([]byte, error) {
	top := make(map[string]any, len(f.top))
	for k, v := range f.top {
		top[k] = v
	}
	top["tune_params"], top["cache"] = f.params, f.entries
	data, err := json.Marshal(top)
	if err != nil || !gz {
		return data, err
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(data); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// write writes the subspace to path, then reads it back through runner's
// reader and checks it against full, the whole file: the same timed
// configs with knob=value, and each with the same time.
func (f *cacheFile) write(path string, full *cacheFile, knob, value string) (stats, error) {
	return f.writeAs(path, full, knob, value, true)
}

// writeAs is write for a subspace (keep: knob fixed at value) or for the
// file without value (keep false).
func (f *cacheFile) writeAs(path string, full *cacheFile, knob, value string, keep bool) (stats, error) {
	data, err := f.encode(strings.HasSuffix(path, ".gz"))
	if err != nil {
		return stats{}, fmt.Errorf("encoding %s: %w", path, err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return stats{}, err
	}
	sub, err := runner.LoadKTCache(path)
	if err != nil {
		return stats{}, fmt.Errorf("reading back the subspace just written: %w", err)
	}
	var want []space.Config
	for _, c := range full.valid {
		if (c[knob] == value) == keep {
			want = append(want, c)
		}
	}
	got := sub.Valid()
	if len(got) != len(want) {
		rel := "="
		if !keep {
			rel = "≠"
		}
		return stats{}, fmt.Errorf("%s reads back with %d timed configs; the whole file has %d with %s%s%s", path, len(got), len(want), knob, rel, value)
	}
	ctx := context.Background()
	for i, c := range got {
		a, b := sub.Evaluate(ctx, c), full.full.Evaluate(ctx, want[i])
		if a.Key != b.Key || a.Objective != b.Objective {
			return stats{}, fmt.Errorf("%s reads back config %s at %v µs; the whole file has %s at %v µs", path, a.Key, a.Objective, b.Key, b.Objective)
		}
	}
	sp, err := sub.Space(nil)
	if err != nil {
		return stats{}, err
	}
	st := stats{timed: len(got)}
	st.product, _ = sp.Size()
	_, st.optimum = best(sub, got)
	for _, c := range got {
		if sub.Evaluate(ctx, c).Objective <= st.optimum*1.02 {
			st.within++
		}
	}
	return st, nil
}

// split writes every subspace of f that qualifies under opt into
// opt.split, and prints a table of them.
func split(f *cacheFile, opt options, stdout io.Writer) error {
	if err := os.MkdirAll(opt.split, 0o755); err != nil {
		return err
	}
	base := strings.TrimSuffix(strings.TrimSuffix(filepath.Base(f.path), ".gz"), ".json")
	type candidate struct {
		knob, value string
		timed       int
		product     uint64
	}
	var chosen []candidate
	for _, p := range f.full.Params() {
		if len(p.Values) < 2 {
			continue // fixing it changes nothing
		}
		var qualifying []candidate
		for _, v := range p.Values {
			if f.best[p.Name] == v {
				continue // the file's optimum is this subspace's too
			}
			timed := 0
			for _, c := range f.valid {
				if c[p.Name] == v {
					timed++
				}
			}
			product := f.product() / uint64(len(p.Values))
			if timed < opt.minValid || product < opt.minProduct {
				continue
			}
			qualifying = append(qualifying, candidate{p.Name, v, timed, product})
		}
		if opt.largest && len(qualifying) > 1 {
			// The first of the most timed, in the file's order of values.
			most := slices.MaxFunc(qualifying, func(a, b candidate) int { return a.timed - b.timed })
			qualifying = []candidate{most}
		}
		chosen = append(chosen, qualifying...)
	}
	fmt.Fprintf(stdout, "%s: %d configs in the product, %d timed, optimum %.1f µs\n", f.path, f.product(), f.full.Timed(), f.optimum)
	fmt.Fprintln(stdout, "| file | fixed | product | timed | optimum µs | file's optimum ÷ this | within 2% |")
	fmt.Fprintln(stdout, "|---|---|---|---|---|---|---|")
	for _, c := range chosen {
		path := filepath.Join(opt.split, fmt.Sprintf("%s-%s-%s.json.gz", base, fileSafe(c.knob), fileSafe(c.value)))
		sub, err := f.subspace(c.knob, c.value)
		if err != nil {
			return err
		}
		st, err := sub.write(path, f, c.knob, c.value)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "| %s | %s=%s | %d | %d | %.1f | %.3f | %d |\n", filepath.Base(path), c.knob, c.value, st.product, st.timed, st.optimum, f.optimum/st.optimum, st.within)
	}
	return nil
}

// drop writes into dir, for each tune parameter of f with three or more
// values, f without the value of f's optimum (FILE-without-KNOB-VALUE), and
// prints a table of them: spaces nearly as large as the file, each with an
// optimum of its own.
func drop(f *cacheFile, dir string, stdout io.Writer) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	base := strings.TrimSuffix(strings.TrimSuffix(filepath.Base(f.path), ".gz"), ".json")
	fmt.Fprintf(stdout, "%s: %d configs in the product, %d timed, optimum %.1f µs\n", f.path, f.product(), f.full.Timed(), f.optimum)
	fmt.Fprintln(stdout, "| file | dropped | product | timed | optimum µs | file's optimum ÷ this | within 2% |")
	fmt.Fprintln(stdout, "|---|---|---|---|---|---|---|")
	for _, p := range f.full.Params() {
		if len(p.Values) < 3 {
			continue
		}
		v := f.best[p.Name]
		path := filepath.Join(dir, fmt.Sprintf("%s-without-%s-%s.json.gz", base, fileSafe(p.Name), fileSafe(v)))
		sub, err := f.without(p.Name, v)
		if err != nil {
			return err
		}
		st, err := sub.writeAs(path, f, p.Name, v, false)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "| %s | %s=%s | %d | %d | %.1f | %.3f | %d |\n", filepath.Base(path), p.Name, v, st.product, st.timed, st.optimum, f.optimum/st.optimum, st.within)
	}
	return nil
}

// product is the number of configs in the full product of f's tune parameters.
func (f *cacheFile) product() uint64 {
	n := uint64(1)
	for _, p := range f.full.Params() {
		n *= uint64(len(p.Values))
	}
	return n
}

// fileSafe keeps letters, digits, '.', '_' and '-' of s and turns anything
// else into '_', for a file name.
func fileSafe(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '_', r == '-':
			return r
		}
		return '_'
	}, s)
}
