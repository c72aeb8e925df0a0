package dledger

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/storectl/storectl/internal/storefile"
	fdl "github.com/storectl/storectl/pkg/format/dledger"
	rmq "github.com/storectl/storectl/pkg/format/rocketmq"
	"github.com/storectl/storectl/pkg/scan"
	"github.com/storectl/storectl/pkg/scan/cqueue"
)

// Recovery is the predicted outcome of the broker's next start on this
// DLedger store: DLedgerMmapFileStore.recover, then DLedgerCommitLog.
type Recovery struct {
	StartFile        string `json:"start_file"`         // data file the scan starts from
	LedgerBeginIndex int64  `json:"ledger_begin_index"` // -1 when empty
	LedgerEndIndex   int64  `json:"ledger_end_index"`
	LedgerEndTerm    int64  `json:"ledger_end_term"`
	WritePos         int64  `json:"write_pos"`       // processOffset: data kept up to here
	IndexWritePos    int64  `json:"index_write_pos"` // (end index + 1) * 32
	CommittedIndex   int64  `json:"committed_index"`
	CommittedPos     int64  `json:"committed_pos"`
	StoreMaxOffset   int64  `json:"store_max_phy_offset"` // what RocketMQ sees: the committed pos
	StoreMinOffset   int64  `json:"store_min_phy_offset"`
	StopReason       string `json:"stop_reason,omitempty"`
	StopPath         string `json:"stop_path,omitempty"`
	StopOffset       int64  `json:"stop_offset"`
	Exit             bool   `json:"exit"` // DLedger calls System.exit(-1)
	ExitReason       string `json:"exit_reason,omitempty"`
	IndexRebuiltFrom int64  `json:"index_rebuilt_from"` // entry index recovery rebuilds the index from; -1 none
	Entries          int    `json:"entries"`            // entries on disk
	Kept             int    `json:"entries_kept"`
	Dropped          int    `json:"entries_dropped"`
	Uncommitted      int    `json:"entries_uncommitted"` // kept but past the committed index: not visible
	Abnormal         bool   `json:"abnormal"`            // the abort file is there
	// Unread is the data file the recovery walk reached and could not
	// read: WritePos, the end index, the committed position and
	// StoreMaxOffset are then only what recovery reaches at least, and
	// Unknown counts the entries on disk after that file.
	Unread  string `json:"unread,omitempty"`
	Unknown int    `json:"entries_unknown,omitempty"`
	// CQCut is where DLedgerCommitLog truncates the consume queues
	// (truncateDirtyLogicFiles), -1 when it does not.
	CQCut int64 `json:"cq_cut"`
	// AbnormalProcessOffset is dledgerRecoverAbnormally's processOffset:
	// its start file's offset plus the inner sizes only (48 bytes short per
	// entry of that file), -1 for a normal recovery.
	AbnormalProcessOffset int64        `json:"abnormal_process_offset"`
	EntryList             [][4]int64   `json:"-"` // with Config.KeepEntries: [index, term, pos, size] of every kept entry
	Queues                []QueueState `json:"queues,omitempty"`
}

// prepare reads what the walk must know before it starts: the first
// entry of every data file (recovery's start file pre-check, the abnormal
// recovery's file match), and opens the consume queue merge.
func (s *scanner) prepare(context.Context) error {
	rc := &Recovery{LedgerBeginIndex: -1, LedgerEndIndex: -1, LedgerEndTerm: -1, CommittedIndex: -1, CommittedPos: -1,
		IndexRebuiltFrom: -1, CQCut: -1, AbnormalProcessOffset: -1}
	s.rec = rc
	if _, err := os.Stat(filepath.Join(s.cfg.Root, "abort")); err == nil {
		rc.Abnormal = true
	}
	n := len(s.data)
	s.first = make([]firstEntry, n)
	for i := range s.data {
		s.first[i] = s.readFirst(&s.data[i])
	}
	if n > 0 {
		// The third-from-last file backwards, the first whose first entry
		// passes and agrees with its index unit.
		for i := max(n-3, 0); i >= 0; i-- {
			s.start = i
			if s.first[i].ok {
				break
			}
		}
		rc.StartFile = s.data[s.start].rel
		s.rProcess = s.data[s.start].base
		rc.StoreMinOffset = s.data[0].base
		// dledgerRecoverAbnormally: the last file whose first inner record
		// is a V1 message stored at or before the checkpoint's min time.
		minTS := s.minTimestamp()
		for i := n - 1; i >= 0; i-- {
			if fe := s.first[i]; fe.v1 && fe.storeTS != 0 && fe.storeTS <= minTS {
				s.abnStart = i
				break
			}
		}
		s.abnBase = s.data[s.abnStart].base
	}
	if l, ok := cqueue.RocksDB(s.cfg.Root); ok {
		s.rocks = true
		s.add(scan.Finding{Code: CodeRocksDBCQ, Severity: scan.Info, Path: cqueue.Dir, Details: map[string]any{"files": l.Files()},
			Message: "consumequeue/ holds a RocksDB consume queue: derived data storectl does not read; it is not checked against the DLedger entries"})
		return nil
	}
	qs, err := cqueue.List(s.cfg.Root)
	if err != nil {
		return err
	}
	s.queues = qs
	s.merge = newCQMerge(qs, s.cqCount)
	return nil
}

