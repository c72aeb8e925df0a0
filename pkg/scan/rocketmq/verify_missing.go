package rocketmq

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	rmq "github.com/storectl/storectl/pkg/format/rocketmq"
	"github.com/storectl/storectl/pkg/scan"
)

// missingQueue aggregates the records of a queue that has no dir.
type missingQueue struct {
	n, redispatched int
	unknown         int // of n: whether the next start dispatches them is not known (sureFrom)
	first, last     int64
}

// sureFrom is where a record without a unit is sure to be dispatched
// again at the next start; a record in [redispatchFrom, sureFrom) may or
// may not be. redispatchFrom is where the consume queues end
// (dispatchFrom) or, after an unclean shutdown, the start file
// recoverAbnormally re-dispatches from if earlier: each can be a guess.
// A consume queue file that could not be read (dispatchWaits) makes
// dispatchFrom a lower bound; an unread checkpoint makes the start file
// unknown, and a later file whose first bytes could not be read
// (startWaitsOn) may be the start. Only what every possible start and end
// dispatches is sure.
func (v *verifier) sureFrom() int64 {
	end := v.dispatchFrom
	if len(v.dispatchWaits) > 0 {
		end = math.MaxInt64
	}
	if !v.abort {
		return end
	}
	start := v.abnormalStart()
	switch {
	case v.cpUnread:
		start = math.MaxInt64
	case v.startWaitsOn() != "":
		start = v.segBase(v.startWaitsOn()) // the latest start there may be
	}
	return min(end, start)
}

// redispatchWaits is what the records in [redispatchFrom, sureFrom) wait
// on, sorted, for a finding's waits_on.
func (v *verifier) redispatchWaits() []string {
	w := slices.Clone(v.dispatchWaits)
	if v.abort && v.cpUnread {
		w = append(w, "checkpoint")
	} else if f := v.startWaitsOn(); v.abort && f != "" {
		w = append(w, f)
	}
	slices.Sort(w)
	return slices.Compact(w)
}

// dispatchWaitsOn is dispatchWaits sorted, for a finding's waits_on.
func (v *verifier) dispatchWaitsOn() []string {
	w := slices.Clone(v.dispatchWaits)
	slices.Sort(w)
	return slices.Compact(w)
}

// segBase is the base of the commitlog file rel (MaxInt64 if none).
func (v *verifier) segBase(rel string) int64 {
	for _, s := range v.store.lay.segs {
		if s.rel == rel {
			return s.base
		}
	}
	return math.MaxInt64
}

// checkMissing reports dispatched records (NOT_TYPE or COMMIT) below the
// recovery end that no unit of their own queue points at. A record after
// the queue's last unit that the next start dispatches again is "not
// dispatched yet": info, since the broker's own start repairs it (its
// reput service dispatches from the highest offset any consume queue
// reaches), as after every crash that stops a queue a unit or more
// behind; one inside the queue, before it, or one the next start will not
// dispatch is lost (error).
func (v *verifier) checkMissing(fileSize int64) {
	noDir := map[queueKey]*missingQueue{}
	unread := map[*queueState]int{}
	skipped := 0
	lost := 0
	v.startSummary()
	sure := v.sureFrom()
	var waitsOn []string // what the records in [redispatchFrom, sure) wait on
	if sure > v.redispatchFrom {
		waitsOn = v.redispatchWaits()
	}
	waitMsg := strings.Join(waitsOn, ", ")
	// Matched records add nothing to the summary: read only the unmatched.
	v.eachUnmatched(func(i int, r *vrec) {
		v.summarize(i, r)
		if !r.dispatched() {
			return
		}
		if r.flags&vfInnerBatch != 0 {
			skipped++ // BatchConsumeQueue topics: not checked here
			return
		}
		k := queueKey{v.topics[r.topic], r.queueID}
		q := v.queues[k]
		redispatch := r.phy >= v.redispatchFrom
		unknown := redispatch && r.phy < sure
		if q == nil {
			mq := noDir[k]
			if mq == nil {
				mq = &missingQueue{first: r.phy}
				noDir[k] = mq
			}
			mq.n++
			mq.last = r.phy
			switch {
			case unknown:
				mq.unknown++
			case redispatch:
				mq.redispatched++
			}
			return
		}
		qo := r.queueOff
		if q.unreadFile != "" && qo >= q.unreadFrom {
			unread[q]++ // its unit is in or after a file the walk could not read
			return
		}
		state, sev, msg := "lost", scan.Error, "message has no consume queue unit inside its queue's range: consumers will never see it"
		waits := false
		switch {
		case qo >= q.units && unknown:
			state, sev, waits, msg = "not-dispatched", scan.Warning, true, "message is after the queue's last unit; whether the next start dispatches it is not known: where it dispatches from waits on "+waitMsg+", which could not be read"
		case qo >= q.units && redispatch:
			state, sev, msg = "not-dispatched", scan.Info, "message is not dispatched yet (after the queue's last unit); the broker dispatches it at the next start, by itself"
		case qo >= q.units:
			state, msg = "not-dispatched", "message is after the queue's last unit but before where the next start dispatches from: it will never be dispatched"
		case qo < q.minIdx:
			msg = "message is before the queue's first consume queue file although it is still in the commitlog: its units are lost"
		}
		if state == "lost" || sev == scan.Error {
			lost++
		}
		path, off := q.rel, int64(0)
		if qo >= 0 && qo < 1<<58 {
			b := qo * rmq.CQUnitSize
			path, off = q.rel+"/"+rmq.FormatFileName(b/fileSize*fileSize), b%fileSize
			if state == "lost" && !q.hasFile(b/fileSize*fileSize) {
				v.missingFile(q, path, b/fileSize*fileSize)
			}
		}
		det := map[string]any{"state": state, "phy_offset": r.phy, "size": r.size, "queue_offset": qo,
			"topic": k.topic, "queue_id": k.queueID, "queue_max_offset": q.units, "redispatch_from": v.redispatchFrom}
		if waits {
			delete(det, "redispatch_from")
			det["redispatch_from_at_least"], det["waits_on"] = v.redispatchFrom, waitsOn
		}
		v.add(q.rel+":missing", scan.Finding{Code: CodeCQMissing, Severity: sev, Path: path, Offset: off, Length: rmq.CQUnitSize,
			Repair: scan.RepairRebuildIndex, Message: msg, Evidence: map[string]string{"unit": "fail"}, Details: det})
	})
	v.sum.done = true
	v.unreadQueues(unread)
	v.missingQueueDirs(noDir, waitsOn)
	v.lostCount = lost
	if skipped > 0 {
		v.res.Add(scan.Finding{Code: CodeCQNotChecked, Severity: scan.Info, Path: "consumequeue", Repair: scan.RepairNone,
			Details: map[string]any{"records": skipped},
			Message: fmt.Sprintf("%d inner-batch records without a consume queue unit were not judged (batch consume queues are not verified)", skipped)})
	}
}

