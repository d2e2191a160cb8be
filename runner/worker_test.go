package runner

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"evotune/internal/testtool"
	"evotune/kernels"
)

// The test binary doubles as a fake GPU worker: run with fakeWorkerEnv set,
// it serves the worker protocol, acting on each request's Cubin field.
const fakeWorkerEnv = "EVOTUNE_FAKE_WORKER"

func TestMain(m *testing.M) {
	switch os.Getenv(fakeWorkerEnv) {
	case "":
		os.Exit(m.Run())
	case "sleeper":
		time.Sleep(time.Hour)
		os.Exit(0)
	default:
		os.Exit(fakeWorker())
	}
}

// fakeWorker answers requests; the Cubin field picks its behaviour:
//
//	""              answer (info: the device name carries CUDA_VISIBLE_DEVICES)
//	"hang"          never answer
//	"exit7"         write to stderr and exit with status 7 without answering
//	"selfkill"      die of SIGKILL without answering
//	"sticky"        answer a sticky error, then exit 3
//	"error"         answer a non-sticky error
//	"garbage"       answer a line that is not JSON
//	"wrongid"       answer with another ID
//	"partial"       write half a line, then exit
//	"spawn:FILE"    start a child process, write its pid to FILE, never answer
//	"slow:MS"       answer after MS milliseconds
func fakeWorker() int {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<20)
	out := bufio.NewWriter(os.Stdout)
	answer := func(r kernels.Response) {
		b, _ := json.Marshal(r)
		out.Write(append(b, '\n'))
		out.Flush()
	}
	for in.Scan() {
		var req kernels.Request
		if err := json.Unmarshal(in.Bytes(), &req); err != nil {
			answer(kernels.Response{Error: "bad request JSON: " + err.Error()})
			continue
		}
		mode, arg, _ := strings.Cut(req.Cubin, ":")
		switch mode {
		case "hang":
			time.Sleep(time.Hour)
		case "exit7":
			fmt.Fprintln(os.Stderr, "fake worker: giving up on request", req.ID)
			return 7
		case "selfkill":
			fmt.Fprintln(os.Stderr, "fake worker: about to die")
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
			time.Sleep(time.Hour)
		case "sticky":
			fmt.Fprintln(os.Stderr, "fake worker: context lost")
			answer(kernels.Response{ID: req.ID, Error: "cuStreamSynchronize: CUDA_ERROR_ILLEGAL_ADDRESS", Sticky: true})
			return 3
		case "error":
			answer(kernels.Response{ID: req.ID, Error: "cuModuleGetFunction: CUDA_ERROR_NOT_FOUND"})
		case "garbage":
			out.WriteString("Segmentation fault? not JSON\n")
			out.Flush()
		case "wrongid":
			answer(kernels.Response{ID: req.ID + 1000})
		case "partial":
			out.WriteString(`{"id":`)
			out.Flush()
			return 0
		case "spawn":
			child := exec.Command(os.Args[0])
			child.Env = append(os.Environ(), fakeWorkerEnv+"=sleeper")
			if err := child.Start(); err != nil {
				fmt.Fprintln(os.Stderr, "fake worker:", err)
				return 1
			}
			os.WriteFile(arg, []byte(strconv.Itoa(child.Process.Pid)), 0o644)
			time.Sleep(time.Hour)
		case "slow":
			ms, _ := strconv.Atoi(arg)
			time.Sleep(time.Duration(ms) * time.Millisecond)
			answer(kernels.Response{ID: req.ID})
		default:
			r := kernels.Response{ID: req.ID}
			if req.Op == kernels.OpInfo {
				r.Device = "fake GPU " + os.Getenv("CUDA_VISIBLE_DEVICES")
				r.ComputeCap = "9.0"
			}
			answer(r)
			if req.Op == kernels.OpQuit {
				return 0
			}
		}
	}
	return 0
}

func startFake(t *testing.T, gpu int) *Worker {
	t.Helper()
	t.Setenv(fakeWorkerEnv, "serve")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	w, err := StartWorker(context.Background(), exe, gpu, nil)
	if err != nil {
		t.Fatalf("StartWorker: %v", err)
	}
	t.Cleanup(func() { w.Close() })
	return w
}

