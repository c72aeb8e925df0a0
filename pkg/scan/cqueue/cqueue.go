// Package cqueue reads single RocketMQ file consume queues
// (consumequeue/<topic>/<queueId>/<20-digit offset>) by unit index, for
// the scanners that need a few queues rather than the whole cross-check
// of pkg/scan/rocketmq.Verify: the timer store (rmq_sys_wheel_timer/0),
// the consumer offsets against each queue's max, DLedger's inner offsets.
//
// It also tells a file consume queue from the RocksDB database that
// storeType=defaultRocksDB keeps in consumequeue/ itself (List refuses
// to read one as topic dirs).
package cqueue

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"

	"github.com/storectl/storectl/internal/storefile"
	rmq "github.com/storectl/storectl/pkg/format/rocketmq"
	"github.com/storectl/storectl/pkg/scan"
)

// Dir is the consume queue root under a store.
const Dir = "consumequeue"

// ErrRocksDB is returned by List and Open when consumequeue/ holds a
// RocksDB database, not topic dirs.
var ErrRocksDB = errors.New("consumequeue/ holds a RocksDB consume queue (storeType=defaultRocksDB), not file queues")

// File is one file of a queue.
type File struct {
	Rel  string // relative to the store root, slash-separated
	Path string
	Base int64 // byte offset in the queue stream (the file name)
	Size int64
}

// Queue is one file consume queue.
type Queue struct {
	Topic   string
	QueueID int32
	Rel     string // consumequeue/<topic>/<queueId>
	Files   []File
	// Irregular are the entries named like a file of the queue that are
	// a dir, FIFO, socket or device (scan.OffsetFilesIrregular): not in
	// Files, never opened; the units they hold are unknown.
	Irregular []File
	open      map[int]*os.File
}

// RocksDB reports whether root/consumequeue holds a RocksDB database, and
// its file names.
func RocksDB(root string) (rmq.RocksDBLayout, bool) {
	ents, err := storefile.ReadDir(filepath.Join(root, Dir))
	if err != nil {
		return rmq.RocksDBLayout{}, false
	}
	names := make([]string, 0, len(ents))
	for _, e := range ents {
		if !e.IsDir() {
			names = append(names, e.Name())
		}
	}
	l := rmq.ClassifyRocksDB(names)
	return l, l.IsDB()
}

// Open lists the files of consumequeue/<topic>/<qid>. A missing queue dir
// gives a Queue with no files.
func Open(root, topic string, qid int32) (*Queue, error) {
	if _, ok := RocksDB(root); ok {
		return nil, ErrRocksDB
	}
	q := &Queue{Topic: topic, QueueID: qid, Rel: Dir + "/" + topic + "/" + strconv.Itoa(int(qid)), open: map[int]*os.File{}}
	dir := filepath.Join(root, Dir, topic, strconv.Itoa(int(qid)))
	files, irregular, err := scan.OffsetFilesIrregular(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return q, nil
	}
	if err != nil {
		return nil, err
	}
	for _, f := range files {
		q.Files = append(q.Files, File{Rel: q.Rel + "/" + f.Name, Path: f.Path, Base: f.Base, Size: f.Size})
	}
	for _, f := range irregular {
		q.Irregular = append(q.Irregular, File{Rel: q.Rel + "/" + f.Name, Path: f.Path, Base: f.Base})
	}
	return q, nil
}

// List returns every queue under root/consumequeue, by topic and id.
func List(root string) ([]*Queue, error) {
	if _, ok := RocksDB(root); ok {
		return nil, ErrRocksDB
	}
	topics, err := storefile.ReadDir(filepath.Join(root, Dir))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []*Queue
	for _, t := range topics {
		if !t.IsDir() {
			continue
		}
		qs, err := storefile.ReadDir(filepath.Join(root, Dir, t.Name()))
		if err != nil {
			return nil, err
		}
		for _, e := range qs {
			id, err := strconv.ParseInt(e.Name(), 10, 32)
			if !e.IsDir() || err != nil || id < 0 {
				continue
			}
			q, err := Open(root, t.Name(), int32(id))
			if err != nil {
				return nil, err
			}
			out = append(out, q)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Topic != out[j].Topic {
			return out[i].Topic < out[j].Topic
		}
		return out[i].QueueID < out[j].QueueID
	})
	return out, nil
}

