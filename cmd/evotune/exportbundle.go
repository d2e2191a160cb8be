package main

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	"evotune/cmd/evotune/internal/bundle"
	"evotune/cmd/evotune/internal/export"
	"evotune/elites"
	"evotune/kernels"
)

// exportBundle renders the launcher bundle of exp, the kernel source
// exactly as the archive measured it included, and records it in exp. An
// archive whose results were replayed measured no kernel source: it gets
// no bundle, and note says so.
func exportBundle(a *elites.Archive, exp *export.Export, kernelSource string) (files []bundle.File, note string, err error) {
	if exp.Provenance.Replay != "" {
		return nil, fmt.Sprintf("no launcher: the archive's results were replayed from %s, not measured from a kernel source; wrote the header and JSON only", exp.Provenance.Replay), nil
	}
	family, err := kernels.FamilyOf(exp.Meta.Problem.Family)
	if err != nil {
		return nil, "", fmt.Errorf("export: %w", err)
	}
	embedded := family.Source()
	var given *kernels.Source
	if kernelSource != "" {
		src, err := bundle.ReadSource(kernelSource, embedded)
		if err != nil {
			return nil, "", usagef("export", "--kernel-source: %v", err)
		}
		given = &src
	}
	src, err := bundle.Resolve(cmp.Or(exp.Meta.SourceHash, exp.Provenance.SourceHash), given, embedded)
	if err != nil {
		return nil, "", fmt.Errorf("export: %v; give --kernel-source with the source it measured (its .cu file, or a folder with %s, such as kernels/ of the commit that measured it)", err, strings.Join(slices.Sorted(maps.Keys(embedded.Files)), " and "))
	}
	// The flags each result records are what the search compiled.
	best := bundle.Config{Key: exp.Key, Config: exp.Config, Flags: recordedFlags(exp.Result.Flags, exp.Flags)}
	var shapes []bundle.ShapeBest
	for _, d := range exp.Dispatch {
		flags := d.Flags
		if r, ok := a.Lookup(d.Key); ok {
			flags = recordedFlags(r.Flags, d.Flags)
		}
		shapes = append(shapes, bundle.ShapeBest{Shape: d.Shape, Config: bundle.Config{Key: d.Key, Config: d.Config, Flags: flags}})
	}
	b, err := bundle.New(exp.Name, exp.Meta.Problem, src, exp.Provenance.Arch, best, shapes)
	if err != nil {
		return nil, "", fmt.Errorf("export: %w", err)
	}
	files, err = b.Files()
	if err != nil {
		return nil, "", fmt.Errorf("export: %w", err)
	}
	exp.Bundle = &export.Bundle{Files: bundle.Paths(files), KernelSourceHash: src.Hash}
	for _, c := range b.Configs {
		exp.Bundle.Configs = append(exp.Bundle.Configs, c.Key)
	}
	return files, "", nil
}

func recordedFlags(recorded, rendered []string) []string {
	if len(recorded) > 0 {
		return slices.Clone(recorded)
	}
	return rendered
}