func fakeReq(op, cubin string) kernels.Request { return kernels.Request{Op: op, Cubin: cubin} }

// mustAnswer asserts that the worker answers req without error.
func mustAnswer(t *testing.T, w *Worker, r kernels.Request) kernels.Response {
	t.Helper()
	resp, err := w.Do(context.Background(), r, 10*time.Second)
	if err != nil {
		t.Fatalf("Do(%s %q): %v", r.Op, r.Cubin, err)
	}
	if resp.Error != "" {
		t.Fatalf("Do(%s %q): error response %q", r.Op, r.Cubin, resp.Error)
	}
	return resp
}

func TestWorkerAnswersAndSetsDevice(t *testing.T) {
	w := startFake(t, 3)
	resp := mustAnswer(t, w, fakeReq(kernels.OpInfo, ""))
	if resp.Device != "fake GPU 3" {
		t.Errorf("device = %q, want the worker to see CUDA_VISIBLE_DEVICES=3", resp.Device)
	}
	first := resp.ID
	resp = mustAnswer(t, w, fakeReq(kernels.OpCheck, ""))
	if resp.ID != first+1 {
		t.Errorf("second request ID = %d, want %d", resp.ID, first+1)
	}
	if n := w.Restarts(); n != 0 {
		t.Errorf("Restarts = %d, want 0", n)
	}
	if err := w.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if _, err := w.Do(context.Background(), fakeReq(kernels.OpInfo, ""), time.Second); err == nil {
		t.Error("Do after Close succeeded")
	}
}

// TestWorkerFailures checks how each way of failing is classified, and that
// the next request is served by a restarted worker.
func TestWorkerFailures(t *testing.T) {
	tests := []struct {
		cubin    string
		timeout  time.Duration
		wantErr  error  // nil: a response comes back
		wantText string // in the error, or in the response's Error
		sticky   bool
		restart  bool
	}{
		{cubin: "error", wantText: "CUDA_ERROR_NOT_FOUND"},
		{cubin: "slow:50", timeout: 5 * time.Second},
		{cubin: "sticky", wantText: "ILLEGAL_ADDRESS", sticky: true, restart: true},
		{cubin: "exit7", wantErr: ErrWorkerDied, wantText: "exit status 7; stderr: fake worker: giving up on request", restart: true},
		{cubin: "selfkill", wantErr: ErrWorkerDied, wantText: "killed by signal killed; stderr: fake worker: about to die", restart: true},
		{cubin: "partial", wantErr: ErrWorkerDied, wantText: "exit status 0", restart: true},
		{cubin: "hang", timeout: 300 * time.Millisecond, wantErr: ErrWorkerTimeout, wantText: "no answer after", restart: true},
		{cubin: "garbage", wantErr: ErrWorkerProtocol, wantText: "not JSON", restart: true},
		{cubin: "wrongid", wantErr: ErrWorkerProtocol, wantText: "answered with id", restart: true},
	}
	for _, tt := range tests {
		t.Run(tt.cubin, func(t *testing.T) {
			w := startFake(t, 0)
			mustAnswer(t, w, fakeReq(kernels.OpInfo, ""))
			timeout := tt.timeout
			if timeout == 0 {
				timeout = 10 * time.Second
			}
			resp, err := w.Do(context.Background(), fakeReq(kernels.OpCheck, tt.cubin), timeout)
			switch {
			case tt.wantErr != nil:
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("error = %v, want %v", err, tt.wantErr)
				}
				if !strings.Contains(err.Error(), tt.wantText) {
					t.Errorf("error %q does not contain %q", err, tt.wantText)
				}
			case err != nil:
				t.Fatalf("error = %v, want a response", err)
			default:
				if !strings.Contains(resp.Error, tt.wantText) {
					t.Errorf("response error %q does not contain %q", resp.Error, tt.wantText)
				}
				if resp.Sticky != tt.sticky {
					t.Errorf("sticky = %v, want %v", resp.Sticky, tt.sticky)
				}
			}
			// The next request works, on a new process when the old one is gone.
			after := mustAnswer(t, w, fakeReq(kernels.OpInfo, ""))
			if after.Device != "fake GPU 0" {
				t.Errorf("after: device = %q", after.Device)
			}
			want := 0
			if tt.restart {
				want = 1
			}
			if got := w.Restarts(); got != want {
				t.Errorf("Restarts = %d, want %d", got, want)
			}
		})
	}
}

