package quorum

import (
	"encoding/hex"
	"fmt"
	"iter"
	"os"
	"sort"
	"strings"
	"unsafe"

	"github.com/storectl/storectl/pkg/format/etf"
	"github.com/storectl/storectl/pkg/format/ra"
	"github.com/storectl/storectl/pkg/scan"
)

// QueueType is the queue_type of a quorum queue's queue line.
const QueueType = "quorum"

// Next-start states of a quorum queue.
const (
	StartOK        = "starts"
	StartDown      = "down"       // the node's WAL is refused: no quorum queue starts
	StartCrashLoop = "crash-loop" // a log entry the member must read is damaged
	StartNoConfig  = "no-config"  // no readable config: ra cannot start the member
	StartNotRead   = "unknown"    // the log could not be replayed
)

// Queue is a quorum queue's `queue` line of verify: the fields every queue
// line has and the replica's own.
type Queue struct {
	QueueType string `json:"queue_type"`
	VHost     string `json:"vhost"`
	Queue     string `json:"queue"`
	Dir       string `json:"dir"` // the replica dir, relative to the data dir
	// Entries are the messages the log holds at its end (ready and
	// delivered-unsettled), before the next start.
	Entries int `json:"entries"`
	// Keep is what the next start holds (what list_queues shows after it);
	// Drop is what the start itself drops (returns over the delivery
	// limit).
	Keep    int            `json:"keep"`
	Drop    int            `json:"drop"`
	Unknown int            `json:"unknown"`
	AtRisk  map[string]int `json:"at_risk"`

	UID            string   `json:"uid"`
	System         string   `json:"system"`
	Node           string   `json:"node"`
	Members        []string `json:"members"`
	MachineVersion int64    `json:"machine_version"`
	FirstIndex     uint64   `json:"first_index"`
	LastIndex      uint64   `json:"last_index"`
	LastTerm       uint64   `json:"last_term"`
	SnapshotIndex  int64    `json:"snapshot_index"`   // -1: none
	CheckpointIdx  int64    `json:"checkpoint_index"` // the newest valid checkpoint; -1: none
	// ReplayFrom is the index of the state the prediction starts from
	// (the valid snapshot or checkpoint with the highest index; 0: none).
	ReplayFrom int64    `json:"replay_from"`
	Commit     Commit   `json:"commit"`
	NextStart  Forecast `json:"next_start"`
	// Returned names (AMQP message-id, else Raft index) the messages that
	// were delivered and not settled in the log: they come back to the
	// queue at the next start.
	Returned []string `json:"returned"`
	// Damaged lists log entries the member cannot read.
	Damaged []Damaged `json:"damaged"`
}

// Commit is what one node's files say about the commit index.
type Commit struct {
	// SingleMember: the queue has one member, so every entry on disk was
	// committed once written.
	SingleMember bool `json:"single_member"`
	// AtLeast: entries up to here are committed (the snapshot, or the last
	// applied index in meta.dets); entries above it may be replaced by a
	// leader on a cluster.
	AtLeast     int64  `json:"committed_at_least"`
	LastApplied int64  `json:"last_applied"` // from meta.dets; -1 when unknown
	CurrentTerm int64  `json:"current_term"`
	VotedFor    string `json:"voted_for,omitempty"`
}

// Forecast is what the next start does with the queue.
type Forecast struct {
	State  string `json:"state"`
	Reason string `json:"reason,omitempty"`
	// Messages is the count list_queues shows after the start (Keep);
	// when Exact is false, Min and Max bound it and Inexact says why.
	Messages int      `json:"messages"`
	Ready    int      `json:"ready"`   // ready at the end of the log
	Unacked  int      `json:"unacked"` // delivered and unsettled at the end of the log (returned at the start)
	Exact    bool     `json:"exact"`
	Min      int      `json:"min"`
	Max      int      `json:"max"`
	Inexact  []string `json:"inexact,omitempty"`
	// IdentityUncertain messages may be others than predicted (same
	// count); Notes say why.
	IdentityUncertain int      `json:"identity_uncertain"`
	Notes             []string `json:"notes,omitempty"`
	Replayed          int      `json:"replayed"` // log entries replayed
	// MissingBodies counts live messages whose enqueue entry is not on disk.
	MissingBodies int `json:"missing_bodies"`
}

