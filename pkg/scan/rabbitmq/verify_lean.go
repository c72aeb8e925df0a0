package rabbitmq

// Verify: the scan (lean.go: records released per file, queue
// indexes read without entries) plus a prediction made per queue dir
// (--jobs dirs at once, results in dir order). Each queue dir is read
// again one .qi segment at a time (ReadQueueDirSegments), its
// entries decided against the scanner's pointer-free id map (found /
// missing) and a compact set of hazard victims and dropped, so memory
// does not grow with a queue (when the scan spilled its join, from an
// external join of the entries' ids instead: verify_spill.go). A store
// with a clean-shutdown index
// (msg_store_index.ets) is checked against the scan's off-heap copy
// of the index and its file-by-file places (clean_lean.go).

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"sync"

	"github.com/storectl/storectl/pkg/scan"
)

// vhostResult is what Verify takes from one vhost.
type vhostResult struct {
	files    []*FileScan
	findings []scan.Finding
	queues   queueLines
	layout   map[string]any
	assumed  []string
	unread   []error // queue dirs that could not be read (unreadErrs)
}

// verifyVHost scans one vhost dir and cross-checks it: queue index
// entries against the shared store, the clean-shutdown index and file
// summary against the files, orphan queue dirs; then predicts per queue,
// one queue at a time, what the next start keeps, drops, and what buggy
// scanner versions would lose.
func verifyVHost(ctx context.Context, root, vhostDir string, o VHostOptions) (*vhostResult, error) {
	ver, err := parseVersion(o.BrokerVersion)
	if err != nil {
		return nil, err
	}
	v, s, err := scanVHostKeep(ctx, root, vhostDir, o)
	if err != nil {
		return nil, err
	}
	defer s.free()
	// Bad-body first copies of referenced ids, from their findings (error
	// severity: a duplicate's or an unreferenced record's is a warning).
	bad := map[fileIDPath]int64{}
	for _, f := range v.Findings {
		if f.Code != CodeBadBody || f.Severity != scan.Error {
			continue // most findings: no id to decode
		}
		if id, ok := decodeID(f.MsgID); ok {
			bad[fileIDPath{f.Path, id}] = f.Offset
		}
	}
	cs := readCleanState(root, filepath.Join(vhostDir, "msg_store_persistent"))
	if cs.leanIndex && !s.leanIndexHolds(cs.indexObjects) {
		// The scan and the check frame the dump with the same reader
		// (rfmt.EachETSItem), and a dump that checks holds only objects
		// the scan takes: only a dump rewritten between the two reads
		// holds other counts.
		return nil, fmt.Errorf("%s: msg_store_index.ets changed while it was read (%d objects checked, another count scanned)", cs.indexPath, cs.indexObjects)
	}
	// Nothing reads v.Findings after this: verify's list is made in place
	// (the findings can be most of the heap).
	vv := startVerify(v, cs, true)
	clean := vv.State == StateClean
	res := &vhostResult{files: v.Files, assumed: v.Assumed}
	// Each queue's line goes to res.queues as soon as it is decided (and
	// past queueSpillMin to the temp file): vv.Queues stays empty, the
	// layout takes the index kinds and the count from here.
	kinds, nq := map[string]bool{}, 0
	keep := func(qf *QueueFate) error {
		kinds[qf.Index] = true
		nq++
		return res.queues.add(qf.Queue)
	}
	if v.Queues != nil {
		lp := &leanPredict{s: s, bad: bad}
		if s.sj != nil {
			// The scan spilled its join: the entries' questions are
			// answered by an external join too (verify_spill.go).
			if lp.vs, err = buildVerifySpill(ctx, v, ver, s, bad); err != nil {
				return nil, err
			}
			defer lp.vs.close()
		} else if lp.vic, err = compactVictims(v, ver, s.seen); err != nil {
			return nil, err
		}
		anoms, orphans, missing, err := lp.queues(ctx, root, v, clean, keep)
		if err != nil {
			return nil, err
		}
		vv.Findings = append(append(append(vv.Findings, anoms...), orphans...), missing...)
	}
	if cs.leanIndex {
		vv.Findings = append(vv.Findings, s.cleanIndexFindingsLean(v, cs)...)
	}
	if cs.summary != nil {
		vv.Findings = append(vv.Findings, fileSummaryFindings(v, cs)...)
	}
	if cs.leanIndex || cs.summary != nil {
		vv.Findings = append(vv.Findings, cleanChecksUnknown(root, v, cs)...)
	}
	for _, qf := range unreadQueueFates(root, v) {
		if err := keep(qf); err != nil {
			return nil, err
		}
	}
	res.unread = unreadErrs(root, v)
	res.findings = dedupe(vv.Findings)
	res.layout = verifyLayout(v, vv, vhostDir, kinds, nq)
	return res, nil
}