func TestWorkerContextCancel(t *testing.T) {
	w := startFake(t, 0)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	start := time.Now()
	_, err := w.Do(ctx, fakeReq(kernels.OpTime, "hang"), time.Minute)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error = %v, want context.Canceled", err)
	}
	if errors.Is(err, ErrWorkerTimeout) {
		t.Errorf("a cancellation is not a timeout: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Do returned %s after cancel", d)
	}
	mustAnswer(t, w, fakeReq(kernels.OpInfo, ""))
	if got := w.Restarts(); got != 1 {
		t.Errorf("Restarts = %d, want 1", got)
	}
}

// TestWorkerTimeoutKillsChildren checks that a timeout kills the worker's
// whole process group, not just the worker.
func TestWorkerTimeoutKillsChildren(t *testing.T) {
	w := startFake(t, 0)
	pidFile := filepath.Join(t.TempDir(), "child.pid")
	_, err := w.Do(context.Background(), fakeReq(kernels.OpTime, "spawn:"+pidFile), 2*time.Second)
	if !errors.Is(err, ErrWorkerTimeout) {
		t.Fatalf("error = %v, want ErrWorkerTimeout", err)
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatalf("the fake worker did not record its child: %v", err)
	}
	pid, err := strconv.Atoi(string(b))
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for processAlive(pid) {
		if time.Now().After(deadline) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("child %d of the killed worker is still running", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// processAlive reports whether pid runs (a zombie waiting for its reaper does not).
func processAlive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

func TestWorkerSerialisesConcurrentCalls(t *testing.T) {
	w := startFake(t, 0)
	var wg sync.WaitGroup
	ids := make(chan int64, 16)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := w.Do(context.Background(), fakeReq(kernels.OpCheck, "slow:5"), 10*time.Second)
			if err != nil || resp.Error != "" {
				t.Errorf("Do: %v %q", err, resp.Error)
				return
			}
			ids <- resp.ID
		}()
	}
	wg.Wait()
	close(ids)
	seen := map[int64]bool{}
	for id := range ids {
		if seen[id] {
			t.Errorf("ID %d answered twice", id)
		}
		seen[id] = true
	}
	if len(seen) != 16 {
		t.Errorf("%d distinct answers, want 16", len(seen))
	}
}

func TestWorkerQuit(t *testing.T) {
	w := startFake(t, 0)
	mustAnswer(t, w, fakeReq(kernels.OpQuit, ""))
	if err := w.Close(); err != nil {
		t.Errorf("Close after quit: %v", err)
	}
}

func TestStartWorkerMissingBinary(t *testing.T) {
	_, err := StartWorker(context.Background(), filepath.Join(t.TempDir(), "no-worker"), 0, nil)
	if err == nil || !strings.Contains(err.Error(), "no-worker") {
		t.Errorf("error = %v, want one naming the binary", err)
	}
}

func TestTailWriter(t *testing.T) {
	var tw tailWriter
	for i := range 2000 {
		fmt.Fprintf(&tw, "line %d\n", i)
	}
	got := tw.lines(3)
	want := []string{"line 1997", "line 1998", "line 1999"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("lines(3) = %q, want %q", got, want)
	}
	if len(tw.buf) > 2*tailBytes {
		t.Errorf("kept %d bytes, want at most %d", len(tw.buf), 2*tailBytes)
	}
}

// writeFakeNVCC writes a shell script that answers --version, logs each
// compile to log, checks that worker.cu and sdpa_params.h were written into
// the -I directory, and writes a stub binary to -o (or fails, when fail).
func writeFakeNVCC(t *testing.T, dir, log string, fail bool) string {
	t.Helper()
	body := `#!/bin/sh
if [ "$1" = "--version" ]; then echo "Cuda compilation tools, release 12.4, V12.4.99"; exit 0; fi
echo "$@" >> ` + log + `
inc= out= src=
while [ $# -gt 0 ]; do
  case "$1" in
    -I*) inc="${1#-I}" ;;
    -o) shift; out="$1" ;;
    *.cu) src="$1" ;;
  esac
  shift
done
[ -f "$src" ] || { echo "fatal error: $src missing" >&2; exit 2; }
case "$src" in */worker.cu) [ -f "$inc/sdpa_params.h" ] || { echo "fatal error: sdpa_params.h missing in $inc" >&2; exit 2; } ;; esac
`
	if fail {
		body += "echo \"$inc/worker.cu(12): error: identifier \\\"cudaFoo\\\" is undefined\" >&2\nexit 1\n"
	} else {
		body += "printf '#!/bin/sh\\necho worker\\n' > \"$out\"; chmod +x \"$out\"\n"
	}
	name := "nvcc"
	if fail {
		name = "nvcc-bad"
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

func countLines(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "\n")
}

func TestBuildWorkerCaches(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "nvcc.log")
	nvcc := writeFakeNVCC(t, dir, log, false)
	cache := filepath.Join(dir, "cache")
	ctx := context.Background()

	p1, err := BuildWorker(ctx, nvcc, kernels.WorkerSource(), "sm_89", cache)
	if err != nil {
		t.Fatalf("BuildWorker: %v", err)
	}
	if !isExecutable(p1) {
		t.Fatalf("%s is not an executable file", p1)
	}
	args, _ := os.ReadFile(log)
	for _, want := range []string{"-O2", "-std=c++17", "-arch=sm_89", "-lcuda", "worker.cu"} {
		if !strings.Contains(string(args), want) {
			t.Errorf("nvcc arguments %q lack %q", args, want)
		}
	}
	p2, err := BuildWorker(ctx, nvcc, kernels.WorkerSource(), "sm_89", cache)
	if err != nil || p2 != p1 {
		t.Fatalf("second BuildWorker = %q, %v; want %q from the cache", p2, err, p1)
	}
	if n := countLines(t, log); n != 1 {
		t.Errorf("nvcc ran %d times for the same arch, want 1", n)
	}
	p3, err := BuildWorker(ctx, nvcc, kernels.WorkerSource(), "sm_90", cache)
	if err != nil || p3 == p1 {
		t.Fatalf("BuildWorker(sm_90) = %q, %v; want a new build", p3, err)
	}
	if n := countLines(t, log); n != 2 {
		t.Errorf("nvcc ran %d times for two archs, want 2", n)
	}
	// Another family's worker is its own build, of its own file.
	toy := kernels.Source{Name: "toy_worker.cu", Files: map[string][]byte{"toy_worker.cu": []byte("int main() { return 0; }\n")}, Hash: "toy"}
	p4, err := BuildWorker(ctx, nvcc, toy, "sm_89", cache)
	if err != nil || p4 == p1 {
		t.Fatalf("BuildWorker(toy, sm_89) = %q, %v; want a build of its own", p4, err)
	}
	if args, _ := os.ReadFile(log); countLines(t, log) != 3 || !strings.Contains(string(args), "toy_worker.cu") {
		t.Errorf("nvcc did not compile the toy family's worker source:\n%s", args)
	}
	if _, err := BuildWorker(ctx, nvcc, kernels.Source{}, "sm_89", cache); err == nil {
		t.Error("BuildWorker with no worker source succeeded")
	}
	entries, _ := os.ReadDir(cache)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			t.Errorf("temporary %s left in the cache", e.Name())
		}
	}
}

