package runner

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"evotune/kernels"
)

// Errors of the GPU worker process. Do wraps them with detail: the exit
// status or signal and the last lines the worker wrote to stderr.
var (
	// ErrWorkerDied means the worker exited or closed its stdout before answering.
	ErrWorkerDied = errors.New("GPU worker died")
	// ErrWorkerTimeout means the worker did not answer in time and was killed.
	ErrWorkerTimeout = errors.New("GPU worker timed out")
	// ErrWorkerProtocol means the worker's answer was not the response to
	// the request (not JSON, or another request's ID); it was killed.
	ErrWorkerProtocol = errors.New("GPU worker broke the protocol")
)

// workerBuildTimeout bounds the one nvcc run that builds the worker.
const workerBuildTimeout = 5 * time.Minute

// BuildWorker returns the path of the GPU worker binary built from src (a
// kernel family's Worker()) by nvcc for arch ("sm_89"), building it when
// cacheDir does not hold one for the same source hash, nvcc (path and
// release) and arch. A failed build's error carries nvcc's output.
func BuildWorker(ctx context.Context, nvcc string, src kernels.Source, arch, cacheDir string) (string, error) {
	if nvcc == "" || arch == "" || cacheDir == "" || src.Name == "" {
		return "", errors.New("building the GPU worker: nvcc, the worker's source, arch and cache dir are all required")
	}
	version, err := NVCCVersion(ctx, nvcc)
	if err != nil {
		return "", fmt.Errorf("building the GPU worker: %w", err)
	}
	abs, err := filepath.Abs(nvcc)
	if err != nil {
		abs = nvcc
	}
	h := sha256.New()
	for _, part := range []string{src.Hash, abs, version, arch} {
		fmt.Fprintf(h, "%d:%s\n", len(part), part)
	}
	key := hex.EncodeToString(h.Sum(nil))[:24]
	dir := filepath.Join(cacheDir, "worker-"+key)
	bin := filepath.Join(dir, "worker")
	if isExecutable(bin) {
		return bin, nil
	}
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return "", fmt.Errorf("building the GPU worker: cache dir: %w", err)
	}
	// Build in a private directory and rename it into place whole, so that a
	// concurrent evotune sees either no worker or a complete one.
	tmp, err := os.MkdirTemp(cacheDir, ".worker-")
	if err != nil {
		return "", fmt.Errorf("building the GPU worker: %w", err)
	}
	defer os.RemoveAll(tmp)
	for name, b := range src.Files {
		if err := os.WriteFile(filepath.Join(tmp, name), b, 0o644); err != nil {
			return "", fmt.Errorf("building the GPU worker: writing %s: %w", name, err)
		}
	}
	tctx, cancel := context.WithTimeout(ctx, workerBuildTimeout)
	defer cancel()
	args := []string{"-O2", "-std=c++17", "-arch=" + arch, "-I" + tmp, "-o", filepath.Join(tmp, "worker"),
		filepath.Join(tmp, src.Name), "-lcuda"}
	cmd := exec.CommandContext(tctx, nvcc, args...)
	cmd.Dir = tmp
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		if tctx.Err() != nil {
			err = fmt.Errorf("ran past its %s limit", workerBuildTimeout)
		}
		text := strings.TrimSpace(strings.ReplaceAll(out.String(), tmp+string(filepath.Separator), ""))
		return "", fmt.Errorf("building the GPU worker: %s %s: %w\n%s", nvcc, strings.Join(args, " "), err, text)
	}
	if err := os.Rename(tmp, dir); err != nil && !isExecutable(bin) {
		return "", fmt.Errorf("building the GPU worker: %w", err)
	}
	return bin, nil
}

// A Worker is the client of one GPU worker process: it sends one request at
// a time and restarts the process when it died, timed out, broke the
// protocol or lost its CUDA context. It is safe for concurrent use; calls
// are serialised.
type Worker struct {
	bin    string
	gpu    int
	stderr io.Writer

	mu       sync.Mutex
	proc     *workerProc // nil when the next Do must start one
	nextID   int64
	starts   int
	closed   bool
	closeErr error
}