// findingEntries returns whether a fate of qd is needed for the
// findings: .qs entries in a file with an anomaly (anomalyFindings places
// .qs damage at them) and shared-store entries whose record is missing or
// has a bad body (missingFindings).
func findingEntries(qd *QueueDir) func(EntryFate) bool {
	damaged := map[string]bool{}
	for _, a := range qd.Anomalies {
		damaged[a.Path] = true
	}
	return func(ef EntryFate) bool {
		switch ef.Entry.Location {
		case LocationQueueStore:
			return damaged[ef.Entry.StorePath]
		case LocationSharedStore:
			return ef.Entry.Persistent && (ef.Record == nil || ef.Record.BadBody || ef.Unknown)
		}
		return false
	}
}

type fileIDPath struct {
	path string
	id   [16]byte
}

// leanPredict decides entries from the scanner's id map.
type leanPredict struct {
	s   *scanner
	bad map[fileIDPath]int64 // offset of a bad-body first copy
	vic *victimIDs
	vs  *verifySpill // the answers when the scan spilled its join (vic and the table unused)
}

// foundRecord stands for every found record that is not a bad body: the
// prediction and the findings only ask whether a record was found.
var foundRecord = &Record{Status: StatusReferenced}

// lookup returns the referenced record holding id (its first copy in the
// persistent store), or nil.
func (lp *leanPredict) lookup(id [16]byte) *Record {
	e := lp.s.seen.get(id)
	if e.set == 0 || e.path() == 0 {
		return nil
	}
	p := lp.s.paths[e.path()-1]
	if off, ok := lp.bad[fileIDPath{p, id}]; ok {
		return &Record{Path: p, Offset: off, MsgID: id, Status: StatusReferenced, BadBody: true}
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

// queueResult is one queue dir's share of the lean verify.
type queueResult struct {
	qf                      *QueueFate
	anoms, orphans, missing []scan.Finding
	err                     error
}

// queueWindow is how many queue dirs are decided ahead of the one whose
// result is taken next: the results wait in a ring of this size, not one
// slot per queue.
const queueWindow = 64

// queues reads and predicts the queue dirs, opts.Jobs at a time, each
// dir's entries dropped as soon as it is decided, hands each dir's
// QueueFate (without entries) to keep in queue order, and returns the
// anomaly, orphan and message-missing findings in queue order, whatever
// Jobs is.
func (lp *leanPredict) queues(ctx context.Context, root string, v *VHostScan, clean bool, keep func(*QueueFate) error) (anoms, orphans, missing []scan.Finding, err error) {
	vq := v.Queues
	anoms = anomalyFindings(root, &VHostQueues{Anomalies: vq.Anomalies}, nil)
	window := min(len(vq.Queues), queueWindow)
	out := make([]chan queueResult, window) // queue i's result is in out[i%window]
	for i := range out {
		out[i] = make(chan queueResult, 1)
	}
	// At most window queues are handed out and not yet taken (sem), so
	// queue i's slot is empty when it is handed out: queue i-window was
	// taken already.
	sem := make(chan struct{}, window)
	next := make(chan int)
	ctx, cancel := context.WithCancel(ctx)
	// On an error the workers are cancelled and waited for: they read the
	// scanner's off-heap id table, which the caller frees on return.
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(next)
		for i := range vq.Queues {
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				return
			}
			select {
			case next <- i:
			case <-ctx.Done():
				return
			}
		}
	}()
	for range min(max(lp.s.opts.Jobs, 1), max(len(vq.Queues), 1)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				out[i%window] <- lp.queue(ctx, root, v, i, vq.SegmentEntryCount, clean)
			}
		}()
	}
	for i := range vq.Queues {
		var r queueResult
		select {
		case r = <-out[i%window]:
		case <-ctx.Done(): // the feeder may stop before handing out queue i
			return nil, nil, nil, ctx.Err()
		}
		<-sem
		if r.err != nil {
			return nil, nil, nil, r.err
		}
		anoms = append(anoms, r.anoms...)
		orphans = append(orphans, r.orphans...)
		missing = append(missing, r.missing...)
		if err := keep(r.qf); err != nil {
			return nil, nil, nil, err
		}
	}
	return anoms, orphans, missing, nil
}

