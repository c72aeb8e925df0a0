package scan

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
)

// tempDir is where UnlinkedTemp makes its files: SetTempDir's, else
// $TMPDIR (os.TempDir).
var tempDir atomic.Pointer[string]

// SetTempDir makes UnlinkedTemp create its files in dir ("" for
// $TMPDIR): the --tmp-dir of a run, which checks that it is not inside the
// data dir.
func SetTempDir(dir string) {
	if dir == "" {
		tempDir.Store(nil)
		return
	}
	tempDir.Store(&dir)
}

// TempDir is the directory UnlinkedTemp creates its files in.
func TempDir() string {
	if d := tempDir.Load(); d != nil {
		return *d
	}
	return os.TempDir()
}

// UnlinkedTemp creates a temp file (os.CreateTemp with pattern, in
// TempDir) and removes its name at once, so it vanishes with its last
// descriptor whatever happens to the process. Scans and plans spill what
// would otherwise grow with the store (RocketMQ verify's record table,
// rebuild-index's sorted runs, RabbitMQ's long victim lists) to such
// files; nothing of them is ever in a data dir.
func UnlinkedTemp(pattern string) (*os.File, error) {
	f, err := os.CreateTemp(TempDir(), pattern)
	if err != nil {
		return nil, err
	}
	if err := os.Remove(f.Name()); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// Spill is an append-only UnlinkedTemp file that a scan moves long lists
// to, reading each back when its finding is written (RabbitMQ's victim
// lists, MsgIDs chunks). It is safe for concurrent use, and its zero value
// is ready: the file is made at the first Put, with Pattern. Once a create
// or write fails the Spill is broken and every later Put says no (the
// caller keeps its list in memory). Close gives the file back; else it is
// closed when the Spill is no longer reachable (os.File's own cleanup).
type Spill struct {
	Pattern string // os.CreateTemp pattern of the file; "" is storectl-spill-*

	broken atomic.Bool
	mu     sync.Mutex
	f      *os.File
	end    int64
	tries  int // writes Put tried (tests)
}

// Broken reports whether a create or write failed: Put says no from then
// on, so a caller may skip building what it would write.
func (s *Spill) Broken() bool { return s.broken.Load() }

// Put appends b and returns its offset, or ok false when the file cannot
// be used.
func (s *Spill) Put(b []byte) (off int64, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.broken.Load() {
		return 0, false
	}
	s.tries++
	if s.f == nil {
		pattern := s.Pattern
		if pattern == "" {
			pattern = "storectl-spill-*"
		}
		f, err := UnlinkedTemp(pattern)
		if err != nil {
			s.broken.Store(true)
			return 0, false
		}
		s.f = f
	}
	if _, err := s.f.WriteAt(b, s.end); err != nil {
		s.broken.Store(true)
		return 0, false
	}
	off = s.end
	s.end += int64(len(b))
	return off, true
}

// WriteAt writes b over bytes put before at off (b no longer than what
// was put there: a block rewritten in place), or says no when the file
// cannot be used.
func (s *Spill) WriteAt(b []byte, off int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.broken.Load() || s.f == nil || off+int64(len(b)) > s.end {
		return false
	}
	if _, err := s.f.WriteAt(b, off); err != nil {
		s.broken.Store(true)
		return false
	}
	return true
}

// Close closes the file, if one was made: its space goes back at once
// rather than when the collector finds the Spill unreachable. Every later
// Put says no and ReadAt fails. It is safe to call more than once.
func (s *Spill) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.broken.Store(true)
	if s.f == nil {
		return nil
	}
	err := s.f.Close()
	s.f = nil
	return err
}

// errSpillShort: the spill file holds fewer bytes than were put there.
var errSpillShort = errors.New("spill file shorter than written")

// ReadAt reads len(b) bytes put at off back; what names them in the error
// ("reading <what> back from the temp file: ...").
func (s *Spill) ReadAt(b []byte, off int64, what string) error {
	s.mu.Lock()
	f := s.f
	s.mu.Unlock()
	if f == nil {
		return fmt.Errorf("reading %s back from the temp file: %w", what, os.ErrClosed)
	}
	if n, err := f.ReadAt(b, off); n < len(b) {
		if err == nil {
			err = errSpillShort
		}
		return fmt.Errorf("reading %s back from the temp file: %w", what, err)
	}
	return nil
}