// readFirst reads a data file's first entry header, its index unit and
// its inner record's magic and store time.
func (s *scanner) readFirst(f *dataFile) firstEntry {
	fh, err := storefile.Open(f.path)
	if err != nil {
		return firstEntry{}
	}
	defer fh.Close()
	b := make([]byte, fdl.BodyOffset+64)
	n, _ := fh.ReadAt(b, 0)
	b = b[:n]
	if len(b) < fdl.BodyOffset || fdl.IsBlank(b) {
		return firstEntry{}
	}
	h, _ := fdl.DecodeHeader(b, f.base)
	fe := firstEntry{h: h}
	if h.Check(f.base) == nil {
		u, st := s.idx.unit(h.Index)
		fe.ok = st == unitOK && u.Magic == fdl.Magic1 && u.Size == h.Size && u.Index == h.Index && u.Term == h.Term && u.Pos == f.base
	}
	if body := b[fdl.BodyOffset:]; len(body) >= 8 {
		fe.v1 = beU32(body[4:]) == rmq.MagicMessageV1
		sys := int32(0)
		if len(body) >= 40 {
			sys = int32(beU32(body[36:]))
		}
		at := 48 + 8 // MESSAGE_STORE_TIMESTAMP_POSITION = 56 with an IPv4 born host
		if sys&rmq.FlagBornHostV6 != 0 {
			at += 12
		}
		if len(body) >= at+8 {
			fe.storeTS = int64(beU64(body[at:]))
		}
	}
	return fe
}

func beU32(b []byte) uint32 {
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}
func beU64(b []byte) uint64 { return uint64(beU32(b))<<32 | uint64(beU32(b[4:])) }

// recoverEntry runs recover()'s scan on one entry.
func (s *scanner) recoverEntry(f *dataFile, e *entry) {
	rc := s.rec
	rc.Entries++
	if e.file < s.start || !s.rStopped && e.file >= s.start && s.acceptEntry(e) {
		if e.file == 0 && rc.LedgerBeginIndex < 0 && f.n == 0 {
			rc.LedgerBeginIndex = e.index
		}
		rc.Kept++
		k := [4]int64{e.index, e.term, e.pos, int64(e.size)}
		s.lastKeptAt = k
		s.lastKept = &s.lastKeptAt // no allocation per entry
		if s.cpOK && s.cp.HasCommittedIndex && e.index == s.cp.CommittedIndex {
			c := k
			s.committedAt = &c
		}
		if s.cfg.KeepEntries {
			rc.EntryList = append(rc.EntryList, k)
		}
		if s.cfg.OnKept != nil {
			s.cfg.OnKept(k)
		}
		return
	}
	if s.rUnread {
		rc.Unknown++ // past a file storectl could not read: kept or not is unknown
		return
	}
	rc.Dropped++
	if len(s.dropIDs) < 1000 && e.inner.decoded {
		if id, ok := s.dropped.msgID(f, e, s.cfg.MaxMessageSize); ok {
			s.dropIDs = append(s.dropIDs, id)
		}
	}
}

// dropReader reads the inner records of the entries recovery drops (at
// most the first 1,000) again for their message ids: the decode stage's
// items do not carry the store host and offset an id is made of (40 of
// their bytes, read from another CPU's cache for every entry), and the
// few entries that need them are read here.
type dropReader struct {
	fh  *os.File
	fi  int
	buf []byte
}

