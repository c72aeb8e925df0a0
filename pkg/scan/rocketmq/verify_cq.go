package rocketmq

import (
	"errors"
	"fmt"
	"strings"

	rmq "github.com/storectl/storectl/pkg/format/rocketmq"
	"github.com/storectl/storectl/pkg/scan"
)

// unitScan is the running state of one queue's unit walk.
type unitScan struct {
	q                 *queueState
	ended             bool // the first invalid unit was seen: recovery stops there
	afterEnd          bool // a non-zero unit after the end was reported
	prevOff, prevSize int64
	placeholders      int64
	expired           int64
	// unknown counts units pointing at or past an unread commitlog file
	// (verifier.unread), the first at unknownFile@unknownPos.
	unknown     int64
	unknownFile string
	unknownPos  int64
	// spanUnknown counts units below the recovery end pointing into a
	// commitlog range the scan could not read (verifier.unreadSpans).
	spanUnknown spanUnknown
	// next is the stream index after the last unit checked, run the
	// queue's claimed run at or after it (verify_cqclaim.go).
	next int64
	run  int
}

// unit checks one unit at pos in file f. A unit its record claimed in
// the walk (verify_cqclaim.go) that does not reach the record check
// gives the record's claim back.
func (v *verifier) unit(us *unitScan, f cqFile, pos int64, u rmq.CQUnit) {
	idx := (f.base + pos) / rmq.CQUnitSize
	us.next = idx + 1
	claimed := us.q.claim != nil && us.claimedAt(idx)
	if !v.unitAt(us, f, pos, idx, u, claimed) && claimed {
		v.unclaim(u)
	}
}

// unitAt is unit's checks; it reports whether a claimed unit was counted
// as linked (without looking its record up: the claim made linkUnit's
// checks).
func (v *verifier) unitAt(us *unitScan, f cqFile, pos, idx int64, u rmq.CQUnit, claimed bool) bool {
	q := us.q
	if us.ended {
		if !u.IsZero() {
			us.afterEnd = true
			v.add(q.rel, v.unitFinding(f, pos, idx, u, CodeCQBadUnit, scan.Warning, scan.RepairRebuildIndex,
				"unit after the queue's end (the first invalid unit); recovery drops it and everything after it", nil))
		}
		return false
	}
	if !u.Valid() {
		us.ended = true
		if !u.IsZero() {
			v.add(q.rel, v.unitFinding(f, pos, idx, u, CodeCQBadUnit, scan.Error, scan.RepairRebuildIndex,
				"invalid unit (offset < 0 or size <= 0): recovery ends the queue here and drops the units after it",
				map[string]string{"valid": "fail"}))
		}
		return false
	}
	q.units = idx + 1
	if u.IsPlaceholder() || u.Size == rmq.CQPlaceholderSize {
		if q.real == 0 && u.IsPlaceholder() {
			us.placeholders++
			return false
		}
		v.add(q.rel, v.unitFinding(f, pos, idx, u, CodeCQBadUnit, scan.Error, scan.RepairRebuildIndex,
			"placeholder-sized unit after the queue's first message", map[string]string{"placeholder_position": "fail"}))
		return false
	}
	q.real++
	q.lastEnd = max(q.lastEnd, u.CommitLogOffset+int64(u.Size))
	if us.prevOff >= 0 && u.CommitLogOffset < us.prevOff+us.prevSize {
		fd := v.unitFinding(f, pos, idx, u, CodeCQOrder, scan.Error, scan.RepairRebuildIndex,
			"unit does not follow the previous unit in commitlog order", map[string]string{"order": "fail"})
		fd.Expected, fd.Actual = ">= "+fmtInt(us.prevOff+us.prevSize), fmtInt(u.CommitLogOffset)
		v.add(q.rel, fd)
	}
	us.prevOff, us.prevSize = u.CommitLogOffset, int64(u.Size)
	switch {
	case u.CommitLogOffset < v.minPhy:
		us.expired++
	case u.CommitLogOffset >= v.recoveryEnd && v.unread != "":
		if us.unknown == 0 {
			us.unknownFile, us.unknownPos = f.rel, pos
		}
		us.unknown++
	case u.CommitLogOffset >= v.recoveryEnd:
		fd := v.unitFinding(f, pos, idx, u, CodeCQBeyondEnd, scan.Warning, scan.RepairTruncate,
			"unit points at or past the commitlog recovery end; recovery truncates it", map[string]string{"below_recovery_end": "fail"})
		fd.Expected, fd.Actual = "< "+fmtInt(v.recoveryEnd), fmtInt(u.CommitLogOffset)
		v.add(q.rel, fd)
	case claimed:
		v.unitsLinked++
		return true
	default:
		v.linkUnit(us, f, pos, idx, u)
	}
	return false
}