// MinIndex is the index of the first unit of the first file.
func (q *Queue) MinIndex() int64 {
	if len(q.Files) == 0 {
		return 0
	}
	return q.Files[0].Base / rmq.CQUnitSize
}

// Unit reads the unit with queue offset idx; ok is false when no file
// holds it (before the first file, past the last, or in a missing file).
func (q *Queue) Unit(idx int64) (u rmq.CQUnit, ok bool, err error) {
	if idx < 0 {
		return u, false, nil
	}
	at := idx * rmq.CQUnitSize
	i := sort.Search(len(q.Files), func(i int) bool { return q.Files[i].Base > at }) - 1
	if i < 0 || at+rmq.CQUnitSize > q.Files[i].Base+q.Files[i].Size {
		return u, false, nil
	}
	f, ok := q.open[i]
	if !ok {
		if f, err = storefile.Open(q.Files[i].Path); err != nil {
			return u, false, err
		}
		q.open[i] = f
	}
	var b [rmq.CQUnitSize]byte
	if _, err := f.ReadAt(b[:], at-q.Files[i].Base); err != nil && !errors.Is(err, io.EOF) {
		return u, false, fmt.Errorf("%s: %w", q.Files[i].Rel, err)
	}
	u, err = rmq.DecodeCQUnit(b[:], at-q.Files[i].Base)
	return u, err == nil, err
}

// UnreadError is a file of the queue that a walk reached and could not
// read: a dir, FIFO, socket or device in its place (Queue.Irregular), or
// an open or read error. The units from it on are unknown.
type UnreadError struct {
	Rel string
	Err error
}

func (e *UnreadError) Error() string { return e.Rel + ": " + e.Err.Error() }
func (e *UnreadError) Unwrap() error { return e.Err }

// Each calls fn for every unit from the first file on, in order, until
// fn returns false, a unit is not Valid (the end of a file queue's data,
// as ConsumeQueue.recover reads it) or the files end. It returns the
// index just past the last unit handed to fn. A file it reaches that it
// cannot read, one of Irregular among them, stops it with an
// *UnreadError: what the queue holds from there on is unknown, not its
// end.
func (q *Queue) Each(fn func(idx int64, u rmq.CQUnit) bool) (int64, error) {
	if len(q.Irregular) > 0 && (len(q.Files) == 0 || q.Irregular[0].Base < q.Files[0].Base) {
		f := q.Irregular[0]
		return f.Base / rmq.CQUnitSize, &UnreadError{Rel: f.Rel, Err: NotRegular(f.Path)}
	}
	idx, ended, err := q.walk(0, true, fn)
	if n := len(q.Files); err == nil && !ended && n > 0 {
		if g, ok := q.irregularAt(q.Files[n-1].Base + q.Files[n-1].Size); ok {
			return idx, &UnreadError{Rel: g.Rel, Err: NotRegular(g.Path)} // the walk goes on into it
		}
	}
	return idx, err
}

// RecoverMaxPhy is ConsumeQueue.recover's maxPhysicOffset (5.3.3): the
// units from the third file from the last (the first with fewer) on,
// until the first that is not valid, give the last valid one's offset +
// size; -1 with none. It does not stop at a gap between files (recover
// does not check them). A queue with a dir, FIFO, socket or device under
// a file's name is an *UnreadError: what it ends with is unknown (the
// broker's load of it fails, too), as is a file it cannot read.
func (q *Queue) RecoverMaxPhy() (int64, error) {
	if n := len(q.Irregular); n > 0 {
		f := q.Irregular[n-1]
		return 0, &UnreadError{Rel: f.Rel, Err: NotRegular(f.Path)}
	}
	last := int64(-1)
	_, _, err := q.walk(max(len(q.Files)-3, 0), false, func(_ int64, u rmq.CQUnit) bool {
		last = u.CommitLogOffset + int64(u.Size)
		return true
	})
	return last, err
}

