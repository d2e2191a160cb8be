package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"evotune/cmd/evotune/internal/bundle"
	"evotune/cmd/evotune/internal/elitetable"
	"evotune/cmd/evotune/internal/export"
	"evotune/elites"
	"evotune/internal/durable"
	"evotune/kernels"
)

// exportOptions are the flags of evotune export.
type exportOptions struct {
	Archive string
	Out     string
	Name    string
	To      string
	Force   bool
	Commit  bool
	// KernelSource is the kernel source the archive measured, when the
	// binary embeds another.
	KernelSource string
}

func defaultExportOptions() exportOptions {
	return exportOptions{Archive: "evotune-archive", Out: ".", Name: "evotune_best"}
}

func exportCommand() command {
	return command{
		name:     "export",
		summary:  "write the best configuration as a launcher bundle, a C header and JSON, with its provenance",
		synopsis: "evotune export [--archive DIR] [--out DIR] [--name NAME] [--kernel-source PATH] [--force] [--to DIR [--commit]]",
		examples: `  # Writes ./evotune_best.h and ./evotune_best.json, and the launcher a main
  # build compiles: evotune_best_launch.h, evotune_best_launch.cu,
  # evotune_best_plan.h and the kernel source in evotune_best_kernel/.
  evotune export --archive evotune-archive

  # An archive measured with another kernel source than this evotune embeds.
  evotune export --archive old-archive --kernel-source ../evotune-old/kernels

  evotune export --archive evotune-archive --out include --name sdpa_l4_best

  # Replaces the header that the main build includes, and commits it there
  # with the evidence in the commit message.
  evotune export --archive evotune-archive --to ../attention/include --commit
`,
		run: runExport,
	}
}

// exportName is what --name may be: it becomes file names and C identifiers.
var exportName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// exportMarker is in the first lines of every header that export writes:
// --to replaces only files that carry it.
const exportMarker = bundle.Marker

func runExport(ctx context.Context, c *cli, args []string) error {
	opts := defaultExportOptions()
	fs := newFlagSet("export")
	fs.StringVar(&opts.Archive, "archive", opts.Archive, "archive `directory`")
	fs.StringVar(&opts.Out, "out", opts.Out, "output `directory` (not used with --to unless given)")
	fs.StringVar(&opts.Name, "name", opts.Name, "base name of the files written (NAME.h, NAME.json) and of the dispatch table")
	fs.StringVar(&opts.To, "to", opts.To, "also write NAME.h and NAME.json into `directory` of a main build, replacing only an earlier export")
	fs.BoolVar(&opts.Force, "force", opts.Force, "export although a damaged log line may hold a better result; with --to: replace files that are not an evotune export")
	fs.BoolVar(&opts.Commit, "commit", opts.Commit, "with --to: git add and commit the files there, the evidence in the message")
	fs.StringVar(&opts.KernelSource, "kernel-source", opts.KernelSource, "the kernel source the archive measured, when this evotune embeds another: its .cu `path`, or a folder with sdpa.cu and sdpa_params.h")
	if _, err := c.parseFlags(fs, args, false); err != nil {
		return err
	}
	switch {
	case !exportName.MatchString(opts.Name):
		return usagef("export", "--name %q: want a C identifier (letters, digits, _)", opts.Name)
	case opts.Archive == "":
		return usagef("export", "--archive must name a directory")
	case opts.Out == "":
		return usagef("export", "--out must name a directory")
	case opts.Commit && opts.To == "":
		return usagef("export", "--commit needs --to: it commits the files where the main build includes them")
	}
	done := c.loading("archive " + opts.Archive)
	a, err := elites.Read(opts.Archive)
	done()
	if err != nil {
		return fmt.Errorf("export --archive: %w", err)
	}
	defer a.Close()
	warnSkipped(c.stderr, a)
	completeConfigs(c.stderr, a, archiveSpace(a))
	archivePath, err := filepath.Abs(opts.Archive)
	if err != nil {
		return fmt.Errorf("export --archive: %w", err)
	}
	exp, err := newExport(a, opts.Name, archivePath, c.now())
	if err != nil {
		return err
	}
	if hidden := elitetable.Hidden(a, exp.Result.Objective, "a result faster than "+us(exp.Result.Objective)+" µs"); len(hidden) > 0 {
		if !opts.Force {
			return fmt.Errorf("export: line %d of %s/results.jsonl is damaged and may have held a result faster than the best readable one (%s µs, result %d): run tune on the archive to evaluate it again, or pass --force to export the best readable one",
				a.Hidden(exp.Result.Objective)[0].Line, a.Dir(), us(exp.Result.Objective), exp.Result.Seq)
		}
		for _, h := range hidden {
			fmt.Fprintf(c.stdout, "%s; exported anyway (--force)\n", h)
		}
	}
	launcher, note, err := exportBundle(a, &exp, opts.KernelSource)
	if err != nil {
		return err
	}
	if note != "" {
		fmt.Fprintf(c.stderr, "evotune: export: %s\n", note)
	}
	header := []byte(exp.Header())
	data, err := json.MarshalIndent(exp, "", "  ")
	if err != nil {
		return fmt.Errorf("export: encoding JSON: %w", err)
	}
	data = append(data, '\n')
	var dirs []string
	if opts.To == "" || fs.Changed("out") {
		dirs = append(dirs, opts.Out)
	}
	files := append([]bundle.File{{Path: opts.Name + ".h", Data: header}, {Path: opts.Name + ".json", Data: data}}, launcher...)
	if opts.To != "" {
		if err := checkReplaceable(opts.To, opts.Name, files, opts.Force); err != nil {
			return err
		}
		dirs = append(dirs, opts.To)
	}
	for _, dir := range dirs {
		if err := writeExport(dir, files); err != nil {
			return err
		}
		fmt.Fprintf(c.stdout, "wrote %s and %s: %s µs, %s\n", filepath.Join(dir, files[0].Path), filepath.Join(dir, files[1].Path),
			us(exp.Result.Objective), exp.Key)
		if exp.Bundle != nil {
			fmt.Fprintf(c.stdout, "wrote the launcher %s (%s_forward; %d configs, kernel source %s in %s)\n",
				filepath.Join(dir, opts.Name+"_launch.h"), opts.Name, len(exp.Bundle.Configs), shortHash(exp.Bundle.KernelSourceHash),
				filepath.Join(dir, opts.Name+"_kernel"))
		}
	}
	if opts.Commit {
		return commitExport(ctx, c.stdout, opts.To, bundle.Paths(files), exp)
	}
	return nil
}