// queue reads, predicts and reports one queue dir.
func (lp *leanPredict) queue(ctx context.Context, root string, v *VHostScan, qi int, segEntries int, clean bool) (r queueResult) {
	dir := v.Queues.Queues[qi].Dir
	if r.err = ctx.Err(); r.err != nil {
		return r
	}
	// One .qi segment at a time: memory does not grow with the queue.
	var qf *QueueFate
	n := 0
	lookup, vic, names := lp.lookup, lp.vic, lp.queueNames
	var cur *answerCursor
	if lp.vs != nil {
		// A spilled verify: the answers come in the order the entries
		// are read, for this queue only.
		cur = lp.vs.cursor(qi)
		lookup, vic, names = cur.lookup, &victimIDs{cur: cur}, cur.queueNames
	}
	qd, err := ReadQueueDirSegmentsIDs(dir, segEntries, func(q *QueueDir, es []QueueEntry) error {
		if qf == nil {
			qf = startQueueFate(q, v.VHost, false, 0)
		}
		lookup, keep := unreadLookup(lookup, v.Unread()), findingEntries(q)
		for from := 0; from < len(es); from += warmBatch {
			// The ids warmed a batch at a time, just before their lookups
			// (idTable.warm): the same fates as one add of the whole segment.
			part := es[from:min(from+warmBatch, len(es))]
			if cur == nil {
				lp.s.seen.warm(len(part), func(k int) *[16]byte { return &part[k].ID })
			}
			qf.add(part, clean, lookup, vic, keep)
		}
		n += len(es)
		return ctx.Err()
	})
	if errors.Is(err, ErrSegmentOrder) {
		// Overlapping segments: decide the queue whole, in seq order.
		if qd, err = ReadQueueDir(dir, segEntries); err == nil {
			qf, n = predictQueue(qd, v.VHost, clean, unreadLookup(lookup, v.Unread()), vic, findingEntries(qd)), len(qd.Entries)
			qd.Entries = nil
		}
	}
	if err == nil && cur != nil {
		err = cur.end()
	}
	if err != nil {
		r.err = err
		return r
	}
	if qf == nil {
		qf = startQueueFate(qd, v.VHost, false, 0)
	}
	qf.end()
	qf.waitsOn(v.Unread())
	one := []*QueueFate{qf}
	r.anoms = anomalyFindings(root, &VHostQueues{Queues: []*QueueDir{qd}}, one)
	r.orphans = orphanFindings(root, one)
	refs := map[string][]string{}
	for _, ef := range qf.Entries {
		if (ef.Record == nil || ef.Record.BadBody || ef.Unknown) && ef.Entry.Location == LocationSharedStore {
			if _, ok := refs[ef.Entry.MsgID]; !ok {
				refs[ef.Entry.MsgID] = names(ef.Entry.MsgID)
			}
		}
	}
	r.missing = missingFindings(root, one, refs, clean)
	qf.Entries = nil
	r.qf = qf
	if n >= bigQueue {
		// A big queue's garbage raised the heap target: collect it now
		// rather than let the next queue's pile on top of it.
		runtime.GC()
	}
	return r
}

// bigQueue is the entry count from which a queue's garbage is collected
// before the next queue is read: below it a collection costs more than
// the memory it returns (brokers can have thousands of small queues).
const bigQueue = 1 << 16
