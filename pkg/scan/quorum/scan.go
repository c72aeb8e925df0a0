// Package quorum scans RabbitMQ quorum queues: the ra system dirs
// quorum/<node>/ and coordination/<node>/ of a node (WAL, per-replica
// segments, snapshots, checkpoints, config), checks every WAL record and
// segment entry, and (Verify) predicts what each queue holds at the next
// start by replaying rabbit_fifo over the log after its snapshot.
// docs/formats/ra.md describes the files and the broker's rules.
package quorum

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"

	"github.com/storectl/storectl/internal/fileview"
	"github.com/storectl/storectl/internal/storefile"
	"github.com/storectl/storectl/pkg/format"
	"github.com/storectl/storectl/pkg/format/etf"
	"github.com/storectl/storectl/pkg/format/ra"
	"github.com/storectl/storectl/pkg/scan"
)

// Config says what to scan.
type Config struct {
	// Root is the data dir: finding and record paths are relative to it.
	Root string
	// Path is the node dir, quorum/ or coordination/ dir, or a system dir
	// to scan; "" means Root.
	Path string
	// Systems, when set, are scanned instead of those found under Path.
	Systems []SystemDir
	// Replay (verify) builds every replica's log and predicts the next
	// start: queue lines in Result.QueueLines.
	Replay bool
	// WALEnds, when set, makes the scan read a WAL (by absolute path) as if
	// it ended at the given size: the prediction after a planned cut.
	WALEnds map[string]int64
	// LogPages bounds the replay's log-table pages (40 KiB each) in memory,
	// all replicas together; the others go to an unlinked temp file. <= 0
	// is DefaultLogPages (tests force a small one).
	LogPages int
	// QueueChunk is the replay's message queue chunk size (ra.MsgQueue);
	// <= 0 is ra.MsgChunk (tests force a small one), and LiveChunk the
	// live lists' (<= 0: liveChunk).
	QueueChunk, LiveChunk int
}

// Result is a scan's result with the model the other commands use.
type Result struct {
	*scan.Result
	Systems []*System
	// Queues are verify's queue lines, one per quorum queue replica.
	Queues []Queue
	// spill holds the replay's log-table pages and live lists past their
	// memory bounds, for as long as the predictions are read.
	spill *scan.Spill
	pool  *logPool
}

// Close gives back the temp file the replay spilled to (the predictions'
// Live cannot be read after it). It is safe to call more than once; a
// Result not closed gives it back when the collector finds it
// unreachable.
func (r *Result) Close() error {
	if r == nil || r.spill == nil {
		return nil
	}
	return r.spill.Close()
}

// System is one scanned ra system dir.
type System struct {
	SystemDir
	Rel      string
	WALs     []*WALFile
	Replicas []*Replica
	byUID    map[string]*Replica
	// names is the content of names.dets (nil when absent or unreadable):
	// a replica whose UId is not in it is not registered.
	names []byte
	// namesUnread is names.dets' path when it is there and could not be
	// read: whether a replica is registered is unknown.
	namesUnread string
	// meta holds what meta.dets says per UId.
	meta map[string]MetaDETS
	// spill is the scan's temp file (Result.spill) for the live lists and
	// message queues, in chunks of the Config's sizes.
	spill                 *scan.Spill
	queueChunk, liveChunk int
	// Refused is set when ra will not start this system's WAL at the next
	// start (every queue of the system is then down): the finding code.
	Refused string
	// logUnread are its WAL files that could not be read: an index in no
	// file read may be in them (unknown, not a gap); Replica.logUnread
	// has the replica's own segments.
	logUnread    []string
	RefusedWhere string // path@offset of that finding
}

// WALFile is one scanned WAL.
type WALFile struct {
	Name, Rel, Path string
	Size            int64
	Number          ra.FileNumber
	Records         int
	End             string // scan.End*
	EndOff          int64
	// RecoveryEnd is where ra's recovery of this file stops (a tolerated
	// bad last record or a torn one is not kept).
	RecoveryEnd int64
	// Fatal is set when ra cannot recover the file (bad header, a bad
	// checksum before the last record, an unknown writer reference).
	Fatal bool
	// Torn describes a record cut short at the end (nil when none).
	Torn *TornRecord
}

// TornRecord is what a cut last record still says.
type TornRecord struct {
	Offset    int64
	Have      int64 // bytes present
	Want      int64 // bytes the record needs (0 when its head is cut too)
	UID       string
	Index     uint64
	Term      uint64
	HeadKnown bool
}

// Replica is one replica dir (<UId>/).
type Replica struct {
	System      *System
	UID, Rel    string
	Path        string
	Config      *ra.Config
	ConfigErr   error
	Segments    []*SegmentFile
	Snapshots   []*SnapshotFile
	Checkpoints []*SnapshotFile
	// Registered is true/false when names.dets was read, nil otherwise.
	Registered *bool
	// Log maps a Raft index to where its entry is (Config.Replay only).
	Log *logTable
	// First and Last bound the indexes on disk (segments and WAL).
	First, Last uint64
	HasEntries  bool
	LastTerm    uint64
	// CrashEntries are live segment entries whose CRC fails, or whose data
	// is short: reading them crashes the member.
	CrashEntries []*EntryLoc
	walEntries   int
	segNotes     segNote
	prediction   *Prediction
	// logUnread are its segments (or its dir) that could not be read.
	logUnread []string
	// configUnread is its config's path when it is there and could not
	// be read (whether ra can start the member is unknown).
	configUnread string
	// MovedFrom is the data dir the config pins when the replica is not
	// there (ra < 2.4.2 reads the log from it).
	MovedFrom string
}

// LogWaitsOn are the WAL and segment files (or the replica dir) that
// could not be read and may hold entries of r's log.
func (r *Replica) LogWaitsOn() []string {
	out := append([]string(nil), r.System.logUnread...)
	return append(out, r.logUnread...)
}

// samePath reports whether a and b name the same dir.
func samePath(a, b string) bool {
	if filepath.Clean(a) == filepath.Clean(b) {
		return true
	}
	pa, err1 := filepath.EvalSymlinks(a)
	pb, err2 := filepath.EvalSymlinks(b)
	return err1 == nil && err2 == nil && pa == pb
}

// Prediction is the replay's result (Config.Replay), nil before it.
func (r *Replica) Prediction() *Prediction { return r.prediction }

// Name is "vhost/queue" when known, else the UId.
func (r *Replica) Name() string {
	if r.Config != nil && r.Config.Queue != "" {
		return r.Config.Queue
	}
	if r.Config != nil && r.Config.ClusterName != "" {
		return r.Config.ClusterName
	}
	return r.UID
}

// EntryLoc is where one log entry is.
type EntryLoc struct {
	Path    string // absolute
	Rel     string
	Offset  int64  // of the entry data
	Length  uint32 // data length
	Record  int64  // WAL: record offset; segment: slot offset
	RecSize int64  // WAL record size
	Index   uint64
	Term    uint64
	InWAL   bool
	OK      bool // checksum / CRC holds
	Slot    int
}

