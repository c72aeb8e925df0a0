package rocketmq

import (
	"context"
	"errors"
	"fmt"

	rmq "github.com/storectl/storectl/pkg/format/rocketmq"
	"github.com/storectl/storectl/pkg/scan"
)

// maxRecoverySteps bounds the simulated walk of the unpatched broker past
// the recovery end (one step per stale record), so a file full of stale
// copies cannot stall verify.
const maxRecoverySteps = 1 << 20

// loadCheckpoint reads the checkpoint file (§6.1); a missing or short
// file leaves cpPresent false (the broker then starts from zeros).
func (v *verifier) loadCheckpoint() {
	cp, present, err := readCheckpointErr(v.cfg.Root)
	if err != nil {
		// There but not readable (permission, a dir or FIFO in its
		// place): not "missing", and what depends on it is unknown.
		v.cpUnread = true
		v.res.Unread("checkpoint", err)
		return
	}
	v.cp, v.cpPresent = cp, present
}

// abnormalStart is the base of the commitlog file recoverAbnormally starts
// from (§3.3): the scan's (recoveryStart: the last file whose raw first
// bytes carry a message magic and a store time not newer than the
// checkpoint's min timestamp, as isMappedFileMatchedRecover, no CRC
// check) when its rule applied; else (no data dir, a single file) the
// last file whose first valid record matches; file 0 when none does.
func (v *verifier) abnormalStart() int64 {
	if s := v.scanStart; s != nil && !s.normal {
		return s.base
	}
	segs := v.store.lay.segs
	if len(segs) == 0 {
		return 0
	}
	minTS := v.cp.MinTimestamp() // zero checkpoint: 0, nothing matches
	for i := len(segs) - 1; i >= 0; i-- {
		if r, ok := v.segFirst(segs[i].base); ok && r.storeTS != 0 && r.storeTS <= minTS {
			return segs[i].base
		}
	}
	return segs[0].base
}

// startWaitsOn is, after an unclean shutdown, a commitlog file that could
// not be read and lies after the file abnormalStart finds:
// recoverAbnormally tries the files from the last one back and starts at
// the first whose first record is old enough, so that file may be where
// it starts, and then its recovery end is in or after it. With the
// scan's start it is the last file after it whose first bytes the scan
// could not read (a file whose first record it read and found too new is
// not a possible start, whatever else in it could not be read); else the
// last file after the start whose scan.File has no end. "" when the
// start does not wait on a file not read.
func (v *verifier) startWaitsOn() string {
	if !v.abort {
		return ""
	}
	if s := v.scanStart; s != nil && !s.normal {
		if len(s.maybe) > 0 {
			return s.maybe[0]
		}
		return ""
	}
	unread := unreadCommitlogFiles(v.res)
	if len(unread) == 0 {
		return ""
	}
	segs := v.store.lay.segs
	start := v.abnormalStart()
	for i := len(segs) - 1; i >= 0 && segs[i].base > start; i-- {
		if unread[segs[i].rel] {
			return segs[i].rel
		}
	}
	return ""
}

// brokerEndWithoutFix walks on from the recovery end the way the broker's
// validator does before rocketmq #10017: a stale record (stored physical
// offset elsewhere) passes when its CRC does. It returns where that walk
// stops and how many stale records it accepted.
func (v *verifier) brokerEndWithoutFix() (int64, int) {
	p, n := v.recoveryEnd, 0
	for range maxRecoverySteps {
		m, err := v.store.RecordAt(p)
		switch {
		case err == nil && m.IsBlank():
			i := v.store.seg(p)
			if i < 0 || i+1 >= len(v.store.lay.segs) {
				return p, n
			}
			p = v.store.lay.segs[i+1].base
		case errors.Is(err, rmq.ErrStale) && m.TotalSize > 0:
			n++
			p += int64(m.TotalSize)
		default:
			return p, n
		}
	}
	return p, n
}

