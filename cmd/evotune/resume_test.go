package main

import (
	"testing"

	"evotune/evo"
)

// TestSettingsText checks that the settings line names what differs from
// the defaults of an evo search: restarts and interactions off, bred batches
// below the population, ILS epochs on.
func TestSettingsText(t *testing.T) {
	// tune's settings with candidates in flight: whole generations.
	def := evo.DefaultOptionsInFlight(8).Settings()
	noRestart, noInteract, unscreened := def, def, def
	noRestart.Restart = false
	noInteract.Interact = false
	unscreened.Screen, unscreened.Interact = 1, false
	ils, ilsNoRestart := def, noRestart
	ils.ILS, ilsNoRestart.ILS = true, true
	batch1, batchAll := def, def
	batch1.Batch, batchAll.Batch = 1, def.Population
	oneAtATime := evo.DefaultOptions().Settings()
	for _, tc := range []struct {
		name string
		in   evo.Settings
		want string
	}{
		{"defaults", def, "evo strategy, seed 1, population 8, elites 8, screen 8"},
		{"no restarts", noRestart, "evo strategy, seed 1, population 8, elites 8, screen 8, no restarts"},
		{"no interactions", noInteract, "evo strategy, seed 1, population 8, elites 8, screen 8, no interactions"},
		{"unscreened", unscreened, "evo strategy, seed 1, population 8, elites 8, screen 1"},
		{"bred batches of 1", batch1, "evo strategy, seed 1, population 8, elites 8, screen 8, bred batches of 1"},
		{"bred batches of the population", batchAll, "evo strategy, seed 1, population 8, elites 8, screen 8"},
		{"one at a time", oneAtATime, "evo strategy, seed 1, population 8, elites 8, screen 4, bred batches of 1"},
		{"ILS epochs", ils, "evo strategy, seed 1, population 8, elites 8, screen 8, ILS epochs"},
		// ILS epochs take the place of restarts: none without them.
		{"ILS without restarts", ilsNoRestart, "evo strategy, seed 1, population 8, elites 8, screen 8, no restarts"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := settingsText(tc.in); got != tc.want {
				t.Errorf("settingsText = %q, want %q", got, tc.want)
			}
		})
	}
}
