package evo

import "evotune/space"

// Credit assignment between the two mutation layers. A mutation of a config
// whose objective is known is a trial of its layer, and a success when the
// child beats that config. After each population's worth of evaluations (a
// generation, or several bred batches smaller than the population), a layer
// that had trials moves its rate halfway towards their smoothed success
// rate, (successes+¼)/(trials+½), so the rate reflects recent generations
// and a layer tried rarely keeps a chance without being trusted on one draw.
// The share of macro mutations is the macro layer's part of the summed
// rates, clamped so that neither layer is ever shut out.
const (
	layerDecay    = 0.5 // weight of the newest generation in a layer's rate
	layerPrior    = 0.5 // rate a layer starts with
	minMacroShare = 0.1
	maxMacroShare = 0.9
)

// LayerStats is what the search has learned about one mutation layer.
type LayerStats struct {
	Trials    int     `json:"trials"`
	Successes int     `json:"successes"`
	Rate      float64 `json:"rate"` // recent smoothed success rate
	// PendingTrials and PendingSuccesses are the trials and successes
	// since the rate last moved (bred batches below the population).
	PendingTrials    int `json:"pending_trials,omitempty"`
	PendingSuccesses int `json:"pending_successes,omitempty"`
}

// add counts a batch's trials and successes of the layer.
func (l *LayerStats) add(trials, successes int) {
	l.Trials += trials
	l.Successes += successes
	l.PendingTrials += trials
	l.PendingSuccesses += successes
}

// update moves the rate with the trials and successes since it last moved.
func (l *LayerStats) update() {
	if l.PendingTrials == 0 {
		return
	}
	gen := (float64(l.PendingSuccesses) + 0.25) / (float64(l.PendingTrials) + 0.5)
	l.Rate += layerDecay * (gen - l.Rate)
	l.PendingTrials, l.PendingSuccesses = 0, 0
}

// macroShare is the probability of a macro mutation given both layers' stats.
func macroShare(macro, micro LayerStats) float64 {
	sum := macro.Rate + micro.Rate
	if sum <= 0 {
		return 0.5
	}
	return min(max(macro.Rate/sum, minMacroShare), maxMacroShare)
}

// layerOrigin is the proposal origin of a mutation of layer l.
func layerOrigin(l space.Layer) string {
	if l == space.Macro {
		return originMacro
	}
	return originMicro
}