// newExport gathers the evidence for the archive's best configuration and
// the space of its problem, whose lookups only the command knows, and has
// package export build the export from them.
func newExport(a *elites.Archive, name, archivePath string, now time.Time) (export.Export, error) {
	meta := a.Meta()
	def, _ := familyDefault(meta.Problem, meta.Arch)
	ev, err := elites.Gather(a, def)
	if errors.Is(err, elites.ErrNoBest) {
		return export.Export{}, fmt.Errorf("export: archive %s holds no configuration that passed every gate", a.Dir())
	}
	if err != nil {
		return export.Export{}, fmt.Errorf("export: %w", err)
	}
	sp, err := familySpace("export", meta.Problem, cmp.Or(meta.Arch, kernels.DefaultArchOf(meta.Problem.Family)))
	if err != nil {
		return export.Export{}, fmt.Errorf("export: the archive's problem: %w", err)
	}
	exp, err := export.New(a, ev, sp, name, archivePath, now)
	if err != nil {
		return export.Export{}, fmt.Errorf("export: %w", err)
	}
	return exp, nil
}

// checkReplaceable refuses to overwrite a file in dir that export did not
// write, unless force: the main build's own header must not be lost to a
// typo in --name. A generated file must carry exportMarker; the kernel
// source, copied as it is, may be replaced when the launcher beside it is
// an export.
func checkReplaceable(dir, name string, files []bundle.File, force bool) error {
	if force {
		return nil
	}
	exported := func(path string) (exists, marked bool, err error) {
		f, err := os.Open(path)
		if errors.Is(err, os.ErrNotExist) {
			return false, false, nil
		}
		if err != nil {
			return false, false, fmt.Errorf("export --to: checking %s: %w", path, err)
		}
		defer f.Close()
		head := make([]byte, 1024)
		n, _ := io.ReadFull(f, head)
		return true, bytes.Contains(head[:n], []byte(exportMarker)), nil
	}
	kernelDir := name + "_kernel/"
	for _, file := range files {
		path := filepath.Join(dir, filepath.FromSlash(file.Path))
		exists, marked, err := exported(path)
		if err != nil {
			return err
		}
		if !exists || marked {
			continue
		}
		if strings.HasPrefix(file.Path, kernelDir) {
			launcher := filepath.Join(dir, name+"_launch.h")
			if _, ok, err := exported(launcher); err != nil {
				return err
			} else if ok {
				continue
			}
			return fmt.Errorf("export --to: %s exists and %s beside it is not an evotune export; use --force to replace it", path, launcher)
		}
		return fmt.Errorf("export --to: %s exists and is not an evotune export (it lacks %q); use --force to replace it", path, exportMarker)
	}
	return nil
}

// writeExport writes files into dir, each durably, so that a build never
// includes half a header, even after a power cut.
func writeExport(dir string, files []bundle.File) error {
	for _, f := range files {
		path := filepath.Join(dir, filepath.FromSlash(f.Path))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return fmt.Errorf("export: creating %s: %w", filepath.Dir(path), err)
		}
		if err := durable.WriteFile(path, f.Data, 0o644); err != nil {
			return fmt.Errorf("export: %w", err)
		}
	}
	return nil
}

// commitExport commits files (relative to dir) in the git work tree that
// holds dir, the evidence in the message. Only these files are committed,
// whatever else is staged there.
func commitExport(ctx context.Context, stdout io.Writer, dir string, files []string, e export.Export) error {
	out, err := git(ctx, dir, "rev-parse", "--is-inside-work-tree")
	if err != nil || strings.TrimSpace(out) != "true" {
		return fmt.Errorf("export --commit: %s is not inside a git work tree", dir)
	}
	if _, err := git(ctx, dir, append([]string{"add", "--"}, files...)...); err != nil {
		return fmt.Errorf("export --commit: %w", err)
	}
	subject, body := e.CommitMessage()
	args := append([]string{"commit", "-q", "-m", subject, "-m", body, "--"}, files...)
	if _, err := git(ctx, dir, args...); err != nil {
		return fmt.Errorf("export --commit: %w", err)
	}
	rev, err := git(ctx, dir, "rev-parse", "--short", "HEAD")
	if err != nil {
		return fmt.Errorf("export --commit: %w", err)
	}
	fmt.Fprintf(stdout, "committed %s in %s: %s\n", strings.Join(files, " and "), dir, strings.TrimSpace(rev))
	return nil
}

// git runs git -C dir args and returns its stdout; a failure carries git's
// stderr.
func git(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", append([]string{"-C", dir}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}