// SegmentFile is one scanned segment.
type SegmentFile struct {
	Name, Rel, Path string
	Number          ra.FileNumber
	Size            int64
	Header          ra.SegmentHeader
	HeaderErr       error
	Slots, Live     int
	First, Last     uint64
	HasLive         bool
	BadCRC          []uint64
}

// SnapshotFile is one snapshot or checkpoint.
type SnapshotFile struct {
	Dir, Rel, Path string
	Checkpoint     bool
	Term, Index    uint64 // from the dir name
	Size           int64
	CRCOK          bool
	Err            error
	// Unread: the file could not be read (Err says why): what it holds
	// is unknown, not bad.
	Unread bool
	Meta   ra.SnapshotMeta
}

// Valid reports whether ra would recover from it.
func (s *SnapshotFile) Valid() bool { return s.Err == nil && s.CRCOK }

// Scan scans the ra systems of cfg.
func Scan(ctx context.Context, cfg Config, opts scan.Options) (*Result, error) {
	res := &Result{Result: &scan.Result{Store: scan.RabbitMQ, Layout: map[string]any{}}}
	if cfg.Replay {
		res.spill = &scan.Spill{Pattern: "storectl-quorum-*"}
		res.pool = newLogPool(cfg.LogPages, res.spill)
	}
	root := cfg.Root
	path := cfg.Path
	if path == "" {
		path = root
	}
	systems := cfg.Systems
	if systems == nil {
		var err error
		if systems, err = FindSystems(path); err != nil {
			return res, err
		}
	}
	var rels []string
	for _, sd := range systems {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		s := &System{SystemDir: sd, Rel: rel(root, sd.Path), byUID: map[string]*Replica{}, spill: res.spill,
			queueChunk: cfg.QueueChunk, liveChunk: cfg.LiveChunk}
		rels = append(rels, s.Rel)
		res.Systems = append(res.Systems, s)
		sc := &scanner{ctx: ctx, cfg: cfg, opts: opts, res: res, sys: s, root: root}
		if err := sc.scanSystem(); err != nil {
			if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
				return res, err
			}
			res.Fail(fmt.Errorf("%s: %w", s.Rel, err))
		}
	}
	res.Layout["ra_systems"] = rels
	if cfg.Replay {
		for _, s := range res.Systems {
			if s.System != SystemQuorum {
				continue
			}
			for _, r := range s.Replicas {
				if err := ctx.Err(); err != nil {
					return res, err
				}
				q := predictReplica(res, r)
				res.Queues = append(res.Queues, q)
			}
		}
		if err := res.pool.Err(); err != nil {
			res.Fail(err)
		}
	}
	res.SortFindings()
	return res, nil
}

type scanner struct {
	ctx  context.Context
	cfg  Config
	opts scan.Options
	res  *Result
	sys  *System
	root string
	// segPrev is the reader of the last segment, whose window and slot
	// table the next one reuses (a scanner reads one segment at a time).
	segPrev *ra.SegmentReader
}

func rel(root, p string) string {
	if root == "" {
		return p
	}
	r, err := filepath.Rel(root, p)
	if err != nil {
		return p
	}
	return filepath.ToSlash(r)
}

func (sc *scanner) code(quorumCode string) string { return Code(sc.sys.System, quorumCode) }

func (sc *scanner) add(f scan.Finding) {
	if f.Repair == "" {
		f.Repair = scan.RepairNone
	}
	sc.res.Add(f)
}

// unreadable reports a file or dir that could not be read. A read that
// failed (permission, I/O error, a file that vanished or shrank, a dir,
// FIFO, socket or device in the file's place) also makes the result
// incomplete (exit 3): what the file holds is unknown, not lost
// (docs/cli.md). A symlink (errNotRegular) is only the finding.
func (sc *scanner) unreadable(p string, err error) {
	sc.add(scan.Finding{Code: sc.code(CodeUnreadable), Severity: scan.Error, Path: rel(sc.root, p),
		Message: fmt.Sprintf("cannot read %s: %v", filepath.Base(p), err)})
	if !errors.Is(err, errNotRegular) {
		sc.res.Fail(fmt.Errorf("%s: %w", rel(sc.root, p), err))
		if s := sc.sys; s != nil && strings.HasSuffix(p, ".wal") {
			s.logUnread = append(s.logUnread, rel(sc.root, p))
		}
	}
}

// logUnreadable is unreadable for a file or dir of replica r's log (a
// segment, the replica dir): an index in no file read may be in it. Kept
// per replica (r.logUnread: the replicas are read concurrently), so an
// unread segment of one replica leaves another's gaps known.
func (sc *scanner) logUnreadable(r *Replica, p string, err error) {
	sc.unreadable(p, err)
	if !errors.Is(err, errNotRegular) {
		r.logUnread = append(r.logUnread, rel(sc.root, p))
	}
}

func (sc *scanner) scanSystem() error {
	s := sc.sys
	if st, err := os.Lstat(s.Path); err != nil || !st.IsDir() {
		if err == nil {
			err = &storefile.NotRegularError{Path: s.Path, Mode: st.Mode().Type(), Want: "directory"}
		}
		// what the system's WALs and replicas hold is unknown
		sc.unreadable(s.Path, err)
		return nil
	}
	l, err := listSystem(s.Path)
	if err != nil {
		sc.unreadable(s.Path, err)
		return nil
	}
	// names.dets or meta.dets there but not readable (a dir, FIFO,
	// permission, I/O error) is unreadable, not absent: no replica is
	// then called unregistered (namesUnread), and meta.dets' terms and
	// applied indexes are unknown (-1)
	if l.names != "" {
		if b, err := readRegular(l.names); err == nil {
			s.names = b
		} else {
			s.namesUnread = rel(sc.root, l.names)
			sc.unreadable(l.names, err)
		}
	}
	if l.meta != "" {
		if b, err := readRegular(l.meta); err == nil {
			s.meta = ParseMetaDETS(b)
		} else {
			sc.unreadable(l.meta, err)
		}
	}
	for _, n := range l.replicas {
		sc.openReplica(n)
	}
	for _, n := range l.other {
		p := filepath.Join(s.Path, n)
		sc.add(scan.Finding{Code: sc.code(CodeUnexpectedFile), Severity: scan.Info, Path: rel(sc.root, p),
			Message: fmt.Sprintf("%s is not a file ra writes here; ra ignores it", n)})
	}
	if sc.concurrentWAL() {
		// the WALs are read beside the replicas' segments: what they
		// change of a replica (its notes, its truncates) is kept apart
		// from what the segments note and merged after, in the order the
		// sequential scan takes (every WAL, then the segments)
		wsc := &scanner{ctx: sc.ctx, cfg: sc.cfg, opts: sc.opts, res: &Result{Result: &scan.Result{Store: sc.res.Store}}, sys: s, root: sc.root}
		if p := sc.opts.Progress; p != nil {
			var mu sync.Mutex
			wsc.opts.Progress = func(n int64) { mu.Lock(); p(n); mu.Unlock() }
			sc.opts.Progress = wsc.opts.Progress
			defer func() { sc.opts.Progress = p }()
		}
		done := make(chan error, 1)
		go func() {
			for _, n := range l.wals {
				if err := wsc.ctx.Err(); err != nil {
					done <- err
					return
				}
				wsc.scanWAL(n)
			}
			done <- nil
		}()
		subs, rerr := sc.scanReplicaSubs()
		werr := <-done
		sc.res.Merge(wsc.res.Result)
		for _, sub := range subs {
			sc.res.Merge(sub.res.Result)
		}
		for _, r := range s.Replicas {
			r.mergeSegmentNotes()
		}
		if werr != nil {
			return werr
		}
		if rerr != nil {
			return rerr
		}
		sc.checkOrphans()
		return nil
	}
	for _, n := range l.wals {
		if err := sc.ctx.Err(); err != nil {
			return err
		}
		sc.scanWAL(n)
	}
	for _, r := range s.Replicas {
		r.Log.release()
	}
	if err := sc.scanReplicas(); err != nil {
		return err
	}
	for _, r := range s.Replicas {
		r.mergeSegmentNotes()
	}
	sc.checkOrphans()
	return nil
}

