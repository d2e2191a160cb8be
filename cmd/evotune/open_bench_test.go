package main

// Opening large archives: show, export and tune's open of archives of 10k,
// 100k and 300k results made from the H100 night's log (GPU results with
// their samples, about 5.8 KB a line). results/*-open-bench.md holds a run.
//
//	go test ./cmd/evotune -run '^$' -bench OpenArchive -benchtime 3x -timeout 1h

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"testing"

	"evotune/elites"
	"evotune/kernels"
	"evotune/space"
)

// nightArchive is the committed archive of a 20-minute H100 night.
const nightArchive = "../../results/2026-11-22-h100-night/archive"

// benchArchive returns an archive of n results made by repeating the
// night's log, each copy's configs told apart by an extra knob "copy" (so
// only the first copy's configs are of the knob space), and with the
// kernel source hash of this evotune's. It is made once in
// the directory $EVOTUNE_BENCH_DIR (else the temporary directory) and kept
// for later runs.
func benchArchive(b *testing.B, n int) string {
	b.Helper()
	root := os.Getenv("EVOTUNE_BENCH_DIR")
	if root == "" {
		root = os.TempDir()
	}
	dir := filepath.Join(root, fmt.Sprintf("evotune-open-bench-%d", n))
	if _, err := os.Stat(filepath.Join(dir, "done")); err == nil {
		return dir
	}
	os.RemoveAll(dir)
	night, err := elites.Read(nightArchive)
	if err != nil {
		b.Fatal(err)
	}
	// The results claim the kernel source this evotune embeds, so that
	// export has the source they name at hand.
	meta := night.Meta()
	oldHash, newHash := []byte(meta.SourceHash), []byte(kernels.SDPASource().Hash)
	meta.SourceHash = string(newHash)
	a, err := elites.Create(dir, meta)
	if err != nil {
		b.Fatal(err)
	}
	a.Close()
	f, err := os.Open(filepath.Join(nightArchive, "results.jsonl.gz"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		b.Fatal(err)
	}
	data, err := io.ReadAll(zr)
	if err != nil {
		b.Fatal(err)
	}
	lines := bytes.SplitAfter(bytes.TrimSuffix(data, []byte("\n")), []byte("\n"))
	head := regexp.MustCompile(`^\{"seq":\d+,"key":"([^"]*)","config":\{`)
	out, err := os.Create(filepath.Join(dir, "results.jsonl"))
	if err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriterSize(out, 1<<20)
	for i := range n {
		line, copyN := bytes.TrimSuffix(lines[i%len(lines)], []byte("\n")), i/len(lines)
		m := head.FindSubmatchIndex(line)
		if m == nil {
			b.Fatalf("line %d of the night's log does not start as a result", i%len(lines)+1)
		}
		key := string(line[m[2]:m[3]])
		if copyN > 0 {
			cfg, ok := space.FromKey(key)
			if !ok {
				b.Fatalf("line %d of the night's log: key %q", i%len(lines)+1, key)
			}
			cfg["copy"] = strconv.Itoa(copyN)
			key = cfg.Key()
		}
		line = bytes.ReplaceAll(line, oldHash, newHash)
		fmt.Fprintf(w, `{"seq":%d,"key":"%s","config":{`, i+1, key)
		if copyN > 0 {
			fmt.Fprintf(w, `"copy":"%d",`, copyN)
		}
		w.Write(line[m[1]:])
		w.WriteByte('\n')
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	if err := out.Close(); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "done"), nil, 0o644); err != nil {
		b.Fatal(err)
	}
	return dir
}

// BenchmarkOpenArchive times, for each size, elites.Read with no index
// (rebuild) and with one (read, what every reader starts with), elites.Open (tune's open for writing: lock, identity, the
// log), and the commands show and export end to end. It reports the heap
// held with the archive open (MB-live) beside the allocations.
func BenchmarkOpenArchive(b *testing.B) {
	for _, n := range []int{10_000, 100_000, 300_000} {
		dir := benchArchive(b, n)
		name := fmt.Sprintf("%dk", n/1000)
		// rebuild is a read with no index (results.idx): the whole log
		// decoded, as the first open after an older evotune wrote it.
		b.Run("rebuild/"+name, func(b *testing.B) {
			var a *elites.Archive
			for b.Loop() {
				b.StopTimer()
				os.Remove(filepath.Join(dir, "results.idx"))
				b.StartTimer()
				var err error
				if a, err = elites.Read(dir); err != nil {
					b.Fatal(err)
				}
			}
			reportLive(b, a)
		})
		if _, err := elites.Read(dir); err != nil { // the index, for what follows
			b.Fatal(err)
		}
		b.Run("read/"+name, func(b *testing.B) {
			var a *elites.Archive
			for b.Loop() {
				var err error
				if a, err = elites.Read(dir); err != nil {
					b.Fatal(err)
				}
			}
			reportLive(b, a)
		})
		b.Run("open/"+name, func(b *testing.B) {
			var a *elites.Archive
			meta := readMeta(b, dir)
			for b.Loop() {
				var err error
				if a, err = elites.Open(dir, meta, elites.OpenOptions{}); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				a.Close()
				b.StartTimer()
			}
			reportLive(b, a)
		})
		for _, cmd := range [][]string{{"show", "--archive", dir}, {"export", "--archive", dir, "--out", b.TempDir()}} {
			b.Run(cmd[0]+"/"+name, func(b *testing.B) {
				for b.Loop() {
					var stdout, stderr bytes.Buffer
					if err := run(b.Context(), cmd, &stdout, &stderr); err != nil {
						b.Fatalf("%v: %v\n%s", cmd, err, stderr.String())
					}
				}
			})
		}
	}
}