// Damaged is a log entry that cannot be read.
type Damaged struct {
	Index  uint64 `json:"index"`
	Path   string `json:"path"`
	Offset int64  `json:"offset"`
	Length uint32 `json:"length"`
	// MessageID is the AMQP message-id when the damaged entry still
	// decodes to an enqueue.
	MessageID string `json:"message_id,omitempty"`
}

// LiveMsg is one message the next start holds (Prediction.Live).
type LiveMsg struct {
	Index     uint64
	Loc       *EntryLoc // its enqueue entry; nil when not on disk
	MessageID string
	Size      int64
	SHA256    string
	Returned  bool // delivered and unsettled at the end of the log
	Damaged   bool // its entry fails its CRC or checksum
}

// Prediction is the replay's result for one replica.
type Prediction struct {
	Queue Queue
	// live: the messages the next start holds, in queue order, 16 bytes
	// each (in the scan's spill file past the first liveChunk); Live reads
	// their entries as it hands them out.
	live    liveList
	log     *logTable
	liveErr error // what ended the last Live early (LiveErr)
	// gapAt is the first index between the replay's base and the last
	// entry that is in no WAL or segment (0: none); noBase is the first
	// index of a log that starts after 1 with no snapshot or checkpoint
	// below it (0: none). Each is a finding (predictReplica).
	gapAt, noBase uint64
	// baseWaitsOn are the snapshots and checkpoints that could not be
	// read and that ra may recover from (Replica.baseWaitsOn): the replay
	// is not done.
	baseWaitsOn []string
}

// liveRec is a live message as the prediction keeps it.
type liveRec struct {
	index uint64
	flags uint8
}

const (
	liveReturned uint8 = 1 << iota
)

// liveChunk is how many liveRecs (64 KiB) a liveList writes to its spill
// file at a time.
const liveChunk = 4096

// liveList is a list of liveRecs whose full chunks are in a spill file:
// what stays in memory is the last chunk, however many messages a queue
// holds. Without a usable spill file it keeps them all.
type liveList struct {
	spill  *scan.Spill
	chunks []int64 // offsets of the spilled chunks, in list order
	tail   []liveRec
	n      int
	chunk  int // <= 0: liveChunk
}

func (l *liveList) size() int {
	if l.chunk > 0 {
		return l.chunk
	}
	return liveChunk
}

func liveBytes(recs []liveRec) []byte {
	if len(recs) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&recs[0])), len(recs)*int(unsafe.Sizeof(liveRec{})))
}

func (l *liveList) add(r liveRec) {
	l.tail = append(l.tail, r)
	l.n++
	if len(l.tail) == l.size() && l.spill != nil {
		if off, ok := l.spill.Put(liveBytes(l.tail)); ok {
			l.chunks = append(l.chunks, off)
			l.tail = l.tail[:0]
		}
	}
}

// each calls fn for every rec in order until it returns false; err is a
// failure reading a chunk back.
func (l *liveList) each(fn func(liveRec) bool) error {
	if len(l.chunks) > 0 {
		buf := make([]liveRec, l.size())
		for _, off := range l.chunks {
			if err := l.spill.ReadAt(liveBytes(buf), off, "a quorum queue's live messages"); err != nil {
				return err
			}
			for _, r := range buf {
				if !fn(r) {
					return nil
				}
			}
		}
	}
	for _, r := range l.tail {
		if !fn(r) {
			return nil
		}
	}
	return nil
}

// msgSpiller keeps the replay's message queue chunks (ra.MsgQueue) in
// the scan's spill file.
type msgSpiller struct{ sp *scan.Spill }

func fifoBytes(msgs []ra.FifoMsg) []byte {
	if len(msgs) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&msgs[0])), len(msgs)*int(unsafe.Sizeof(ra.FifoMsg{})))
}

func (s msgSpiller) Spill(msgs []ra.FifoMsg) (int64, bool) { return s.sp.Put(fifoBytes(msgs)) }

