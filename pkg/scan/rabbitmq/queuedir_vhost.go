package rabbitmq

// Vhost-level reader: every queue dir under <vhost>/queues/ plus the
// shared-store reference counts a dirty recovery derives from them
// (§4.3 step 1, rabbit_msg_store:count_msg_refs/3).

import (
	"errors"
	"io/fs"
	"path/filepath"
	"runtime"
	"sort"
	"sync"

	"github.com/storectl/storectl/internal/storefile"
	rfmt "github.com/storectl/storectl/pkg/format/rabbitmq"
)

// VHostQueues is the queue side of one vhost directory.
type VHostQueues struct {
	Dir   string
	VHost string // content of .vhost, when present
	// SegmentEntryCount is the v1 segment size from .config, or
	// rfmt.LegacySegmentEntryCount when the file is missing.
	SegmentEntryCount int
	Queues            []*QueueDir // sorted by Hash
	// RefCounts maps a shared-store msg id (32 hex) to the number of
	// references the queue walkers count (≤3.13 semantics: one per
	// reference; 4.0+ brokers store one more after a dirty recovery).
	RefCounts map[string]int
	Anomalies []IndexAnomaly // vhost-level (bad .config)
	// Unreadable are the queue dirs a file of which could not be read
	// (permission, I/O error, vanished): they are not in Queues, and
	// what they reference is unknown.
	Unreadable []UnreadQueueDir
}

// UnreadQueueDir is a queue dir that could not be read, and why.
type UnreadQueueDir struct {
	Dir  string // the queue dir
	Path string // the file (or dir) that could not be read
	Err  error
}

// AllAnomalies returns the vhost's and every queue's anomalies.
func (v *VHostQueues) AllAnomalies() []IndexAnomaly {
	out := append([]IndexAnomaly(nil), v.Anomalies...)
	for _, q := range v.Queues {
		out = append(out, q.Anomalies...)
	}
	return out
}

// ReadVHostQueues reads <vhostDir>/.config, .vhost and every directory
// under <vhostDir>/queues. A missing queues dir means no queues.
func ReadVHostQueues(vhostDir string) (*VHostQueues, error) {
	return readVHostQueues(vhostDir, false, nil)
}

// ReadVHostQueuesRefs is ReadVHostQueues for callers that need only the
// shared-store references, anomalies and queue names: each queue's
// Entries (with the .qs bodies they alias) are released as soon as its
// dir is read, RefCounts is left empty and a Ref's hex MsgID may be
// empty (its ID is set), so memory does not grow with the number of
// queued messages beyond the Refs themselves. Queue dirs are read in
// parallel.
func ReadVHostQueuesRefs(vhostDir string) (*VHostQueues, error) {
	return readVHostQueues(vhostDir, true, nil)
}

// ReadVHostQueuesRefsFunc is ReadVHostQueuesRefs handing each queue
// dir's references to take as they are read (a .qi segment at a time,
// then the v1 ones), in the order Refs would hold them, instead of
// keeping them: the Queues returned have no Refs, and the references of
// all queues are never held at once. take gets the same *QueueDir the
// result holds; it is called from several goroutines at once (one queue
// dir each) and must not keep refs.
func ReadVHostQueuesRefsFunc(vhostDir string, take func(q *QueueDir, refs []QueueRef)) (*VHostQueues, error) {
	return readVHostQueues(vhostDir, true, take)
}

func readVHostQueues(vhostDir string, refsOnly bool, take func(*QueueDir, []QueueRef)) (*VHostQueues, error) {
	v := &VHostQueues{Dir: vhostDir, SegmentEntryCount: rfmt.LegacySegmentEntryCount, RefCounts: map[string]int{}}
	if b, err := storefile.ReadFile(filepath.Join(vhostDir, ".vhost")); err == nil {
		v.VHost = string(b)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	cfgPath := filepath.Join(vhostDir, ".config")
	switch b, err := storefile.ReadFile(cfgPath); {
	case err == nil:
		n, perr := rfmt.ParseVHostConfig(b)
		if perr != nil {
			v.Anomalies = append(v.Anomalies, IndexAnomaly{Path: cfgPath, Offset: queuedirOffset(perr),
				Code: CodeVHostConfig, Err: perr})
		} else {
			v.SegmentEntryCount = n
		}
	case !errors.Is(err, fs.ErrNotExist):
		return nil, err
	}
	ents, err := storefile.ReadDir(filepath.Join(vhostDir, "queues"))
	if errors.Is(err, fs.ErrNotExist) {
		return v, nil
	}
	if err != nil {
		return nil, err
	}
	var dirs []string
	for _, e := range ents {
		if e.IsDir() {
			dirs = append(dirs, filepath.Join(vhostDir, "queues", e.Name()))
		}
	}
	qs := make([]*QueueDir, len(dirs))
	errs := make([]error, len(dirs))
	if refsOnly {
		// Independent dirs, CPU-bound decoding: read them in parallel.
		next := make(chan int, len(dirs))
		for i := range dirs {
			next <- i
		}
		close(next)
		var wg sync.WaitGroup
		for range min(runtime.GOMAXPROCS(0), max(len(dirs), 1)) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range next {
					qs[i], errs[i] = readQueueDirWith(dirs[i], v.SegmentEntryCount, true, nil, take, false)
				}
			}()
		}
		wg.Wait()
	} else {
		for i, d := range dirs {
			qs[i], errs[i] = readQueueDir(d, v.SegmentEntryCount, false)
		}
	}
	for i, q := range qs {
		if errs[i] != nil {
			// One queue's index that cannot be read does not stop the
			// others: the caller reports it, and what it references is
			// unknown (the scan is incomplete).
			u := UnreadQueueDir{Dir: dirs[i], Path: dirs[i], Err: errs[i]}
			var pe *fs.PathError
			if errors.As(errs[i], &pe) {
				u.Path = pe.Path
			}
			v.Unreadable = append(v.Unreadable, u)
			continue
		}
		v.Queues = append(v.Queues, q)
		if refsOnly {
			continue
		}
		for _, r := range q.Refs {
			v.RefCounts[r.MsgID]++
		}
	}
	sort.Slice(v.Queues, func(i, j int) bool { return v.Queues[i].Hash < v.Queues[j].Hash })
	return v, nil
}
