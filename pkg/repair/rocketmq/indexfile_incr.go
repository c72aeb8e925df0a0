package rocketmq

import (
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	rmq "github.com/storectl/storectl/pkg/format/rocketmq"
	"github.com/storectl/storectl/pkg/repair"
)

// idxbIncr builds the index files while the commitlog is scanned: each
// commitlog file's records, once absorbed in offset order, are fed to a
// builder goroutine, so that when the scan ends only the last file's
// header and slots remain to be written. It then prehashes every staged
// file (repair.PrehashSource) while the consume queues are built and
// compared: the index file's SHA-256 (420 MB at the broker's defaults,
// mostly zeros) is off the plan's critical path. A plan that is only
// printed (repair.Plan.PrintOnly) hashes nothing, so neither does it.
//
// The build is speculative: the records fed are those of the commitlog
// scan, not yet cut at the recovery end. When the cut drops records it
// has indexed (a damaged store), the caller discards it and builds again
// from a second scan that feeds only the records before it (rbRefeed).
//
// Feeding blocks while idxbMaxQueued batches wait for the builder, so the
// records in memory stay bounded when the scan runs ahead of it.
type idxbIncr struct {
	b       *idxbBuilder
	mu      sync.Mutex
	queue   []idxbBatch
	closed  bool
	fed     int           // records fed so far
	wake    chan struct{} // capacity 1: a feed or close happened
	room    chan struct{} // a slot per batch queued or being built: feed waits for one
	aborted atomic.Bool
	done    chan struct{}
	files   []*idxbFile // after done
	err     error       // after done
	prehash bool        // hash the files for the plan (repair.PrehashSource)
}

// idxbBatch is a run of consecutive commitlog records and their key
// hashes (a record's keyEnd indexes keys).
type idxbBatch struct {
	recs []rbRecord
	keys []int32
}

// idxbMaxQueued bounds the batches fed and not yet built (about 200 KiB
// each).
const idxbMaxQueued = 8

// startIdxbIncr starts the builder goroutine, staging under stage/index;
// prehash says whether the plan will hash the files.
func startIdxbIncr(lay rmq.IndexLayout, stage string, prehash bool) *idxbIncr {
	x := &idxbIncr{b: &idxbBuilder{lay: lay, stage: filepath.Join(stage, "index")},
		wake: make(chan struct{}, 1), room: make(chan struct{}, idxbMaxQueued), done: make(chan struct{}), prehash: prehash}
	go x.run()
	return x
}

// feed queues a batch of records, waiting while idxbMaxQueued are
// queued. The batch must not change afterwards.
func (x *idxbIncr) feed(b idxbBatch) {
	select {
	case x.room <- struct{}{}:
	case <-x.done: // the builder stopped (an error, or aborted): drop it
		return
	}
	x.mu.Lock()
	x.queue = append(x.queue, b)
	x.fed += len(b.recs)
	x.mu.Unlock()
	x.signal()
}

func (x *idxbIncr) signal() {
	select {
	case x.wake <- struct{}{}:
	default:
	}
}

// finish says no more records come and waits for the build and the
// prehashing; it returns the files (closed) and how many records they
// index.
func (x *idxbIncr) finish() ([]*idxbFile, int, error) {
	x.mu.Lock()
	x.closed = true
	fed := x.fed
	x.mu.Unlock()
	x.signal()
	<-x.done
	return x.files, fed, x.err
}

// abort stops the build, waits for the goroutine and removes what it
// staged.
func (x *idxbIncr) abort() {
	x.aborted.Store(true)
	x.finish()
	for _, f := range x.b.files {
		repair.DropPrehashed(f.path) // a new file could reuse the inode
	}
	os.RemoveAll(x.b.stage)
}

func (x *idxbIncr) run() {
	defer close(x.done)
	b := x.b
	err := os.MkdirAll(b.stage, 0o755)
	hashed := 0 // b.files[:hashed] are prehashed
	for {
		x.mu.Lock()
		batches, closed := x.queue, x.closed
		x.queue = nil
		x.mu.Unlock()
		for _, bt := range batches {
			prev, touched := uint32(0), 0
			for i := range bt.recs {
				if err != nil || x.aborted.Load() {
					break
				}
				r := &bt.recs[i]
				lo, hi := int(prev), int(r.keyEnd)
				if hi > touched {
					touched = min(len(bt.keys), hi+idxbTouchAhead)
					b.touch(bt.keys[lo:touched])
				}
				err = b.record(r, bt.keys[lo:hi])
				prev = r.keyEnd
			}
			<-x.room
		}
		// Files that filled up are closed: hash them while the scan goes on.
		for x.prehash && err == nil && !x.aborted.Load() && hashed < len(b.files) && b.files[hashed] != b.cur {
			_ = repair.PrehashSource(b.files[hashed].path) // only a shortcut: Plan.Add hashes without it
			hashed++
		}
		if len(batches) == 0 {
			if closed {
				break
			}
			<-x.wake
		}
	}
	if cerr := b.closeCur(); err == nil {
		err = cerr
	}
	if err != nil || x.aborted.Load() {
		for _, f := range b.files {
			if f.f != nil {
				f.f.Close()
			}
		}
		x.err = err
		return
	}
	for _, f := range b.files[hashed:] {
		if x.prehash {
			_ = repair.PrehashSource(f.path)
		}
	}
	x.files = b.files
}