func (s msgSpiller) Load(dst []ra.FifoMsg, at int64) error {
	return s.sp.ReadAt(fifoBytes(dst), at, "a quorum queue's messages")
}

// LiveCount is the number of messages the next start holds.
func (p *Prediction) LiveCount() int { return p.live.n }

// Live yields the messages the next start holds, in queue order, each
// with its enqueue entry's location, AMQP message-id, payload size and
// sha256, read from the entry as it is yielded (the prediction keeps 16
// bytes a message, not these: on a generated 1 GiB store they had been a
// third of verify's memory). An entry that cannot be read leaves them
// empty. A failure to read the list itself back from the temp file ends
// it early: LiveErr says so, and a caller must check it after the loop.
func (p *Prediction) Live() iter.Seq[LiveMsg] {
	return func(yield func(LiveMsg) bool) {
		p.liveErr = nil
		ef := &entryFiles{}
		defer ef.close()
		defer p.log.release()
		err := p.live.each(func(lr liveRec) bool {
			lm := LiveMsg{Index: lr.index, Returned: lr.flags&liveReturned != 0}
			if loc := p.log.Get(lr.index); loc != nil {
				lm.Loc, lm.Damaged = loc, !loc.OK
				if b, err := ef.read(loc); err == nil {
					lm.MessageID, lm.Size, lm.SHA256, _ = enqueueSummary(b)
				}
			}
			return yield(lm)
		})
		// the temp file failed under us: what follows cannot be named
		p.liveErr = err
	}
}

// LiveErr is the failure that ended the last Live before its end (the
// temp file the list spilled to could not be read back, or the Result
// was closed), nil when it ran to the end or was stopped by its caller.
func (p *Prediction) LiveErr() error { return p.liveErr }

// entryFiles reads log entries from their files, keeping them open.
type entryFiles struct {
	open map[string]*os.File
	buf  []byte
}

func (ef *entryFiles) read(loc *EntryLoc) ([]byte, error) {
	f := ef.open[loc.Path]
	if f == nil {
		var err error
		if f, err = openRegular(loc.Path); err != nil {
			return nil, err
		}
		if ef.open == nil {
			ef.open = map[string]*os.File{}
		}
		ef.open[loc.Path] = f
	}
	if cap(ef.buf) < int(loc.Length) {
		ef.buf = make([]byte, loc.Length)
	}
	b := ef.buf[:loc.Length]
	if _, err := f.ReadAt(b, loc.Offset); err != nil {
		return nil, err
	}
	return b, nil
}

func (ef *entryFiles) close() {
	for _, f := range ef.open {
		f.Close()
	}
}

// Predict replays a replica's log (Config.Replay) and says what the next
// start holds.
func (r *Replica) Predict() *Prediction { return predict(r) }

