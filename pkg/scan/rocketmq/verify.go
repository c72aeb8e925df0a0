package rocketmq

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"

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

// maxFindingsPerUnit bounds the findings one consume queue or one index
// file adds, so a wholly wrong file gives a readable report; the rest are
// counted in one CodeVerifyTooMany finding.
const maxFindingsPerUnit = 200

// Record flags kept by the collector.
const (
	vfLMQ        = 1 << iota // INNER_MULTI_DISPATCH: also dispatched to LMQ queues
	vfInnerBatch             // inner batch record: one unit covers INNER_NUM offsets
	vfMatched                // a consume queue unit of its own queue points at it
)

// vrec is what the cross-file checks need of one valid commitlog record,
// without its body: about 64 bytes per message.
type vrec struct {
	phy      int64
	queueOff int64
	tagsCode int64
	storeTS  int64
	size     int32
	topic    int32 // index into verifier.topics
	queueID  int32
	sysFlag  int32
	hashOff  int32 // first of its index key hashes in verifier.hashes
	nhash    uint16
	flags    uint8
}

func (r *vrec) dispatched() bool {
	t := r.sysFlag & rmq.FlagTransactionMask
	return t == rmq.TxNotType || t == rmq.TxCommit
}

// verifier holds the state shared by the cross-file checks.
type verifier struct {
	cfg         *VerifyConfig
	res         *scan.Result
	store       *Store
	recs        []vrec // valid records below the recovery end, in phy order
	all         []vrec // every valid record of the primary walks (for the start-file rule)
	topics      []string
	topicID     map[string]int32
	hashes      []int32
	minPhy      int64
	recoveryEnd int64
	abort       bool
	// dispatchFrom is the max over all consume queues of offset+size of
	// their last unit: the broker's dispatchFromPhyOffset.
	dispatchFrom int64
	// redispatchFrom is where the next start dispatches from again: a
	// record at or past it that has no unit will get one.
	redispatchFrom int64
	queues         map[queueKey]*queueState
	evidence       map[string]any // store version evidence
	capped         map[string]int // findings per cap key
	lostCount      int            // records the next start will not dispatch
	cp             rmq.Checkpoint
	cpPresent      bool
	missingFiles   map[string]bool // consume queue files already reported missing
	unitsLinked    int             // units compared with the record they point at
	entriesLinked  int             // index entries compared with their record
}

// Verify scans the commitlog (ScanCommitLog) and cross-checks the consume
// queues, index files, checkpoint, abort marker and config/topics.json
// against it. Every finding names the file concerned and the byte offset
// in it. It returns an error only when it could not look at all.
func Verify(ctx context.Context, cfg VerifyConfig, opts scan.Options) (*scan.Result, error) {
	cfg.fill()
	v := &verifier{cfg: &cfg, topicID: map[string]int32{}, queues: map[queueKey]*queueState{},
		evidence: map[string]any{}, capped: map[string]int{}, missingFiles: map[string]bool{}}
	inner := cfg.Config
	inner.OnMessage = nil // called by the collectors, in file order (it makes the scan sequential)
	if cfg.OnMessage != nil {
		inner.OnMessage = func(*rmq.Message, int64) error { return nil }
	}
	var files []*collector // per commitlog file, merged in offset order
	var mu sync.Mutex
	inner.OnFile = func(i int, _ int64) FileHook {
		c := &collector{topicID: map[string]int32{}, userHook: cfg.OnMessage}
		mu.Lock()
		files = append(files, c)
		mu.Unlock()
		return FileHook{Message: c.collect, Done: func() { v.absorb(c) }}
	}
	res, err := ScanCommitLog(ctx, inner, opts)
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
	if res.RecoveryEnd != nil {
		v.recoveryEnd = *res.RecoveryEnd
	}
	v.recs = v.all
	if i := sort.Search(len(v.all), func(i int) bool { return v.all[i].phy >= v.recoveryEnd }); i < len(v.all) {
		v.recs = v.all[:i:i]
	}
	_, err = os.Stat(filepath.Join(cfg.Root, "abort"))
	v.abort = err == nil
	v.loadCheckpoint()
	steps := []func(context.Context) error{v.checkConsumeQueues, v.checkIndexFiles, v.checkCheckpoint, v.checkTopics}
	for _, step := range steps {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		if err := step(ctx); err != nil {
			res.Fail(err)
		}
	}
	v.layout()
	res.SortFindings()
	return res, ctx.Err()
}

