package main

import (
	"cmp"
	"fmt"
	"path/filepath"

	"github.com/spf13/pflag"

	"evotune/evo"
	"evotune/kernels"
	"evotune/runner"
	"evotune/space"
)

// A recordedSpace is a recorded file ready to be searched without a GPU:
// an evotune replay file or a Kernel Tuner cache, with the space a search
// of it walks and the evaluator that answers from it. tune --replay,
// tune --kt-cache and bench-search all load their file through
// loadRecorded, so they search the same space.
type recordedSpace struct {
	path     string
	problem  space.Problem
	env      space.Env
	space    *space.Space
	eval     evo.Evaluator
	recorded string // how the results were recorded, for people
	// kt is the Kernel Tuner cache, nil for a replay file; ktValidOnly
	// says whether the space is its valid set instead of the full product.
	kt          *runner.KTCache
	ktValidOnly bool
}

// recordedFileFlags are the flags that name a recorded file, shared by tune
// and bench-search.
type recordedFileFlags struct {
	Replay  string
	KTCache string
	// KTValidOnly restricts a Kernel Tuner space to the configs with a
	// time, instead of the full product of the tune parameters.
	KTValidOnly bool
	// KTMacro names the tune parameters that are macro knobs; the others
	// are micro.
	KTMacro []string
}

// registerKT adds the Kernel Tuner flags to fs, bound to f.
func (f *recordedFileFlags) registerKT(fs *pflag.FlagSet) {
	fs.StringVar(&f.KTCache, "kt-cache", f.KTCache, "answer from a Kernel Tuner cache `file` (JSON, .gz allowed): the space is the full product of its tune parameters, a config absent from the cache or failed in it costs an evaluation and yields nothing")
	fs.BoolVar(&f.KTValidOnly, "kt-valid-only", f.KTValidOnly, "with --kt-cache: search only the configs the cache timed (the search knows the valid set)")
	fs.StringSliceVar(&f.KTMacro, "kt-macro", f.KTMacro, "with --kt-cache: tune parameters searched as macro knobs (default: none, every parameter is micro)")
}

// validate checks the combinations of the flags, for command cmd.
func (f recordedFileFlags) validate(cmd string) error {
	switch {
	case f.KTCache != "" && f.Replay != "":
		return usagef(cmd, "--kt-cache and --replay both name a recorded file: give one")
	case f.KTCache == "" && f.KTValidOnly:
		return usagef(cmd, "--kt-valid-only needs --kt-cache")
	case f.KTCache == "" && len(f.KTMacro) > 0:
		return usagef(cmd, "--kt-macro needs --kt-cache")
	}
	return nil
}

// loadReplay reads an evotune replay file for command cmd. Its problem
// and architecture are the file's; when problemSet, the flags named prob
// and a file of another problem is refused, and an arch given (not "")
// must be the file's. A file that names no problem is taken to record
// prob, and one that names no architecture arch, or sm_89. The space is
// the family's for that problem, restricted to the recorded configs: the
// search's moves go to the nearest recorded config instead of mostly
// falling outside the recording.
func loadReplay(cmd, path string, prob space.Problem, problemSet bool, arch string) (recordedSpace, error) {
	rp, err := runner.LoadReplay(path)
	if err != nil {
		return recordedSpace{}, fmt.Errorf("%s --replay: %w", cmd, err)
	}
	h := rp.Header()
	if h.Problem != nil {
		recorded := *h.Problem
		if recorded.Family == "" {
			recorded.Family = kernels.DefaultFamily
		}
		if problemSet && problemLine(recorded) != problemLine(prob) {
			return recordedSpace{}, usagef(cmd, "--replay %s records %s; the problem flags (--shape, --dtype, --causal, ...) ask for %s",
				path, problemLine(recorded), problemLine(prob))
		}
		prob = recorded
	}
	fileArch := h.Env.Arch
	switch {
	case fileArch == "" && arch == "":
		arch = kernels.DefaultArch
	case fileArch == "":
	case arch != "" && arch != fileArch:
		return recordedSpace{}, usagef(cmd, "--arch %s: --replay %s was recorded for %s", arch, path, fileArch)
	default:
		arch = fileArch
	}
	sp, err := familySpace(cmd, prob, arch)
	if err != nil {
		return recordedSpace{}, err
	}
	sp.Constraints = append(sp.Constraints, rp.Constraint())
	env := h.Env
	env.Arch = arch
	return recordedSpace{
		path: path, problem: prob, env: env, space: sp.Restrict(rp.Configs()), eval: rp, recorded: h.Recorded,
	}, nil
}

// loadKTCache reads a Kernel Tuner cache for command cmd. The space is the
// full product of its tune parameters (the published protocol: a config
// the cache does not hold is invalid and costs an evaluation), or with
// validOnly the configs it timed; macro names the macro knobs.
func loadKTCache(cmd, path string, validOnly bool, macro []string) (recordedSpace, error) {
	kt, err := runner.LoadKTCache(path)
	if err != nil {
		return recordedSpace{}, fmt.Errorf("%s --kt-cache: %w", cmd, err)
	}
	sp, err := kt.Space(macro)
	if err != nil {
		return recordedSpace{}, usagef(cmd, "--kt-macro: %v", err)
	}
	raw, _ := sp.Size()
	rs := recordedSpace{
		path: path, problem: kt.Problem(), env: space.Env{GPU: kt.Device(), Replay: filepath.Base(path)},
		space: sp, eval: kt, kt: kt, ktValidOnly: validOnly,
	}
	protocol := fmt.Sprintf("the full product of %d tune parameters, %d configs, of which %d timed (published protocol: the others cost an evaluation and yield nothing)",
		len(sp.Knobs), raw, kt.Timed())
	if validOnly {
		rs.space = sp.Restrict(kt.Valid())
		protocol = fmt.Sprintf("the %d timed configs of the %d in the product of %d tune parameters (--kt-valid-only)", kt.Timed(), raw, len(sp.Knobs))
	}
	rs.recorded = fmt.Sprintf("Kernel Tuner cache of %s on %s: %s", cmp.Or(kt.Kernel(), "a kernel"), cmp.Or(kt.Device(), "an unnamed GPU"), protocol)
	return rs, nil
}