// concurrentWAL reports whether the WALs are read beside the segments: a
// plain scan on more than one CPU (the replay's log table and the
// records want them in order).
func (sc *scanner) concurrentWAL() bool {
	return !sc.cfg.Replay && sc.opts.Records == nil && sc.jobs() > 1 && len(sc.sys.Replicas) > 0
}

func (sc *scanner) jobs() int {
	if sc.opts.Jobs > 0 {
		return sc.opts.Jobs
	}
	return runtime.NumCPU()
}

// scanReplicas reads every replica's snapshots and segments: Options.Jobs
// replicas at once (default: the CPUs), each into a result of its own
// merged in replica order, so the output does not depend on the jobs;
// one at a time when records are wanted (they come in file order).
func (sc *scanner) scanReplicas() error {
	s := sc.sys
	jobs := sc.opts.Jobs
	if jobs <= 0 {
		jobs = runtime.NumCPU()
	}
	if jobs == 1 || sc.opts.Records != nil || len(s.Replicas) < 2 {
		for _, r := range s.Replicas {
			if err := sc.ctx.Err(); err != nil {
				return err
			}
			sc.scanReplicaFiles(r)
		}
		return nil
	}
	subs, err := sc.scanReplicaSubs()
	for _, sub := range subs {
		sc.res.Merge(sub.res.Result)
	}
	return err
}

// scanReplicaSubs reads the replicas' files Options.Jobs at a time, each
// into a scanner of its own (returned in replica order, for the caller to
// merge).
func (sc *scanner) scanReplicaSubs() ([]*scanner, error) {
	s := sc.sys
	jobs := sc.jobs()
	opts := sc.opts
	if p := opts.Progress; p != nil {
		var mu sync.Mutex
		opts.Progress = func(n int64) { mu.Lock(); p(n); mu.Unlock() }
	}
	subs := make([]*scanner, len(s.Replicas))
	sem := make(chan struct{}, jobs)
	var wg sync.WaitGroup
	for i, r := range s.Replicas {
		sub := &scanner{ctx: sc.ctx, cfg: sc.cfg, opts: opts, res: &Result{Result: &scan.Result{Store: sc.res.Store}}, sys: s, root: sc.root}
		subs[i] = sub
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			sub.scanReplicaFiles(r)
		}()
	}
	wg.Wait()
	return subs, sc.ctx.Err()
}

// openReplica reads a replica dir's config and registration.
func (sc *scanner) openReplica(name string) {
	s := sc.sys
	p := filepath.Join(s.Path, name)
	r := &Replica{System: s, UID: name, Rel: rel(sc.root, p), Path: p}
	s.Replicas = append(s.Replicas, r)
	s.byUID[name] = r
	if s.names != nil {
		reg := strings.Contains(string(s.names), name)
		r.Registered = &reg
	}
	cp := filepath.Join(p, ra.ConfigFile)
	b, err := readRegular(cp)
	// There but not readable (permission, I/O, a dir or FIFO in its
	// place): the queue's name and whether ra can start the member are
	// unknown, not "config bad". Missing and symlinked configs are.
	unread := err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, errNotRegular)
	if err == nil {
		var c ra.Config
		c, err = ra.ParseConfig(b)
		if err == nil {
			r.Config = &c
			if c.UID != name {
				err = fmt.Errorf("config uid %q is not the dir name", c.UID)
			}
		}
	}
	if err == nil && r.Config.SystemDataDir != "" && !samePath(r.Config.SystemDataDir, s.Path) {
		r.MovedFrom = r.Config.SystemDataDir
		sc.add(scan.Finding{Code: sc.code(CodeConfigDataDir), Severity: scan.Error, Path: rel(sc.root, cp),
			Expected: s.Path, Actual: r.Config.SystemDataDir,
			Message: fmt.Sprintf("%s: the config pins the data dir %s (written by ra before 2.4.2, RabbitMQ 3.10.0-3.10.13), but the replica is in %s: that ra reads the member's log from the pinned dir, so this queue fails to start there (or reads another copy's files); RabbitMQ 3.10.14+ ignores the pinned dir", r.Name(), r.Config.SystemDataDir, s.Path),
			Details: map[string]any{"pinned": r.Config.SystemDataDir, "actual": s.Path}})
	}
	switch {
	case unread:
		r.ConfigErr, r.configUnread = err, rel(sc.root, cp)
		sc.unreadable(cp, err)
	case err != nil:
		r.ConfigErr = err
		sc.add(scan.Finding{Code: sc.code(CodeConfigBad), Severity: scan.Warning, Path: rel(sc.root, cp),
			Message: fmt.Sprintf("replica %s: config %v: the queue's name is not known, and ra cannot start this member", name, err)})
	}
	if sc.cfg.Replay {
		r.Log = newLogTable(sc.res.pool)
	}
}

// segNote is what a replica's segments note (noteSegment), merged into
// the replica after its WAL records (mergeSegmentNotes): the same First,
// Last and LastTerm as noting them one by one after the WAL's.
type segNote struct {
	first, last, lastTerm uint64
	has                   bool
}

func (r *Replica) noteSegment(idx, term uint64) {
	n := &r.segNotes
	if !n.has || idx < n.first {
		n.first = idx
	}
	if !n.has || idx >= n.last {
		n.last, n.lastTerm = idx, term
	}
	n.has = true
}

// mergeSegmentNotes applies the segments' notes after the WAL's: a
// segment index at or above the WAL's last is the newest (note's >=).
func (r *Replica) mergeSegmentNotes() {
	n := r.segNotes
	r.segNotes = segNote{}
	if !n.has {
		return
	}
	if !r.HasEntries || n.first < r.First {
		r.First = n.first
	}
	if !r.HasEntries || n.last >= r.Last {
		r.Last, r.LastTerm = n.last, n.lastTerm
	}
	r.HasEntries = true
}

func (r *Replica) note(idx, term uint64) {
	if !r.HasEntries || idx < r.First {
		r.First = idx
	}
	if !r.HasEntries || idx >= r.Last {
		r.Last, r.LastTerm = idx, term
	}
	r.HasEntries = true
}