// A workerProc is one running worker process.
type workerProc struct {
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	lines   chan []byte   // response lines; closed when stdout ends
	stop    chan struct{} // closed to release the reader
	done    chan struct{} // closed when the process has been waited for
	waitErr error         // valid after done
	tail    *tailWriter
}

// StartWorker starts the worker binary bin on GPU gpu (through
// CUDA_VISIBLE_DEVICES, so the worker sees it as device 0) in its own
// process group. The worker's stderr is copied to stderr when non-nil.
func StartWorker(ctx context.Context, bin string, gpu int, stderr io.Writer) (*Worker, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	w := &Worker{bin: bin, gpu: gpu, stderr: stderr}
	if err := w.start(); err != nil {
		return nil, err
	}
	return w, nil
}

// Restarts returns how many times the worker process was started again
// after a death, a timeout, a protocol error or a lost context.
func (w *Worker) Restarts() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return max(0, w.starts-1)
}

func (w *Worker) start() error {
	pr, pw, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("starting GPU worker %s: %w", w.bin, err)
	}
	cmd := exec.Command(w.bin)
	cmd.Env = append(os.Environ(), "CUDA_VISIBLE_DEVICES="+strconv.Itoa(w.gpu))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = 2 * time.Second
	// A plain pipe (not StdoutPipe): the reader may then run past Wait.
	cmd.Stdout = pw
	tail := &tailWriter{}
	if w.stderr != nil {
		cmd.Stderr = io.MultiWriter(tail, w.stderr)
	} else {
		cmd.Stderr = tail
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		pr.Close()
		pw.Close()
		return fmt.Errorf("starting GPU worker %s: %w", w.bin, err)
	}
	if err := cmd.Start(); err != nil {
		pr.Close()
		pw.Close()
		return fmt.Errorf("starting GPU worker %s: %w", w.bin, err)
	}
	pw.Close() // the child holds its own copy; EOF comes when it exits
	p := &workerProc{
		cmd:   cmd,
		stdin: stdin,
		lines: make(chan []byte),
		stop:  make(chan struct{}),
		done:  make(chan struct{}),
		tail:  tail,
	}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.done)
	}()
	go p.read(pr)
	w.proc = p
	w.starts++
	return nil
}

// read passes complete stdout lines to p.lines until stdout ends.
func (p *workerProc) read(r *os.File) {
	defer r.Close()
	defer close(p.lines)
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := br.ReadBytes('\n')
		if err != nil {
			return // a partial last line means the worker died mid-answer
		}
		select {
		case p.lines <- line:
		case <-p.stop:
			return
		}
	}
}

// Do sends req (with a fresh ID) and returns the worker's response. A
// response with Error set is returned with a nil error: the request failed
// on the GPU side and the response says why (Sticky when the context was
// lost; the worker is then restarted by the next Do). timeout ≤ 0 means no
// limit beyond ctx. On timeout the worker's process group is killed and the
// error wraps ErrWorkerTimeout; on cancellation it wraps ctx.Err().
func (w *Worker) Do(ctx context.Context, req kernels.Request, timeout time.Duration) (kernels.Response, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return kernels.Response{}, errors.New("GPU worker: Do after Close")
	}
	if err := ctx.Err(); err != nil {
		return kernels.Response{}, err
	}
	if w.proc == nil {
		if err := w.start(); err != nil {
			return kernels.Response{}, err
		}
	}
	p := w.proc
	w.nextID++
	req.ID = w.nextID
	line, err := json.Marshal(req)
	if err != nil {
		return kernels.Response{}, fmt.Errorf("encoding %s request: %w", req.Op, err)
	}
	start := time.Now()
	if _, err := p.stdin.Write(append(line, '\n')); err != nil {
		return kernels.Response{}, w.died(p, req)
	}
	var expire <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		expire = t.C
	}
	select {
	case out, ok := <-p.lines:
		if !ok {
			return kernels.Response{}, w.died(p, req)
		}
		var resp kernels.Response
		if err := json.Unmarshal(out, &resp); err != nil {
			w.kill(p)
			return kernels.Response{}, fmt.Errorf("%w: %s request %d: answer %q: %v", ErrWorkerProtocol, req.Op, req.ID, excerpt(out), err)
		}
		if resp.ID != req.ID {
			w.kill(p)
			return kernels.Response{}, fmt.Errorf("%w: %s request %d answered with id %d", ErrWorkerProtocol, req.Op, req.ID, resp.ID)
		}
		if resp.Sticky || req.Op == kernels.OpQuit {
			w.retire(p) // it exits after answering
		}
		return resp, nil
	case <-expire:
		w.kill(p)
		return kernels.Response{}, fmt.Errorf("%w: %s request %d: no answer after %s (killed)%s", ErrWorkerTimeout, req.Op, req.ID,
			time.Since(start).Round(time.Millisecond), p.tail.suffix())
	case <-ctx.Done():
		w.kill(p)
		return kernels.Response{}, fmt.Errorf("%s request %d: %w", req.Op, req.ID, ctx.Err())
	}
}