func TestBuildWorkerCompileError(t *testing.T) {
	dir := t.TempDir()
	nvcc := writeFakeNVCC(t, dir, filepath.Join(dir, "log"), true)
	cache := filepath.Join(dir, "cache")
	_, err := BuildWorker(context.Background(), nvcc, kernels.WorkerSource(), "sm_89", cache)
	if err == nil {
		t.Fatal("BuildWorker succeeded with a failing nvcc")
	}
	if !strings.Contains(err.Error(), `worker.cu(12): error: identifier "cudaFoo" is undefined`) {
		t.Errorf("error %q lacks nvcc's message", err)
	}
	entries, _ := os.ReadDir(cache)
	if len(entries) != 0 {
		t.Errorf("a failed build left %d entries in the cache", len(entries))
	}
}

func TestWorkerSourceHash(t *testing.T) {
	a, b := kernels.WorkerSource(), kernels.WorkerSource()
	if a.Hash == "" || a.Hash != b.Hash {
		t.Fatalf("hash %q vs %q: want stable and non-empty", a.Hash, b.Hash)
	}
	if a.Hash == kernels.SDPASource().Hash {
		t.Error("worker and SDPA sources hash alike")
	}
	for _, name := range []string{"worker.cu", "sdpa_params.h"} {
		if len(a.Files[name]) == 0 {
			t.Errorf("worker source lacks %s", name)
		}
	}
}