// scanWAL reads one WAL file the way ra's recovery does, and checks every
// record.
func (sc *scanner) scanWAL(name string) {
	s := sc.sys
	p := filepath.Join(s.Path, name)
	w := &WALFile{Name: name, Rel: rel(sc.root, p), Path: p, EndOff: -1, RecoveryEnd: -1}
	s.WALs = append(s.WALs, w)
	var fault error // the file shrank under its mapping (sc.reader)
	defer func() {
		if fault != nil {
			w.Fatal = true
			sc.unreadable(p, fault)
		}
	}()
	defer fileview.Guard(&fault)()
	if n, ok := ra.ParseFileName(name, "wal"); ok {
		w.Number = n
	} else {
		sc.add(scan.Finding{Code: sc.code(CodeWALBadName), Severity: scan.Warning, Path: w.Rel,
			Message: fmt.Sprintf("%s is not a name ra gives a WAL (8 or 16 digits); ra recovers it in name order all the same", name)})
	}
	f, err := openRegular(p)
	if err != nil {
		sc.unreadable(p, err)
		w.Fatal = true
		return
	}
	defer f.Close()
	st, _ := f.Stat()
	w.Size = st.Size()
	if end, ok := sc.cfg.WALEnds[p]; ok && end < w.Size {
		w.Size = end
	}
	file := scan.File{Path: w.Rel, Kind: "ra-wal", Size: w.Size, FirstValid: -1, LastValid: -1}
	defer func() {
		file.Records = w.Records
		file.End, file.ValidEnd = w.End, w.RecoveryEnd
		sc.res.Files = append(sc.res.Files, file)
	}()
	fr, done := sc.reader(f, p)
	defer done()
	rd := ra.NewWALReader(fr, w.Size)
	var badAt int64 = -1
	orphans := map[string]int{}
	var entry EntryLoc // one for the walk: Log.put copies it
	for rd.Next() {
		rec := rd.Record()
		w.Records++
		if file.FirstValid < 0 {
			file.FirstValid = rec.Offset
		}
		file.LastValid = rec.Offset
		// the UId as a string only where one is kept (a finding, an
		// orphan count): a string per record was the walk's largest
		// allocation. Taken before IsLast, whose peek past the record
		// can move the read window over its bytes.
		uid := ""
		if rec.UID == nil {
			w.Fatal = true
			sc.add(scan.Finding{Code: sc.code(CodeWALUnknownWriter), Severity: scan.Error, Path: w.Rel, Offset: rec.Offset, Length: rec.Size(),
				Message: fmt.Sprintf("record %d refers to writer %d, which this WAL never defined: ra 2.2-2.15 crash recovering it (badmatch), so the node's %s queues do not start", w.Records, rec.WriterRef, sc.sys.System),
				Details: map[string]any{"writer_ref": rec.WriterRef, "index": rec.Index}})
			if badAt < 0 {
				badAt = rec.Offset
			}
			continue
		}
		ok := rec.ChecksumOK()
		if !ok {
			uid = string(rec.UID)
			if rd.IsLast() {
				sc.add(scan.Finding{Code: sc.code(CodeWALChecksumLast), Severity: scan.Warning, Path: w.Rel, Offset: rec.Offset, Length: rec.Size(),
					Expected: fmt.Sprint(rec.Checksum), Actual: fmt.Sprint(rec.ComputeChecksum()), Repair: scan.RepairTruncate,
					Message: fmt.Sprintf("the last record (%s index %d term %d) fails its Adler-32: ra 2.0.13+ drops it at the next start (older ra refuses the WAL)", sc.queueName(uid), rec.Index, rec.Term),
					Details: map[string]any{"uid": uid, "queue": sc.queueName(uid), "index": rec.Index, "term": rec.Term}})
				if w.RecoveryEnd < 0 {
					w.RecoveryEnd = rec.Offset
				}
			} else if badAt < 0 {
				badAt = rec.Offset
				w.Fatal = true
				sc.walChecksumFinding(w, rec)
			} else {
				sc.add(scan.Finding{Code: sc.code(CodeWALChecksum), Severity: scan.Error, Path: w.Rel, Offset: rec.Offset, Length: rec.Size(),
					Expected: fmt.Sprint(rec.Checksum), Actual: fmt.Sprint(rec.ComputeChecksum()), Repair: scan.RepairTruncate,
					Message: fmt.Sprintf("another record (%s index %d) fails its Adler-32", sc.queueName(uid), rec.Index),
					Details: map[string]any{"uid": uid, "queue": sc.queueName(uid), "index": rec.Index, "term": rec.Term}})
			}
		}
		// a record whose checksum was computed and holds is the bytes ra
		// wrote (term_to_binary's): the term check is for the others
		entryOK := ok && rec.Checksum != 0 || etf.IsExactTerm(rec.Data)
		if ok && !entryOK {
			uid = string(rec.UID)
			sc.add(scan.Finding{Code: sc.code(CodeWALBadEntry), Severity: scan.Error, Path: w.Rel, Offset: rec.Offset + int64(rec.HeaderLen), Length: int64(rec.DataLen),
				Message: fmt.Sprintf("record of %s index %d (no checksum computed) is not an Erlang term: ra crashes decoding it (binary_to_term)", sc.queueName(uid), rec.Index),
				Details: map[string]any{"uid": uid, "index": rec.Index}})
		}
		var r *Replica
		if ok && uid == "" {
			r = s.byUID[string(rec.UID)] // (no string made)
		} else {
			r = s.byUID[uid]
		}
		if r == nil {
			if uid == "" {
				uid = string(rec.UID)
			}
			orphans[uid]++
			continue
		}
		loc := &entry
		*loc = EntryLoc{Path: p, Rel: w.Rel, Offset: rec.Offset + int64(rec.HeaderLen), Length: rec.DataLen, Record: rec.Offset,
			RecSize: rec.Size(), Index: rec.Index, Term: rec.Term, InWAL: true, OK: ok}
		if ok {
			// every record that passes its checksum: ra recovers them (a
			// fatal record elsewhere stops the whole system, which the
			// prediction reports; salvage wants them all)
			if rec.Truncate {
				r.truncateAbove(rec.Index)
			}
			r.note(rec.Index, rec.Term)
			if r.Log != nil {
				r.Log.put(r.Log.file(p, w.Rel), loc, false)
			}
			r.walEntries++
		}
		if sc.opts.Records != nil && ok && entryOK {
			sc.record(r, loc, rec.Data)
		}
	}
	file.BytesScanned = rd.BytesRead()
	sc.res.BytesScanned += rd.BytesRead()
	if sc.opts.Progress != nil {
		sc.opts.Progress(rd.BytesRead())
	}
	if err := rd.Err(); err != nil {
		var ce *format.CorruptError
		w.Fatal = true
		if errors.As(err, &ce) {
			code, what := CodeWALBadHeader, "does not start with the RAWA version 1 header"
			if w.Size < ra.WALHeaderLen {
				code, what = CodeWALEmpty, fmt.Sprintf("is %d bytes, shorter than the 5-byte header", w.Size)
			}
			sc.add(scan.Finding{Code: sc.code(code), Severity: scan.Error, Path: w.Rel, Offset: ce.Offset, Length: w.Size,
				Repair: scan.RepairTruncate,
				Message: fmt.Sprintf("%s %s: ra cannot open it (%s), so the WAL and every %s queue of the node (%s) fail to start",
					name, what, walHeaderReason(code), sc.sys.System, strings.Join(sc.queueNames(), ", ")),
				Details: map[string]any{"queues": sc.queueNames()}})
			w.End = scan.EndGarbage
			sc.refuse(code, w.Rel, ce.Offset)
		} else {
			sc.unreadable(p, err)
		}
		return
	}
	reason, off := rd.End()
	w.EndOff = off
	switch reason {
	case ra.WALEndEOF:
		w.End = scan.EndEOF
	case ra.WALEndZero:
		w.End = scan.EndZero
		sc.add(scan.Finding{Code: sc.code(CodeWALZeroTail), Severity: scan.Info, Path: w.Rel, Offset: off, Length: w.Size - off,
			Message: fmt.Sprintf("%d zero bytes after the last record (a pre-allocated WAL): ra stops reading there", w.Size-off)})
	case ra.WALEndPartial:
		w.End = scan.EndTorn
		sc.tornRecord(w, f, off, rd.Writers())
	}
	if w.RecoveryEnd < 0 {
		w.RecoveryEnd = off
	}
	if badAt >= 0 {
		w.RecoveryEnd = badAt
	}
	for uid, n := range orphans {
		sc.add(scan.Finding{Code: sc.code(CodeWALOrphanWriter), Severity: scan.Info, Path: w.Rel,
			Message: fmt.Sprintf("%d records of UId %s, which has no replica dir here (a deleted queue): ra skips them", n, uid),
			Details: map[string]any{"uid": uid, "records": n}})
	}
}

