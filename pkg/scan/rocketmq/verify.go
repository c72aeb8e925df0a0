package rocketmq

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/storectl/storectl/internal/storefile"
	rmq "github.com/storectl/storectl/pkg/format/rocketmq"
	"github.com/storectl/storectl/pkg/scan"
)

// VerifyConfig says what Verify checks: the commitlog scan config plus the
// geometry of the derived files, which is not stored in them.
type VerifyConfig struct {
	Config             // the commitlog scan config (Root, CommitLogDir, MappedFileSize, ...)
	CQFileSize   int64 // mappedFileSizeConsumeQueue; 0 = infer from the files (else 300000*20)
	IndexSlots   int   // maxHashSlotNum; 0 = infer from the file size (rmq.IndexLayoutFromSize)
	IndexEntries int   // maxIndexNum; 0 = follows from the size and IndexSlots
}

// Tests: indexSequential runs the index files' structure checks after
// the commitlog walk instead of beside it; indexStructuresHook, when set,
// runs before they start (with their context, cancelled when Verify
// returns early).
var (
	indexSequential     bool
	indexStructuresHook func(ctx context.Context)
)

// maxFindingsPerUnit bounds the findings one consume queue or one index
// file adds, so a wholly wrong file gives a readable report; the rest are
// counted in one CodeVerifyTooMany finding.
const maxFindingsPerUnit = 200

// Record flags kept by the collector.
const (
	vfLMQ        = 1 << iota // INNER_MULTI_DISPATCH: also dispatched to LMQ queues
	vfInnerBatch             // inner batch record: one unit covers INNER_NUM offsets
)

// vrec is what the cross-file checks need of one valid commitlog record,
// without its body: 64 bytes per message, kept in a recTable's temp file
// (verify_spill.go), not on the heap.
type vrec struct {
	phy      int64
	queueOff int64
	tagsCode int64
	storeTS  int64
	size     int32
	topic    int32 // index into verifier.topics
	queueID  int32
	sysFlag  int32
	hashOff  int64 // first of its index key hashes in the recTable's hash file
	nhash    uint16
	flags    uint8
}

func (r *vrec) dispatched() bool {
	t := r.sysFlag & rmq.FlagTransactionMask
	return t == rmq.TxNotType || t == rmq.TxCommit
}

// scanStart is the recovery start the commitlog scan picked.
type scanStart struct {
	base   int64    // the start file's base
	normal bool     // recoverNormally, else recoverAbnormally
	maybe  []string // abnormal: later files whose first bytes could not be read, from the last back
}

