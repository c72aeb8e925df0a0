package rabbitmq

// Reading one classic queue's index directory (queues/<QueueDirName(vhost, queue)>/)
// into the entries the queue holds, replaying v1 (.idx + journal.jif) and
// v2 (.qi + .qs) files as recovery does (§4.3 step 5, §5).

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/storectl/storectl/internal/storefile"
	rfmt "github.com/storectl/storectl/pkg/format/rabbitmq"

	"github.com/storectl/storectl/pkg/format"
)

// EntryLocation says where the message of a queue entry lives.
type EntryLocation uint8

// Message locations.
const (
	LocationMemory      EntryLocation = iota // v2 location 0: no copy on disk
	LocationSharedStore                      // msg_store_persistent, by MsgID
	LocationQueueStore                       // the queue's <S>.qs (v2)
	LocationEmbedded                         // inside the v1 index record
)

// String names the location: memory, shared-store, queue-store, embedded.
func (l EntryLocation) String() string {
	switch l {
	case LocationMemory:
		return "memory"
	case LocationSharedStore:
		return "shared-store"
	case LocationQueueStore:
		return "queue-store"
	case LocationEmbedded:
		return "embedded"
	}
	return "location(" + strconv.Itoa(int(l)) + ")"
}

// Reasons a dirty recovery drops an entry (QueueEntry.Drop), as counted in
// the broker's "dropped A/B/C persistent and D transient" log line.
const (
	DropTransient = "transient" // D: transient entries never survive a restart
	DropOther     = "other"     // C: v2 location 0 or malformed
	// B (per-queue store) uses rfmt.QSDropReason: no_file, bad_header, eof,
	// bad_size, bad_crc. A (shared store missing) needs the .rdq scan and is
	// left to the caller.
)

// QueueEntry is one unacked entry of a queue index.
type QueueEntry struct {
	SeqID uint64
	// MsgID is the store msg id, 32 lowercase hex digits. v2 slots of
	// location 0 and 2 carry no id: it is empty there (for location 2 it
	// is inside Body, as the id annotation of the message).
	MsgID string
	// ID is the store msg id as bytes, and HasID says it is set: on every
	// entry whose id the index holds (v1 publishes, v2 shared-store
	// slots), whether or not MsgID is also given.
	ID          [16]byte
	HasID       bool
	Persistent  bool
	Location    EntryLocation
	StoreOffset uint64 // LocationQueueStore: entry offset in StorePath
	StoreSize   uint32 // LocationQueueStore: blob size
	StorePath   string // LocationQueueStore: the .qs file
	Size        uint32 // payload size (stats)
	Expiry      uint64 // absolute Unix µs; 0 = none
	Delivered   bool   // v1 only: a deliver record exists
	// Body is the ETF of the message for LocationEmbedded (exact) and
	// LocationQueueStore (the .qs blob: ETF plus zero padding, normally
	// none). It aliases the file bytes.
	Body         []byte
	IndexVersion int    // 1 or 2
	Path         string // index file holding the publish
	Offset       int64  // offset of the publish record / slot in Path
	// Drop is "" when a dirty recovery keeps the entry (subject to the
	// shared-store check for LocationSharedStore), else the reason.
	Drop string
}

// QueueRef is one shared-store reference counted by the dirty-recovery
// walker (§4.3 step 1).
type QueueRef struct {
	Path  string // .qi, .idx or journal.jif
	Slot  int    // v2: slot in the .qi; v1: -1
	SeqID uint64
	MsgID string   // hex; "" from ReadVHostQueuesRefs (use ID)
	ID    [16]byte // the msg id's bytes
}

// QueueDir is a decoded queue index directory.
type QueueDir struct {
	Dir       string         // path of the directory
	Hash      string         // its base name (rfmt.QueueDirName)
	Name      rfmt.QueueName // from .queue_name
	HasName   bool
	Entries   []QueueEntry // unacked entries in seq order, dropped ones included
	Refs      []QueueRef
	Anomalies []IndexAnomaly
	// handed counts the references handed to refFn.
	handed int
	// dirReader is the reader's state while the dir is read; nil once it
	// is (a vhost's thousands of QueueDirs are kept: none of them holds it).
	*dirReader
}

