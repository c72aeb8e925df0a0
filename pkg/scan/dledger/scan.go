// Package dledger scans the DLedger commitlog of a RocketMQ data dir
// (enableDLegerCommitLog=true: dledger-<selfId>/data, index, checkpoint,
// currterm). It checks the entry framing, data against index, term and
// index order, positions and the inner RocketMQ record with every
// commitlog record check (DLedger 0.3.1.2 never computes its own CRCs, so
// the inner body CRC is the only checksum), and predicts the recovery of
// openmessaging/dledger dledger-all-0.3.1.2 DLedgerMmapFileStore.recover
// (where it stops, what it truncates, when it calls System.exit) and of
// apache/rocketmq rocketmq-all-5.3.3 DLedgerCommitLog on top of it (the
// committed index from the checkpoint, the consume queue truncation).
package dledger

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/storectl/storectl/internal/storefile"
	fdl "github.com/storectl/storectl/pkg/format/dledger"
	rmq "github.com/storectl/storectl/pkg/format/rocketmq"
	"github.com/storectl/storectl/pkg/scan"
	"github.com/storectl/storectl/pkg/scan/cqueue"
)

// Config says what to scan.
type Config struct {
	Root string // store root; paths in findings are relative to it
	// Dir is the dledger-<selfId> dir; "" finds the one dledger-* dir
	// under Root.
	Dir string
	// DataFileSize is mappedFileSizeCommitLog, which RocketMQ copies into
	// DLedger's mappedFileSizeForEntryData; 0 infers it from the files.
	DataFileSize int64
	// IndexFileSize is mappedFileSizeForEntryIndex; 0 infers it.
	IndexFileSize int64
	// MaxMessageSize bounds an inner record (0: rocketmq.DefaultMaxRecordSize).
	MaxMessageSize int
	// OnMessage, when set, receives every inner record the walk decodes
	// (valid or not: err says which), with its physical offset (pos + 48),
	// in offset order. m is valid only during the call.
	OnMessage func(m *rmq.Message, phy int64, err error) error
	// MaxFindings caps the findings per code (0 = 200).
	MaxFindings int
	// KeepEntries keeps [index, term, pos, size] of every entry recovery
	// keeps in Recovery.EntryList (tests compare it with DLedger's).
	KeepEntries bool
	// OnKept, when set, receives [index, term, pos, size] of every entry
	// recovery keeps, in order (rebuild-index builds the index from them).
	OnKept func(e [4]int64)
}

// Dirs lists the dledger-* dirs under root that hold a data dir.
func Dirs(root string) []string {
	m, _ := filepath.Glob(filepath.Join(root, "dledger-*"))
	var out []string
	for _, d := range m {
		if st, err := os.Stat(filepath.Join(d, fdl.DataDir)); err == nil && st.IsDir() {
			out = append(out, d)
		}
	}
	sort.Strings(out)
	return out
}

// dataFile is one file of data/ or index/.
type dataFile struct {
	name string
	rel  string
	path string
	base int64
	size int64
	// walk results (data files)
	end     string // fdl.End*
	endPos  int64
	first   int // index into entries of its first entry (-1 none)
	n       int
	lastPos int64 // file position of its last entry (-1 none)
	idx     int   // its index in the list
	// cut is how many of its entries come before the walk's first stop
	// (a rejected or torn entry); entries found past it by resync are in n
	// but recovery never reaches them. -1: no stop inside the file.
	cut int
	// irregular: a dir, FIFO, socket or device under the file's name
	// (storefile.Irregular): listed, never opened; size 0.
	irregular error
}

// entry is one data entry as the walk sees it.
type entry struct {
	pos     int64
	size    int32
	index   int64
	term    int64
	file    int
	inner   *innerFacts // the item's, while checkEntry runs
	idxDiff string      // first index field that disagrees ("" agree, "missing" no unit)
}

// innerFacts is the part of the inner record the cross checks need.
type innerFacts struct {
	topic    string
	queueOff int64
	queueID  int32
	size     int32
	ok       bool // CheckMessage passed
	decoded  bool // the structure decoded (a CRC failure keeps it readable)
}