// linkUnit checks that a unit points at the start of a valid record of
// its queue with the right size, queue offset and tags code (§4.1).
func (v *verifier) linkUnit(us *unitScan, f cqFile, pos, idx int64, u rmq.CQUnit) {
	q := us.q
	ri, rv := v.recAtRec(u.CommitLogOffset)
	if ri < 0 && len(v.unreadSpans) > 0 {
		if rel := v.unreadAt(u.CommitLogOffset); rel != "" {
			us.spanUnknown.add(rel, f.rel, pos) // no record read there: unknown
			return
		}
	}
	if ri < 0 {
		v.add(q.rel, v.unitFinding(f, pos, idx, u, CodeCQBadUnit, scan.Error, scan.RepairRebuildIndex,
			"unit "+v.whatIsAt(u.CommitLogOffset), map[string]string{"record_start": "fail"}))
		return
	}
	r := &rv
	v.unitsLinked++
	lmq := strings.HasPrefix(q.topic, rmq.LMQPrefix)
	if unitMatches(v, q, r, u, idx, lmq) { // fast path: no evidence map for a good unit
		if lmq || (v.topics[r.topic] == q.topic && r.queueID == q.queueID) {
			v.setMatched(ri)
		}
		return
	}
	ev := map[string]string{"record_start": "pass"}
	var exp, act []string
	check := func(name string, ok bool, want, got string) {
		ev[name] = passFail(ok)
		if !ok {
			exp, act = append(exp, name+"="+want), append(act, name+"="+got)
		}
	}
	if lmq {
		// LMQ queues hold records of other topics (INNER_MULTI_DISPATCH):
		// only the pointer and the size can be judged.
		check("multi_dispatch", r.flags&vfLMQ != 0, "INNER_MULTI_DISPATCH", "absent")
	} else {
		check("topic", v.topics[r.topic] == q.topic, q.topic, v.topics[r.topic])
		check("queue_id", r.queueID == q.queueID, fmtInt(int64(q.queueID)), fmtInt(int64(r.queueID)))
		if r.flags&vfInnerBatch == 0 {
			check("queue_offset", r.queueOff == idx, fmtInt(idx), fmtInt(r.queueOff))
		}
	}
	check("size", int64(r.size) == int64(u.Size), fmtInt(int64(r.size)), fmtInt(int64(u.Size)))
	check("dispatched_type", r.dispatched(), "NOT_TYPE or COMMIT", fmt.Sprintf("sysflag 0x%x", r.sysFlag))
	switch {
	case u.IsExtAddress() || lmq:
		ev["tags_code"] = "not checked"
	case q.topic == rmq.ScheduleTopic && r.tagsCode != u.TagsCode:
		// The delivery time depends on the broker's messageDelayLevel,
		// which is not in the store: don't judge it.
		ev["tags_code"] = "not checked (delay levels unknown)"
	default:
		check("tags_code", r.tagsCode == u.TagsCode, fmtInt(r.tagsCode), fmtInt(u.TagsCode))
	}
	if lmq || (v.topics[r.topic] == q.topic && r.queueID == q.queueID) {
		v.setMatched(ri)
	}
	if len(exp) == 0 {
		return
	}
	fd := v.unitFinding(f, pos, idx, u, CodeCQBadUnit, scan.Error, scan.RepairRebuildIndex,
		"unit does not match the record it points at ("+strings.Join(failed(ev), ", ")+")", ev)
	fd.Expected, fd.Actual = strings.Join(exp, " "), strings.Join(act, " ")
	v.add(q.rel, fd)
}

// unitMatches is linkUnit's checks without the evidence: true when every
// check linkUnit makes passes (it then reports nothing).
func unitMatches(v *verifier, q *queueState, r *vrec, u rmq.CQUnit, idx int64, lmq bool) bool {
	if lmq {
		if r.flags&vfLMQ == 0 {
			return false
		}
	} else if v.topics[r.topic] != q.topic || r.queueID != q.queueID ||
		(r.flags&vfInnerBatch == 0 && r.queueOff != idx) {
		return false
	}
	if int64(r.size) != int64(u.Size) || !r.dispatched() {
		return false
	}
	switch {
	case u.IsExtAddress() || lmq:
	case q.topic == rmq.ScheduleTopic && r.tagsCode != u.TagsCode:
	default:
		return r.tagsCode == u.TagsCode
	}
	return true
}

func failed(ev map[string]string) []string {
	var out []string
	for _, k := range []string{"topic", "queue_id", "queue_offset", "size", "dispatched_type", "tags_code", "multi_dispatch"} {
		if ev[k] == "fail" {
			out = append(out, k)
		}
	}
	return out
}

// whatIsAt describes a commitlog offset that is not the start of a valid
// record below the recovery end.
func (v *verifier) whatIsAt(phy int64) string {
	if i := v.recCovering(phy); i >= 0 {
		r := v.rec(i)
		return fmt.Sprintf("points into the middle of the record at %d (size %d)", r.phy, r.size)
	}
	m, err := v.store.RecordAt(phy)
	switch {
	case errors.Is(err, rmq.ErrStale):
		return fmt.Sprintf("points at a stale record (stored physical offset %d)", m.PhysicalOffset)
	case errors.Is(err, ErrNoFile):
		return "points at an offset no commitlog file holds"
	case err == nil && m.IsBlank():
		return "points at a BLANK end-of-file record"
	case err == nil:
		return "points at a record the scan did not accept"
	}
	return "points at no valid record"
}

func (v *verifier) unitFinding(f cqFile, pos, idx int64, u rmq.CQUnit, code string, sev scan.Severity,
	repair, msg string, ev map[string]string) scan.Finding {
	return scan.Finding{Code: code, Severity: sev, Path: f.rel, Offset: pos, Length: rmq.CQUnitSize, Repair: repair,
		Message: msg, Evidence: ev, Details: map[string]any{"queue_offset": idx, "phy_offset": u.CommitLogOffset,
			"size": u.Size, "tags_code": fmtInt(u.TagsCode)}}
}
