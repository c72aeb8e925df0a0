package dledger

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	fdl "github.com/storectl/storectl/pkg/format/dledger"
	rmq "github.com/storectl/storectl/pkg/format/rocketmq"
	"github.com/storectl/storectl/pkg/scan"
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
	// CQCut is where DLedgerCommitLog truncates the consume queues
	// (truncateDirtyLogicFiles), -1 when it does not.
	CQCut int64 `json:"cq_cut"`
	// AbnormalProcessOffset is dledgerRecoverAbnormally's processOffset:
	// the last file's offset plus the inner sizes only (48 bytes short per
	// entry of that file), -1 for a normal recovery.
	AbnormalProcessOffset int64        `json:"abnormal_process_offset"`
	EntryList             [][4]int64   `json:"-"` // [index, term, pos, size] of every kept entry
	Queues                []QueueState `json:"queues,omitempty"`
}

// recover simulates DLedgerMmapFileStore.recover over the walked entries.
func (s *scanner) recover(context.Context) error {
	rc := &Recovery{LedgerBeginIndex: -1, LedgerEndIndex: -1, LedgerEndTerm: -1, CommittedIndex: -1, CommittedPos: -1,
		IndexRebuiltFrom: -1, Entries: len(s.entries), CQCut: -1, AbnormalProcessOffset: -1}
	s.rec = rc
	if _, err := os.Stat(filepath.Join(s.cfg.Root, "abort")); err == nil {
		rc.Abnormal = true
	}
	if len(s.data) == 0 {
		return nil
	}
	n := len(s.data)
	// Pre-check: from the third-from-last file backwards, the first file
	// whose first entry passes and agrees with its index unit.
	start := 0
	for i := max(n-3, 0); i >= 0; i-- {
		start = i
		if s.precheck(i) {
			break
		}
	}
	rc.StartFile = s.data[start].rel
	for i := 0; i < s.data[start].first && start > 0; i++ { // before the start file: kept as they are
		e := &s.entries[i]
		rc.EntryList = append(rc.EntryList, [4]int64{e.index, e.term, e.pos, int64(e.size)})
	}
	process := s.data[start].base
	lastIndex, lastTerm := int64(-1), int64(-1)
	needWrite := false
	kept := 0
	stopped := false
scan:
	for fi := start; fi < n; fi++ {
		f := &s.data[fi]
		process = f.base
		for k := 0; k < f.n; k++ {
			e := &s.entries[f.first+k]
			if k == f.cut {
				rc.StopReason = "entry header rejected"
				stopped = true
				break scan
			}
			if lastIndex != -1 && e.index != lastIndex+1 {
				rc.StopReason = fmt.Sprintf("index=%d lastEntryIndex=%d", e.index, lastIndex)
				stopped = true
				break scan
			}
			if e.term < lastTerm {
				rc.StopReason = fmt.Sprintf("term=%d lastEntryTerm=%d", e.term, lastTerm)
				stopped = true
				break scan
			}
			if !needWrite && e.idxDiff != "" {
				needWrite = true
				rc.IndexRebuiltFrom = e.index
			}
			lastIndex, lastTerm = e.index, e.term
			process = e.pos + int64(e.size)
			kept++
			rc.EntryList = append(rc.EntryList, [4]int64{e.index, e.term, e.pos, int64(e.size)})
		}
		if f.cut >= 0 {
			rc.StopReason = "entry header rejected"
			stopped = true
			break
		}
		switch f.end {
		case fdl.EndBlank:
			if fi == n-1 {
				process = f.base + f.size
			}
			continue
		case fdl.EndZero:
			rc.StopReason = "size 0 (end of data)"
		case fdl.EndEOF:
			rc.StopReason = "end of file without a BLANK"
		default:
			rc.StopReason = "entry header rejected"
		}
		if f.end != fdl.EndZero || fi < n-1 {
			stopped = true
		}
		break
	}
	rc.WritePos = process
	rc.StopPath, rc.StopOffset = s.locate(process)
	rc.Kept = kept + s.entriesBefore(start)
	rc.Dropped = len(s.entries) - rc.Kept
	last := s.data[n-1]
	if last.base-process > last.size {
		rc.Exit = true
		rc.ExitReason = fmt.Sprintf("the processOffset %d is more than a file before the last data file (%d): DLedger logs \"[MONITOR]The processOffset is too small\" and calls System.exit(-1)", process, last.base)
	}
	rc.LedgerEndIndex, rc.LedgerEndTerm = lastIndex, lastTerm
	if lastIndex != -1 && s.data[0].n > 0 {
		rc.LedgerBeginIndex = s.entries[s.data[0].first].index
	}
	rc.IndexWritePos = (lastIndex + 1) * fdl.IndexUnitSize
	rc.StoreMinOffset = s.data[0].base
	// Committed index from the checkpoint (updateCommittedIndex).
	if s.cpOK && s.cp.HasCommittedIndex && s.cp.CommittedIndex != -1 && lastIndex != -1 && s.cp.CommittedIndex >= rc.LedgerBeginIndex {
		ci := min(s.cp.CommittedIndex, lastIndex)
		if e := s.entryByIndex(ci); e != nil {
			rc.CommittedIndex, rc.CommittedPos = ci, e.pos+int64(e.size)
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
		rc.Uncommitted = int(lastIndex - rc.CommittedIndex)
	}
	s.findings(rc, stopped, start)
	return nil
}

// precheck is recover()'s test of a start file candidate.
func (s *scanner) precheck(i int) bool {
	f := &s.data[i]
	if f.n == 0 || f.cut == 0 {
		return false
	}
	e := &s.entries[f.first]
	if e.pos != f.base || e.size <= fdl.HeaderSize {
		return false
	}
	u, ok := s.indexUnit(e.index)
	return ok && u.Magic == fdl.Magic1 && u.Size == e.size && u.Index == e.index && u.Term == e.term && u.Pos == f.base
}

func (s *scanner) entriesBefore(start int) int {
	n := 0
	for i := 0; i < start; i++ {
		n += s.data[i].n
	}
	return n
}

func (s *scanner) entryByIndex(idx int64) *entry {
	for i := len(s.entries) - 1; i >= 0; i-- { // the kept entries are the tail of a contiguous run
		if s.entries[i].index == idx {
			return &s.entries[i]
		}
	}
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

func (s *scanner) findings(rc *Recovery, stopped bool, start int) {
	if rc.Exit {
		s.add(scan.Finding{Code: CodeExit, Severity: scan.Error, Path: rc.StopPath, Offset: rc.StopOffset, Repair: scan.RepairTruncate,
			Details: map[string]any{"process_offset": rc.WritePos}, Message: rc.ExitReason +
				"; the broker does not start until the data past it is removed (storectl truncate)"})
	}
	if rc.Dropped > 0 {
		var ids []string
		for _, e := range s.entries {
			if e.pos >= rc.WritePos && len(ids) < 1000 {
				ids = append(ids, e.inner.msgID)
			}
		}
		s.add(scan.Finding{Code: CodeDropped, Severity: scan.Error, Path: rc.StopPath, Offset: rc.StopOffset, Repair: scan.RepairTruncate,
			Details: map[string]any{"entries": rc.Dropped, "stop": rc.StopReason, "end_index": rc.LedgerEndIndex, "msg_ids": ids},
			Message: fmt.Sprintf("DLedger's recovery stops at data offset %d (%s): it truncates %d entries after it, whose messages are lost", rc.WritePos, rc.StopReason, rc.Dropped)})
	}
	if rc.Uncommitted > 0 {
		ce := s.entryByIndex(rc.CommittedIndex)
		rel, off := s.locate(ce.pos + int64(ce.size))
		s.add(scan.Finding{Code: CodeUncommitted, Severity: scan.Warning, Path: rel, Offset: off, Repair: scan.RepairNone,
			Details: map[string]any{"committed_index": rc.CommittedIndex, "end_index": rc.LedgerEndIndex, "entries": rc.Uncommitted, "committed_pos": rc.CommittedPos},
			Message: fmt.Sprintf("%d entries are on disk past the committed index %d (checkpoint): the broker's max offset stays at %d, so these messages are not visible to consumers until new appends advance the commit", rc.Uncommitted, rc.CommittedIndex, rc.CommittedPos)})
	}
	if !s.cpOK && s.cpErr == nil && rc.LedgerEndIndex >= 0 {
		// checkpoint missing: already reported
	}
	s.add(scan.Finding{Code: CodeRecoveryPlan, Severity: scan.Info, Path: rc.StartFile, Repair: scan.RepairNone,
		Details: map[string]any{"start_file": rc.StartFile, "end_index": rc.LedgerEndIndex, "write_pos": rc.WritePos,
			"committed_index": rc.CommittedIndex, "committed_pos": rc.CommittedPos, "store_max_phy_offset": rc.StoreMaxOffset,
			"stop": rc.StopReason, "index_rebuilt_from": rc.IndexRebuiltFrom, "exit": rc.Exit},
		Message: fmt.Sprintf("next start: DLedger recovers from %s to entry %d (data offset %d, %s), committed index %d; the broker's max offset is %d",
			rc.StartFile, rc.LedgerEndIndex, rc.WritePos, rc.StopReason, rc.CommittedIndex, rc.StoreMaxOffset)})
	_ = stopped
	_ = start
}

// abnormalProcessOffset is dledgerRecoverAbnormally's scan: from the last
// data file whose first inner message is a V1 record stored at or before
// the checkpoint's min timestamp, sum the inner sizes of the records that
// pass checkMessageAndReturnSize (with the CRC check); the offset is the
// start file's plus that sum (without the 48-byte headers).
func (s *scanner) abnormalProcessOffset(minTS int64, end int64) int64 {
	n := len(s.data)
	start := 0
	for i := n - 1; i >= 0; i-- {
		f := &s.data[i]
		if f.n > 0 {
			e := &s.entries[f.first]
			if e.inner.v1 && e.inner.storeTS != 0 && e.inner.storeTS <= minTS {
				start = i
				break
			}
		}
	}
	process, sum := s.data[start].base, int64(0)
	for fi := start; fi < n; fi++ {
		f := &s.data[fi]
		process, sum = f.base, 0
		for k := 0; k < f.n; k++ {
			e := &s.entries[f.first+k]
			if !e.inner.ok {
				return process + sum
			}
			sum += int64(e.inner.size)
		}
		if f.end != fdl.EndBlank {
			return process + sum
		}
	}
	return process + sum
}

var _ = rmq.CQUnitSize
