package dledger

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/storectl/storectl/internal/storefile"
	fdl "github.com/storectl/storectl/pkg/format/dledger"
	rmq "github.com/storectl/storectl/pkg/format/rocketmq"
	"github.com/storectl/storectl/pkg/scan"
)

// Log reads the inner records of a DLedger data dir by physical offset
// (entry pos + 48), for the timer store scan (it has the methods of
// pkg/scan/timer.CommitLog) and salvage.
type Log struct {
	files   []dataFile
	open    map[int]*os.File
	maxSize int
	buf     []byte
}

// OpenLog lists the data files of dir (a dledger-<id> dir).
func OpenLog(dir string, maxMessageSize int) (*Log, error) {
	if maxMessageSize <= 0 {
		maxMessageSize = rmq.DefaultMaxRecordSize
	}
	files, err := scan.OffsetFiles(filepath.Join(dir, fdl.DataDir))
	if err != nil {
		return nil, err
	}
	l := &Log{open: map[int]*os.File{}, maxSize: maxMessageSize}
	for _, f := range files {
		l.files = append(l.files, dataFile{name: f.Name, path: f.Path, base: f.Base, size: f.Size})
	}
	return l, nil
}

// ErrNoEntry is RecordAt's error when no entry starts 48 bytes before phy.
var ErrNoEntry = errors.New("no DLedger entry holds a record at this offset")

// RecordAt returns the inner record at physical offset phy after every
// record-local check; the message aliases a buffer the next call reuses.
func (l *Log) RecordAt(phy int64) (rmq.Message, error) {
	pos := phy - fdl.BodyOffset
	i := sort.Search(len(l.files), func(i int) bool { return l.files[i].base > pos }) - 1
	if i < 0 || pos+fdl.BodyOffset > l.files[i].base+l.files[i].size {
		return rmq.Message{}, fmt.Errorf("offset %d: %w", phy, ErrNoEntry)
	}
	f := l.files[i]
	fh, ok := l.open[i]
	if !ok {
		var err error
		if fh, err = storefile.Open(f.path); err != nil {
			return rmq.Message{}, err
		}
		l.open[i] = fh
	}
	var hb [fdl.BodyOffset]byte
	if _, err := fh.ReadAt(hb[:], pos-f.base); err != nil {
		return rmq.Message{}, err
	}
	h, _ := fdl.DecodeHeader(hb[:], pos)
	if err := h.Check(pos); err != nil {
		return rmq.Message{}, fmt.Errorf("offset %d: %w (%v)", phy, ErrNoEntry, err)
	}
	n := min(int64(h.BodyLen), int64(l.maxSize), f.base+f.size-phy)
	if int64(cap(l.buf)) < n {
		l.buf = make([]byte, n)
	}
	b := l.buf[:n]
	if _, err := fh.ReadAt(b, phy-f.base); err != nil {
		return rmq.Message{}, err
	}
	return rmq.CheckMessage(b, phy, l.maxSize)
}

// Tail calls fn for the inner records of the files that may hold records
// stored at or after sinceMs, in offset order, up to the end of each
// file's entries.
func (l *Log) Tail(ctx context.Context, sinceMs int64, fn func(m *rmq.Message, phy int64) error) error {
	start := 0
	for i := len(l.files) - 1; i > 0; i-- {
		if m, err := l.RecordAt(l.files[i].base + fdl.BodyOffset); err == nil && m.StoreTimestamp < sinceMs {
			start = i
			break
		}
	}
	for _, f := range l.files[min(start, len(l.files)):] {
		if err := ctx.Err(); err != nil {
			return err
		}
		fh, err := storefile.Open(f.path)
		if err != nil {
			return err
		}
		r := fdl.NewReader(fh, f.size, f.base, l.maxSize+fdl.BodyOffset)
		for r.Next() {
			h := r.Header()
			m, err := rmq.CheckMessage(r.Body(), h.Pos+fdl.BodyOffset, l.maxSize)
			if err != nil {
				continue
			}
			if err := fn(&m, h.Pos+fdl.BodyOffset); err != nil {
				fh.Close()
				return err
			}
		}
		fh.Close()
	}
	return nil
}

// Close closes the files.
func (l *Log) Close() error {
	for i, f := range l.open {
		f.Close()
		delete(l.open, i)
	}
	return nil
}
