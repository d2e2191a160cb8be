package runner

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"evotune/space"
)

// A Kernel Tuner cache file records the tuning of one GPU kernel by Kernel
// Tuner: the tune parameters with their values (tune_params_keys,
// tune_params) and, under "cache", one entry per config that was tried,
// keyed by its values joined by commas, whose "time" is the mean kernel
// time in milliseconds or a failure string ("CompilationFailedConfig",
// "RuntimeFailedConfig", "InvalidConfig"). Older files mark a failure with
// a time of 1e20 instead. Public studies of tuning strategies publish such
// files, so reading them lets evotune's search be measured on spaces that
// evotune did not record.
//
// A KTCache serves such a file as an evaluator over the full Cartesian
// product of the tune parameters: a config with a time gets it back as an
// OK result, a config whose entry is a failure fails, and a config absent
// from the cache fails at the constraint gate, as the published protocol
// counts it (Schoonhoven, van Werkhoven, Batenburg 2022: an absent config is
// invalid and costs one evaluation). A KTCache is read-only after loading,
// so it is safe for concurrent use.
type KTCache struct {
	name    string
	device  string
	kernel  string
	params  []KTParam
	results map[string]space.Result // by config key: every entry, timed or failed
	timed   int
	// skipped counts entries whose values are not among the tune
	// parameters' (a cache kept across edits of tune_params).
	skipped int
}

// A KTParam is one tune parameter of a Kernel Tuner cache: its name and its
// values, in the file's order.
type KTParam struct {
	Name   string
	Values []string
}

// KTFamilyPrefix starts the family name of a space read from a Kernel
// Tuner cache; the kernel's name follows it.
const KTFamilyPrefix = space.KernelTunerFamilyPrefix

// ktFailedTime is the time older Kernel Tuner versions record for a config
// that failed to compile or run; anything at least this large is a failure.
const ktFailedTime = 1e20

// ktAbsent is the reason given for a config the cache does not hold.
const ktAbsent = "not in the Kernel Tuner cache: invalid under the published protocol"

// ktFile is the part of a Kernel Tuner cache file that evotune reads.
type ktFile struct {
	DeviceName string                                `json:"device_name"`
	KernelName string                                `json:"kernel_name"`
	Keys       []string                              `json:"tune_params_keys"`
	Params     map[string][]json.RawMessage          `json:"tune_params"`
	Cache      map[string]map[string]json.RawMessage `json:"cache"`
}

// LoadKTCache reads a Kernel Tuner cache file (JSON, gzip-compressed when
// the name ends in .gz). It refuses a file with no tune parameters, a
// parameter with no values or a value listed twice, and an entry whose time
// is neither a number nor a string; errors name the file and the entry.
func LoadKTCache(path string) (*KTCache, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("loading Kernel Tuner cache: %w", err)
	}
	defer f.Close()
	var in io.Reader = f
	if strings.HasSuffix(path, ".gz") {
		zr, err := gzip.NewReader(f)
		if err != nil {
			return nil, fmt.Errorf("loading Kernel Tuner cache %s: %w", path, err)
		}
		defer zr.Close()
		in = zr
	}
	k, err := ReadKTCache(in, path)
	if err != nil {
		return nil, err
	}
	k.name = filepath.Base(path)
	return k, nil
}

// ReadKTCache parses a Kernel Tuner cache file named path (for errors).
func ReadKTCache(in io.Reader, path string) (*KTCache, error) {
	var f ktFile
	dec := json.NewDecoder(in)
	dec.UseNumber()
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("%s: decoding Kernel Tuner cache: %w", path, err)
	}
	if len(f.Keys) == 0 {
		return nil, fmt.Errorf("%s: no tune_params_keys: not a Kernel Tuner cache file", path)
	}
	k := &KTCache{name: filepath.Base(path), device: f.DeviceName, kernel: f.KernelName,
		results: make(map[string]space.Result, len(f.Cache))}
	index := make([]map[string]bool, len(f.Keys))
	for i, name := range f.Keys {
		raw, ok := f.Params[name]
		if !ok || len(raw) == 0 {
			return nil, fmt.Errorf("%s: tune parameter %s has no values in tune_params", path, name)
		}
		p := KTParam{Name: name}
		index[i] = make(map[string]bool, len(raw))
		for _, r := range raw {
			v, err := KTValue(r)
			if err != nil {
				return nil, fmt.Errorf("%s: tune parameter %s: %w", path, name, err)
			}
			if index[i][v] {
				return nil, fmt.Errorf("%s: tune parameter %s: value %s listed twice", path, name, v)
			}
			index[i][v] = true
			p.Values = append(p.Values, v)
		}
		k.params = append(k.params, p)
	}
	env := space.Env{GPU: f.DeviceName, Replay: k.name}
	keys := make([]string, 0, len(f.Cache))
	for key := range f.Cache {
		keys = append(keys, key)
	}
	slices.Sort(keys) // errors and counts do not depend on map order
	for _, key := range keys {
		entry := f.Cache[key]
		c, err := KTConfig(f.Keys, key, entry)
		if err != nil {
			return nil, fmt.Errorf("%s: cache entry %q: %w", path, key, err)
		}
		inside := true
		for i, name := range f.Keys {
			inside = inside && index[i][c[name]]
		}
		if !inside {
			k.skipped++
			continue
		}
		r, err := ktResult(c, entry)
		if err != nil {
			return nil, fmt.Errorf("%s: cache entry %q: %w", path, key, err)
		}
		r.Env = env
		if _, dup := k.results[r.Key]; dup {
			return nil, fmt.Errorf("%s: cache entry %q: config recorded twice", path, key)
		}
		k.results[r.Key] = r
		if r.OK() {
			k.timed++
		}
	}
	if k.timed == 0 {
		return nil, fmt.Errorf("%s: no config of the Kernel Tuner cache has a time", path)
	}
	return k, nil
}