// firstEntry is what recovery's start file pre-check and the abnormal
// recovery's file match read of a data file's first entry.
type firstEntry struct {
	ok      bool // a header Header.Check accepts, whose index unit agrees
	h       fdl.Header
	v1      bool  // the inner record is a V1 message (MESSAGE_MAGIC_CODE)
	storeTS int64 // its store timestamp
}

type scanner struct {
	cfg    Config
	res    *scan.Result
	opts   scan.Options
	dir    string // absolute dledger-<id>
	rel    string // relative to root
	data   []dataFile
	index  []dataFile
	idx    *indexReader
	capped map[string]int
	rec    *Recovery
	cp     fdl.Checkpoint
	cpOK   bool
	cpErr  error
	term   fdl.Term
	first  []firstEntry
	start  int // recovery's start file
	// The walk's own continuity (for findings).
	wLast, wTerm int64
	// wGap: a data file the walk could not read (in full) lies between
	// wLast's entry and the next: that entry's index is only known to be
	// higher (the unread entries are unknown), not wLast+1.
	wGap bool
	// The recovery walk (DLedgerMmapFileStore.recover) as the entries go by.
	rLast, rTerm int64
	rStopped     bool
	rProcess     int64
	needWrite    bool
	dropIDs      []string
	dropped      dropReader // reads dropIDs' records again
	lastKept     *[4]int64  // nil, or &lastKeptAt
	lastKeptAt   [4]int64
	committedAt  *[4]int64
	// dledgerRecoverAbnormally's scan.
	abnStart   int
	abnStopped bool
	abnBase    int64
	abnSum     int64
	// Consume queues merged by physical offset against the entries.
	merge      *cqMerge
	cqMax      int64                    // max offset+size over every unit (maxPhyOffsetOfConsumeQueue)
	cqBad      []cqProblem              // units no entry matches, decided after the walk
	cqCount    map[*cqueue.Queue]*int64 // units the merge took per queue
	queues     []*cqueue.Queue
	rocks      bool
	topicNames map[string]string
	// unread is the first data file the walk could not read ("" none),
	// unreadFrom its base; rUnread: recovery reached it unstopped, so
	// where it stops, and everything after unreadFrom, is unknown.
	unread     string
	unreadFrom int64
	rUnread    bool
	unknown    int // entries after the unread file (not kept, not dropped: unknown)
	// unreadSpans are the data offsets of every data file the walk could
	// not read: no unit pointing into one is judged.
	unreadSpans [][2]int64
	// cpUnread is the checkpoint when it is there but could not be read:
	// the committed index, so the broker's max offset, is unknown.
	cpUnread string
}