// dirReader is what readQueueDirWith needs while it reads one queue dir.
type dirReader struct {
	// refsOnly (ReadVHostQueuesRefs) skips collecting Entries: the .qs
	// entries are still checked, for their anomalies.
	refsOnly bool
	// binaryIDs (ReadQueueDirSegmentsIDs) leaves MsgID empty where ID
	// holds the id: no hex string per entry.
	binaryIDs bool
	// seg, when set (ReadQueueDirSegments), gets a v2-only queue's entries
	// one .qi segment at a time instead of Entries; segMax is the largest
	// seq id handed over so far (segAny: any was).
	seg    func(*QueueDir, []QueueEntry) error
	segMax uint64
	segAny bool
	// qiScratch is decoded into segment after segment (its entries are
	// copied out before the next one).
	qiScratch rfmt.QIFile
	// refFn, when set (ReadVHostQueuesRefsFunc), is handed the references
	// instead of Refs keeping them.
	refFn func(*QueueDir, []QueueRef)
	// qiBuf is what each .qi is read into (nothing decoded from it aliases
	// it past readQISegment); segOut, with seg, what each segment's entries
	// are built in (seg does not keep them).
	qiBuf  []byte
	segOut []QueueEntry
}

// HasRefs reports whether the queue holds a reference to the shared
// store, whether it kept its references (Refs) or handed them over
// (ReadVHostQueuesRefsFunc).
func (q *QueueDir) HasRefs() bool { return len(q.Refs) > 0 || q.handed > 0 }

// Kept returns the entries a dirty recovery keeps (Drop == "").
func (q *QueueDir) Kept() []QueueEntry {
	var out []QueueEntry
	for _, e := range q.Entries {
		if e.Drop == "" {
			out = append(out, e)
		}
	}
	return out
}

// IndexAnomaly is a problem found in a queue index file.
type IndexAnomaly struct {
	Path   string
	Offset int64
	Code   string // stable dotted code, one of the Code* constants
	Err    error  // usually a *format.CorruptError
}

// Error formats the anomaly as path@offset: code: cause.
func (a IndexAnomaly) Error() string {
	return fmt.Sprintf("%s@%d: %s: %v", a.Path, a.Offset, a.Code, a.Err)
}

// queuedirMaxFile bounds how much of one index file is read into memory:
// a .qi is at most 64+32*4096 bytes, a journal holds at most
// queue_index_max_journal_entries (32768) records of a few KiB, and
// segments hold 16384 records; 1 GiB is far above any of them.
const queuedirMaxFile = 1 << 30

// ReadQueueDir reads one queue directory. v1SegmentEntryCount is the
// vhost's segment_entry_count (rfmt.ParseVHostConfig). Corruption becomes
// anomalies; the error is for I/O failures only.
func ReadQueueDir(dir string, v1SegmentEntryCount int) (*QueueDir, error) {
	return readQueueDir(dir, v1SegmentEntryCount, false)
}

func readQueueDir(dir string, v1SegmentEntryCount int, refsOnly bool) (*QueueDir, error) {
	return readQueueDirWith(dir, v1SegmentEntryCount, refsOnly, nil, nil, false)
}

