package elites

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// lockDir takes the archive's exclusive lock: flock(2) on dir/lock, then our
// pid written into the file for the message a second process shows. The
// kernel drops a flock when its holder dies, so a lock left by a killed
// process never blocks; the file itself is never removed, because removing it
// would let two processes lock two different files of the same name.
func lockDir(dir string) (*os.File, error) {
	path := filepath.Join(dir, lockName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening archive lock: %w", err)
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		holder := lockHolder(f)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("archive %s is in use by %s (it holds %s); wait for it to finish or stop it", dir, holder, path)
		}
		return nil, fmt.Errorf("locking archive %s: %w", path, err)
	}
	pid := strconv.Itoa(os.Getpid()) + "\n"
	if err := f.Truncate(0); err == nil {
		_, err = f.WriteAt([]byte(pid), 0)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("writing pid into archive lock %s: %w", path, err)
	}
	return f, nil
}

// lockHolder names the process that holds the lock, from the pid it wrote.
func lockHolder(f *os.File) string {
	buf := make([]byte, 32)
	n, _ := f.ReadAt(buf, 0)
	pid, err := strconv.Atoi(strings.TrimSpace(string(buf[:n])))
	switch {
	case err != nil:
		// The holder has taken the lock but not yet written its pid.
		return "another process"
	case pid == os.Getpid():
		return fmt.Sprintf("process %d (this process)", pid)
	default:
		return fmt.Sprintf("process %d", pid)
	}
}