func predictReplica(res *Result, r *Replica) (q Queue) {
	defer func() {
		// a replay bug must not take the scan down: the queue's forecast
		// is unknown and the run incomplete
		if v := recover(); v != nil {
			res.Fail(fmt.Errorf("%s: replaying the log of %s failed: %v", r.Rel, r.Name(), v))
			q = Queue{QueueType: QueueType, VHost: "", Queue: r.Name(), Dir: r.Rel, UID: r.UID, AtRisk: map[string]int{},
				Members: []string{}, Returned: []string{}, Damaged: []Damaged{}, SnapshotIndex: -1, CheckpointIdx: -1,
				NextStart: Forecast{State: StartNotRead, Reason: fmt.Sprint("internal error: ", v)}}
		}
	}()
	p := predict(r)
	r.prediction = p
	f := p.Queue.NextStart
	code := func(c string) string { return Code(r.System.System, c) }
	if len(f.Inexact) > 0 {
		res.Add(scan.Finding{Code: code(CodeReplayInexact), Severity: scan.Info, Path: r.Rel, Repair: scan.RepairNone,
			Message: fmt.Sprintf("%s: the next start holds %d-%d messages, not an exact number: %v", r.Name(), f.Min, f.Max, f.Inexact),
			Details: map[string]any{"min": f.Min, "max": f.Max, "reasons": f.Inexact}})
	}
	waits := r.LogWaitsOn()
	if len(p.baseWaitsOn) > 0 {
		// The snapshot or checkpoint ra may recover from could not be
		// read: the state the log replays on is unknown, not absent.
		res.Add(scan.Finding{Code: code(CodeSnapshotUnknown), Severity: scan.Warning, Path: r.Rel, Repair: scan.RepairNone,
			Message: fmt.Sprintf("%s: %s could not be read: the state ra recovers this member from is unknown, so its next start is not predicted (no gap or missing base is drawn from it)", r.Name(), strings.Join(p.baseWaitsOn, ", ")),
			Details: map[string]any{"waits_on": p.baseWaitsOn}})
	} else if (p.gapAt > 0 || p.noBase > 0) && len(waits) > 0 {
		// The index may be in a WAL or segment that could not be read:
		// unknown, not gone.
		idx := p.gapAt
		if p.noBase > 0 {
			idx = 1 // the entries before the first one read
		}
		if p.Queue.NextStart.State == StartNotRead {
			p.Queue.NextStart.Reason = fmt.Sprintf("index %d is in no WAL or segment that could be read (%s could not be): unknown", idx, strings.Join(waits, ", "))
		}
		res.Add(scan.Finding{Code: code(CodeLogUnknown), Severity: scan.Warning, Path: r.Rel, Repair: scan.RepairNone,
			Message: fmt.Sprintf("%s: index %d is in no WAL or segment that could be read (the replay starts after %d, the files read hold %d-%d); it may be in %s, which could not be read: whether the member can replay its log is unknown",
				r.Name(), idx, p.Queue.ReplayFrom, r.First, r.Last, strings.Join(waits, ", ")),
			Details: map[string]any{"index": idx, "first": r.First, "last": r.Last, "replay_from": p.Queue.ReplayFrom, "waits_on": waits}})
	} else if p.gapAt > 0 {
		res.Add(scan.Finding{Code: code(CodeLogGap), Severity: scan.Error, Path: r.Rel, Repair: scan.RepairNone,
			Message: fmt.Sprintf("%s: index %d is in no WAL or segment (the replay starts after %d, the log on disk holds %d-%d): entries between the snapshot and the last entry are gone, and the member cannot replay its log past %d",
				r.Name(), p.gapAt, p.Queue.ReplayFrom, r.First, r.Last, p.gapAt-1),
			Details: map[string]any{"index": p.gapAt, "first": r.First, "last": r.Last, "replay_from": p.Queue.ReplayFrom}})
	}
	if p.noBase > 0 && len(waits) == 0 && len(p.baseWaitsOn) == 0 {
		res.Add(scan.Finding{Code: code(CodeNoSnapshotBase), Severity: scan.Error, Path: r.Rel, Repair: scan.RepairNone,
			Message: fmt.Sprintf("%s: the log starts at index %d and no valid snapshot or checkpoint covers the entries before it: the member cannot rebuild its state", r.Name(), p.noBase),
			Details: map[string]any{"first": p.noBase}})
	}
	if f.State == StartDown || f.State == StartCrashLoop {
		res.Add(scan.Finding{Code: code(CodeQueueDown), Severity: scan.Error, Path: r.Rel, Repair: scan.RepairNone,
			Message: fmt.Sprintf("%s will not start at the next start (%s): %s; it holds %d messages on disk", r.Name(), f.State, f.Reason, p.Queue.Entries),
			Details: map[string]any{"state": f.State, "messages": p.Queue.Entries}})
	}
	if t := r.tornOwnTail(); t != "" && len(p.Queue.Returned) > 0 {
		res.Add(scan.Finding{Code: code(CodeSettlesLost), Severity: scan.Warning, Path: t, Repair: scan.RepairNone,
			Message: fmt.Sprintf("%s: the newest WAL lost its last record of this queue, and %d delivered messages have no settle in the log: they come back at the next start (redelivered), including any whose ack was in the lost tail", r.Name(), len(p.Queue.Returned)),
			Details: map[string]any{"returned": p.Queue.Returned}})
	}
	return p.Queue
}