// reader is what the WAL and segment readers read f (at path p) through:
// bounded mappings when the file is in the page cache
// (fileview.MapCached: no copy out of it; the caller reads under
// fileview.Guard) unless records are wanted, which are decoded from the
// bytes and handed on (they get pread's copies). done gives the mapping
// back.
func (sc *scanner) reader(f *os.File, p string) (r io.ReaderAt, done func()) {
	if sc.opts.Records != nil {
		return f, func() {}
	}
	return fileview.MapCached(f, p)
}

func walHeaderReason(code string) string {
	if code == CodeWALEmpty {
		return "case_clause reading the header, ra#165/ra#170"
	}
	return "unknown_wal_file_format"
}

// refuse records that the system's WAL will not start.
func (sc *scanner) refuse(code, path string, off int64) {
	if sc.sys.Refused == "" {
		sc.sys.Refused = sc.code(code)
		sc.sys.RefusedWhere = fmt.Sprintf("%s@%d", path, off)
	}
}

// walChecksumFinding is the first mid-file checksum failure: the whole
// ra system does not start.
func (sc *scanner) walChecksumFinding(w *WALFile, rec *ra.WALRecord) {
	uid := string(rec.UID)
	queues := sc.queueNames()
	sc.add(scan.Finding{Code: sc.code(CodeWALChecksum), Severity: scan.Error, Path: w.Rel, Offset: rec.Offset, Length: rec.Size(),
		Expected: fmt.Sprint(rec.Checksum), Actual: fmt.Sprint(rec.ComputeChecksum()), Repair: scan.RepairTruncate,
		Message: fmt.Sprintf("record of %s index %d term %d fails its Adler-32 and more records follow: ra refuses this WAL (wal_checksum_validation_failure), so every %s queue of the node is down at the next start: %s",
			sc.queueName(uid), rec.Index, rec.Term, sc.sys.System, strings.Join(queues, ", ")),
		Details: map[string]any{"uid": uid, "queue": sc.queueName(uid), "index": rec.Index, "term": rec.Term, "queues_down": queues}})
	sc.refuse(CodeWALChecksum, w.Rel, rec.Offset)
}

// tornRecord reports the record cut short at off.
func (sc *scanner) tornRecord(w *WALFile, f *os.File, off int64, ws *ra.WALWriters) {
	n := min(w.Size-off, 3+2+65535+ra.WALFixedLen)
	b := make([]byte, n)
	if _, err := f.ReadAt(b, off); err != nil {
		sc.unreadable(w.Path, err)
		return
	}
	t := &TornRecord{Offset: off, Have: w.Size - off}
	rec, err := ra.DecodeWALRecord(b, off, ws)
	var ce *format.CorruptError
	if err == nil || (errors.As(err, &ce) && ce.Field == "data") {
		if rec.IsRef {
			uid, _ := ws.Lookup(rec.WriterRef)
			rec.UID = uid
		}
		t.HeadKnown, t.UID, t.Index, t.Term = true, string(rec.UID), rec.Index, rec.Term
		t.Want = rec.Size()
	}
	w.Torn = t
	what := fmt.Sprintf("the last %d bytes are a record cut short", t.Have)
	if t.HeadKnown {
		what = fmt.Sprintf("the last record (%s index %d term %d) has %d of its %d bytes", sc.queueName(t.UID), t.Index, t.Term, t.Have, t.Want)
	}
	d := map[string]any{"bytes": t.Have}
	if t.HeadKnown {
		d["uid"], d["queue"], d["index"], d["term"], d["record_size"] = t.UID, sc.queueName(t.UID), t.Index, t.Term, t.Want
	}
	sc.add(scan.Finding{Code: sc.code(CodeWALTornTail), Severity: scan.Warning, Path: w.Rel, Offset: off, Length: t.Have,
		Repair:  scan.RepairTruncate,
		Message: what + ": ra drops it silently at the next start (its entry, and a settle or ack in it, is lost)", Details: d})
}

func (sc *scanner) queueName(uid string) string {
	if r := sc.sys.byUID[uid]; r != nil {
		return r.Name()
	}
	return uid
}

func (sc *scanner) queueNames() []string {
	out := []string{}
	for _, r := range sc.sys.Replicas {
		out = append(out, r.Name())
	}
	return out
}

// truncateAbove drops the log entries above idx (a WAL record with the
// truncate bit).
func (r *Replica) truncateAbove(idx uint64) {
	if r.Log != nil {
		r.Log.truncateAbove(idx)
	}
	if r.HasEntries && r.Last > idx {
		r.Last = idx
	}
}

