package rocketmq

import (
	"errors"
	"fmt"
	"os"
	"sort"

	"github.com/storectl/storectl/internal/storefile"
	"github.com/storectl/storectl/pkg/format"
	rmq "github.com/storectl/storectl/pkg/format/rocketmq"
)

// ErrNoFile is returned by Store.RecordAt for an offset no commitlog file
// covers.
var ErrNoFile = errors.New("no commitlog file covers this offset")

// Store gives random access to the records of a commitlog, for commands
// that check single records (verify, truncate, rebuild-index). It holds
// the files open read-only; call Close when done. Not safe for concurrent
// use.
type Store struct {
	cfg   Config
	lay   *layout
	files map[int]*os.File
}

// OpenStore lists the commitlog files of cfg.
func OpenStore(cfg Config) (*Store, error) {
	cfg.fill()
	lay, err := loadLayout(&cfg)
	if err != nil {
		return nil, err
	}
	return &Store{cfg: cfg, lay: lay, files: map[int]*os.File{}}, nil
}

// MappedFileSize is the configured or inferred commitlog file size.
func (s *Store) MappedFileSize() int64 { return s.lay.mapped }

// Path returns the file (relative to Root) holding phy and the offset in it.
func (s *Store) Path(phy int64) (string, int64, bool) {
	i := s.seg(phy)
	if i < 0 {
		return "", 0, false
	}
	return s.lay.segs[i].rel, phy - s.lay.segs[i].base, true
}

func (s *Store) seg(phy int64) int {
	segs := s.lay.segs
	i := sort.Search(len(segs), func(i int) bool { return segs[i].base > phy }) - 1
	if i < 0 || phy >= segs[i].base+segs[i].size {
		return -1
	}
	return i
}

// RecordAt reads the record at physical offset phy and applies every
// record-local check (rocketmq.CheckMessage). The returned message owns its
// bytes. Corruption is a *format.CorruptError with the file's path and
// the physical offset; a missing file is ErrNoFile; anything else is I/O.
func (s *Store) RecordAt(phy int64) (rmq.Message, error) {
	i := s.seg(phy)
	if i < 0 {
		return rmq.Message{}, fmt.Errorf("offset %d: %w", phy, ErrNoFile)
	}
	seg := s.lay.segs[i]
	f, ok := s.files[i]
	if !ok {
		var err error
		if f, err = storefile.Open(seg.path); err != nil {
			return rmq.Message{}, err
		}
		s.files[i] = f
	}
	m, err := rmq.ReadMessageAt(f, seg.size, seg.base, phy-seg.base, s.cfg.MaxMessageSize)
	return m, format.WithPath(err, seg.rel)
}

// Close closes the files RecordAt opened.
func (s *Store) Close() error {
	var first error
	for _, f := range s.files {
		if err := f.Close(); err != nil && first == nil {
			first = err
		}
	}
	s.files = map[int]*os.File{}
	return first
}