// eachUnmatched calls fn for every record below the recovery end that no
// unit of its queue points at (!isMatched), in phy order, skipping runs
// of 64 matched records at once.
func (v *verifier) eachUnmatched(fn func(i int, r *vrec)) {
	var r vrec // one for the walk: fn's pointer would put one a record on the heap
	for i := 0; i < v.nrecs; i++ {
		if i%64 == 0 && i+64 <= v.nrecs && v.matched[i/64] == ^uint64(0) {
			i += 63
			continue
		}
		if !v.isMatched(i) {
			r = v.tab.at(i)
			fn(i, &r)
		}
	}
}

// hasFile reports whether the queue has a file starting at base.
func (q *queueState) hasFile(base int64) bool {
	for _, f := range q.files {
		if f.base == base {
			return true
		}
	}
	return false
}

// missingFile reports, once, a consume queue file that is absent although
// the commitlog holds messages whose units belong in it.
func (v *verifier) missingFile(q *queueState, path string, base int64) {
	if v.missingFiles[path] {
		return
	}
	v.missingFiles[path] = true
	v.add(q.rel, scan.Finding{Code: CodeCQMissing, Severity: scan.Error, Path: path, Repair: scan.RepairRebuildIndex,
		Evidence: map[string]string{"file": "fail"}, Details: map[string]any{"queue_offset": base / rmq.CQUnitSize, "state": "missing-file"},
		Message: "consume queue file is missing although the commitlog still holds messages whose units belong in it"})
}

func (v *verifier) missingQueueDirs(noDir map[queueKey]*missingQueue, waitsOn []string) {
	keys := make([]queueKey, 0, len(noDir))
	for k := range noDir {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].topic != keys[j].topic {
			return keys[i].topic < keys[j].topic
		}
		return keys[i].queueID < keys[j].queueID
	})
	for _, k := range keys {
		mq := noDir[k]
		sev, state := scan.Error, "lost"
		msg := fmt.Sprintf("no consume queue dir for %s/%d although %d messages of it are in the commitlog", k.topic, k.queueID, mq.n)
		switch {
		case mq.redispatched == mq.n:
			sev, state = scan.Info, "not-dispatched"
			msg += "; the broker dispatches them at the next start"
		case mq.redispatched+mq.unknown == mq.n:
			sev, state = scan.Warning, "not-dispatched"
			msg += fmt.Sprintf("; whether the next start dispatches %d of them is not known (where it dispatches from waits on %s, which could not be read)", mq.unknown, strings.Join(waitsOn, ", "))
		default:
			v.lostCount += mq.n - mq.redispatched - mq.unknown
			msg += "; the next start will not dispatch them all"
		}
		det := map[string]any{"state": state, "records": mq.n, "first_phy_offset": mq.first, "last_phy_offset": mq.last,
			"redispatched": mq.redispatched, "topic": k.topic, "queue_id": k.queueID}
		if mq.unknown > 0 {
			det["redispatch_unknown"], det["waits_on"] = mq.unknown, waitsOn
		}
		v.res.Add(scan.Finding{Code: CodeCQMissing, Severity: sev, Path: fmt.Sprintf("consumequeue/%s/%d", k.topic, k.queueID),
			Repair: scan.RepairRebuildIndex, Message: msg, Evidence: map[string]string{"queue_dir": "fail"}, Details: det})
	}
}

// unreadQueues reports, per queue whose unit walk stopped at a file it
// could not read, the records whose units would be in or after that file:
// whether the queue has them is unknown, not missing (docs/cli.md).
func (v *verifier) unreadQueues(unread map[*queueState]int) {
	qs := make([]*queueState, 0, len(unread))
	for q := range unread {
		qs = append(qs, q)
	}
	sort.Slice(qs, func(i, j int) bool { return qs[i].rel < qs[j].rel })
	for _, q := range qs {
		v.res.Add(scan.Finding{Code: CodeCQUnknown, Severity: scan.Warning, Path: q.unreadFile, Repair: scan.RepairNone,
			Details: map[string]any{"records": unread[q], "queue_offset": q.unreadFrom, "waits_on": []string{q.unreadFile}},
			Message: fmt.Sprintf("%d record(s) of %s/%d have their consume queue units at or after queue offset %d, in or after %s, which could not be read: whether the queue has them is unknown, not missing",
				unread[q], q.topic, q.queueID, q.unreadFrom, q.unreadFile)})
	}
}