// Scan checks the DLedger store under cfg.Root. It returns an error only
// when it could not look at all. A root without a DLedger dir gives an
// empty result with Layout["dledger"] = false.
func Scan(ctx context.Context, cfg Config, opts scan.Options) (*scan.Result, error) {
	if cfg.MaxMessageSize <= 0 {
		cfg.MaxMessageSize = rmq.DefaultMaxRecordSize
	}
	if cfg.MaxFindings <= 0 {
		cfg.MaxFindings = 200
	}
	res := &scan.Result{Store: scan.RocketMQ, Layout: map[string]any{"dledger": false}}
	dir := cfg.Dir
	if dir == "" {
		dirs := Dirs(cfg.Root)
		if len(dirs) == 0 {
			return res, nil
		}
		if len(dirs) > 1 {
			return res, fmt.Errorf("%d dledger-* dirs under %s (%s): say which with Config.Dir", len(dirs), cfg.Root, strings.Join(dirs, ", "))
		}
		dir = dirs[0]
	}
	s := &scanner{cfg: cfg, res: res, opts: opts, dir: dir, capped: map[string]int{}, cqCount: map[*cqueue.Queue]*int64{}, topicNames: map[string]string{},
		wLast: -1, wTerm: -1, rLast: -1, rTerm: -1}
	s.rel = scan.Rel(cfg.Root, dir)
	res.Layout["dledger"] = true
	res.Layout["dledger_dir"] = s.rel
	var err error
	if s.data, err = s.listFiles(fdl.DataDir, cfg.DataFileSize); err != nil {
		return res, err
	}
	if s.index, err = s.listFiles(fdl.IndexDir, cfg.IndexFileSize); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return res, err
	}
	s.idx = newIndexReader(s.index)
	defer s.idx.close()
	defer s.dropped.close()
	defer func() {
		if s.merge != nil {
			s.merge.close()
		}
	}()
	for _, step := range []func(context.Context) error{s.readProps, s.prepare, s.walk, s.finish, s.finishCQ} {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		if err := step(ctx); err != nil {
			res.Fail(err)
		}
	}
	s.idx.report(s)
	s.flushCaps()
	res.Extra = map[string]any{"dledger": s.rec}
	switch {
	case s.rUnread:
		// The broker's recovery reads on past what storectl could read:
		// where it ends is unknown (as rocketmq.ExtraRecoveryEndUnknown).
		res.SetEndUnknown(scan.EndUnknown{AtLeast: s.rec.StoreMaxOffset, WaitsOn: s.unread})
		res.Assume(fmt.Sprintf("DLedger recovery end unknown: %s could not be read, so recovery reaches at least data offset %d and nothing after it is called lost", s.unread, s.unreadFrom))
	case s.cpUnread != "":
		// The broker's max offset is the committed position.
		res.SetEndUnknown(scan.EndUnknown{AtLeast: s.rec.StoreMinOffset, WaitsOn: s.cpUnread})
		res.Assume(fmt.Sprintf("DLedger committed position unknown: %s could not be read", s.cpUnread))
	default:
		end := s.rec.StoreMaxOffset
		res.RecoveryEnd = &end
	}
	res.SortFindings()
	return res, ctx.Err()
}

func (s *scanner) add(f scan.Finding) {
	s.capped[f.Code]++
	if s.capped[f.Code] > s.cfg.MaxFindings {
		return
	}
	if f.Repair == "" {
		f.Repair = scan.RepairNone
	}
	s.res.Add(f)
}

func (s *scanner) flushCaps() {
	for code, n := range s.capped {
		if n > s.cfg.MaxFindings {
			s.res.Add(scan.Finding{Code: CodeTooMany, Severity: scan.Warning, Path: s.rel, Repair: scan.RepairNone,
				Details: map[string]any{"code": code, "total": n, "reported": s.cfg.MaxFindings},
				Message: fmt.Sprintf("%d findings of %s, only the first %d are listed", n, code, s.cfg.MaxFindings)})
		}
	}
}

// ExtraRecoveryEndUnknown is scan.ExtraRecoveryEndUnknown: a scan that
// could not read a data file the recovery reaches (Result.SetEndUnknown).
const ExtraRecoveryEndUnknown = scan.ExtraRecoveryEndUnknown

