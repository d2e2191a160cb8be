package elites

import (
	"errors"

	"evotune/space"
)

// A Completion says what Archive.Complete did.
type Completion struct {
	// Results is how many results it completed, and Values the knob
	// values it filled in, "name=value" in the space's knob order.
	Results int
	Values  []string
	// Repeats is how many results it left as their lines hold them,
	// because the archive holds a result of the config they complete to
	// (evaluated again after the knob was added): that result stands for
	// the config, and they are no longer ranked (Top). FirstRepeat is the
	// Seq of the first of them.
	Repeats     int
	FirstRepeat int
}

// loggedConfig is what a completed result's log line holds: its key and,
// when the key does not give it back, its config.
type loggedConfig struct {
	key    string
	config space.Config
}

// Complete reads the archive's results as configs of sp: a result whose
// config does not name knobs of sp that declare an Absent value (it was
// recorded before they existed) takes the config sp.Complete makes of it,
// and that config's key. Lookup then finds it by the key a search of sp
// proposes the config with, so a resumed search does not evaluate it
// again, and every reader (Results, Top, Keys, Seeds, Merge) hands it out
// as a config of sp. A completion is taken only when it names every knob of
// sp with a value from the knob's list; a result whose completed key the
// archive already holds keeps its own key and is ranked no more (a Repeat:
// the other result stands for the config). The log is not touched:
// its lines stay what was recorded, and results.idx stays a copy of them.
// Complete again with the same space changes nothing more; results recorded
// afterwards are taken as they come. A nil sp, or one whose knobs declare no
// Absent value, completes nothing.
func (a *Archive) Complete(sp *space.Space) Completion {
	var out Completion
	if sp == nil || !declaresAbsent(sp) {
		return out
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.completion = sp
	filled := make(map[string]bool)
	scratch := space.Config{}
	for i := range a.results {
		r := &a.results[i]
		cfg := r.Config
		if cfg == nil {
			if !scratch.SetKey(r.Key) {
				continue
			}
			cfg = scratch
		}
		done, ok := sp.Complete(cfg)
		if !ok {
			continue
		}
		var rej *space.Rejection
		if err := sp.Check(done); err != nil && !errors.As(err, &rej) {
			continue // still not a config of sp: a knob without an Absent value is missing
		}
		key := done.Key()
		if _, held := a.byKey[key]; held {
			if out.Repeats == 0 {
				out.FirstRepeat = r.Seq
			}
			out.Repeats++
			if a.repeats == nil {
				a.repeats = make(map[int]bool)
			}
			a.repeats[i] = true
			continue
		}
		for name, value := range done {
			if _, named := cfg[name]; !named {
				filled[name+"="+value] = true
			}
		}
		if a.logged == nil {
			a.logged = make(map[int]loggedConfig)
		}
		a.logged[i] = loggedConfig{key: r.Key, config: r.Config}
		delete(a.byKey, r.Key)
		a.byKey[key] = i
		r.Key, r.Config = key, done
		compact(r)
		out.Results++
	}
	for _, k := range sp.Knobs {
		if v := k.Name + "=" + k.Absent; k.Absent != "" && filled[v] {
			out.Values = append(out.Values, v)
		}
	}
	return out
}

// declaresAbsent reports whether a knob of sp declares an Absent value.
func declaresAbsent(sp *space.Space) bool {
	for _, k := range sp.Knobs {
		if k.Absent != "" {
			return true
		}
	}
	return false
}

// completionSpace returns the space the archive was completed with, nil if
// none.
func (a *Archive) completionSpace() *space.Space {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.completion
}

// completedKey returns the key that the archive's results hold for a config
// whose log line has key: the completed one where Complete would complete
// it. Call with a.mu held.
func (a *Archive) completedKey(key string) string {
	if a.completion == nil || key == "" {
		return key
	}
	c, ok := space.FromKey(key)
	if !ok {
		return key
	}
	if done, ok := a.completion.Complete(c); ok {
		return done.Key()
	}
	return key
}

// loggedResults returns the results as the log holds them: what the index
// caches.
func (a *Archive) loggedResults() []space.Result {
	if len(a.logged) == 0 {
		return a.results
	}
	out := make([]space.Result, len(a.results))
	copy(out, a.results)
	for i, l := range a.logged {
		out[i].Key, out[i].Config = l.key, l.config
	}
	return out
}

// eachStanding calls fn on every result that stands for its config, in log
// order, as each does: every result but Complete's Repeats.
func (a *Archive) eachStanding(fn func(r *space.Result)) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for i := range a.results {
		if !a.repeats[i] {
			fn(&a.results[i])
		}
	}
}

// loggedKey returns the key that the log line of result i holds. Call with
// a.mu held.
func (a *Archive) loggedKey(i int) string {
	if l, ok := a.logged[i]; ok {
		return l.key
	}
	return a.results[i].Key
}