// BenchmarkResume times tune resuming an evo search that evaluated a whole
// Kernel Tuner space and finds its --evals reached: opening the archive,
// checking the state against the log, restoring the search, and reading the
// Kernel Tuner file that answers it (about half of the time). 83k is
// ktGEMM (82,944 configs); 100k is a synthetic space of 120,000 configs
// searched for 100,000 evaluations (syntheticKT). A search over all of a
// space leaves its results with the search state beside them, as a long
// night on a GPU does. The archives are made once (minutes each) in
// $EVOTUNE_BENCH_DIR.
func BenchmarkResume(b *testing.B) {
	root := os.Getenv("EVOTUNE_BENCH_DIR")
	if root == "" {
		root = os.TempDir()
	}
	synthetic := filepath.Join(root, "evotune-resume-bench-synthetic-120000.json.gz")
	if _, err := os.Stat(synthetic); err != nil {
		syntheticKT(b, synthetic)
	}
	for _, c := range []struct {
		name, file string
		evals      int
	}{{"83k", ktGEMM, 82944}, {"100k", synthetic, 100000}} {
		dir := filepath.Join(root, fmt.Sprintf("evotune-resume-bench-%d", c.evals))
		args := []string{"tune", "--kt-cache", c.file, "--archive", dir, "--evals", strconv.Itoa(c.evals), "--quiet"}
		if _, err := os.Stat(filepath.Join(dir, "done")); err != nil {
			os.RemoveAll(dir)
			var stdout, stderr bytes.Buffer
			if err := run(b.Context(), args, &stdout, &stderr); err != nil {
				b.Fatalf("making the archive: %v\n%s", err, stderr.String())
			}
			if err := os.WriteFile(filepath.Join(dir, "done"), nil, 0o644); err != nil {
				b.Fatal(err)
			}
		}
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				var stdout, stderr bytes.Buffer
				if err := run(b.Context(), args, &stdout, &stderr); err != nil {
					b.Fatalf("%v: %v\n%s", args, err, stderr.String())
				}
			}
		})
	}
}

// syntheticKT writes a Kernel Tuner cache file of 120,000 configs (six
// parameters of 10, 10, 10, 10, 4 and 3 values): about one in five a
// compile failure, the others timed by a smooth function of the values with
// a deterministic ripple, so that a search has a landscape to climb.
func syntheticKT(b *testing.B, path string) {
	b.Helper()
	names := []string{"a", "b", "c", "d", "e", "f"}
	sizes := []int{10, 10, 10, 10, 4, 3}
	var buf bytes.Buffer
	buf.WriteString(`{"device_name": "synthetic", "kernel_name": "synthetic", "tune_params_keys": ["a", "b", "c", "d", "e", "f"], "tune_params": {`)
	for i, n := range names {
		if i > 0 {
			buf.WriteString(", ")
		}
		fmt.Fprintf(&buf, "%q: [", n)
		for v := range sizes[i] {
			if v > 0 {
				buf.WriteString(", ")
			}
			fmt.Fprintf(&buf, "%d", v)
		}
		buf.WriteString("]")
	}
	buf.WriteString(`}, "cache": {`)
	idx := make([]int, len(sizes))
	for n := 0; ; n++ {
		if n > 0 {
			buf.WriteString(", ")
		}
		key := fmt.Sprintf("%d,%d,%d,%d,%d,%d", idx[0], idx[1], idx[2], idx[3], idx[4], idx[5])
		h := (idx[0]*7919 + idx[1]*104729 + idx[2]*1299709 + idx[3]*15485863 + idx[4]*179424673 + idx[5]*32452843) % 1000
		if h < 200 {
			fmt.Fprintf(&buf, "%q: {\"time\": \"CompilationFailedConfig\"}", key)
		} else {
			t := 1.0
			for i, v := range idx {
				d := float64(v) - float64(sizes[i])*0.6
				t += 0.02 * d * d
			}
			t += float64(h%97) / 500
			fmt.Fprintf(&buf, "%q: {\"time\": %.6f}", key, t)
		}
		i := len(idx) - 1
		for i >= 0 {
			idx[i]++
			if idx[i] < sizes[i] {
				break
			}
			idx[i] = 0
			i--
		}
		if i < 0 {
			break
		}
	}
	buf.WriteString("}}\n")
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(buf.Bytes())
	if err := zw.Close(); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(path, gz.Bytes(), 0o644); err != nil {
		b.Fatal(err)
	}
}

func readMeta(b *testing.B, dir string) elites.Meta {
	a, err := elites.Read(dir)
	if err != nil {
		b.Fatal(err)
	}
	return a.Meta()
}

// reportLive reports the heap held while a is open.
func reportLive(b *testing.B, a *elites.Archive) {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b.ReportMetric(float64(ms.HeapAlloc)/(1<<20), "MB-live")
	runtime.KeepAlive(a)
}
