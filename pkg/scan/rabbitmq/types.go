package rabbitmq

import (
	"encoding/hex"

	"github.com/storectl/storectl/pkg/scan"
)

// Record statuses.
const (
	StatusReferenced   = "referenced"   // a queue index references the msg id; first copy
	StatusUnreferenced = "unreferenced" // no queue references it: garbage compaction reclaims
	StatusDuplicate    = "duplicate"    // a later copy of an id already found (first copy wins)
	// StatusUnknown is used when no queue index was given (StoreDirs,
	// Files): whether anything references the record cannot be told.
	StatusUnknown = "unknown"
)

// LiveStatus reports whether a record of this status is a message (a
// queue references it, or whether one does cannot be told), not garbage
// awaiting compaction or a later copy: what a validating scanner accepts
// and what a misread loses.
func LiveStatus(status string) bool { return status == StatusReferenced || status == StatusUnknown }

// Record is one real record of an .rdq file: a frame with Size ≥ 18 that
// fits in the file, ends in 0xFF and whose body is exactly one ETF term.
type Record struct {
	Path         string   // relative to Config.Root
	File         int64    // N of N.rdq; -1 when the name is not a number
	Offset       int64    // offset of the size field
	TotalSize    int64    // Size + 9
	MsgID        [16]byte // the store msg id
	Status       string   // Status*
	ReferencedBy []string // queue names, one per reference (a q1+q2 message lists both)
	Term         string   // "basic_message", "mc", or "" for another term
	// BadBody marks an aligned frame (file start or right after a record,
	// marker 0xFF) whose body is not one ETF term: RabbitMQ's scanners take
	// it, its reader would fail on it.
	BadBody bool
	// IndexMatch says whether msg_store_index.ets agrees: "match",
	// "mismatch" (the index puts this id elsewhere), "absent" (not in the
	// index) or "" (no clean-shutdown index).
	IndexMatch string
	// FirstPath and FirstOffset locate the authoritative copy of a
	// duplicate.
	FirstPath   string
	FirstOffset int64
}

// ID returns the msg id as 32 lowercase hex digits.
func (r *Record) ID() string { return hex.EncodeToString(r.MsgID[:]) }

// End returns the offset just after the record.
func (r *Record) End() int64 { return r.Offset + r.TotalSize }

// Gap is a byte range of a file not covered by any real record.
type Gap struct {
	Offset int64
	Length int64
	Zero   bool // every byte is 0x00
}

// Victim is a real record a RabbitMQ scanner version would lose. It is
// kept compact (the id as bytes, no string per victim: a generation-1
// stop can list every record of every file) and encodes itself as
// {"msg_id": hex, "offset", "size", "status"} (victims.go).
type Victim struct {
	ID     [16]byte
	Offset int64
	Size   int64
	Status string // one of the Status* constants
}

// Victims is a hazard's victim list; it encodes itself without reflection.
type Victims []Victim

// Hazard is a place where a RabbitMQ scanner generation misreads a file
// (zero-hole misread, off-by-nine, generation-1 stop or crash).
type Hazard struct {
	Code     string   // finding code
	Offset   int64    // bogus candidate / window / stop position
	Length   int64    // bytes the scanner jumps over (misread) or 8
	Versions string   // RabbitMQ versions affected, e.g. "3.13.1-4.0.2"
	Gens     []int    // scanner generations affected
	When     []string // "dirty recovery", "compaction"
	// Victims are the records the scanner loses. Once the file is
	// released a long list is moved to a temp file (victim_spill.go): Victims is then nil
	// and VictimCount and EachVictim are the way to them.
	Victims Victims
	Details map[string]any
	spill   *spilledVictims
}

// FileScan is the scan of one .rdq file: its records, gaps and hazards
// while the scan holds them (VHostOptions.EachFile), then what release
// keeps of them (lean.go).
type FileScan struct {
	Path      string // relative to Config.Root
	Abs       string // path on disk
	Number    int64  // N of N.rdq, -1 if not numeric
	Size      int64
	Current   bool // highest-numbered file of its store: the write file
	Transient bool // in msg_store_transient (wiped by the broker at start)
	Records   []*Record
	Gaps      []Gap // between/before records, and the tail
	End       string
	ValidEnd  int64 // end of the last real record
	// LastReferencedEnd is where the last referenced record ends (where a
	// dirty recovery truncates the current file); 0 if none.
	LastReferencedEnd int64
	Torn              *Gap    // the tail when a record is cut by EOF
	BadMarkers        []int64 // frames with a valid term but a marker other than 0xFF
	ShortFrames       []int64 // complete frames with Size < 16 and marker 0xFF (gen-1 crash)
	Hazards           []Hazard
	ModelsRun         bool // the scanner models were run (file not gap-free)
	// IndexEntries holds, by record offset, the msg_store_index.ets entry
	// of each record whose IndexMatch is "mismatch": where the index puts
	// the id instead.
	IndexEntries map[int64]IndexEntry
	Err          error
	lean         leanFile // set when the records were released (lean.go)
}

// Location is where a msg id was found.
type Location struct {
	Path   string `json:"path"`
	Offset int64  `json:"offset"`
}

// CleanIndex is the clean-shutdown state of a store, when present.
type CleanIndex struct {
	CleanDot       bool
	HasIndex       bool          // msg_store_index.ets (the scan's leanIndex or digest holds it)
	Summaries      []FileSummary // file_summary.ets (nil if absent)
	HasFileSummary bool
}

// VHostScan is the result of ScanVHost (and of the scan Scan and Verify
// run of a vhost): the files' records were handed over and released.
type VHostScan struct {
	Dir   string // vhost dir relative to Root
	VHost string // from .vhost
	// Queues is what the queue indexes say (nil when the vhost has no
	// queues dir: references unknown).
	Queues *VHostQueues
	// RefsKnown: the queue indexes were read, so a record no queue
	// references is unreferenced (not unknown). QueuesOf names a
	// referenced id's queues.
	RefsKnown bool
	Files     []*FileScan // persistent store files in numeric order, then transient
	Lost      []string    // referenced ids found in no .rdq (sorted)
	Clean     *CleanIndex // nil when no clean-shutdown file exists
	Findings  []scan.Finding
	Layout    map[string]any
	// Assumed says what the scan assumed where the files lack context
	// (the broker version: brokerVersion.infer; queue references), and why.
	Assumed []string
	// unrefUnknown counts the records no readable queue index references
	// while some queue dir could not be read (unreadQueueFindings).
	unrefUnknown int
}