// verifier holds the state shared by the cross-file checks.
type verifier struct {
	cfg         *VerifyConfig
	res         *scan.Result
	store       *Store
	tab         *recTable      // every valid record of the primary walks, in phy order (spilled to a temp file)
	nrecs       int            // tab's records below the recovery end (the ones the checks use)
	matched     []uint64       // per record below the recovery end: a unit of its own queue points at it (or, when the claims counted, it gets none: undispatched)
	hint        int            // index of the record recAt found last
	cur         recCursor      // the index entries' lookups, in phy order
	sum         recSummary     // per-record facts the checkpoint checks need (one pass, in checkMissing)
	fileFirst   map[int64]vrec // first valid record of each commitlog file, by phy (for the start-file rules)
	topics      []string
	topicID     map[string]int32
	minPhy      int64
	recoveryEnd int64
	// unread is the commitlog file that could not be read in full
	// ("" when all were): recoveryEnd is then only a lower bound, and what
	// points at or past it is unknown, not beyond the end.
	unread string
	// startUnread: a commitlog file that could not be read and that the
	// abnormal recovery may start from (startWaitsOn): the start is
	// abnormalStart's or this file; unread then names it too.
	startUnread string
	// unreadWhy, with unread: the assumption the scan could not make
	// (recovery_end_unknown's "missing"), when the end is unknown not
	// because a file could not be read but because which recovery runs is
	// not known; unread then names what would tell (the store version).
	unreadWhy string
	// scanStart is the recovery start file the scan picked (nil when its
	// rule did not decide): verify takes it as its own.
	scanStart *scanStart
	abort     bool
	// dispatchFrom is the max over all consume queues of offset+size of
	// their last unit: the broker's dispatchFromPhyOffset.
	dispatchFrom int64
	// redispatchFrom is where the next start dispatches from again: a
	// record at or past it that has no unit will get one.
	redispatchFrom int64
	// dispatchWaits are the consume queue files the unit walk could not
	// read: their units may reach past dispatchFrom, which is then only a
	// lower bound, and a record at or past it may or may not be
	// dispatched again (sureFrom).
	dispatchWaits []string
	// unreadSpans are the commitlog ranges the scan could not read
	// (verify_unreadspan.go).
	unreadSpans  []unreadSpan
	queues       map[queueKey]*queueState
	evidence     map[string]any // store version evidence
	capped       map[string]int // findings per cap key
	lostCount    int            // records the next start will not dispatch
	cp           rmq.Checkpoint
	cpPresent    bool
	cpUnread     bool            // the checkpoint is there but could not be read
	missingFiles map[string]bool // consume queue files already reported missing
	unitsLinked  int             // units compared with the record they point at
	// claims are the consume queues the collectors claim units of
	// (verify_cqclaim.go; nil: none), claimedRecs the records whose own
	// unit was claimed or that get no unit (undispatched: the checks of
	// the matched flags look at dispatched records only), by table index,
	// claimsCut that some claimed queue's walk stopped before its end.
	claims        *cqClaims
	claimedRecs   []uint64
	claimsCut     bool
	entriesLinked int // index entries compared with their record
}

