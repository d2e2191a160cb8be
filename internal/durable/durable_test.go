package durable

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestWriteFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.json")
	for _, data := range []string{"first\n", "second, longer\n", ""} {
		if err := WriteFile(path, []byte(data), 0o640); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(path)
		if err != nil || string(got) != data {
			t.Fatalf("after WriteFile(%q): %q, %v", data, got, err)
		}
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o640 {
		t.Errorf("mode %v, want 0640", fi.Mode().Perm())
	}
	assertOnly(t, dir, "state.json")
}

func TestWriteFileRelative(t *testing.T) {
	t.Chdir(t.TempDir())
	if err := WriteFile("bench.json", []byte("{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile("bench.json"); err != nil || string(got) != "{}\n" {
		t.Errorf("bench.json: %q, %v", got, err)
	}
}

// failingFile fails its write as a full disk does.
type failingFile struct{ File }

func (failingFile) Write([]byte) (int, error) { return 0, syscall.ENOSPC }

func TestWriteFileFailureKeepsOld(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "export.h")
	if err := WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	w := Writer{CreateTemp: func(dir, pattern string) (File, error) {
		f, err := os.CreateTemp(dir, pattern)
		return failingFile{f}, err
	}}
	err := w.WriteFile(path, []byte("new"), 0o644)
	if !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), path) {
		t.Fatalf("WriteFile on a full disk: %v, want ENOSPC naming %s", err, path)
	}
	if got, _ := os.ReadFile(path); string(got) != "old" {
		t.Errorf("after a failed write: %q, want old", got)
	}
	assertOnly(t, dir, "export.h")
}

func TestWriteFileMissingDir(t *testing.T) {
	path := filepath.Join(t.TempDir(), "no", "such", "file")
	if err := WriteFile(path, []byte("x"), 0o644); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("WriteFile into a missing directory: %v, want ErrNotExist", err)
	}
}

// assertOnly fails unless dir holds exactly the named files.
func assertOnly(t *testing.T, dir string, names ...string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	if fmt.Sprint(got) != fmt.Sprint(names) {
		t.Errorf("%s holds %v, want %v", dir, got, names)
	}
}

// The writer process of the kill tests: EVOTUNE_DURABLE_CHILD is
// "MODE PATH". In mode "hold" it writes newData to PATH, says "renaming"
// on stdout once the temporary file is complete, and waits there to be
// killed; in mode "loop" it writes oldData and newData in turn until killed.
const childEnv = "EVOTUNE_DURABLE_CHILD"

var (
	oldData = bytes.Repeat([]byte("old state, "), 100_000)
	newData = bytes.Repeat([]byte("the new state "), 100_000)
)

func TestMain(m *testing.M) {
	if v := os.Getenv(childEnv); v != "" {
		mode, path, _ := strings.Cut(v, " ")
		switch mode {
		case "hold":
			w := Writer{beforeRename: func(tmp string) {
				fmt.Println("renaming", tmp)
				time.Sleep(time.Hour)
			}}
			w.WriteFile(path, newData, 0o644)
		case "loop":
			fmt.Println("writing")
			for i := 0; ; i++ {
				data := oldData
				if i%2 == 1 {
					data = newData
				}
				if err := WriteFile(path, data, 0o644); err != nil {
					fmt.Fprintln(os.Stderr, err)
					os.Exit(2)
				}
			}
		}
		os.Exit(3)
	}
	os.Exit(m.Run())
}

// startWriter starts a writer process in mode on path and waits for its
// first line on stdout.
func startWriter(t *testing.T, mode, path string) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), childEnv+"="+mode+" "+path)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("writer process said nothing: %v", err)
	}
	return cmd, strings.TrimSpace(line)
}

// kill sends SIGKILL to the writer and reaps it.
func kill(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("writer process ended with %v, want killed by SIGKILL", err)
	}
}

// TestKilledBeforeRename kills a writer between its write and its rename:
// the target still holds the old file, whole, and only a temporary file
// named as such is left beside it.
func TestKilledBeforeRename(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.json")
	if err := WriteFile(path, oldData, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd, line := startWriter(t, "hold", path)
	tmp, ok := strings.CutPrefix(line, "renaming ")
	if !ok {
		kill(t, cmd)
		t.Fatalf("writer process said %q, want renaming TMP", line)
	}
	// The write is done: the temporary file holds all of the new data.
	if got, err := os.ReadFile(tmp); err != nil || !bytes.Equal(got, newData) {
		t.Errorf("temporary file %s: %d bytes, %v; want the new data's %d", tmp, len(got), err, len(newData))
	}
	kill(t, cmd)
	if got, err := os.ReadFile(path); err != nil || !bytes.Equal(got, oldData) {
		t.Fatalf("after a kill before the rename, %s holds %d bytes (%v); want the old file", path, len(got), err)
	}
	if !strings.HasSuffix(tmp, TempSuffix) || filepath.Dir(tmp) != dir {
		t.Errorf("temporary file %s: want it in %s, named with %s", tmp, dir, TempSuffix)
	}
}

// TestKilledAnywhere kills writers that replace a file over and over at
// moments spread over their work: every time, the file is either the old
// one or the new one, whole.
func TestKilledAnywhere(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "bench.json")
	if err := WriteFile(path, oldData, 0o644); err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for i := range 12 {
		cmd, _ := startWriter(t, "loop", path)
		time.Sleep(time.Duration(i) * 3 * time.Millisecond)
		kill(t, cmd)
		got, err := os.ReadFile(path)
		switch {
		case err != nil:
			t.Fatalf("kill %d: %v", i, err)
		case bytes.Equal(got, oldData):
			seen["old"]++
		case bytes.Equal(got, newData):
			seen["new"]++
		default:
			t.Fatalf("kill %d: %s holds %d bytes that are neither the old file nor the new one", i, path, len(got))
		}
	}
	t.Logf("after 12 kills: %v", seen)
}