// walk calls fn for the units of Files[from:] in order until fn returns
// false or a unit is not Valid (ended), or the files end; with gapStop a
// gap between files ends it too (the broker's checkSelf fails), with an
// *UnreadError when one of Irregular fills the gap. It returns the index
// just past the last unit handed to fn.
func (q *Queue) walk(from int, gapStop bool, fn func(idx int64, u rmq.CQUnit) bool) (idx int64, ended bool, err error) {
	if from < len(q.Files) {
		idx = q.Files[from].Base / rmq.CQUnitSize
	}
	buf := make([]byte, 1<<16/rmq.CQUnitSize*rmq.CQUnitSize)
	for i := from; i < len(q.Files); i++ {
		f := q.Files[i]
		if gapStop && i > from && f.Base != q.Files[i-1].Base+q.Files[i-1].Size {
			if g, ok := q.irregularAt(q.Files[i-1].Base + q.Files[i-1].Size); ok {
				return idx, true, &UnreadError{Rel: g.Rel, Err: NotRegular(g.Path)}
			}
			return idx, true, nil // a gap: the broker's checkSelf fails; stop here
		}
		fh, err := storefile.Open(f.Path)
		if err != nil {
			return idx, true, &UnreadError{Rel: f.Rel, Err: err}
		}
		for pos := int64(0); pos+rmq.CQUnitSize <= f.Size; {
			n, rerr := fh.ReadAt(buf[:min(int64(len(buf)), f.Size-pos)/rmq.CQUnitSize*rmq.CQUnitSize], pos)
			for k := 0; k+rmq.CQUnitSize <= n; k += rmq.CQUnitSize {
				u, _ := rmq.DecodeCQUnit(buf[k:], pos+int64(k))
				if !u.Valid() || !fn(idx, u) {
					fh.Close()
					return idx, true, nil
				}
				idx++
			}
			pos += int64(n)
			if rerr != nil && !errors.Is(rerr, io.EOF) {
				fh.Close()
				return idx, true, &UnreadError{Rel: f.Rel, Err: fmt.Errorf("at %d: %w", pos, rerr)}
			}
			if rerr != nil || n == 0 {
				break
			}
		}
		fh.Close()
	}
	return idx, false, nil
}

// irregularAt is the file of Irregular at stream offset base.
func (q *Queue) irregularAt(base int64) (File, bool) {
	for _, f := range q.Irregular {
		if f.Base == base {
			return f, true
		}
	}
	return File{}, false
}

// NotRegular is the error of opening the irregular file at path: why it
// is not read (never nil, even if the file became regular since).
func NotRegular(path string) error {
	fh, err := storefile.Open(path)
	if err == nil {
		fh.Close()
		return errors.New("not a regular file when listed")
	}
	return err
}

// Recovered returns the queue's [min, max) after the broker's recovery
// against a commitlog that ends at end: units read in order until the
// first invalid one, then cut at the first unit whose offset is at or
// past end (ConsumeQueue.truncateDirtyLogicFiles keeps a unit that starts
// before the end).
func (q *Queue) Recovered(end int64) (minIdx, maxIdx int64, err error) {
	minIdx = q.MinIndex()
	maxIdx, err = q.Each(func(_ int64, u rmq.CQUnit) bool { return u.CommitLogOffset < end })
	return minIdx, maxIdx, err
}

// Close closes the files Unit opened.
func (q *Queue) Close() error {
	for i, f := range q.open {
		f.Close()
		delete(q.open, i)
	}
	return nil
}