// Verify scans the commitlog (ScanCommitLog) and cross-checks the consume
// queues, index files, checkpoint, abort marker and config/topics.json
// against it. Every finding names the file concerned and the byte offset
// in it. It returns an error only when it could not look at all.
func Verify(ctx context.Context, cfg VerifyConfig, opts scan.Options) (*scan.Result, error) {
	cfg.fill()
	v := &verifier{cfg: &cfg, topicID: map[string]int32{}, queues: map[queueKey]*queueState{},
		evidence: map[string]any{}, capped: map[string]int{}, missingFiles: map[string]bool{}, fileFirst: map[int64]vrec{}}
	var err error
	if v.tab, err = newRecTable(); err != nil {
		return nil, err
	}
	defer v.tab.Close()
	inner := cfg.Config
	inner.OnMessage = nil     // called by the collectors, in file order (it makes the scan sequential)
	inner.hooksInPlace = true // the collectors copy what they keep of a record
	if cfg.OnMessage != nil {
		inner.OnMessage = func(*rmq.Message, int64) error { return nil }
	}
	var files []*collector // per commitlog file, merged in offset order
	var mu sync.Mutex
	hashes := hasIndexFiles(cfg.Root)
	v.claims = newCQClaims(&cfg)
	inner.OnFile = func(i int, _ int64) FileHook {
		c := &collector{intern: topicIDs{ids: map[string]int32{}}, userHook: cfg.OnMessage, wantHashes: hashes,
			w: blockWriter{t: v.tab}}
		if v.claims != nil {
			c.claim = &claimer{cl: v.claims}
		}
		mu.Lock()
		files = append(files, c)
		mu.Unlock()
		return FileHook{Message: c.collect, Done: func() { v.absorb(c) }}
	}
	// The index files' own structure (header counts, slot chains and
	// heads) needs no record: it is checked beside the commitlog walk, on
	// a verifier of its own, and the entries against their records after
	// it (checkIndexFiles).
	ia := &verifier{cfg: &cfg, res: &scan.Result{Layout: map[string]any{}}, capped: map[string]int{}}
	ictx, icancel := context.WithCancel(ctx)
	var ic *indexCheck
	icDone := make(chan struct{})
	structures := func() {
		defer close(icDone)
		if indexStructuresHook != nil {
			indexStructuresHook(ictx)
		}
		ic = ia.indexStructures(ictx)
	}
	if !indexSequential {
		go structures()
	}
	defer func() { icancel(); <-icDone }() // an early return stops it
	inner.onStart = func(lay *layout, st recStart) {
		if st.decided {
			v.scanStart = &scanStart{base: lay.segs[st.i].base, normal: st.normal, maybe: st.maybe}
		}
	}
	res, err := ScanCommitLog(ctx, inner, opts)
	v.claims.close()
	if indexSequential {
		structures()
	}
	if err != nil {
		return res, err
	}
	v2, propCRC, trailing := 0, 0, 0
	for _, c := range files {
		v2, propCRC, trailing = v2+c.v2, propCRC+c.propCRC, trailing+c.trailing
	}
	v.res = res
	v.evidence["v2_records"], v.evidence["prop_crc_records"] = v2, propCRC
	v.evidence["properties_trailing_separator"] = trailing
	if v.store, err = OpenStore(cfg.Config); err != nil {
		return res, err
	}
	defer v.store.Close()
	if len(v.store.lay.segs) > 0 {
		v.minPhy = v.store.lay.segs[0].base
	}
	v.findUnreadSpans()
	if res.RecoveryEnd != nil {
		v.recoveryEnd = *res.RecoveryEnd
	} else if u, ok := res.EndUnknown(); ok {
		// A commitlog file could not be read: recovery reaches at least
		// here; units and entries past it wait on that file.
		v.recoveryEnd, v.unread, v.unreadWhy = u.AtLeast, u.WaitsOn, u.Missing
	}
	if err := v.tab.finish(); err != nil {
		return res, err
	}
	v.nrecs = v.tab.firstAtOrAfter(v.recoveryEnd)
	v.matched = make([]uint64, (v.nrecs+63)/64)
	_, err = os.Stat(filepath.Join(cfg.Root, "abort"))
	v.abort = err == nil
	v.loadCheckpoint()
	if f := v.startWaitsOn(); f != "" && v.unread == f {
		v.startUnread = f // the scan already made the end a lower bound for it
	} else if f != "" && v.unread == "" {
		// The recovery end found walking from the first file holds only
		// if recovery does not start at f: a lower bound.
		v.unread, v.startUnread = f, f
		res.RecoveryEnd = nil
		if res.Extra == nil {
			res.Extra = map[string]any{}
		}
		res.SetEndUnknown(scan.EndUnknown{AtLeast: v.recoveryEnd, WaitsOn: f})
		res.Assume(fmt.Sprintf("recovery end unknown: the abnormal recovery may start at %s, which could not be read (its first record decides), so it reaches at least %d and nothing after it is called lost", f, v.recoveryEnd))
	}
	// The index files are checked beside the consume queues (each has its
	// own lookups and findings; they share only what the scan made), and
	// their findings and errors follow the consume queues', as when the
	// two ran one after the other.
	iv, err := v.forIndex(ia)
	if err != nil {
		return res, err
	}
	defer iv.store.Close()
	idxDone := make(chan error, 1)
	go func() {
		<-icDone
		idxDone <- iv.checkIndexFiles(ctx, ic)
	}()
	cqErr := v.checkConsumeQueues(ctx)
	idxErr := <-idxDone
	if err := ctx.Err(); err != nil {
		return res, err
	}
	if cqErr != nil {
		res.Fail(cqErr)
	}
	v.absorbIndex(iv)
	if idxErr != nil {
		res.Fail(idxErr)
	}
	for _, step := range []func(context.Context) error{v.checkCheckpoint, v.checkTopics} {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		if err := step(ctx); err != nil {
			res.Fail(err)
		}
	}
	for _, t := range []*recTable{v.tab, iv.tab} {
		if t.err != nil {
			res.Fail(t.err)
		}
	}
	v.layout()
	res.SortFindings()
	return res, ctx.Err()
}