func readQueueDirWith(dir string, v1SegmentEntryCount int, refsOnly bool, seg func(*QueueDir, []QueueEntry) error,
	refFn func(*QueueDir, []QueueRef), binaryIDs bool) (*QueueDir, error) {
	if v1SegmentEntryCount <= 0 || v1SegmentEntryCount > rfmt.MaxV1SegmentEntryCount {
		return nil, fmt.Errorf("segment entry count %d out of range", v1SegmentEntryCount)
	}
	ents, err := storefile.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	q := &QueueDir{Dir: dir, Hash: filepath.Base(dir),
		dirReader: &dirReader{refsOnly: refsOnly, seg: seg, refFn: refFn, binaryIDs: binaryIDs}}
	// A segment's decoded records, its .qi bytes and (handed over a
	// segment at a time) its entries are forgotten before the next one is
	// read: decode into recycled scratch (dirScratches), in every mode.
	// So are the references when they are handed over (refFn) or not
	// returned at all (seg).
	sc := dirScratches.Get().(*dirScratch)
	q.qiScratch.Records, q.qiScratch.WalkerRefs, q.qiBuf = sc.records, sc.walkerRefs, sc.qi
	if refFn != nil || seg != nil {
		q.Refs = sc.refs
	}
	if seg != nil {
		q.segOut = sc.entries
	}
	var qi, qs, idx []uint64
	hasJournal := false
	for _, e := range ents {
		n := e.Name()
		switch {
		case !storefile.IsRegular(dir, e):
			// A dir, FIFO, socket or device named like an index file or
			// .queue_name: the queue's entries (or whose queue it is, so
			// whether the broker keeps the dir) are unknown, as when a
			// file cannot be read (the caller reports the queue as
			// unreadable); not a dir without .queue_name (an orphan).
			if nr, ok := storefile.Irregular(dir, e); ok && (isQueueIndexName(n) || n == ".queue_name") {
				var ne *storefile.NotRegularError
				errors.As(nr, &ne)
				return nil, &fs.PathError{Op: "open", Path: filepath.Join(dir, n),
					Err: fmt.Errorf("%s: %w", storefile.TypeName(ne.Mode), storefile.ErrNotRegular)}
			}
		case n == ".queue_name":
			if err := q.readName(); err != nil {
				return nil, err
			}
		case n == "journal.jif":
			hasJournal = true
		default:
			if s, ok := queuedirSegNum(n, ".qi"); ok {
				qi = append(qi, s)
			} else if s, ok := queuedirSegNum(n, ".qs"); ok {
				qs = append(qs, s)
			} else if s, ok := queuedirSegNum(n, ".idx"); ok {
				idx = append(idx, s)
			}
		}
	}
	stream := q.seg
	if len(idx) > 0 || hasJournal {
		q.seg = nil // the journal applies across segments: merge first
	}
	v2, err := q.readV2(qi, qs)
	if err != nil {
		return nil, err
	}
	var v1 []QueueEntry
	if len(idx) > 0 || hasJournal {
		if v1, err = q.readV1(idx, hasJournal, v1SegmentEntryCount); err != nil {
			return nil, err
		}
	}
	switch {
	case stream != nil && q.seg == nil:
		if err := stream(q, queuedirMerge(v2, v1)); err != nil {
			return nil, err
		}
	case !refsOnly && q.seg == nil:
		q.Entries = queuedirMerge(v2, v1)
	}
	if stream != nil {
		sc.refs = clearAll(q.Refs)
		q.Refs = nil
	}
	if q.refFn != nil {
		if len(q.Refs) > 0 { // v1 references (.idx, journal)
			q.handed += len(q.Refs)
			q.refFn(q, q.Refs)
		}
		sc.refs = clearAll(q.Refs)
		q.Refs, q.refFn = nil, nil
	}
	sc.records, sc.walkerRefs = clearAll(q.qiScratch.Records), clearAll(q.qiScratch.WalkerRefs)
	sc.qi, sc.entries = q.qiBuf[:0], clearAll(q.segOut)
	dirScratches.Put(sc)
	q.dirReader = nil // a vhost can have thousands of queue dirs: keep none of it
	return q, nil
}

// hexIDs says MsgID is filled in (entries and references): not for
// ReadVHostQueuesRefs (refsOnly) nor ReadQueueDirSegmentsIDs (binaryIDs),
// whose callers use the ids' bytes.
func (q *QueueDir) hexIDs() bool { return !q.refsOnly && !q.binaryIDs }

func (q *QueueDir) anomaly(path string, err error, code string) {
	err = format.WithPath(err, path)
	q.Anomalies = append(q.Anomalies, IndexAnomaly{Path: path, Offset: queuedirOffset(err), Code: code, Err: err})
}

// queuedirOffset is the offset of a *format.CorruptError, else 0.
func queuedirOffset(err error) int64 {
	var ce *format.CorruptError
	if errors.As(err, &ce) {
		return ce.Offset
	}
	return 0
}

// read reads a file of the dir; ok is false (with an anomaly) when it is
// larger than queuedirMaxFile.
func (q *QueueDir) read(name string) (b []byte, ok bool, err error) {
	return q.readInto(name, nil)
}

// dirScratch is what reading one queue dir decodes into, kept between
// dirs (dirScratches): a 4096-entry segment's records and references are
// 1.5 MB, its .qi 128 KiB and its entries 0.7 MB, and a vhost has a dir
// per queue (verify reads each dir two or three times; a new buffer per
// segment was most of the garbage its reads made).
type dirScratch struct {
	records, walkerRefs []rfmt.QIRecord
	refs                []QueueRef
	qi                  []byte
	entries             []QueueEntry
}