// died reaps a worker that stopped answering and describes its end.
func (w *Worker) died(p *workerProc, req kernels.Request) error {
	select {
	case <-p.done:
	case <-time.After(2 * time.Second): // stdout closed but still running: finish it
	}
	w.kill(p)
	return fmt.Errorf("%w: %s request %d: %s%s", ErrWorkerDied, req.Op, req.ID, exitText(p.waitErr), p.tail.suffix())
}

// retire waits briefly for a worker that is exiting on its own, then makes
// sure its whole process group is gone.
func (w *Worker) retire(p *workerProc) {
	p.stdin.Close()
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
	}
	w.kill(p)
}

// kill ends p's process group (its children too) and waits for p.
func (w *Worker) kill(p *workerProc) {
	if w.proc == p {
		w.proc = nil
	}
	select {
	case <-p.stop:
	default:
		close(p.stop)
	}
	// ESRCH when the group is already gone is fine.
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	p.stdin.Close()
	<-p.done // bounded by WaitDelay
}

// Close stops the worker: it closes its stdin (the worker exits at EOF),
// waits a few seconds, then kills its process group. It returns an error
// when the worker had to be killed or exited with a failure.
func (w *Worker) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return w.closeErr
	}
	w.closed = true
	p := w.proc
	if p == nil {
		return nil
	}
	p.stdin.Close()
	select {
	case <-p.done:
		w.kill(p) // any child it left behind
		if p.waitErr != nil {
			w.closeErr = fmt.Errorf("closing GPU worker: %s%s", exitText(p.waitErr), p.tail.suffix())
		}
	case <-time.After(5 * time.Second):
		w.kill(p)
		w.closeErr = fmt.Errorf("closing GPU worker: still running 5s after its input closed; killed%s", p.tail.suffix())
	}
	return w.closeErr
}

// exitText describes how a waited-for process ended.
func exitText(err error) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return "killed by signal " + ws.Signal().String()
		}
		return fmt.Sprintf("exit status %d", ee.ExitCode())
	}
	if err != nil {
		return err.Error()
	}
	return "exit status 0"
}

func excerpt(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}

// A tailWriter keeps the last bytes written to it: the worker's last stderr
// lines, which say why it died.
type tailWriter struct {
	mu  sync.Mutex
	buf []byte
}

const tailBytes = 4 << 10

func (t *tailWriter) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, b...)
	if len(t.buf) > 2*tailBytes {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-tailBytes:]...)
	}
	return len(b), nil
}

// lines returns up to the last n non-empty lines.
func (t *tailWriter) lines(n int) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []string
	for _, l := range strings.Split(string(t.buf), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out[max(0, len(out)-n):]
}

// suffix renders the last stderr lines for an error message.
func (t *tailWriter) suffix() string {
	l := t.lines(5)
	if len(l) == 0 {
		return ""
	}
	return "; stderr: " + strings.Join(l, " | ")
}
