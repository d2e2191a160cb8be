package elites_test

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"evotune/elites"
)

// lockChildEnv, when set to an archive directory, makes the test binary a
// child process that opens that archive, says "locked", and waits to be
// killed.
const lockChildEnv = "EVOTUNE_ELITES_LOCK_CHILD"

func TestMain(m *testing.M) {
	if dir := os.Getenv(lockChildEnv); dir != "" {
		os.Exit(lockChild(dir))
	}
	os.Exit(m.Run())
}

func lockChild(dir string) int {
	ro, err := elites.Read(dir)
	if err != nil {
		fmt.Println(err)
		return 1
	}
	a, err := elites.Open(dir, ro.Meta(), elites.OpenOptions{})
	if err != nil {
		fmt.Println(err)
		return 1
	}
	if err := a.Record(rejected("from-child")); err != nil {
		fmt.Println(err)
		return 1
	}
	fmt.Println("locked")
	for {
		time.Sleep(time.Hour) // until killed
	}
}

// TestLockAcrossProcesses holds the archive in a child process: a second
// Open here refuses, naming the child's pid; after the child is killed with
// SIGKILL (no chance to clean up), its stale lock does not block.
func TestLockAcrossProcesses(t *testing.T) {
	dir := t.TempDir()
	mustClose(t, mustCreate(t, dir))

	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), lockChildEnv+"="+dir)
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	t.Cleanup(func() {
		if !killed {
			child.Process.Kill()
			child.Wait()
		}
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || line != "locked\n" {
		t.Fatalf("child said %q, %v; want locked", line, err)
	}

	_, err = elites.Open(dir, testMeta(), elites.OpenOptions{})
	wantMsg := fmt.Sprintf("in use by process %d ", child.Process.Pid)
	if err == nil || !strings.Contains(err.Error(), wantMsg) {
		t.Fatalf("Open while the child holds the lock: %v, want an error containing %q", err, wantMsg)
	}
	if _, err := elites.Create(dir, testMeta()); err == nil {
		t.Fatalf("Create over a held archive succeeded")
	}

	if err := child.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	child.Wait()
	killed = true

	a := mustOpen(t, dir)
	if _, ok := a.Lookup("from-child"); !ok {
		t.Errorf("the child's record is lost")
	}
	pid, err := os.ReadFile(filepath.Join(dir, "lock"))
	if err != nil || strings.TrimSpace(string(pid)) != strconv.Itoa(os.Getpid()) {
		t.Errorf("lock file holds %q, %v; want our pid %d", pid, err, os.Getpid())
	}
}