// scanReplicaFiles reads a replica's segments and snapshots.
func (sc *scanner) scanReplicaFiles(r *Replica) {
	l, err := listReplica(r.Path)
	if err != nil {
		sc.logUnreadable(r, r.Path, err)
		return
	}
	for _, n := range l.other {
		p := filepath.Join(r.Path, n)
		sc.add(scan.Finding{Code: sc.code(CodeUnexpectedFile), Severity: scan.Info, Path: rel(sc.root, p),
			Message: fmt.Sprintf("%s is not a file ra writes in a replica dir; ra ignores it", n)})
	}
	// snapshots first: the snapshot index decides what segments are needed
	for _, n := range l.snapshots {
		r.Snapshots = append(r.Snapshots, sc.readSnapshot(r, n, false))
	}
	for _, n := range l.checkpoints {
		r.Checkpoints = append(r.Checkpoints, sc.readSnapshot(r, n, true))
	}
	sc.snapshotFindings(r)
	// the WAL entries were noted first; segments hold older entries, and a
	// WAL entry wins over a segment entry of the same index (Log.put)
	for _, n := range l.segments {
		if err := sc.ctx.Err(); err != nil {
			return
		}
		sc.scanSegment(r, n)
	}
	r.Log.release()
	snap := r.snapshotIndex()
	for _, sf := range r.Segments {
		if sf.HasLive && snap >= 0 && sf.Last <= uint64(snap) && sf.Live > 0 {
			sc.add(scan.Finding{Code: sc.code(CodeSegmentReclaimable), Severity: scan.Info, Path: sf.Rel, Length: sf.Size,
				Message: fmt.Sprintf("every entry (%d-%d) is at or below the snapshot index %d: ra no longer needs this segment", sf.First, sf.Last, snap),
				Details: map[string]any{"first": sf.First, "last": sf.Last, "snapshot_index": snap}})
		}
	}
}

// snapshotIndex is the index of the state ra recovers from: the valid
// snapshot or checkpoint with the highest index; -1 for none.
func (r *Replica) snapshotIndex() int64 {
	if s := r.base(); s != nil {
		return int64(s.Meta.Index)
	}
	return -1
}

// base is the snapshot or checkpoint ra recovers from.
func (r *Replica) base() *SnapshotFile {
	var best *SnapshotFile
	for _, set := range [][]*SnapshotFile{r.Snapshots, r.Checkpoints} {
		for _, s := range set {
			if s.Valid() && (best == nil || s.Meta.Index > best.Meta.Index) {
				best = s
			}
			if s.Valid() {
				break // ra picks the newest valid one of each kind
			}
		}
	}
	return best
}

// unreadBaseAbove is the highest index (from the dir name) of the
// snapshots and checkpoints that could not be read and that ra may
// recover from instead of the base (-1 for none), and their paths.
func (r *Replica) unreadBaseAbove() (int64, []string) {
	base := r.base()
	at := int64(-1)
	for _, set := range [][]*SnapshotFile{r.Snapshots, r.Checkpoints} {
		for _, s := range set {
			if s.Valid() {
				break
			}
			if s.Unread && (base == nil || s.Index > base.Meta.Index) {
				at = max(at, int64(s.Index))
			}
		}
	}
	return at, r.baseWaitsOn(base)
}

// maybeBelow says that an entry's damage waits on unread snapshots.
func maybeBelow(waits []string) string {
	return fmt.Sprintf(", but it is at or below the index of %s, which could not be read: whether ra reads it (and the member crash-loops) is unknown", strings.Join(waits, ", "))
}

// baseWaitsOn are the snapshots and checkpoints that could not be read
// and that ra may take before base (the one it recovers from, nil for
// none): one ra tries before the first valid one of its kind, with a
// higher index (from its dir name) than base's.
func (r *Replica) baseWaitsOn(base *SnapshotFile) []string {
	var out []string
	for _, set := range [][]*SnapshotFile{r.Snapshots, r.Checkpoints} {
		for _, s := range set {
			if s.Valid() {
				break
			}
			if s.Unread && (base == nil || s.Index > base.Meta.Index) {
				out = append(out, s.Rel)
			}
		}
	}
	return out
}

// SnapshotIndex is the newest valid snapshot's index (not checkpoints);
// -1 for none.
func (r *Replica) SnapshotIndex() int64 {
	for _, s := range r.Snapshots {
		if s.Valid() {
			return int64(s.Meta.Index)
		}
	}
	return -1
}

func (sc *scanner) readSnapshot(r *Replica, dir string, checkpoint bool) *SnapshotFile {
	kind := ra.SnapshotsDir
	if checkpoint {
		kind = ra.CheckpointsDir
	}
	p := filepath.Join(r.Path, kind, dir, ra.SnapshotFile)
	s := &SnapshotFile{Dir: dir, Rel: rel(sc.root, p), Path: p, Checkpoint: checkpoint}
	s.Term, s.Index, _ = ra.ParseSnapshotDirName(dir)
	b, err := readRegular(p)
	if err != nil {
		s.Err, s.Unread = err, true
		sc.unreadable(p, err)
		return s
	}
	s.Size = int64(len(b))
	file := scan.File{Path: s.Rel, Kind: "ra-" + strings.TrimSuffix(kind, "s"), Size: s.Size, BytesScanned: s.Size, FirstValid: -1, LastValid: -1, ValidEnd: s.Size, End: scan.EndEOF}
	snap, err := ra.DecodeSnapshot(b)
	s.CRCOK, s.Meta = snap.CRCOK, snap.Meta
	if err == nil {
		file.Records, file.FirstValid, file.LastValid = 1, 0, 0
	} else {
		file.End, file.ValidEnd = scan.EndGarbage, 0
	}
	sc.res.Files = append(sc.res.Files, file)
	sc.res.BytesScanned += s.Size
	if err != nil {
		s.Err = err
		return s
	}
	if s.Meta.Index != s.Index || s.Meta.Term != s.Term {
		s.Err = fmt.Errorf("meta index %d term %d, dir name says %d %d", s.Meta.Index, s.Meta.Term, s.Index, s.Term)
	}
	return s
}

// snapshotFindings reports snapshots and checkpoints ra will not use.
func (sc *scanner) snapshotFindings(r *Replica) {
	newestValid := false
	for _, s := range r.Snapshots {
		switch {
		case s.Unread:
			// the unreadable finding; not "does not decode"
		case s.Err != nil:
			sc.add(scan.Finding{Code: sc.code(CodeSnapshotBad), Severity: scan.Error, Path: s.Rel, Length: s.Size,
				Message: fmt.Sprintf("%s: snapshot %s does not decode (%v): ra skips it", r.Name(), s.Dir, s.Err)})
		case !s.CRCOK:
			sc.add(scan.Finding{Code: sc.code(CodeSnapshotCRC), Severity: scan.Error, Path: s.Rel, Offset: 5, Length: s.Size,
				Message: fmt.Sprintf("%s: snapshot %s (index %d) fails its CRC-32: ra skips it and recovers from an older one, or none", r.Name(), s.Dir, s.Meta.Index),
				Details: map[string]any{"index": s.Meta.Index}})
		case newestValid:
			sc.add(scan.Finding{Code: sc.code(CodeSnapshotStale), Severity: scan.Info, Path: s.Rel, Length: s.Size,
				Message: fmt.Sprintf("%s: snapshot %s is older than the one ra uses: ra deletes it at the next start", r.Name(), s.Dir)})
		default:
			newestValid = true
		}
	}
	for _, s := range r.Checkpoints {
		switch {
		case s.Unread:
		case s.Err != nil:
			sc.add(scan.Finding{Code: sc.code(CodeCheckpointBad), Severity: scan.Warning, Path: s.Rel, Length: s.Size,
				Message: fmt.Sprintf("%s: checkpoint %s does not decode (%v): ra removes it", r.Name(), s.Dir, s.Err)})
		case !s.CRCOK:
			sc.add(scan.Finding{Code: sc.code(CodeCheckpointCRC), Severity: scan.Warning, Path: s.Rel, Offset: 5, Length: s.Size,
				Message: fmt.Sprintf("%s: checkpoint %s (index %d) fails its CRC-32: ra removes it at the next start", r.Name(), s.Dir, s.Meta.Index),
				Details: map[string]any{"index": s.Meta.Index}})
		}
	}
}

