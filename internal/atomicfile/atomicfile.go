// Package atomicfile writes what a restart reads (certificates, keys,
// CA files, state files, digests) so that a crash or a power loss leaves
// the old content or the new one, never a torn or empty file. The rule,
// for a file: write a temporary file beside it, sync it, rename (or link)
// it into place, sync the directory. For a directory: write and sync
// every file in a temporary directory beside it, sync that directory,
// rename it into place, sync the parent. A rename is atomic, and the
// syncs order the data on disk before the name that points to it.
//
// Its errors are the os package's, which name the operation and the
// file; callers add their own prefix. A crash can leave a temporary file
// or directory (named ".<name>.tmp-*", the name cut to tempBase bytes)
// behind; nothing reads it.
package atomicfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"unicode/utf8"
)

// step, if not nil, is called after each step of a write with its name.
// Only this package's tests set it: they stop a writer process at each
// step and look at what is left.
var step func(name string)

func done(name string) {
	if step != nil {
		step(name)
	}
}

// WriteFile replaces path with data (mode perm), creating missing
// directories (mode 0700). A reader, or a restart after a crash, sees
// the old file or the new one.
func WriteFile(path string, data []byte, perm fs.FileMode) error {
	dir := filepath.Dir(path)
	if err := MkdirAll(dir); err != nil {
		return err
	}
	tmp, err := writeTemp(dir, filepath.Base(path), data, perm)
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	done("rename")
	return syncDir(dir)
}

// CreateFile creates path holding data (mode perm), or fails with an
// error wrapping fs.ErrExist if path exists: of writers racing to
// create one file, one wins and the others keep its content. A reader,
// or a restart after a crash, finds no file or the whole of it.
func CreateFile(path string, data []byte, perm fs.FileMode) error {
	dir := filepath.Dir(path)
	tmp, err := writeTemp(dir, filepath.Base(path), data, perm)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	if err := os.Link(tmp, path); err != nil {
		return err
	}
	done("link")
	return syncDir(dir)
}

// File is a file of a directory CreateDir makes.
type File struct {
	Name string // a name in the directory, no separator
	Data []byte
	Perm fs.FileMode
}

// CreateDir creates the directory dir (mode 0700) holding files, or fails
// with an error wrapping fs.ErrExist if dir exists and is not empty: of
// writers racing to create one directory, one wins. A reader, or a
// restart after a crash, finds no directory or all of its files whole.
func CreateDir(dir string, files []File) error {
	parent := filepath.Dir(dir)
	tmp, err := os.MkdirTemp(parent, tempPrefix(filepath.Base(dir)))
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp) // gone after the rename; left only on failure
	for _, f := range files {
		if f.Name == "" || f.Name != filepath.Base(f.Name) {
			return fmt.Errorf("atomicfile: %q is not a file name", f.Name)
		}
		if err := writeSynced(filepath.Join(tmp, f.Name), f.Data, f.Perm); err != nil {
			return err
		}
		done("write " + f.Name)
	}
	if err := syncDir(tmp); err != nil {
		return err
	}
	if err := os.Rename(tmp, dir); err != nil {
		// Linux says ENOTEMPTY, other systems EEXIST, for a directory
		// that exists.
		if errors.Is(err, syscall.ENOTEMPTY) {
			err = &os.LinkError{Op: "rename", Old: tmp, New: dir, Err: fs.ErrExist}
		}
		return err
	}
	done("rename")
	return syncDir(parent)
}

// tempBase bounds the bytes of a target's name that its temporary's
// name repeats. A file name has at most 255 bytes on most file systems;
// a temporary's is at most 1 + tempBase + 5 + 10 (os.CreateTemp's random
// part), so any name that fits has a temporary that fits.
const tempBase = 64

// tempPrefix is the start of the name of base's temporary: ".<base>.tmp-",
// base cut to tempBase bytes at a character boundary.
func tempPrefix(base string) string {
	if len(base) > tempBase {
		cut := tempBase
		for cut > 0 && !utf8.RuneStart(base[cut]) {
			cut--
		}
		base = base[:cut]
	}
	return "." + base + ".tmp-"
}

// writeTemp writes data to a new temporary file in dir named after base,
// synced, with mode perm, and returns its path.
func writeTemp(dir, base string, data []byte, perm fs.FileMode) (string, error) {
	f, err := os.CreateTemp(dir, tempPrefix(base))
	if err != nil {
		return "", err
	}
	if err := finish(f, data, perm); err != nil {
		os.Remove(f.Name())
		return "", err
	}
	return f.Name(), nil
}

// writeSynced creates path (which must not exist) holding data, synced,
// with mode perm.
func writeSynced(path string, data []byte, perm fs.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	return finish(f, data, perm)
}

// finish writes data to the new file f, sets its mode, syncs and closes
// it.
func finish(f *os.File, data []byte, perm fs.FileMode) error {
	done("create")
	err := f.Chmod(perm)
	if err == nil {
		_, err = f.Write(data)
		done("write")
	}
	if err == nil {
		err = f.Sync()
		done("sync")
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// syncDir makes the names in dir durable. Where a directory cannot be
// synced (Windows, some file systems), that is left to the system.
func syncDir(dir string) error {
	if runtime.GOOS == "windows" {
		return nil
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, errors.ErrUnsupported) && !errors.Is(err, syscall.EINVAL) {
		return err
	}
	done("sync directory")
	return nil
}

// MkdirAll makes dir and its missing parents (mode 0700), each made
// durable in its parent.
func MkdirAll(dir string) error {
	var missing []string
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(d); err == nil || filepath.Dir(d) == d {
			break
		}
		missing = append(missing, d)
	}
	if len(missing) == 0 {
		return nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	for i := len(missing) - 1; i >= 0; i-- {
		if err := syncDir(filepath.Dir(missing[i])); err != nil {
			return err
		}
	}
	return nil
}