// checkCheckpoint compares the checkpoint with the data and says what the
// next start's recovery will do.
func (v *verifier) checkCheckpoint(context.Context) error {
	if !v.sum.done { // checkMissing did not run (no consume queue walk)
		v.startSummary()
		if v.sum.start >= 0 { // else summarize has nothing to count
			v.eachRec(v.summarize)
		}
		v.sum.done = true
	}
	lastTS := v.sum.lastTS
	slack := v.cfg.TimestampSlack.Milliseconds()
	if !v.cpPresent && !v.cpUnread {
		v.res.Add(scan.Finding{Code: CodeCheckpointMissing, Severity: scan.Info, Path: "checkpoint", Repair: scan.RepairNone,
			Evidence: map[string]string{"checkpoint": "fail"},
			Message:  "checkpoint file missing or short: the broker starts from zero timestamps (an abnormal recovery scans from the first commitlog file)"})
	} else {
		for _, c := range []struct {
			name string
			off  int64
			ts   int64
		}{{"physicMsgTimestamp", 0, v.cp.PhysicMsgTimestamp}, {"logicsMsgTimestamp", 8, v.cp.LogicsMsgTimestamp},
			{"indexMsgTimestamp", 16, v.cp.IndexMsgTimestamp}} {
			if v.nrecs > 0 && c.ts > lastTS+slack {
				v.res.Add(scan.Finding{Code: CodeCheckpointAhead, Severity: scan.Warning, Path: "checkpoint", Offset: c.off, Length: 8,
					Repair: scan.RepairNone, Expected: "<= " + fmtInt(lastTS+slack), Actual: fmtInt(c.ts),
					Evidence: map[string]string{c.name: "fail"},
					Message:  fmt.Sprintf("checkpoint %s is %d ms after the newest message the commitlog keeps: flushed data was lost", c.name, c.ts-lastTS)})
			}
		}
	}
	v.recoveryPlan()
	return nil
}

// recoveryPlan adds the info finding that says which recovery runs, from
// which file, where it truncates and what the unpatched broker accepts.
func (v *verifier) recoveryPlan() {
	fixEnd, stale := v.brokerEndWithoutFix()
	v.res.Layout["recovery_end_without_10017_fix"] = fixEnd
	v.res.Layout["stale_records_accepted_without_fix"] = stale
	staleMsg := "no stale records past it"
	if stale > 0 {
		staleMsg = fmt.Sprintf("without the rocketmq #10017 fix the broker would accept %d stale records and end at %d", stale, fixEnd)
	}
	det := map[string]any{"recovery_end": v.recoveryEnd, "recovery_end_without_fix": fixEnd, "stale_records_accepted": stale,
		"checkpoint_min_timestamp": v.cp.MinTimestamp(), "dispatch_from": v.dispatchFrom}
	if len(v.dispatchWaits) > 0 {
		delete(det, "dispatch_from")
		det["dispatch_from_at_least"], det["dispatch_waits_on"] = v.dispatchFrom, v.dispatchWaitsOn()
	}
	end := fmt.Sprintf("at %d", v.recoveryEnd)
	if v.unread != "" { // recovery reads on past what storectl could read
		delete(det, "recovery_end")
		det["recovery_end_at_least"], det["waits_on"] = v.recoveryEnd, []string{v.unread}
		if v.unreadWhy != "" {
			det["missing"] = v.unreadWhy
		}
		end = fmt.Sprintf("at or after %d (%s could not be read in full)", v.recoveryEnd, v.unread)
		if v.unreadWhy != "" {
			end = fmt.Sprintf("at or after %d (which recovery runs is not known: %s)", v.recoveryEnd, v.unreadWhy)
		}
	}
	if !v.abort {
		start := v.normalStart()
		det["start_file"], det["mode"] = rmq.FormatFileName(start), "recoverNormally"
		v.res.Layout["recovery_start_file"] = rmq.FormatFileName(start)
		v.res.Add(scan.Finding{Code: CodeRecoveryPlan, Severity: scan.Info, Path: "checkpoint", Repair: scan.RepairNone, Details: det,
			Message: fmt.Sprintf("clean shutdown: recoverNormally from commitlog file %s, ending %s; %s",
				rmq.FormatFileName(start), end, staleMsg)})
		return
	}
	if v.cpUnread {
		// Where recoverAbnormally starts comes from the checkpoint's
		// timestamps: unknown, and so is what it skips.
		det["mode"], det["waits_on"] = "recoverAbnormally", append(anyStrings(det["waits_on"]), "checkpoint")
		v.res.Add(scan.Finding{Code: CodeUncleanShutdown, Severity: scan.Info, Path: "abort", Repair: scan.RepairNone, Details: det,
			Evidence: map[string]string{"abort_file": "present"},
			Message:  fmt.Sprintf("abort file present (unclean shutdown): recoverAbnormally truncates %s; the file it starts from is unknown (checkpoint could not be read); %s", end, staleMsg)})
		return
	}
	start := v.abnormalStart()
	det["start_file"], det["mode"] = rmq.FormatFileName(start), "recoverAbnormally"
	v.res.Layout["recovery_start_file"] = rmq.FormatFileName(start)
	startAt := fmt.Sprintf("commitlog file %s (first record not newer than checkpoint min %d)", rmq.FormatFileName(start), v.cp.MinTimestamp())
	if v.startUnread != "" {
		det["start_waits_on"] = []string{v.startUnread}
		startAt += fmt.Sprintf(", or at %s if its first record is (it could not be read)", v.startUnread)
	}
	v.res.Add(scan.Finding{Code: CodeUncleanShutdown, Severity: scan.Info, Path: "abort", Repair: scan.RepairNone, Details: det,
		Evidence: map[string]string{"abort_file": "present"},
		Message: fmt.Sprintf("abort file present (unclean shutdown): recoverAbnormally starts at %s, re-dispatches from there and truncates %s; %s",
			startAt, end, staleMsg)})
	skipped := v.sum.skipped
	if v.sum.start != start { // not expected: the summary used the same rule
		skipped = 0
		v.eachRec(func(i int, r *vrec) {
			if r.phy < start && !v.isMatched(i) && r.flags&vfInnerBatch == 0 && r.dispatched() && !v.unitUnread(r) {
				skipped++
			}
		})
	}
	if skipped > 0 {
		f := scan.Finding{Code: CodeRecoverySkips, Severity: scan.Error, Path: "checkpoint", Repair: scan.RepairRebuildIndex,
			Details: map[string]any{"records": skipped, "start_file": rmq.FormatFileName(start)},
			Message: fmt.Sprintf("abnormal recovery starts at %s and will not dispatch %d earlier messages that have no consume queue unit",
				rmq.FormatFileName(start), skipped)}
		if v.startUnread != "" { // a later start skips more
			f.Details["waits_on"] = []string{v.startUnread}
			f.Message = fmt.Sprintf("at least: abnormal recovery starts at %s (or at %s, which could not be read, and then skips more) and will not dispatch %d earlier messages that have no consume queue unit",
				rmq.FormatFileName(start), v.startUnread, skipped)
		}
		v.res.Add(f)
	}
}