// scanSegment reads one segment: header, index table and every entry.
func (sc *scanner) scanSegment(r *Replica, name string) {
	p := filepath.Join(r.Path, name)
	sf := &SegmentFile{Name: name, Rel: rel(sc.root, p), Path: p}
	r.Segments = append(r.Segments, sf)
	if n, ok := ra.ParseFileName(name, "segment"); ok {
		sf.Number = n
	} else {
		sc.add(scan.Finding{Code: sc.code(CodeSegmentBadName), Severity: scan.Warning, Path: sf.Rel,
			Message: fmt.Sprintf("%s is not a name ra gives a segment", name)})
	}
	var fault error // the file shrank under its mapping (sc.reader)
	defer func() {
		if fault != nil {
			sc.logUnreadable(r, p, fault)
		}
	}()
	defer fileview.Guard(&fault)()
	f, err := openRegular(p)
	if err != nil {
		sc.logUnreadable(r, p, err)
		return
	}
	defer f.Close()
	st, _ := f.Stat()
	sf.Size = st.Size()
	file := scan.File{Path: sf.Rel, Kind: "ra-segment", Size: sf.Size, FirstValid: -1, LastValid: -1, End: scan.EndEOF, ValidEnd: sf.Size}
	defer func() { sc.res.Files = append(sc.res.Files, file) }()
	fr, done := sc.reader(f, p)
	defer done()
	seg, err := ra.OpenSegmentReusing(fr, sf.Size, sc.segPrev)
	if err == nil {
		defer func() { sc.segPrev = seg }()
	}
	if err != nil {
		var ce *format.CorruptError
		if !errors.As(err, &ce) {
			sc.logUnreadable(r, p, err)
			return
		}
		sf.HeaderErr = err
		file.End, file.ValidEnd = scan.EndGarbage, 0
		sc.add(scan.Finding{Code: sc.code(CodeSegmentBadHeader), Severity: scan.Error, Path: sf.Rel, Offset: ce.Offset, Length: sf.Size,
			Message: fmt.Sprintf("%s: %s is not a ra segment (%v): ra fails to open it (invalid_segment_format) and the queue does not start", r.Name(), name, err)})
		r.markDown(&EntryLoc{Path: p, Rel: sf.Rel})
		return
	}
	sf.Header = seg.Header
	x := seg.Index
	sf.Slots, sf.Live = len(x.Slots), x.LiveCount()
	if first, last, ok := x.Range(); ok {
		sf.First, sf.Last, sf.HasLive = first, last, true
	}
	if seg.Overflow {
		sc.add(scan.Finding{Code: sc.code(CodeSegmentSlotOverflow), Severity: scan.Error, Path: sf.Rel, Offset: 6, Length: 2,
			Expected: "65536", Actual: "0",
			Message: fmt.Sprintf("%s: the header says 0 index slots but data follows: segment_max_entries = 65536 overflowed the 16-bit field (rabbitmq-server #9727); ra reads no entry of this segment. storectl read it with 65536 slots (%d entries)", r.Name(), len(x.Slots))})
	}
	if x.Partial {
		sc.add(scan.Finding{Code: sc.code(CodeSegmentPartialIndex), Severity: scan.Error, Path: sf.Rel, Offset: x.TableEnd, Length: sf.Size - x.TableEnd,
			Message: fmt.Sprintf("%s: the index table ends inside a slot at offset %d: ra cannot parse it (function_clause) and the queue does not start", r.Name(), x.TableEnd)})
		r.markDown(&EntryLoc{Path: p, Rel: sf.Rel, Record: x.TableEnd})
	}
	if len(x.Trimmed) > 0 {
		sc.add(scan.Finding{Code: sc.code(CodeSegmentOverwritten), Severity: scan.Info, Path: sf.Rel,
			Message: fmt.Sprintf("%s: %d slots were overwritten by later slots with lower indexes (a leader change): ra ignores them", r.Name(), len(x.Trimmed))})
	}
	file.Records = len(x.Slots)
	if len(x.Slots) > 0 {
		file.FirstValid, file.LastValid = int64(x.Slots[0].Offset), int64(x.Slots[len(x.Slots)-1].Offset)
	}
	trimmed := map[int]bool{}
	for _, i := range x.Trimmed {
		trimmed[i] = true
	}
	snap := r.snapshotIndex()
	unreadBase, unreadWaits := r.unreadBaseAbove()
	var logFile uint32
	if r.Log != nil {
		logFile = r.Log.file(p, sf.Rel)
	}
	var entry EntryLoc // one for the walk: Log.put and markDown copy it
	for i, sl := range x.Slots {
		data, err := seg.Data(sl)
		loc := &entry
		*loc = EntryLoc{Path: p, Rel: sf.Rel, Offset: int64(sl.Offset), Length: sl.Length, Record: sl.Pos, Index: sl.Index, Term: sl.Term, Slot: sl.Slot}
		live := !trimmed[i]
		needed := live && (snap < 0 || int64(sl.Index) > snap)
		// at or below an unread snapshot's index ra may not need it: a
		// damaged entry there is no crash (unknown, waiting on it)
		maybe := needed && int64(sl.Index) <= unreadBase
		if maybe {
			needed = false
		}
		if err != nil {
			var ce *format.CorruptError
			if !errors.As(err, &ce) {
				sc.logUnreadable(r, p, err)
				return
			}
			sev := scan.Warning
			if needed {
				sev = scan.Error
				r.markDown(loc)
			}
			d := map[string]any{"index": sl.Index, "slot": sl.Slot, "offset": sl.Offset, "length": sl.Length}
			msg := fmt.Sprintf("%s: entry %d (slot %d) runs past the end of the file: reading it exits ra_log_segment_unexpected_eof", r.Name(), sl.Index, sl.Slot)
			if maybe {
				d["waits_on"] = unreadWaits
				msg += maybeBelow(unreadWaits)
			}
			sc.add(scan.Finding{Code: sc.code(CodeSegmentShort), Severity: sev, Path: sf.Rel, Offset: sl.Pos, Length: int64(sl.Length),
				Message: msg, Details: d})
			file.End, file.ValidEnd = scan.EndTorn, int64(sl.Offset)
			continue
		}
		loc.OK = sl.CRCOK(data)
		if !loc.OK {
			sf.BadCRC = append(sf.BadCRC, sl.Index)
			sev := scan.Warning
			consequence := "ra does not read it (below the snapshot or overwritten)"
			if needed {
				sev = scan.Error
				consequence = "reading it exits ra_log_segment_crc_check_failure: the queue crash-loops at the next start and delivers nothing"
				r.markDown(loc)
			}
			d := map[string]any{"uid": r.UID, "queue": r.Name(), "index": sl.Index, "term": sl.Term, "slot": sl.Slot, "slot_offset": sl.Pos}
			if maybe {
				consequence = "reading it exits ra_log_segment_crc_check_failure" + maybeBelow(unreadWaits)
				d["waits_on"] = unreadWaits
			}
			sc.add(scan.Finding{Code: sc.code(CodeSegmentCRC), Severity: sev, Path: sf.Rel, Offset: int64(sl.Offset), Length: int64(sl.Length),
				Expected: fmt.Sprint(sl.CRC), Actual: fmt.Sprint(crc32(data)),
				Message: fmt.Sprintf("%s: entry %d (slot %d) fails its CRC-32: %s", r.Name(), sl.Index, sl.Slot, consequence),
				Details: d})
		} else if sl.CRC == 0 && !etf.IsExactTerm(data) {
			// (an entry whose CRC was computed and holds is the bytes ra
			// wrote, term_to_binary's: the term check is for the others)
			sc.add(scan.Finding{Code: sc.code(CodeSegmentBadEntry), Severity: scan.Error, Path: sf.Rel, Offset: int64(sl.Offset), Length: int64(sl.Length),
				Message: fmt.Sprintf("%s: entry %d (no CRC computed) is not an Erlang term: ra crashes decoding it", r.Name(), sl.Index)})
		}
		if !live {
			continue
		}
		r.noteSegment(sl.Index, sl.Term)
		if r.Log != nil {
			r.Log.put(logFile, loc, true)
		}
		if sc.opts.Records != nil && loc.OK {
			sc.record(r, loc, data)
		}
	}
	file.BytesScanned = seg.BytesRead()
	sc.res.BytesScanned += seg.BytesRead()
	if sc.opts.Progress != nil {
		sc.opts.Progress(seg.BytesRead())
	}
}