// tornOwnTail returns the path of the newest WAL when its tail (a torn or
// bad last record) was this replica's.
func (r *Replica) tornOwnTail() string {
	ws := r.System.WALs
	if len(ws) == 0 {
		return ""
	}
	w := ws[len(ws)-1]
	if w.Torn != nil && (!w.Torn.HeadKnown || w.Torn.UID == r.UID) {
		return w.Rel
	}
	return ""
}

func predict(r *Replica) *Prediction {
	q := Queue{QueueType: QueueType, Dir: r.Rel, UID: r.UID, System: r.System.System, Node: r.System.Node,
		AtRisk: map[string]int{}, Members: []string{}, Returned: []string{}, Damaged: []Damaged{},
		SnapshotIndex: r.SnapshotIndex(), CheckpointIdx: -1, FirstIndex: r.First, LastIndex: r.Last, LastTerm: r.LastTerm}
	q.Queue = r.Name()
	if r.Config != nil {
		q.VHost = r.Config.VHost
		for _, m := range r.Config.InitialMembers {
			q.Members = append(q.Members, m.String())
		}
	}
	for _, c := range r.Checkpoints {
		if c.Valid() {
			q.CheckpointIdx = int64(c.Meta.Index)
			break
		}
	}
	p := &Prediction{Queue: q, log: r.Log, live: liveList{spill: r.System.spill, chunk: r.System.liveChunk}}
	f := &p.Queue.NextStart
	ef := &entryFiles{}
	defer ef.close()
	defer r.Log.release()
	for _, d := range r.CrashEntries {
		dm := Damaged{Index: d.Index, Path: d.Rel, Offset: d.Offset, Length: d.Length}
		if b, err := ef.read(d); err == nil {
			if id, _, _, ok := enqueueSummary(b); ok {
				dm.MessageID = id
			}
		}
		p.Queue.Damaged = append(p.Queue.Damaged, dm)
	}
	switch {
	case r.configUnread != "":
		f.State, f.Reason = StartNotRead, fmt.Sprintf("%s could not be read: whether ra can start the member is unknown", r.configUnread)
	case r.Config == nil:
		f.State, f.Reason = StartNoConfig, "the replica's config file is missing or does not parse"
	}
	base := r.base()
	if w := r.baseWaitsOn(base); len(w) > 0 {
		p.baseWaitsOn = w
		f.State, f.Reason = StartNotRead, fmt.Sprintf("%s could not be read: the state ra recovers from is unknown", strings.Join(w, ", "))
		p.Queue.Commit = r.commit(0)
		return p
	}
	var st *ra.FifoState
	version := int64(0)
	from := uint64(0)
	if base != nil {
		b, err := readRegular(base.Path)
		if err == nil {
			var snap ra.Snapshot
			if snap, err = ra.DecodeSnapshot(b); err == nil {
				var t etf.Term
				if t, _, err = etf.DecodeAt(snap.State, snap.StateOff); err == nil {
					st, err = ra.DecodeFifoState(t, snap.StateOff)
				}
			}
		}
		if err != nil {
			f.State, f.Reason = StartNotRead, fmt.Sprintf("the state in %s does not decode: %v", base.Rel, err)
			return p
		}
		version, from = base.Meta.MachineVersion, base.Meta.Index
		p.Queue.ReplayFrom = int64(from)
		if len(base.Meta.Cluster) > 0 {
			p.Queue.Members = p.Queue.Members[:0]
			for _, m := range base.Meta.Cluster {
				p.Queue.Members = append(p.Queue.Members, m.String())
			}
			sort.Strings(p.Queue.Members)
		}
	} else {
		var conf etf.Map
		if r.Config != nil {
			conf = r.Config.MachineConfig
		}
		st = emptyState(conf)
		if r.HasEntries && r.First > 1 {
			f.State, f.Reason = StartNotRead, fmt.Sprintf("the log starts at index %d and no valid snapshot or checkpoint covers the entries before it", r.First)
			p.noBase = r.First
		}
	}
	p.Queue.Commit = r.commit(from)
	if sp := r.System.spill; sp != nil {
		// the queues' full middle chunks go to the temp file: a queue of
		// millions of messages keeps two chunks of each in memory
		ms := msgSpiller{sp}
		for _, q := range []*ra.MsgQueue{&st.Returns, &st.Hi, &st.No} {
			q.Spiller = ms
			if q.Len() == 0 {
				q.Chunk = r.System.queueChunk
			}
		}
	}
	m := newMachine(st, version)
	p.Queue.MachineVersion = version
	// replay the log after the base
	var replayErr string
	var cur EntryLoc
	for idx := from + 1; r.HasEntries && idx <= r.Last; idx++ {
		loc := &cur
		if !r.Log.load(idx, loc) {
			replayErr = fmt.Sprintf("index %d is missing from the log (%d-%d on disk)", idx, r.First, r.Last)
			m.mark("log gap at index " + fmt.Sprint(idx))
			p.gapAt = idx
			break
		}
		b, err := ef.read(loc)
		if err != nil {
			replayErr = fmt.Sprintf("index %d: %v", idx, err)
			m.mark("unreadable entry at index " + fmt.Sprint(idx))
			break
		}
		if !loc.OK {
			m.note(fmt.Sprintf("entry %d fails its CRC; replayed as it decodes", idx), 1)
		}
		e, err := ra.DecodeEntry(b, loc.Offset)
		if err != nil {
			m.damagedEntry(int64(idx), b, loc)
			continue
		}
		if m.v == 0 && e.Kind == ra.EntryNoop {
			m.v = e.MachineVersion
			p.Queue.MachineVersion = m.v
			continue
		}
		m.applyEntry(int64(idx), e)
		f.Replayed++
	}
	if m.v != p.Queue.MachineVersion {
		p.Queue.MachineVersion = m.v
	}
	f.Ready, f.Unacked = m.ready(), m.st.CheckedOut()
	p.Queue.Entries = f.Ready + f.Unacked
	returned := map[int64]bool{}
	for _, c := range m.st.Consumers {
		for _, msg := range c.Checked {
			returned[msg.Index] = true
		}
	}
	goneBefore := m.Gone
	m.restart(r.System.Node)
	p.Queue.Drop = m.Gone - goneBefore
	// the bodies are read when Live hands them out; only the returned
	// messages' names are read here
	m.eachLive(func(idx int64) {
		lr := liveRec{index: uint64(idx)}
		if returned[idx] {
			lr.flags |= liveReturned
		}
		ok := r.Log.load(uint64(idx), &cur)
		if !ok {
			f.MissingBodies++
		}
		if lr.flags&liveReturned != 0 {
			var name string
			if ok {
				if b, err := ef.read(&cur); err == nil {
					name, _, _, _ = enqueueSummary(b)
				}
			}
			if name == "" {
				name = fmt.Sprintf("index %d", idx)
			}
			p.Queue.Returned = append(p.Queue.Returned, name)
		}
		p.live.add(lr)
	})
	f.Messages = p.live.n
	p.Queue.Keep = f.Messages
	sort.Strings(p.Queue.Returned)
	if r.MovedFrom != "" {
		// ra < 2.4.2 reads this member's log from the pinned dir
		p.Queue.AtRisk["3.10.0-3.10.13"] = p.Queue.Entries
	}
	// bounds
	f.Inexact, f.Notes, f.IdentityUncertain = m.Inexact, m.Notes, m.Uncertain
	if r.configUnread != "" {
		// the machine config (delivery limit, overflow, TTL) is in it
		f.Inexact = append(f.Inexact, fmt.Sprintf("the queue's machine config is in %s, which could not be read; replayed without it", r.configUnread))
	}
	f.Exact = len(f.Inexact) == 0 && replayErr == ""
	f.Min, f.Max = f.Messages, f.Messages
	if !f.Exact {
		// what the replay could not follow may have settled any live
		// message, or left every later enqueue in the queue
		f.Min = 0
		f.Max = f.Messages + countEnqueues(r, from, ef)
	}
	if n := m.expiring(); n > 0 {
		f.Inexact = append(f.Inexact, fmt.Sprintf("%d messages have a TTL and may expire (wall clock) before the start", n))
		f.Exact = false
		f.Min = max(0, f.Min-n)
	}
	switch {
	case f.State != "":
	case r.System.Refused != "":
		f.State, f.Reason = StartDown, fmt.Sprintf("ra refuses the node's WAL (%s at %s), so no %s queue of the node starts", r.System.Refused, r.System.RefusedWhere, r.System.System)
	case len(r.CrashEntries) > 0:
		d := r.CrashEntries[0]
		f.State, f.Reason = StartCrashLoop, fmt.Sprintf("entry %d at %s@%d cannot be read (CRC or length): the member exits each time it reads it", d.Index, d.Rel, d.Offset)
	case replayErr != "":
		f.State, f.Reason = StartNotRead, replayErr
	default:
		f.State = StartOK
	}
	return p
}