// realNVCC returns an nvcc to build the real worker with, or skips.
func realNVCC(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("building the real worker takes about half a minute; skipped with -short")
	}
	return testNVCC(t)
}

// testNVCC finds the nvcc that the compile tests use (CUDA_HOME,
// /usr/local/cuda, PATH). Without one the test skips, except in CI, which
// installs nvcc: there a missing nvcc fails, so that no compile test is
// skipped unnoticed.
func testNVCC(t *testing.T) string {
	t.Helper()
	for _, p := range NVCCLocations("", os.Getenv("CUDA_HOME")) {
		if isExecutable(p) {
			return p
		}
	}
	return testtool.LookPath(t, "nvcc", "nor in CUDA_HOME or /usr/local/cuda; the compile tests need it", "installs it")
}

// TestRealWorkerBuildsWithFP8NVCC builds the real worker for sm_89 and
// sm_90 with the nvcc that fp8 needs ($EVOTUNE_FP8_NVCC, 12.4 or newer),
// which is the one a tune on an fp8 problem uses when the system's is older.
// CI sets it to the private toolkit of .ci/nvcc12, whose profile once linked
// against the system's 11.8 runtime library and failed.
func TestRealWorkerBuildsWithFP8NVCC(t *testing.T) {
	if testing.Short() {
		t.Skip("building the real worker takes about half a minute; skipped with -short")
	}
	nvcc := os.Getenv("EVOTUNE_FP8_NVCC")
	if nvcc == "" {
		testtool.Missing(t, "EVOTUNE_FP8_NVCC names no nvcc 12.4 or newer", "sets it (.ci/nvcc12)")
	}
	cache := t.TempDir()
	for _, arch := range []string{"sm_89", "sm_90"} {
		bin, err := BuildWorker(context.Background(), nvcc, kernels.WorkerSource(), arch, cache)
		if err != nil {
			t.Fatalf("%s: %v", arch, err)
		}
		if !isExecutable(bin) {
			t.Fatalf("%s: %s is not an executable file", arch, bin)
		}
	}
}