// normalStart is the file recoverNormally starts from: the scan's
// (normalStart in start.go) when it named one; else (no file before the
// last stops the walk, or the version is not known) verify's own guess:
// 4.x the third from last; 5.x walking back from the last file (down to
// file 1) the first whose first record's stored offset <=
// dispatchFromPhyOffset.
func (v *verifier) normalStart() int64 {
	if s := v.scanStart; s != nil && s.normal {
		return s.base
	}
	segs := v.store.lay.segs
	if len(segs) == 0 {
		return 0
	}
	if v.versionGuess() == "4.x" {
		return segs[max(len(segs)-3, 0)].base
	}
	for i := len(segs) - 1; i > 0; i-- {
		if r, ok := v.segFirst(segs[i].base); ok && r.phy <= v.dispatchFrom {
			return segs[i].base
		}
	}
	return segs[0].base
}

// recSummary is what the checkpoint checks need of all records below the
// recovery end: the newest store time from the record table's per-block
// maxima, the rest gathered in checkMissing's pass over the unmatched
// records (after the consume queue walk set the matched flags) so the
// table is read once, not three times.
type recSummary struct {
	done    bool
	lastTS  int64 // newest store time
	start   int64 // abnormal recovery start file; -1 without an abort file
	skipped int   // unmatched dispatched records below start
}

// startSummary resets v.sum before a pass calling summarize, with the
// newest store time of the records below the recovery end.
func (v *verifier) startSummary() {
	v.sum = recSummary{start: -1, lastTS: v.tab.maxStoreTS(v.nrecs)}
	if v.abort {
		v.sum.start = v.abnormalStart()
	}
}

// summarize adds record i to v.sum; call it only after the consume queue
// walk (it reads the matched flags). Only unmatched records count.
func (v *verifier) summarize(i int, r *vrec) {
	if r.phy < v.sum.start && !v.isMatched(i) && r.flags&vfInnerBatch == 0 && r.dispatched() && !v.unitUnread(r) {
		v.sum.skipped++
	}
}

// unitUnread reports whether record r's consume queue unit would be in or
// after a file its queue's walk could not read: whether the queue has it
// is unknown (unreadQueues), so it is not a record without a unit.
func (v *verifier) unitUnread(r *vrec) bool {
	if len(v.dispatchWaits) == 0 {
		return false
	}
	q := v.queues[queueKey{v.topics[r.topic], r.queueID}]
	return q != nil && q.unreadFile != "" && r.queueOff >= q.unreadFrom
}

// anyStrings is a details value that may hold a []string (nil otherwise).
func anyStrings(v any) []string {
	s, _ := v.([]string)
	return s
}

// pastUnread says why what points at or past the recovery end's lower
// bound is unknown: the commitlog file that could not be read in full, or
// the assumption the scan could not make (recovery_end_unknown's
// "missing", e.g. the store version).
func (v *verifier) pastUnread() string {
	if v.unreadWhy != "" {
		return "the recovery end's lower bound (which recovery runs is not known: " + v.unreadWhy + ")"
	}
	return "in or after " + v.unread + ", which could not be read in full"
}
