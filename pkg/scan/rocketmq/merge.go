package rocketmq

import (
	"fmt"
	"sync"

	"github.com/storectl/storectl/pkg/scan"
)

type queueKey struct {
	topic   string
	queueID int32
}

// crossState runs the cross-file checks (queue offsets, timestamps) on
// per-file results as they complete, in file order, so a file's compact
// records are dropped as soon as they are checked: memory stays flat
// whatever the store size.
type crossState struct {
	cfg     *Config
	results []*fileResult
	n       int // results[:n] are checked
	stopped bool
	next    map[queueKey]int64
	maxTS   int64
	free    [][]compact // record slices of checked files, for reuse
	mu      sync.Mutex
}

// takeRecs returns an empty record slice of a checked file, or nil.
func (cs *crossState) takeRecs() []compact {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	n := len(cs.free)
	if n == 0 {
		return nil
	}
	r := cs.free[n-1]
	cs.free = cs.free[:n-1]
	return r
}

func newCrossState(cfg *Config, n int) *crossState {
	return &crossState{cfg: cfg, results: make([]*fileResult, n), next: map[queueKey]int64{}}
}

// done stores the result of file i and checks every file whose
// predecessors are all done. Safe for concurrent use.
func (cs *crossState) done(i int, fr *fileResult) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	cs.results[i] = fr
	for cs.n < len(cs.results) && cs.results[cs.n] != nil {
		fr := cs.results[cs.n]
		if !cs.stopped {
			var tmp scan.Result
			cs.maxTS = crossChecks(cs.cfg, fr, cs.next, cs.maxTS, &tmp)
			fr.cross = tmp.Findings
			// The recovery stops after this file unless it ends in a BLANK
			// with a next file (see merge).
			cs.stopped = fr.err != nil || !(fr.blank && cs.n+1 < len(cs.results))
		}
		if cap(fr.recs) > 0 {
			cs.free = append(cs.free, fr.recs[:0]) // for a later file's walk
		}
		fr.recs, fr.topics = nil, nil
		if fr.done != nil {
			fr.done()
		}
		cs.n++
	}
}

// merge walks the per-file results in offset order: it computes the
// recovery end, adds the cross-file findings crossState found on the
// records recovery keeps, and collects files and findings.
func merge(lay *layout, results []*fileResult, res *scan.Result) {
	recoveryEnd := int64(0)
	if len(lay.segs) > 0 {
		recoveryEnd = lay.segs[0].base
	}
	stopped := false
	for i, fr := range results {
		res.BytesScanned += fr.file.BytesScanned
		if fr.err != nil {
			res.Fail(fr.err)
		}
		res.Findings = append(res.Findings, fr.findings...)
		if stopped {
			if fr.file.Records > 0 {
				res.Add(scan.Finding{Code: CodeBeyondRecovery, Severity: scan.Warning, Path: fr.seg.rel,
					Offset: fr.file.FirstValid, Length: fr.failPos - fr.file.FirstValid, Repair: scan.RepairTruncate,
					Message: fmt.Sprintf("%d valid records lie beyond the recovery end; recovery deletes this file", fr.file.Records),
					Details: map[string]any{"phy_offset": fr.seg.base + fr.file.FirstValid, "records": fr.file.Records,
						"recovery_end": recoveryEnd}})
			}
			fr.file.ValidEnd = 0
			res.Files = append(res.Files, fr.file)
			continue
		}
		res.Add(fr.cross...)
		res.Files = append(res.Files, fr.file)
		if fr.err != nil {
			recoveryEnd = fr.seg.base + fr.failPos
			stopped = true
			continue
		}
		if fr.blank && i+1 < len(results) {
			continue // BLANK: recovery goes on with the next file
		}
		recoveryEnd = fr.seg.base + fr.failPos
		stopped = true
		if fr.file.End == scan.EndZero && laterData(results[i+1:]) {
			res.Add(scan.Finding{Code: CodeEarlyEnd, Severity: scan.Error, Path: fr.seg.rel, Offset: fr.failPos,
				Length: fr.seg.size - fr.failPos, Repair: scan.RepairTruncate,
				Evidence: map[string]string{"blank_record": "fail"},
				Message:  "file ends in zeros without a BLANK record while later files hold data; recovery stops here and drops them",
				Details:  map[string]any{"phy_offset": fr.seg.base + fr.failPos}})
		}
	}
	res.RecoveryEnd = &recoveryEnd
}

func laterData(rs []*fileResult) bool {
	for _, r := range rs {
		if r.file.Records > 0 || !r.zeroTail || r.failPos != 0 {
			return true
		}
	}
	return false
}

// crossChecks reports queue offsets going backwards per (topic, queue)
// and store timestamps going backwards by more than the slack, for the
// valid records of one file. It returns the new maximum store timestamp.
func crossChecks(cfg *Config, fr *fileResult, next map[queueKey]int64, maxTS int64, res *scan.Result) int64 {
	slack := cfg.TimestampSlack.Milliseconds()
	// The file's queues by (local topic id, queue id): one string-keyed
	// map lookup per queue of the file, not two per record. Written back
	// to next at the end.
	type local struct {
		k    queueKey
		next int64
		seen bool
	}
	byID := map[uint64]*local{}
	var order []*local
	for _, r := range fr.recs {
		if r.dispatched {
			id := uint64(uint32(r.topic))<<32 | uint64(uint32(r.queueID))
			q := byID[id]
			if q == nil {
				q = &local{k: queueKey{fr.topics[r.topic], r.queueID}}
				q.next, q.seen = next[q.k]
				byID[id] = q
				order = append(order, q)
			}
			if want := q.next; q.seen && r.queueOff < want {
				res.Add(regress(fr, r, CodeQueueRegress, "queue-offset-regress", fmtInt(want), fmtInt(r.queueOff),
					fmt.Sprintf("queue offset of %s/%d goes backwards (expected at least %d)", q.k.topic, q.k.queueID, want),
					map[string]any{"topic": q.k.topic, "queue_id": q.k.queueID}))
			}
			// As next[k] = max(next[k], n) with an absent key read as 0
			// and only stored when n exceeds it.
			if n := r.queueOff + r.innerNum; q.seen {
				q.next = max(q.next, n)
			} else if n > 0 {
				q.next, q.seen = n, true
			}
		}
		if maxTS-r.storeTS > slack {
			res.Add(regress(fr, r, CodeTimestampRegress, "timestamp-regress", ">= "+fmtInt(maxTS-slack), fmtInt(r.storeTS),
				fmt.Sprintf("store timestamp goes back %d ms from the newest earlier record", maxTS-r.storeTS),
				map[string]any{"topic": fr.topics[r.topic], "queue_id": r.queueID}))
		}
		maxTS = max(maxTS, r.storeTS)
	}
	for _, q := range order {
		if q.seen {
			next[q.k] = q.next
		}
	}
	return maxTS
}

func regress(fr *fileResult, r compact, code, check, exp, act, msg string, det map[string]any) scan.Finding {
	det["phy_offset"] = fr.seg.base + r.pos
	det["queue_offset"] = r.queueOff
	det["store_timestamp"] = r.storeTS
	return scan.Finding{Code: code, Severity: scan.Warning, Path: fr.seg.rel, Offset: r.pos,
		Expected: exp, Actual: act, Repair: scan.RepairNone, Message: msg, Details: det,
		Evidence: map[string]string{check: "fail"}}
}