// TestRealWorkerProtocol builds the real worker with the nvcc at hand and
// checks, with or without a GPU, that it answers every line, malformed or
// not, with exactly one JSON line carrying the request's ID, and survives.
func TestRealWorkerProtocol(t *testing.T) {
	nvcc := realNVCC(t)
	bin, err := BuildWorker(context.Background(), nvcc, kernels.WorkerSource(), "sm_80", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	lines := []struct {
		in       string
		wantID   int64
		wantText string // in the error; "" means no error unless there is no GPU
	}{
		{in: `not json`, wantText: "bad request JSON"},
		{in: `{"id":5,"op":"zap"}`, wantID: 5, wantText: `unknown op "zap"`},
		{in: `{"id":6,"op":"check","cubin":"/nonexistent.cubin","plan":{"launches":[{"kernel":"k","grid":[1,1,1],"block":[32,1,1],"smem":0}]},"shape":{"b":1,"h":1,"s":1,"d":64},"dtype":"fp16"}`,
			wantID: 6, wantText: "cubin /nonexistent.cubin"},
		{in: `{"id":7,"op":"check","cubin":"x","plan":{"launches":null},"shape":{"b":1,"h":1,"s":1,"d":64},"dtype":"fp16"}`,
			wantID: 7, wantText: "plan.launches"},
		{in: `{"id":8,"op":"time","cubin":"x","plan":{"launches":[{"kernel":"k","grid":[1,1,1],"block":[32,1,1]}]},"shape":{"b":1,"h":0,"s":1,"d":64},"dtype":"fp16"}`,
			wantID: 8, wantText: "every dimension must be positive"},
		{in: `{"id":9,"op":"check","cubin":"x","plan":{"launches":[{"kernel":"k","grid":[1,1],"block":[32,1,1]}]},"shape":{"b":1,"h":1,"s":1,"d":64}}`,
			wantID: 9, wantText: "want 3 integers"},
		{in: `{"id":10,"op":"check","cubin":"x","plan":{"launches":[{"kernel":"k","grid":[1,1,1],"block":[32,1,1]}]},"shape":{"b":1,"h":1,"s":1,"d":64},"dtype":"fp4"}`,
			wantID: 10, wantText: "fp4"},
		{in: `{"id":21,"op":"check","cubin":"x","plan":{"launches":[{"kernel":"k","grid":[1,1,1],"block":[32,1,1]}]},"shape":{"b":1,"h":1,"s":1,"d":64},"dtype":"fp16","out_dtype":"bf16"}`,
			wantID: 21, wantText: "out_dtype"},
		{in: `{"id":22,"op":"check","cubin":"x","plan":{"launches":[{"kernel":"k","grid":[1,1,1],"block":[32,1,1]}]},"shape":{"b":1,"h":1,"s":1,"d":64},"dtype":"fp8","out_dtype":"fp8"}`,
			wantID: 22, wantText: "fp16 or bf16"},
		{in: `{"id":23,"op":"check","cubin":"x","plan":{"launches":[{"kernel":"k","grid":[1,1,1],"block":[32,1,1]}]},"shape":{"b":1,"h":1,"s":1,"d":64},"dtype":"fp8","input_dist":"cauchy"}`,
			wantID: 23, wantText: "input_dist"},
		{in: `{"id":11,"op":"check","seed":-1,"cubin":"x","plan":{"launches":[{"kernel":"k","grid":[1,1,1],"block":[32,1,1]}]},"shape":{"b":1,"h":1,"s":1,"d":64},"dtype":"fp16"}`,
			wantID: 11, wantText: "seed"},
		{in: `{"id":12,"op":"info","extra":{"nested":[1,2,{"x":"\u00e9\n"}]}}`, wantID: 12},
		{in: `[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[`, wantText: "bad request JSON"},
		{in: `{"id":13,"op":"info"} trailing`, wantText: "unexpected text after the value"},
		{in: `{"id":14,"op":"quit"}`, wantID: 14},
	}
	cmd := exec.Command(bin)
	var input strings.Builder
	for _, l := range lines {
		input.WriteString(l.in + "\n")
	}
	cmd.Stdin = strings.NewReader(input.String())
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("worker: %v (stdout %q)", err, out)
	}
	got := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(got) != len(lines) {
		t.Fatalf("%d response lines for %d requests:\n%s", len(got), len(lines), out)
	}
	for i, l := range lines {
		var resp kernels.Response
		if err := json.Unmarshal([]byte(got[i]), &resp); err != nil {
			t.Errorf("line %d: response %q is not JSON: %v", i, got[i], err)
			continue
		}
		if resp.ID != l.wantID {
			t.Errorf("line %d: id %d, want %d", i, resp.ID, l.wantID)
		}
		if resp.Sticky {
			t.Errorf("line %d: a bad request made a sticky error: %q", i, resp.Error)
		}
		switch {
		case l.wantText != "":
			if !strings.Contains(resp.Error, l.wantText) {
				t.Errorf("line %d: error %q, want one containing %q", i, resp.Error, l.wantText)
			}
		case resp.Error != "" && !strings.Contains(resp.Error, "cudaErrorNoDevice") && !strings.Contains(resp.Error, "cudaErrorInsufficientDriver"):
			t.Errorf("line %d: unexpected error %q", i, resp.Error)
		}
	}
}