// listFiles lists data/ or index/, checks names, sizes and adjacency. A
// dir, FIFO, socket or device under a file's name is listed as a file
// that cannot be read (unknown, not absent) and reported so.
func (s *scanner) listFiles(sub string, size int64) ([]dataFile, error) {
	d := filepath.Join(s.dir, sub)
	ents, err := storefile.ReadDir(d)
	if err != nil {
		return nil, err
	}
	var out []dataFile
	for _, e := range ents {
		rel := s.rel + "/" + sub + "/" + e.Name()
		base, err := rmq.ParseFileName(e.Name())
		if nr, ok := storefile.Irregular(d, e); ok && err == nil {
			// Reported where it is read: the walk (data), indexReader (index).
			out = append(out, dataFile{name: e.Name(), rel: rel, path: filepath.Join(d, e.Name()), base: base, first: -1, cut: -1, lastPos: -1, irregular: nr})
			continue
		}
		if err != nil || !e.Type().IsRegular() {
			s.add(scan.Finding{Code: CodeBadFileName, Severity: scan.Warning, Path: rel,
				Message: "entry in the DLedger " + sub + " dir is not a file named by a 20-digit offset; MmapFileList would try to load it"})
			continue
		}
		info, err := e.Info()
		if err != nil {
			return nil, err
		}
		out = append(out, dataFile{name: e.Name(), rel: rel, path: filepath.Join(d, e.Name()), base: base, size: info.Size(), first: -1, cut: -1, lastPos: -1})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].base < out[j].base })
	for i := range out {
		out[i].idx = i
	}
	if size <= 0 && len(out) > 0 {
		n := 0
		for _, f := range out {
			if f.irregular == nil { // what could not be read has no size
				if n == 0 {
					size = f.size
				}
				n++
			}
		}
		if sub == fdl.IndexDir && n <= 1 {
			size = max(size, fdl.DefaultIndexFileSize)
		}
	}
	for i, f := range out {
		if f.irregular != nil {
			out[i].size = size // its bytes are unknown: taken as a full file
		} else if f.size != size {
			s.add(scan.Finding{Code: CodeBadFileSize, Severity: scan.Error, Path: f.rel, Length: f.size,
				Expected: fmt.Sprint(size), Actual: fmt.Sprint(f.size),
				Message: "DLedger file is not its mapped file size: MmapFileList.load fails and DLedger calls System.exit(-1) at startup"})
		}
		if i > 0 && f.base-out[i-1].base != size {
			s.add(scan.Finding{Code: CodeOffsetGap, Severity: scan.Error, Path: f.rel,
				Message: "DLedger files are not adjacent: MmapFileList.checkSelf fails and recovery throws DISK_ERROR (the broker does not start)"})
		}
	}
	if sub == fdl.DataDir {
		s.res.Layout["dledger_data_file_size"] = size
	} else {
		s.res.Layout["dledger_index_file_size"] = size
	}
	return out, nil
}

// readProps reads checkpoint and currterm.
func (s *scanner) readProps(context.Context) error {
	p := filepath.Join(s.dir, fdl.CheckpointFile)
	b, err := storefile.ReadFile(p)
	rel := s.rel + "/" + fdl.CheckpointFile
	switch {
	case errors.Is(err, fs.ErrNotExist):
		msg := "the DLedger checkpoint is missing: no committed index is loaded, so the store's max offset is the data's first offset and no message is visible until new appends commit"
		if _, terr := os.Stat(p + ".tmp"); terr == nil {
			msg += " (checkpoint.tmp exists: IOUtils.string2File deletes the file before renaming the new one)"
		}
		s.add(scan.Finding{Code: CodeCheckpointMissing, Severity: scan.Error, Path: rel, Message: msg})
	case err != nil:
		// There but not readable: not "missing"; the committed index is
		// unknown.
		s.res.Add(scan.Unreadable(rel, err))
		s.cpUnread = rel
		return fmt.Errorf("%s: %w", rel, err)
	default:
		s.cp, s.cpErr = fdl.DecodeCheckpoint(b)
		s.cpOK = s.cpErr == nil
		if s.cpErr != nil {
			var off int64
			var ce *formatCorrupt
			if errors.As(s.cpErr, &ce) {
				off = ce.Offset
			}
			s.add(scan.Finding{Code: CodeCheckpointBad, Severity: scan.Error, Path: rel, Offset: off,
				Details: map[string]any{"error": s.cpErr.Error()},
				Message: "the DLedger checkpoint does not parse: Long.valueOf throws out of recover() and the broker does not start"})
		}
	}
	termRel := s.rel + "/" + fdl.TermFile
	switch b, err := storefile.ReadFile(filepath.Join(s.dir, fdl.TermFile)); {
	case err == nil:
		if s.term, err = fdl.DecodeTerm(b); err != nil {
			s.add(scan.Finding{Code: CodeTermBad, Severity: scan.Error, Path: termRel,
				Details: map[string]any{"error": err.Error()},
				Message: "currterm does not parse: MemberState.loadTerm fails"})
		}
	case !errors.Is(err, fs.ErrNotExist):
		s.res.Add(scan.Unreadable(termRel, err))
		return fmt.Errorf("%s: %w", termRel, err)
	}
	return nil
}
