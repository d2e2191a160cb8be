// Package durable writes the files a user keeps (archive state, cached
// cubins, bench output, exports) so that a crash or a power cut at any
// moment leaves either the old file or the new one, never a torn one: the
// data goes to a temporary file beside the target, is fsync'd, renamed over
// the target, and the directory is fsync'd so that the rename itself
// survives.
package durable

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// TempSuffix ends the name of every temporary file a Writer leaves behind
// when it is killed before its rename, so that a directory's owner can tell
// them from its own files.
const TempSuffix = ".tmp"

// A File is what a replacement needs of its temporary file; *os.File is one.
type File interface {
	io.Writer
	Sync() error
	Close() error
	Name() string
}

// A Writer replaces files durably. Its zero value is ready to use; its
// fields are seams for tests.
type Writer struct {
	// CreateTemp opens the temporary file, as os.CreateTemp does; nil means
	// os.CreateTemp.
	CreateTemp func(dir, pattern string) (File, error)
	// beforeRename, when set, runs once the temporary file is complete and
	// synced, just before it is renamed over the target.
	beforeRename func(tmp string)
}

// WriteFile replaces path with data, with permissions perm, durably.
func WriteFile(path string, data []byte, perm fs.FileMode) error {
	return Writer{}.WriteFile(path, data, perm)
}

// WriteFile replaces path with data, with permissions perm: a temporary
// file in path's directory, fsync, rename over path, fsync of the
// directory. On failure the temporary file is removed and path is as it was.
func (w Writer) WriteFile(path string, data []byte, perm fs.FileMode) error {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	create := w.CreateTemp
	if create == nil {
		create = func(dir, pattern string) (File, error) { return os.CreateTemp(dir, pattern) }
	}
	f, err := create(dir, "."+base+".*"+TempSuffix)
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	tmp := f.Name()
	n, err := f.Write(data)
	if err == nil && n < len(data) {
		err = io.ErrShortWrite
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp, perm)
	}
	if err == nil && w.beforeRename != nil {
		w.beforeRename(tmp)
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return SyncDir(dir)
}

// SyncDir makes dir's entries (a rename, a new file) durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("syncing directory %s: %w", dir, err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("syncing directory %s: %w", dir, err)
	}
	return nil
}