// collector keeps the compact form of the valid records of one commitlog
// file; files are collected in parallel and absorbed in offset order.
type collector struct {
	all                   []vrec
	topics                []string
	topicID               map[string]int32
	hashes                []int32
	key                   []byte
	v2, propCRC, trailing int
	userHook              func(m *rmq.Message, phy int64) error
}

// collect keeps the compact form of one valid record (topic and hash
// offsets local to the file until absorb).
func (c *collector) collect(m *rmq.Message, phy int64) error {
	id, ok := c.topicID[string(m.Topic)]
	if !ok {
		id = int32(len(c.topics))
		c.topics = append(c.topics, string(m.Topic))
		c.topicID[string(m.Topic)] = id
	}
	// One walk of the properties for the four keys (LookupProperty each
	// would walk them four times).
	var vals [len(collectKeys)][]byte
	var found [len(collectKeys)]bool
	rmq.LookupProperties(m.Properties, collectKeys[:], vals[:], found[:])
	var tags int64
	switch {
	case string(m.Topic) == rmq.ScheduleTopic:
		tags = m.TagsCode() // delay level arithmetic
	case found[ckTags]:
		tags = int64(rmq.JavaHashCode(vals[ckTags]))
	}
	r := vrec{phy: phy, queueOff: m.QueueOffset, tagsCode: tags, storeTS: m.StoreTimestamp,
		size: m.TotalSize, topic: id, queueID: m.QueueID, sysFlag: m.SysFlag, hashOff: int32(len(c.hashes))}
	if m.InnerBatch() {
		r.flags |= vfInnerBatch
	}
	if found[ckMulti] {
		r.flags |= vfLMQ
	}
	if m.TransactionType() != rmq.TxRollback { // IndexService.buildIndex skips ROLLBACK
		add := func(k []byte) {
			c.key = append(append(append(c.key[:0], m.Topic...), '#'), k...)
			if r.nhash < 1<<16-1 {
				c.hashes = append(c.hashes, rmq.IndexKeyHash(c.key))
				r.nhash++
			}
		}
		if found[ckUniq] {
			add(vals[ckUniq])
		}
		if ks, ok := vals[ckKeys], found[ckKeys]; ok {
			for len(ks) > 0 { // bytes.Split on ' ' without allocating
				k := ks
				if i := bytes.IndexByte(ks, ' '); i >= 0 {
					k, ks = ks[:i], ks[i+1:]
				} else {
					ks = nil
				}
				if len(k) > 0 {
					add(k)
				}
			}
		}
	}
	c.all = append(c.all, r)
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

// collectKeys are the properties collect reads, indexed by ck*.
var collectKeys = [...]string{rmq.PropTags, propInnerMultiDispatch, rmq.PropUniqKey, rmq.PropKeys}

const (
	ckTags = iota
	ckMulti
	ckUniq
	ckKeys
)

// absorb appends a file's records to the verifier, mapping its topic ids
// and hash offsets to the verifier's, and frees them.
func (v *verifier) absorb(c *collector) {
	ids := make([]int32, len(c.topics))
	for i, t := range c.topics {
		id, ok := v.topicID[t]
		if !ok {
			id = int32(len(v.topics))
			v.topics = append(v.topics, t)
			v.topicID[t] = id
		}
		ids[i] = id
	}
	off := int32(len(v.hashes))
	v.hashes = append(v.hashes, c.hashes...)
	v.all = slices.Grow(v.all, len(c.all))
	for _, r := range c.all {
		r.topic = ids[r.topic]
		r.hashOff += off
		v.all = append(v.all, r)
	}
	c.all, c.hashes, c.topics, c.topicID = nil, nil, nil, nil
}

// propInnerMultiDispatch is MessageConst.PROPERTY_INNER_MULTI_DISPATCH:
// the LMQ queues a record is also dispatched to.
const propInnerMultiDispatch = "INNER_MULTI_DISPATCH"

// lmqPrefix is MixAll.LMQ_PREFIX: light message queue topics.
const lmqPrefix = "%LMQ%"

// recAt returns the index of the record starting at phy below the
// recovery end, or -1.
func (v *verifier) recAt(phy int64) int {
	i := sort.Search(len(v.recs), func(i int) bool { return v.recs[i].phy >= phy })
	if i < len(v.recs) && v.recs[i].phy == phy {
		return i
	}
	return -1
}

// recCovering returns the index of the record whose bytes include phy
// (not at its start), or -1.
func (v *verifier) recCovering(phy int64) int {
	i := sort.Search(len(v.recs), func(i int) bool { return v.recs[i].phy > phy }) - 1
	if i >= 0 && phy > v.recs[i].phy && phy < v.recs[i].phy+int64(v.recs[i].size) {
		return i
	}
	return -1
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