// collector keeps the compact form of the valid records of one commitlog
// file, in blocks written to the record table as they fill (files are
// collected in parallel and their blocks adopted in offset order), so a
// file's records are never all in memory.
type collector struct {
	w                     blockWriter
	first                 vrec // the file's first record (local topic id and hash offset)
	n                     int
	intern                topicIDs // the file's topics by local id (names: id -> topic)
	keyPrefix             []int32  // per local topic id: rmq.IndexKeyPrefix of the topic
	wantHashes            bool     // compute index key hashes (there are index files to check)
	v2, propCRC, trailing int
	userHook              func(m *rmq.Message, phy int64) error
	claim                 *claimer // nil: no consume queue units to claim
}

// collect keeps the compact form of one valid record (topic and hash
// offsets local to the file and its block until absorb and the table's
// decoding map them).
func (c *collector) collect(m *rmq.Message, phy int64) error {
	id, added := c.intern.id(m.Topic)
	if added {
		c.keyPrefix = append(c.keyPrefix, rmq.IndexKeyPrefix(m.Topic))
		if c.claim != nil {
			c.claim.addTopic(m.Topic)
		}
	}
	// One walk of the properties for the four keys (LookupProperty each
	// would walk them four times), each segment compared with the one key
	// its first byte can be.
	var vals [len(rmq.DispatchProps)][]byte
	var found [len(rmq.DispatchProps)]bool
	rmq.LookupDispatchProps(m.Properties, vals[:], found[:])
	tags := rmq.DispatchTagsCode(m, vals[:], found[:])
	r := vrec{phy: phy, queueOff: m.QueueOffset, tagsCode: tags, storeTS: m.StoreTimestamp,
		size: m.TotalSize, topic: id, queueID: m.QueueID, sysFlag: m.SysFlag, hashOff: int64(len(c.w.hashes))}
	if m.InnerBatch() {
		r.flags |= vfInnerBatch
	}
	if found[rmq.DispatchMulti] {
		r.flags |= vfLMQ
	}
	if c.wantHashes {
		prefix := c.keyPrefix[id]
		rmq.ForEachIndexKey(m, vals[:], found[:], func(k []byte) {
			if r.nhash < 1<<16-1 {
				c.w.hashes = append(c.w.hashes, rmq.IndexKeyHashAfter(prefix, k))
				r.nhash++
			}
		})
	}
	if c.claim != nil {
		c.claim.claim(&r, m.Topic, c.n)
	}
	if c.n == 0 {
		c.first = r
	}
	c.n++
	c.w.add(r)
	if m.Magic == rmq.MagicMessageV2 {
		c.v2++
	}
	if m.PropCRC().Present {
		c.propCRC++
	}
	if n := len(m.Properties); n > 0 && m.Properties[n-1] == rmq.PropertySeparator {
		c.trailing++
	}
	if c.userHook != nil {
		return c.userHook(m, phy)
	}
	return nil
}

// absorb hands a file's records to the verifier's table, after every
// earlier file's, mapping its topic ids to the verifier's.
func (v *verifier) absorb(c *collector) {
	ids := make([]int32, len(c.intern.names))
	for i, t := range c.intern.names {
		id, ok := v.topicID[t]
		if !ok {
			id = int32(len(v.topics))
			v.topics = append(v.topics, t)
			v.topicID[t] = id
		}
		ids[i] = id
	}
	first := v.tab.adopt(&c.w, ids)
	v.absorbClaims(c.claim, first)
	c.claim = nil
	if first >= 0 {
		r := c.first
		r.topic = ids[r.topic]
		r.hashOff = -1 // not needed of a file's first record
		v.fileFirst[r.phy] = r
	}
	c.w = blockWriter{}
	c.intern, c.keyPrefix = topicIDs{}, nil
}

// hasIndexFiles reports whether root/index may hold index files: only
// then are the records' index key hashes (the costliest part of collect)
// computed. A dir that cannot be listed counts as holding some.
func hasIndexFiles(root string) bool {
	ents, err := storefile.ReadDir(filepath.Join(root, "index"))
	if os.IsNotExist(err) {
		return false
	}
	if err != nil {
		return true
	}
	for _, e := range ents {
		if e.Type().IsRegular() {
			return true
		}
	}
	return false
}

// recAt returns the index of the record starting at phy below the
// recovery end, or -1.
func (v *verifier) recAt(phy int64) int {
	i, _ := v.recAtRec(phy)
	return i
}