// msgID decodes the inner record of entry e of file f again and returns
// its message id; false when it can no longer be read or decoded (the
// file changed since the decode stage read it).
func (d *dropReader) msgID(f *dataFile, e *entry, maxSize int) (string, bool) {
	if d.fh == nil || d.fi != f.idx {
		d.close()
		fh, err := storefile.Open(f.path)
		if err != nil {
			return "", false
		}
		d.fh, d.fi = fh, f.idx
	}
	n := int(e.size) - fdl.BodyOffset
	if n <= 0 {
		return "", false
	}
	if cap(d.buf) < n {
		d.buf = make([]byte, n)
	}
	b := d.buf[:n]
	if k, _ := d.fh.ReadAt(b, e.pos-f.base+fdl.BodyOffset); k < n {
		return "", false
	}
	m, err := rmq.DecodeMessage(b, e.pos+fdl.BodyOffset, maxSize)
	if err != nil {
		return "", false
	}
	return m.MsgID(), true
}

func (d *dropReader) close() {
	if d.fh != nil {
		d.fh.Close()
		d.fh = nil
	}
}

// acceptEntry applies the cross-entry checks of the scan from the start
// file; false stops it at e.
func (s *scanner) acceptEntry(e *entry) bool {
	rc := s.rec
	switch {
	case s.rLast != -1 && e.index != s.rLast+1:
		s.stopRecovery(fmt.Sprintf("index=%d lastEntryIndex=%d", e.index, s.rLast))
		return false
	case e.term < s.rTerm:
		s.stopRecovery(fmt.Sprintf("term=%d lastEntryTerm=%d", e.term, s.rTerm))
		return false
	}
	if !s.needWrite && e.idxDiff != "" {
		s.needWrite, rc.IndexRebuiltFrom = true, e.index
	}
	s.rLast, s.rTerm = e.index, e.term
	s.rProcess = e.pos + int64(e.size)
	return true
}

func (s *scanner) stopRecovery(reason string) {
	if !s.rStopped {
		s.rStopped, s.rec.StopReason = true, reason
	}
}

// recoverCut stops the recovery at a rejected or torn entry of file i.
func (s *scanner) recoverCut(i int) {
	if i >= s.start {
		s.stopRecovery("entry header rejected")
	}
}

// recoverFileEnd is the scan at the end of file i: a BLANK goes on to the
// next file, anything else ends the scan.
func (s *scanner) recoverFileEnd(i int) {
	f := &s.data[i]
	if i < s.start || s.rStopped {
		return
	}
	switch f.end {
	case fdl.EndBlank:
		if i == len(s.data)-1 {
			s.rProcess = f.base + f.size
			s.stopRecovery("the last file ends with a BLANK")
			return
		}
		s.rProcess = s.data[i+1].base
	case fdl.EndZero:
		s.stopRecovery("size 0 (end of data)")
	case fdl.EndEOF:
		s.stopRecovery("end of file without a BLANK")
	default:
		s.stopRecovery("entry header rejected")
	}
}

// finish completes the prediction once every entry went by.
func (s *scanner) finish(context.Context) error {
	rc := s.rec
	if len(s.data) == 0 {
		return nil
	}
	if s.rStopped && s.rec.StopReason == "the last file ends with a BLANK" {
		rc.StopReason = ""
	}
	rc.WritePos = s.rProcess
	rc.StopPath, rc.StopOffset = s.locate(s.rProcess)
	last := s.data[len(s.data)-1]
	if s.rUnread {
		rc.Unread = s.unread
	}
	if last.base-s.rProcess > last.size && !s.rUnread { // unread: processOffset unknown
		rc.Exit = true
		rc.ExitReason = fmt.Sprintf("the processOffset %d is more than a file before the last data file (%d): DLedger logs \"[MONITOR]The processOffset is too small\" and calls System.exit(-1)", s.rProcess, last.base)
	}
	if s.lastKept != nil {
		rc.LedgerEndIndex, rc.LedgerEndTerm = s.lastKept[0], s.lastKept[1]
	}
	rc.IndexWritePos = (rc.LedgerEndIndex + 1) * fdl.IndexUnitSize
	// Committed index from the checkpoint (updateCommittedIndex).
	if s.cpOK && s.cp.HasCommittedIndex && s.cp.CommittedIndex != -1 && rc.LedgerEndIndex != -1 && s.cp.CommittedIndex >= rc.LedgerBeginIndex {
		at := s.committedAt
		if s.cp.CommittedIndex > rc.LedgerEndIndex {
			at = s.lastKept
		}
		if at != nil {
			rc.CommittedIndex, rc.CommittedPos = at[0], at[2]+at[3]
		}
	}
	switch {
	case rc.CommittedPos > 0:
		rc.StoreMaxOffset = rc.CommittedPos
	case rc.StoreMinOffset > 0:
		rc.StoreMaxOffset = rc.StoreMinOffset
	default:
		rc.StoreMaxOffset = 0
	}
	if rc.CommittedIndex >= 0 {
		rc.Uncommitted = int(rc.LedgerEndIndex - rc.CommittedIndex)
	}
	if rc.Abnormal {
		rc.AbnormalProcessOffset = s.abnBase + s.abnSum
	}
	s.recoveryFindings(rc)
	return nil
}

