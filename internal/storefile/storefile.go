// Package storefile opens the files of a store (and the small config and
// state files beside them) for reading without ever blocking on them.
//
// A data dir is hostile input: any name in it may be a named pipe, a
// socket or a device instead of the regular file a broker left there.
// open(2) of a FIFO blocks until a writer appears, in the kernel, where
// neither a context nor SIGINT reaches it: `mkfifo store/lock` used to hang
// every command. Every open of a store-side path goes through this
// package: the path is stat'ed first (a non-regular file is refused
// without being opened, so no device sees an open), then opened with
// O_NONBLOCK and O_NOCTTY (a FIFO swapped in between the stat and the open
// cannot block either), and the open file is fstat'ed and refused unless
// it is a regular file. Directories are opened with O_DIRECTORY, which
// fails at once on anything else.
//
// Open follows symlinks, as the brokers do when they open a segment by
// path; OpenNoFollow, for the writers, does not.
package storefile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

// ErrNotRegular is wrapped by every refusal of a path that is not a
// regular file (or, for ReadDir, not a directory).
var ErrNotRegular = errors.New("not a regular file")

// ErrTooLarge is wrapped by ReadFileLimit when a file exceeds its limit.
var ErrTooLarge = errors.New("file too large")

// NotRegularError names the path and what it is instead.
type NotRegularError struct {
	Path string
	Mode fs.FileMode // the file's type bits
	Want string      // "regular file" or "directory"
}

func (e *NotRegularError) Error() string {
	return fmt.Sprintf("%s is %s, not a %s", e.Path, TypeName(e.Mode), e.Want)
}

// Unwrap makes errors.Is(err, ErrNotRegular) true.
func (e *NotRegularError) Unwrap() error { return ErrNotRegular }

// TypeName says in words what kind of file the type bits of m describe.
func TypeName(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	case m.IsDir():
		return "a directory"
	case m.IsRegular():
		return "a regular file"
	}
	return "an irregular file"
}

// Open opens path read-only after checking, without blocking, that it is
// (or a symlink resolves to) a regular file; anything else gives a
// *NotRegularError. The file may be read and mapped like any *os.File.
func Open(path string) (*os.File, error) { return open(path, os.Stat, 0) }

// OpenNoFollow is Open for a path whose last element must not be a
// symlink (the writers: a plan acts on the file in the data dir, never on
// what a link points at). A symlink gives a *NotRegularError.
func OpenNoFollow(path string) (*os.File, error) {
	return open(path, os.Lstat, syscall.O_NOFOLLOW)
}

func open(path string, stat func(string) (fs.FileInfo, error), flags int) (*os.File, error) {
	st, err := stat(path)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, &NotRegularError{Path: path, Mode: st.Mode().Type(), Want: "regular file"}
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY|flags, 0)
	if errors.Is(err, syscall.ELOOP) && flags&syscall.O_NOFOLLOW != 0 {
		return nil, &NotRegularError{Path: path, Mode: fs.ModeSymlink, Want: "regular file"}
	}
	if err != nil {
		return nil, err
	}
	fst, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !fst.Mode().IsRegular() { // swapped after the stat
		f.Close()
		return nil, &NotRegularError{Path: path, Mode: fst.Mode().Type(), Want: "regular file"}
	}
	return f, nil
}

// ReadFile is os.ReadFile through Open.
func ReadFile(path string) ([]byte, error) { return ReadFileLimit(path, -1) }

// ReadFileLimit reads the whole of path through Open; a file larger than
// limit bytes (limit >= 0) is refused with an error wrapping ErrTooLarge
// before it is read.
func ReadFileLimit(path string, limit int64) ([]byte, error) {
	f, err := Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if limit >= 0 && st.Size() > limit {
		return nil, fmt.Errorf("%s: %w: %d bytes, at most %d expected", path, ErrTooLarge, st.Size(), limit)
	}
	r := io.Reader(f)
	if limit >= 0 {
		r = io.LimitReader(f, limit+1) // it may have grown since the stat
	}
	b := make([]byte, 0, st.Size()+1)
	for {
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
	}
	if limit >= 0 && int64(len(b)) > limit {
		return nil, fmt.Errorf("%s: %w: more than %d bytes", path, ErrTooLarge, limit)
	}
	return b, nil
}

// ReadDir is os.ReadDir for a store-side directory: it opens path with
// O_DIRECTORY, so a FIFO or anything else in its place fails at once (a
// *NotRegularError) instead of blocking. Entries come sorted by name.
func ReadDir(path string) ([]fs.DirEntry, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NONBLOCK, 0)
	if errors.Is(err, syscall.ENOTDIR) {
		mode := fs.FileMode(0)
		if st, serr := os.Stat(path); serr == nil {
			mode = st.Mode().Type()
		}
		return nil, &NotRegularError{Path: path, Mode: mode, Want: "directory"}
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	ents, err := f.ReadDir(-1)
	sortEntries(ents)
	return ents, err
}

// IsRegular reports whether the entry e of dir is a regular file, or a
// symlink that resolves to one (the broker opens it by path and reads
// through the link). FIFOs, sockets, devices, dirs and dangling links are
// not. Symlinks (Symlink) are worth a finding of their own.
func IsRegular(dir string, e fs.DirEntry) bool {
	t := e.Type()
	if t.IsRegular() {
		return true
	}
	if t&fs.ModeSymlink == 0 {
		return false
	}
	st, err := os.Stat(filepath.Join(dir, e.Name()))
	return err == nil && st.Mode().IsRegular()
}

// Irregular reports whether the entry e of dir is there but cannot be
// read as a regular file: a directory, named pipe, socket or device, or
// a symlink that resolves to one (not a dangling symlink: nothing is
// there to read). A scanner that finds one under the name of a store
// file has data it cannot read (unknown, not absent); err is the
// *NotRegularError an open of it gives.
func Irregular(dir string, e fs.DirEntry) (err error, ok bool) {
	t := e.Type()
	if t.IsRegular() {
		return nil, false
	}
	p := filepath.Join(dir, e.Name())
	if t&fs.ModeSymlink != 0 {
		st, serr := os.Stat(p)
		if serr != nil || st.Mode().IsRegular() {
			return nil, false
		}
		t = st.Mode().Type()
	}
	return &NotRegularError{Path: p, Mode: t, Want: "regular file"}, true
}

// IsDir reports whether the entry e of dir is a directory or a symlink
// to one.
func IsDir(dir string, e fs.DirEntry) bool {
	t := e.Type()
	if t.IsDir() {
		return true
	}
	if t&fs.ModeSymlink == 0 {
		return false
	}
	st, err := os.Stat(filepath.Join(dir, e.Name()))
	return err == nil && st.IsDir()
}

func sortEntries(ents []fs.DirEntry) {
	slices.SortFunc(ents, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
}

// Info is the FileInfo of the entry e of dir with a symlink followed
// (DirEntry.Info describes the link itself, whose size is its target
// name's length).
func Info(dir string, e fs.DirEntry) (fs.FileInfo, error) {
	if e.Type()&fs.ModeSymlink != 0 {
		return os.Stat(filepath.Join(dir, e.Name()))
	}
	return e.Info()
}
