package rabbitmq

// Lean verify: the lean scan (lean.go: records released per file, queue
// indexes read without entries) plus a prediction made one queue dir at a
// time. Each queue dir is read again with its entries, decided against
// the scanner's pointer-free id map (found / missing) and a compact set of
// hazard victims, turned into its scan.Queue and findings, and dropped
// before the next one, so memory does not grow with the store. A store
// with a clean-shutdown index (msg_store_index.ets) takes the detailed
// path: its checks need every record, as in the lean scan.

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"

	rfmt "github.com/storectl/storectl/pkg/format/rabbitmq"
	"github.com/storectl/storectl/pkg/scan"
)

// verifyLean selects lean verify in Verify; tests turn it off to compare
// with the detailed VerifyVHost.
var verifyLean = true

// vhostResult is what Verify takes from one vhost.
type vhostResult struct {
	files    []*FileScan
	findings []scan.Finding
	queues   []scan.Queue
	layout   map[string]any
}

// verifyVHostResult runs the lean verify of one vhost, or VerifyVHost
// when the store has a clean-shutdown index (or lean mode is off).
func verifyVHostResult(ctx context.Context, root, vhostDir string, o VHostOptions) (*vhostResult, error) {
	idx := filepath.Join(vhostDir, "msg_store_persistent", "msg_store_index.ets")
	if _, err := os.Lstat(idx); verifyLean && errors.Is(err, os.ErrNotExist) {
		return verifyVHostLean(ctx, root, vhostDir, o)
	}
	vv, err := VerifyVHost(ctx, root, vhostDir, o)
	if err != nil {
		return nil, err
	}
	r := &vhostResult{files: vv.Scan.Files, findings: vv.Findings, layout: vv.Layout}
	for _, q := range vv.Queues {
		r.queues = append(r.queues, q.Queue)
	}
	return r, nil
}

// verifyVHostLean is VerifyVHost's result for a store without a
// clean-shutdown index, computed with the lean scan, one queue at a time.
func verifyVHostLean(ctx context.Context, root, vhostDir string, o VHostOptions) (*vhostResult, error) {
	ver, err := parseVersion(o.BrokerVersion)
	if err != nil {
		return nil, err
	}
	o.lean = true
	v, s, err := scanVHostKeep(ctx, root, vhostDir, o)
	if err != nil {
		return nil, err
	}
	vv := &VHostVerify{Scan: v, ClientRefs: -1}
	rebuilt := map[string]bool{CodeMessageMissing: true, CodeIndexMismatch: true}
	for _, c := range anomalyCodes {
		rebuilt[c] = true
	}
	bad := map[fileOffPath]bool{} // bad-body records, from their findings
	for _, f := range v.Findings {
		if f.Code == CodeBadBody {
			bad[fileOffPath{f.Path, f.Offset}] = true
		}
		if !rebuilt[f.Code] {
			vv.Findings = append(vv.Findings, f)
		}
	}
	cs := readCleanState(root, filepath.Join(vhostDir, "msg_store_persistent"))
	vv.State, vv.StateFrom, vv.ClientRefs = cs.state, cs.from, cs.clientRefs
	vv.Findings = append(vv.Findings, cs.findings...)
	clean := vv.State == StateClean
	res := &vhostResult{files: v.Files}
	if v.Queues != nil {
		lp := &leanPredict{s: s, bad: bad, vic: compactVictims(v, ver)}
		anoms, orphans, missing, err := lp.queues(ctx, root, v, vv, clean)
		if err != nil {
			return nil, err
		}
		vv.Findings = append(append(append(vv.Findings, anoms...), orphans...), missing...)
	}
	for _, q := range vv.Queues {
		res.queues = append(res.queues, q.Queue)
	}
	res.findings = dedupe(vv.Findings)
	res.layout = verifyLayout(v, vv, vhostDir)
	return res, nil
}

// bigQueue is the entry count from which a queue's entries are collected
// before the next queue is read: below it a collection costs more than
// the memory it returns (brokers can have thousands of small queues).
const bigQueue = 1 << 16