// markDown keeps a copy of loc as an entry that crashes the member.
func (r *Replica) markDown(loc *EntryLoc) {
	c := *loc
	r.CrashEntries = append(r.CrashEntries, &c)
}

// checkOrphans reports replica dirs names.dets does not register.
func (sc *scanner) checkOrphans() {
	byName := map[string][]*Replica{}
	for _, r := range sc.sys.Replicas {
		byName[r.Name()] = append(byName[r.Name()], r)
	}
	if s := sc.sys; s.namesUnread != "" && len(s.Replicas) > 0 {
		uids := make([]string, 0, len(s.Replicas))
		for _, r := range s.Replicas {
			uids = append(uids, r.UID)
		}
		sc.add(scan.Finding{Code: sc.code(CodeRegistrationUnknown), Severity: scan.Warning, Path: s.namesUnread,
			Message: fmt.Sprintf("%s could not be read: whether ra registers (and so starts) the %d replica dir(s) here is unknown; none is called an orphan", filepath.Base(s.namesUnread), len(uids)),
			Details: map[string]any{"replicas": uids, "waits_on": []string{s.namesUnread}}})
	}
	for _, r := range sc.sys.Replicas {
		if r.Registered == nil || *r.Registered {
			continue
		}
		var others []string
		for _, o := range byName[r.Name()] {
			if o != r {
				others = append(others, o.UID)
			}
		}
		msg := fmt.Sprintf("replica dir %s (%s, last index %d term %d) is not registered in names.dets: ra does not start it, so its data is never read", r.UID, r.Name(), r.Last, r.LastTerm)
		if len(others) > 0 {
			msg += fmt.Sprintf("; the queue's registered replica here is %s (rabbitmq-server #15725)", strings.Join(others, ", "))
		}
		sc.add(scan.Finding{Code: sc.code(CodeOrphanReplica), Severity: scan.Warning, Path: r.Rel,
			Message: msg, Details: map[string]any{"uid": r.UID, "queue": r.Name(), "last_index": r.Last, "last_term": r.LastTerm, "registered_replicas": others}})
	}
}

// record emits one scan --records line for a message-bearing entry.
func (sc *scanner) record(r *Replica, loc *EntryLoc, data []byte) {
	e, err := ra.DecodeEntry(data, loc.Offset)
	if err != nil || e.Kind != ra.EntryUser {
		return
	}
	c := ra.DecodeFifoCommand(e.Command, e.ReplyMode)
	if c.Msg == nil {
		return
	}
	m, err := ra.DecodeEnqueueMessage(c.Msg)
	rec := newRecord(r, loc, c, m, err)
	if err := sc.opts.Records(rec); err != nil {
		sc.res.Fail(err)
	}
}

// Record is a scan --records line: one message-bearing log entry.
type Record struct {
	Path          string         `json:"path"`
	Offset        int64          `json:"offset"`
	Size          int64          `json:"size"`
	MsgID         string         `json:"msg_id"`
	QueueType     string         `json:"queue_type"`
	VHost         string         `json:"vhost"`
	Queue         string         `json:"queue"`
	UID           string         `json:"uid"`
	Index         uint64         `json:"index"`
	Term          uint64         `json:"term"`
	Source        string         `json:"source"` // wal | segment
	Command       string         `json:"command"`
	MessageID     string         `json:"message_id"`
	Exchange      string         `json:"exchange"`
	RoutingKeys   []string       `json:"routing_keys"`
	Properties    map[string]any `json:"properties"`
	Headers       map[string]any `json:"headers"`
	PayloadSize   int64          `json:"payload_size"`
	PayloadSHA256 string         `json:"payload_sha256,omitempty"`
	Error         string         `json:"error,omitempty"`
}

func newRecord(r *Replica, loc *EntryLoc, c ra.FifoCommand, m ra.EnqueueMessage, err error) Record {
	rec := Record{Path: loc.Rel, Offset: loc.Offset, Size: int64(loc.Length), QueueType: "quorum", UID: r.UID,
		Index: loc.Index, Term: loc.Term, Source: "segment", Command: c.Name, RoutingKeys: []string{}, PayloadSize: -1,
		Properties: map[string]any{}, Headers: map[string]any{}}
	if loc.InWAL {
		rec.Source, rec.Offset, rec.Size = "wal", loc.Record, loc.RecSize
	}
	if r.Config != nil {
		rec.VHost, rec.Queue = r.Config.VHost, r.Config.Queue
	}
	if err != nil {
		rec.Error = err.Error()
		return rec
	}
	if len(m.ID) > 0 {
		rec.MsgID = hex.EncodeToString(m.ID)
	}
	rec.Exchange = m.Exchange
	if m.RoutingKeys != nil {
		rec.RoutingKeys = m.RoutingKeys
	}
	if m.Content != nil {
		rec.PayloadSize = m.PayloadSize
		rec.PayloadSHA256 = hex.EncodeToString(m.PayloadSHA256[:])
	}
	if p := m.Properties; p != nil {
		rec.Properties, rec.Headers = propertiesJSON(p)
		if p.MessageID != nil {
			rec.MessageID = *p.MessageID
		}
	}
	return rec
}

// sortedUIDs returns the replicas of s in UId order.
func (s *System) sortedReplicas() []*Replica {
	out := append([]*Replica(nil), s.Replicas...)
	sort.Slice(out, func(i, j int) bool { return out[i].UID < out[j].UID })
	return out
}