// KTValue renders a tune parameter value as a knob value: a number as
// written, a string as it is, a boolean as true or false. Tools that
// rewrite a cache file use it to name values as a KTCache does.
func KTValue(raw json.RawMessage) (string, error) {
	// The common cases without a decoder: a cache of 100,000 entries holds
	// a million values, and a json.Decoder for each cost half a second.
	switch t := bytes.TrimSpace(raw); {
	case len(t) > 0 && (t[0] == '-' || t[0] >= '0' && t[0] <= '9') && json.Valid(t):
		return string(t), nil // what json.Number.String gives: the literal
	case string(t) == "true" || string(t) == "false":
		return string(t), nil
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return "", err
	}
	switch v := v.(type) {
	case json.Number:
		return v.String(), nil
	case string:
		return v, nil
	case bool:
		return strconv.FormatBool(v), nil
	}
	return "", fmt.Errorf("value %s is not a number, string or boolean", raw)
}

// KTConfig reads a cache entry's config from its own fields, or from its
// key (values joined by commas) where a field is missing; names are the
// file's tune_params_keys. Tools that rewrite a cache file use it to read
// an entry as a KTCache does.
func KTConfig(names []string, key string, entry map[string]json.RawMessage) (space.Config, error) {
	parts := strings.Split(key, ",")
	c := make(space.Config, len(names))
	for i, name := range names {
		if raw, ok := entry[name]; ok {
			v, err := KTValue(raw)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			c[name] = v
			continue
		}
		if len(parts) != len(names) {
			return nil, fmt.Errorf("no field %s, and the key holds %d values for %d parameters", name, len(parts), len(names))
		}
		c[name] = parts[i]
	}
	return c, nil
}

// ktResult turns an entry into the result evotune records: OK with the
// time (ms) as the objective in µs, or the failure it names.
func ktResult(c space.Config, entry map[string]json.RawMessage) (space.Result, error) {
	r := space.Result{Key: c.Key(), Config: c}
	ms := func(field string) float64 {
		if raw, ok := entry[field]; ok {
			if v, ok := ktNumber(raw); ok && v > 0 && !math.IsInf(v, 0) {
				return v
			}
		}
		return 0
	}
	r.Cost = space.Cost{CompileSec: ms("compile_time") / 1e3, CheckSec: ms("verification_time") / 1e3, TimeSec: ms("benchmark_time") / 1e3}
	raw, ok := entry["time"]
	if !ok {
		return r, fmt.Errorf("no time")
	}
	t, isNumber := ktNumber(raw)
	var failure string
	if !isNumber && json.Unmarshal(raw, &failure) == nil {
		r.Reason = "Kernel Tuner: " + failure
		switch failure {
		case "CompilationFailedConfig":
			r.Status, r.Gate = space.StatusCompileError, space.GateCompile
		case "InvalidConfig":
			r.Status, r.Gate = space.StatusConstraint, space.GateConstraint
		default: // RuntimeFailedConfig and any failure newer versions name
			r.Status, r.Gate = space.StatusFault, space.GateCorrectness
		}
		return r, nil
	}
	if !isNumber {
		return r, fmt.Errorf("time %s is neither a number nor a failure string", raw)
	}
	if !(t > 0) || t >= ktFailedTime || math.IsInf(t, 0) {
		r.Status, r.Gate, r.Reason = space.StatusFault, space.GateCorrectness, fmt.Sprintf("Kernel Tuner: time %g marks a failed config", t)
		return r, nil
	}
	us := t * 1e3
	timing := space.Timing{P50US: us, P90US: us, P99US: us, CILowUS: us, CIHighUS: us}
	var samples []float64
	if raw, ok := entry["times"]; ok && json.Unmarshal(raw, &samples) == nil && len(samples) > 0 {
		for i := range samples {
			samples[i] *= 1e3
		}
		timing.SamplesUS = samples
	}
	r.Status, r.Gate, r.Objective, r.Timings = space.StatusOK, space.GateTimed, us, []space.Timing{timing}
	return r, nil
}