var dirScratches = sync.Pool{New: func() any { return new(dirScratch) }}

// clearAll zeroes s up to its capacity (what it points to is not kept
// alive from the pool) and returns it empty.
func clearAll[T any](s []T) []T {
	s = s[:cap(s)]
	clear(s)
	return s[:0]
}

// segBufs recycles the buffers ReadVHostQueuesRefs reads .qs segments
// into (a .qi goes to its dir's scratch, dirScratch.qi). A 4 GiB store's
// queues have hundreds of 128 KiB segments, and a new buffer for each was
// most of the garbage reading the indexes made: the collector ran every few ms and the heap's high-water
// mark, which stays resident for the rest of the scan, followed its pace.
var segBufs = sync.Pool{New: func() any { return new([]byte) }}

// readInto reads name as read does, into *buf (grown as needed, and
// kept there for the next read; nil: a new buffer). A caller reusing
// *buf keeps nothing that aliases b past its next use.
func (q *QueueDir) readInto(name string, buf *[]byte) (b []byte, ok bool, err error) {
	if buf == nil {
		buf = new([]byte)
	}
	p := filepath.Join(q.Dir, name)
	f, err := storefile.Open(p)
	if err != nil {
		return nil, false, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, false, err
	}
	if st.Size() > queuedirMaxFile {
		q.anomaly(p, format.Corrupt(0, "file", format.ErrTooLarge), CodeFileTooLarge)
		return nil, false, nil
	}
	b = (*buf)[:0]
	if want := int(st.Size()) + 512; cap(b) < want { // room to see EOF in one more read
		b = make([]byte, 0, want)
	}
	for {
		if len(b) == cap(b) { // the file grew since Stat
			b = append(b, 0)[:len(b)]
		}
		n, rerr := f.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			*buf = b
			return nil, false, rerr
		}
	}
	*buf = b
	return b, true, nil
}

func (q *QueueDir) readName() error {
	b, ok, err := q.read(".queue_name")
	if err != nil || !ok {
		return err
	}
	p := filepath.Join(q.Dir, ".queue_name")
	n, perr := rfmt.ParseQueueName(b)
	if perr != nil {
		q.anomaly(p, perr, CodeQueueName)
		return nil
	}
	q.Name, q.HasName = n, true
	if want := rfmt.QueueDirName(n.VHost, n.Name); want != q.Hash {
		q.anomaly(p, format.Corrupt(0, "queue", fmt.Errorf("%w: name hashes to %s, dir is %s",
			format.ErrInvalid, want, q.Hash)), CodeQueueName)
	}
	return nil
}

// queuedirSegNum parses "<decimal><ext>" as written by the broker.
func queuedirSegNum(name, ext string) (uint64, bool) {
	s, ok := strings.CutSuffix(name, ext)
	if !ok || s == "" || len(s) > 19 {
		return 0, false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseUint(s, 10, 64)
	return n, err == nil
}

// queuedirMerge combines v2 entries with v1 ones not already in v2, as the
// v1-to-v2 conversion's SkipFun does, in seq order.
func queuedirMerge(v2, v1 []QueueEntry) []QueueEntry {
	out := v2 // v2 is the caller's own: appended to and sorted in place, not copied
	if len(v1) == 0 {
		sort.SliceStable(out, func(i, j int) bool { return out[i].SeqID < out[j].SeqID })
		return out
	}
	seen := make(map[uint64]bool, len(v2))
	for _, e := range v2 {
		seen[e.SeqID] = true
	}
	for _, e := range v1 {
		if !seen[e.SeqID] {
			out = append(out, e)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].SeqID < out[j].SeqID })
	return out
}

func queuedirHex(id [16]byte) string { return hex.EncodeToString(id[:]) }

// isQueueIndexName reports whether n names a queue index file: a v2
// segment (.qi) or its store (.qs), a v1 segment (.idx) or journal.
func isQueueIndexName(n string) bool {
	if n == "journal.jif" {
		return true
	}
	for _, ext := range []string{".qi", ".qs", ".idx"} {
		if _, ok := queuedirSegNum(n, ext); ok {
			return true
		}
	}
	return false
}
