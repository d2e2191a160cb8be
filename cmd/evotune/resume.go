package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"evotune/elites"
	"evotune/evo"
)

// startSearch returns the search that tune runs on archive: a new one for an
// archive with nothing in it yet, the saved search restored from state when
// the state agrees with the log, or else a search rebuilt from the log (the
// state is only a cache of it). A resumed or rebuilt search runs with the
// archive's settings; flags given now that differ are named on one line.
func startSearch(stderr io.Writer, fs *pflag.FlagSet, b backend, archive *elites.Archive, state []byte, eo evo.Options) (*evo.Search, error) {
	n := archive.Len()
	settings, stored := archiveSettings(archive.Meta(), state, eo)
	for i, c := range settings.Seeds {
		// Seeds recorded before knobs of this space existed, as the
		// archive's results are read (completeConfigs).
		if done, ok := b.space.Complete(c); ok {
			settings.Seeds[i] = done
		}
	}
	if n == 0 && state == nil {
		if stored {
			eo = eo.WithSettings(settings) // created by a run killed before any result
		}
		return evo.New(b.space, b.eval, archive, eo)
	}
	if state != nil {
		s, err := evo.New(b.space, b.eval, archive, eo)
		if err != nil {
			return nil, err
		}
		restoreErr := s.Restore(state)
		if restoreErr == nil {
			fmt.Fprintf(stderr, "evotune: resuming: %d results, generation %d\n", n, stateGeneration(state))
			warnIgnoredFlags(stderr, fs, s.Settings())
			return s, nil
		}
		fmt.Fprintf(stderr, "evotune: rebuilding the search state from the log (%d results): %s/state.json %s; results the log lacks are run again\n",
			n, archive.Dir(), strings.TrimPrefix(restoreErr.Error(), "restoring search state: "))
	} else {
		fmt.Fprintf(stderr, "evotune: rebuilding the search state from the log (%d results): %s/state.json is missing; results the log lacks are run again\n",
			n, archive.Dir())
	}
	s, err := evo.New(b.space, b.eval, archive, eo.WithSettings(settings))
	if err != nil {
		return nil, err
	}
	if err := s.Rebuild(state); err != nil {
		return nil, err
	}
	warnIgnoredFlags(stderr, fs, s.Settings())
	return s, nil
}

// archiveSettings returns the settings the archive's search was started
// with: those recorded in its identity, else those of its saved state when it
// still reads, else its identity's strategy and seed with the rest from eo
// (an archive made before settings were recorded). stored reports whether
// they came from the archive at all.
func archiveSettings(meta elites.Meta, state []byte, eo evo.Options) (evo.Settings, bool) {
	var st evo.Settings
	if len(meta.Search) > 0 && json.Unmarshal(meta.Search, &st) == nil && st.Strategy != "" {
		return st, true
	}
	if st, ok := evo.StateSettings(state); ok {
		return st, true
	}
	st = eo.Settings()
	st.Seeds = nil
	if meta.Strategy != "" {
		st.Strategy, st.Seed = meta.Strategy, meta.Seed
		return st, true
	}
	return st, false
}

// searchSettings encodes the settings of a new search for its archive's
// identity.
func searchSettings(eo evo.Options) json.RawMessage {
	data, err := json.Marshal(eo.Settings())
	if err != nil {
		return nil // a config is a map of strings: it always encodes
	}
	return data
}

// warnIgnoredFlags names, on one line, the search flags given now that a
// resumed search does not follow, and the settings in force.
func warnIgnoredFlags(stderr io.Writer, fs *pflag.FlagSet, in evo.Settings) {
	var ignored []string
	check := func(flag, want string) {
		if f := fs.Lookup(flag); f != nil && fs.Changed(flag) && f.Value.String() != want {
			ignored = append(ignored, "--"+flag+" "+f.Value.String())
		}
	}
	check("strategy", in.Strategy)
	check("seed", strconv.FormatUint(in.Seed, 10))
	check("population", strconv.Itoa(in.Population))
	check("elites", strconv.Itoa(in.Elites))
	check("screen", strconv.Itoa(in.Screen))
	check("restart", strconv.FormatBool(in.Restart))
	check("interact", strconv.FormatBool(in.Interact))
	check("ils", strconv.FormatBool(in.ILS))
	if len(ignored) == 0 {
		return
	}
	fmt.Fprintf(stderr, "evotune: resuming with the archive's settings, ignoring %s; in force: %s\n", strings.Join(ignored, ", "), settingsText(in))
}

// settingsText renders the settings of a search for people.
func settingsText(s evo.Settings) string {
	text := fmt.Sprintf("%s strategy, seed %d, population %d, elites %d", s.Strategy, s.Seed, s.Population, s.Elites)
	if s.Strategy == evo.StrategyEvo {
		text += fmt.Sprintf(", screen %d", s.Screen)
		if s.Batch > 0 && s.Batch < s.Population {
			text += fmt.Sprintf(", bred batches of %d", s.Batch)
		}
		if !s.Restart {
			text += ", no restarts"
		}
		if s.Screen > 1 && !s.Interact {
			text += ", no interactions"
		}
		if s.ILS && s.Restart {
			text += ", ILS epochs"
		}
	}
	if len(s.Seeds) > 0 {
		text += fmt.Sprintf(", %d seed %s", len(s.Seeds), plural(len(s.Seeds), "config", "configs"))
	}
	return text
}

// plural picks the word for n.
func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