// Params returns the tune parameters, in the file's order.
func (k *KTCache) Params() []KTParam {
	out := make([]KTParam, len(k.params))
	for i, p := range k.params {
		out[i] = KTParam{Name: p.Name, Values: slices.Clone(p.Values)}
	}
	return out
}

// Device is the GPU the file was recorded on, as the file names it.
func (k *KTCache) Device() string { return k.device }

// Kernel is the kernel's name, as the file gives it.
func (k *KTCache) Kernel() string { return k.kernel }

// Name is the file's base name.
func (k *KTCache) Name() string { return k.name }

// Problem is the problem a search of the file solves: the kernel, with no
// shape or dtype (the file's space fixes them).
func (k *KTCache) Problem() space.Problem {
	return space.Problem{Family: KTFamilyPrefix + k.kernel}
}

// Entries is the number of configs the cache holds, timed or failed;
// Timed the number with a time; Skipped the entries left out because a
// value of theirs is not among the tune parameters'.
func (k *KTCache) Entries() int { return len(k.results) }
func (k *KTCache) Timed() int   { return k.timed }
func (k *KTCache) Skipped() int { return k.skipped }

// Space returns the full Cartesian product of the tune parameters as a
// space: one knob per parameter, in the file's order, its values as
// listed, the first of them standing in for a default that the file does
// not have (space.Space.PlaceholderDefaults), and no constraint. A file has
// no notion of layers: the knobs named in macro are macro knobs, the
// others micro. It refuses a name in macro that is not a parameter, and a
// parameter name or value that cannot be a knob's.
func (k *KTCache) Space(macro []string) (*space.Space, error) {
	sp := &space.Space{Family: KTFamilyPrefix + k.kernel, PlaceholderDefaults: true}
	for _, m := range macro {
		if !slices.ContainsFunc(k.params, func(p KTParam) bool { return p.Name == m }) {
			names := make([]string, len(k.params))
			for i, p := range k.params {
				names[i] = p.Name
			}
			return nil, fmt.Errorf("%s is not a tune parameter of %s (%s)", m, k.name, strings.Join(names, ", "))
		}
	}
	for _, p := range k.params {
		layer := space.Micro
		if slices.Contains(macro, p.Name) {
			layer = space.Macro
		}
		sp.Knobs = append(sp.Knobs, space.Knob{
			Name: p.Name, Macro: p.Name, Values: slices.Clone(p.Values), Layer: layer,
			Doc: "Kernel Tuner parameter", Default: p.Values[0],
		})
	}
	if err := sp.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", k.name, err)
	}
	return sp, nil
}

// Valid returns the configs that have a time, in key order: the members
// of a space restricted to the valid set (space.Space.Restrict).
func (k *KTCache) Valid() []space.Config {
	out := make([]space.Config, 0, k.timed)
	for _, r := range k.results {
		if r.OK() {
			out = append(out, r.Config.Clone())
		}
	}
	slices.SortFunc(out, func(a, b space.Config) int { return strings.Compare(a.Key(), b.Key()) })
	return out
}

// Evaluate returns the result the cache holds for c (a copy), or, for a
// config the cache does not hold, a failure at the constraint gate. Both
// cost an evaluation of the search.
func (k *KTCache) Evaluate(ctx context.Context, c space.Config) space.Result {
	key := c.Key()
	rec, ok := k.results[key]
	if !ok {
		return space.Result{
			Key: key, Config: c.Clone(), Status: space.StatusConstraint, Gate: space.GateConstraint,
			Reason: ktAbsent, Env: space.Env{GPU: k.device, Replay: k.name},
		}
	}
	return cloneResult(rec)
}

// ktNumber reads a JSON number, as json.Unmarshal into a float64 does but
// without a decoder for each (a cache holds several a config); ok is false
// for anything else (a string, null, an object).
func ktNumber(raw json.RawMessage) (float64, bool) {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || !(t[0] == '-' || t[0] >= '0' && t[0] <= '9') || !json.Valid(t) {
		return 0, false
	}
	v, err := strconv.ParseFloat(string(t), 64)
	return v, err == nil
}