// recAtRec is recAt with the record (the zero vrec with -1).
func (v *verifier) recAtRec(phy int64) (int, vrec) {
	// The merged consume queue walk and the index walk look records up in
	// increasing phy order: most often the record after the last one, or
	// the last one again (an index entry per key of one record).
	if i := v.hint + 1; i < v.nrecs {
		if r := v.tab.at(i); r.phy == phy {
			v.hint = i
			return i, r
		}
	}
	if i := v.hint; i >= 0 && i < v.nrecs {
		if r := v.tab.at(i); r.phy == phy {
			return i, r
		}
	}
	if i := v.tab.lastAtOrBefore(phy, v.nrecs); i >= 0 {
		if r := v.tab.at(i); r.phy == phy {
			v.hint = i
			return i, r
		}
	}
	return -1, vrec{}
}

// rec returns record i (0 <= i < v.nrecs).
func (v *verifier) rec(i int) vrec { return v.tab.at(i) }

// recCovering returns the index of the record whose bytes include phy
// (not at its start), or -1.
func (v *verifier) recCovering(phy int64) int {
	i := v.tab.lastAtOrBefore(phy, v.nrecs)
	if i < 0 {
		return -1
	}
	if r := v.tab.at(i); phy > r.phy && phy < r.phy+int64(r.size) {
		return i
	}
	return -1
}

// setMatched marks record i as pointed at by a unit of its own queue.
func (v *verifier) setMatched(i int) { v.matched[i/64] |= 1 << (i % 64) }

// isMatched reports whether setMatched(i) was called.
func (v *verifier) isMatched(i int) bool { return v.matched[i/64]&(1<<(i%64)) != 0 }

// eachRec calls fn for every record below the recovery end, in phy order.
func (v *verifier) eachRec(fn func(i int, r *vrec)) {
	for i := 0; i < v.nrecs; i++ {
		r := v.tab.at(i)
		fn(i, &r)
	}
}

// segFirst returns the valid record starting at a commitlog file's base.
func (v *verifier) segFirst(base int64) (vrec, bool) {
	r, ok := v.fileFirst[base]
	return r, ok
}

// add appends f unless the cap for key is reached; the first finding
// over the cap becomes a CodeVerifyTooMany note.
func (v *verifier) add(key string, f scan.Finding) {
	v.capped[key]++
	switch n := v.capped[key]; {
	case n <= maxFindingsPerUnit:
		v.res.Add(f)
	case n == maxFindingsPerUnit+1:
		v.res.Add(scan.Finding{Code: CodeVerifyTooMany, Severity: f.Severity, Path: f.Path, Offset: f.Offset,
			Repair: f.Repair, Message: fmt.Sprintf("more than %d findings for %s; the rest are not listed", maxFindingsPerUnit, key)})
	}
}

func (v *verifier) rel(p string) string { return v.cfg.rel(p) }

// forIndex is a verifier for the index files' checks after the walk, to
// run beside the consume queues': it shares what the scan made (read only
// from here on) and has its own record lookups (a reader of the record
// table, a Store), counters, and the findings and caps of ia, the
// verifier that ran indexStructures.
func (v *verifier) forIndex(ia *verifier) (*verifier, error) {
	iv := *v
	iv.res, iv.capped = ia.res, ia.capped // what indexStructures found
	iv.tab = v.tab.reader()
	iv.hint, iv.entriesLinked, iv.cur = 0, 0, recCursor{}
	var err error
	if iv.store, err = OpenStore(v.cfg.Config); err != nil {
		return nil, err
	}
	return &iv, nil
}

// absorbIndex adds what the index checks found, after the consume queues'.
func (v *verifier) absorbIndex(iv *verifier) {
	v.res.Add(iv.res.Findings...)
	for _, e := range iv.res.Errors {
		v.res.Fail(errors.New(e))
	}
	for k, x := range iv.res.Layout {
		v.res.Layout[k] = x
	}
	v.entriesLinked = iv.entriesLinked
}