// locate turns a data offset into the file holding it and the position.
func (s *scanner) locate(off int64) (string, int64) {
	for i := len(s.data) - 1; i >= 0; i-- {
		if off >= s.data[i].base {
			return s.data[i].rel, off - s.data[i].base
		}
	}
	return s.rel + "/" + fdl.DataDir, off
}

func (s *scanner) recoveryFindings(rc *Recovery) {
	if rc.Exit {
		s.add(scan.Finding{Code: CodeExit, Severity: scan.Error, Path: rc.StopPath, Offset: rc.StopOffset, Repair: scan.RepairTruncate,
			Details: map[string]any{"process_offset": rc.WritePos}, Message: rc.ExitReason +
				"; the broker does not start until the data past it is removed (storectl truncate)"})
	}
	if rc.Dropped > 0 {
		s.add(scan.Finding{Code: CodeDropped, Severity: scan.Error, Path: rc.StopPath, Offset: rc.StopOffset, Repair: scan.RepairTruncate,
			Details: map[string]any{"entries": rc.Dropped, "stop": rc.StopReason, "end_index": rc.LedgerEndIndex, "msg_ids": s.dropIDs},
			Message: fmt.Sprintf("DLedger's recovery stops at data offset %d (%s): it truncates %d entries after it, whose messages are lost", rc.WritePos, rc.StopReason, rc.Dropped)})
	}
	if rc.Unread != "" {
		s.add(scan.Finding{Code: CodeUnknown, Severity: scan.Warning, Path: rc.Unread, Repair: scan.RepairNone,
			Details: map[string]any{"entries": rc.Unknown, "write_pos_at_least": rc.WritePos, "waits_on": []string{rc.Unread}},
			Message: fmt.Sprintf("%s could not be read: DLedger's recovery reaches at least data offset %d; whether it keeps the %d entries on disk after the file is unknown, not lost", rc.Unread, rc.WritePos, rc.Unknown)})
	}
	if rc.Uncommitted > 0 && rc.Unread == "" { // unread: the end index is only a lower bound
		rel, off := s.locate(rc.CommittedPos)
		s.add(scan.Finding{Code: CodeUncommitted, Severity: scan.Warning, Path: rel, Offset: off, Repair: scan.RepairNone,
			Details: map[string]any{"committed_index": rc.CommittedIndex, "end_index": rc.LedgerEndIndex, "entries": rc.Uncommitted, "committed_pos": rc.CommittedPos},
			Message: fmt.Sprintf("%d entries are on disk past the committed index %d (checkpoint): the broker's max offset stays at %d, so these messages are not visible to consumers until new appends advance the commit", rc.Uncommitted, rc.CommittedIndex, rc.CommittedPos)})
	}
	stop := rc.StopReason
	switch {
	case rc.Unread != "":
		stop = rc.Unread + " could not be read: at least this far"
	case stop == "":
		stop = "the end of the data"
	}
	s.add(scan.Finding{Code: CodeRecoveryPlan, Severity: scan.Info, Path: rc.StartFile, Repair: scan.RepairNone,
		Details: map[string]any{"start_file": rc.StartFile, "end_index": rc.LedgerEndIndex, "write_pos": rc.WritePos,
			"committed_index": rc.CommittedIndex, "committed_pos": rc.CommittedPos, "store_max_phy_offset": rc.StoreMaxOffset,
			"stop": rc.StopReason, "index_rebuilt_from": rc.IndexRebuiltFrom, "exit": rc.Exit},
		Message: fmt.Sprintf("next start: DLedger recovers from %s to entry %d (data offset %d, %s), committed index %d; the broker's max offset is %d",
			rc.StartFile, rc.LedgerEndIndex, rc.WritePos, stop, rc.CommittedIndex, rc.StoreMaxOffset)})
}