// countEnqueues counts the enqueue entries after from (an upper bound on
// what a replay that cannot be exact may add).
func countEnqueues(r *Replica, from uint64, ef *entryFiles) int {
	n := 0
	r.Log.Each(func(idx uint64, loc *EntryLoc) {
		if idx <= from {
			return
		}
		b, err := ef.read(loc)
		if err != nil {
			return
		}
		if _, _, _, ok := enqueueSummary(b); ok {
			n++
		}
	})
	return n
}

// enqueueSummary decodes an entry that enqueues a message: its AMQP
// message-id, payload size and sha256.
func enqueueSummary(b []byte) (id string, size int64, sha string, ok bool) {
	m, ok, err := EnqueueOf(b, 0)
	if !ok || err != nil {
		return "", 0, "", ok
	}
	if m.Properties != nil && m.Properties.MessageID != nil {
		id = *m.Properties.MessageID
	}
	if m.Content != nil {
		size, sha = m.PayloadSize, hex.EncodeToString(m.PayloadSHA256[:])
	}
	return id, size, sha, true
}

// EnqueueOf decodes the message of a log entry (b, at file offset off)
// that enqueues one: ok is false when the entry is no enqueue; err says
// why an enqueue's message does not decode. A damaged entry (one whose
// framing fails) is read as far as its command still decodes.
func EnqueueOf(b []byte, off int64) (m ra.EnqueueMessage, ok bool, err error) {
	var msg etf.Term
	e, derr := ra.DecodeEntry(b, off)
	switch {
	case derr == nil && e.Kind == ra.EntryUser:
		msg = ra.DecodeFifoCommand(e.Command, e.ReplyMode).Msg
	case derr != nil:
		name, args, pok := ra.PeekCommand(b)
		if !pok || (name != ra.CmdEnqueue && name != ra.CmdEnqueueV2) {
			return m, false, nil
		}
		at := 1
		if name == ra.CmdEnqueue {
			at = 2
		}
		if len(args) <= at {
			return m, true, fmt.Errorf("enqueue entry without its message: %w", derr)
		}
		msg = args[at]
	}
	if msg == nil {
		return m, false, nil
	}
	m, err = ra.DecodeEnqueueMessage(msg)
	return m, true, err
}

// EntryReader reads log entries from their files (read-only), keeping
// the files open until Close.
type EntryReader struct{ ef entryFiles }

// Read returns the data of the entry at loc; the slice is valid until
// the next Read.
func (er *EntryReader) Read(loc *EntryLoc) ([]byte, error) { return er.ef.read(loc) }

// Close closes the files.
func (er *EntryReader) Close() { er.ef.close() }

// commit says what this node's files tell about the commit index.
func (r *Replica) commit(base uint64) Commit {
	c := Commit{AtLeast: int64(base), LastApplied: -1, CurrentTerm: -1}
	if r.Config != nil && len(r.Config.InitialMembers) == 1 {
		c.SingleMember = true
	}
	if md, ok := r.System.meta[r.UID]; ok {
		c.LastApplied, c.CurrentTerm, c.VotedFor = md.LastApplied, md.CurrentTerm, md.VotedFor
		if md.LastApplied > c.AtLeast {
			c.AtLeast = md.LastApplied
		}
	}
	if c.SingleMember && r.HasEntries && int64(r.Last) > c.AtLeast {
		c.AtLeast = int64(r.Last)
	}
	return c
}