// findingEntries returns whether a fate of qd is needed for the
// findings: .qs entries in a file with an anomaly (anomalyFindings places
// .qs damage at them) and shared-store entries whose record is missing or
// has a bad body (missingFindings).
func findingEntries(qd *rfmt.QueueDir) func(EntryFate) bool {
	damaged := map[string]bool{}
	for _, a := range qd.Anomalies {
		damaged[a.Path] = true
	}
	return func(ef EntryFate) bool {
		switch ef.Entry.Location {
		case rfmt.LocationQueueStore:
			return damaged[ef.Entry.StorePath]
		case rfmt.LocationSharedStore:
			return ef.Entry.Persistent && (ef.Record == nil || ef.Record.BadBody)
		}
		return false
	}
}

type fileOffPath struct {
	path string
	off  int64
}

// leanPredict decides entries from the lean scanner's id map.
type leanPredict struct {
	s   *scanner
	bad map[fileOffPath]bool
	vic *victimIDs
}

// foundRecord stands for every found record that is not a bad body: the
// prediction and the findings only ask whether a record was found.
var foundRecord = &Record{Status: StatusReferenced}

// lookup returns the referenced record holding id (its first copy in the
// persistent store), or nil.
func (lp *leanPredict) lookup(id [16]byte) *Record {
	e := lp.s.seen.get(id)
	if e.set == 0 || e.path == 0 {
		return nil
	}
	p := lp.s.paths[e.path-1]
	if lp.bad[fileOffPath{p, int64(e.off)}] {
		return &Record{Path: p, Offset: int64(e.off), MsgID: id, Status: StatusReferenced, BadBody: true}
	}
	return foundRecord
}

// queueNames returns the sorted names of the queues referencing id, as
// queueRefs does; nil when none does.
func (lp *leanPredict) queueNames(id string) []string {
	b, ok := decodeID(id)
	if !ok || lp.s.lrefs == nil {
		return nil
	}
	if e := lp.s.seen.get(b); e.set > 0 {
		return lp.s.lrefs.sets[e.set-1]
	}
	return nil
}

// queues reads and predicts one queue dir at a time, appending a
// QueueFate without entries to vv.Queues per dir, and returns the
// anomaly, orphan and message-missing findings in VerifyVHost's order.
func (lp *leanPredict) queues(ctx context.Context, root string, v *VHostScan, vv *VHostVerify, clean bool) (anoms, orphans, missing []scan.Finding, err error) {
	vq := v.Queues
	anoms = anomalyFindings(root, &rfmt.VHostQueues{Anomalies: vq.Anomalies}, nil)
	vs := victimSet{atRisk: lp.vic.atRisk, lost: lp.vic.lostBy}
	for _, lq := range vq.Queues {
		if err := ctx.Err(); err != nil {
			return nil, nil, nil, err
		}
		qd, err := rfmt.ReadQueueDir(lq.Dir, vq.SegmentEntryCount)
		if err != nil {
			return nil, nil, nil, err
		}
		qf := predictQueue(qd, v.VHost, clean, lp.lookup, vs, findingEntries(qd))
		n := len(qd.Entries)
		qd.Entries = nil
		one := []*QueueFate{qf}
		anoms = append(anoms, anomalyFindings(root, &rfmt.VHostQueues{Queues: []*rfmt.QueueDir{qd}}, one)...)
		orphans = append(orphans, orphanFindings(root, one)...)
		refs := map[string][]string{}
		for _, ef := range qf.Entries {
			if (ef.Record == nil || ef.Record.BadBody) && ef.Entry.Location == rfmt.LocationSharedStore {
				if _, ok := refs[ef.Entry.MsgID]; !ok {
					refs[ef.Entry.MsgID] = lp.queueNames(ef.Entry.MsgID)
				}
			}
		}
		missing = append(missing, missingFindings(root, one, refs, clean)...)
		qf.Entries = nil
		vv.Queues = append(vv.Queues, qf)
		if n >= bigQueue {
			// Return this queue's entries before the next queue is read:
			// the heap target set while they were live would let the next
			// queue's garbage pile on top of them.
			runtime.GC()
		}
	}
	return anoms, orphans, missing, nil
}
