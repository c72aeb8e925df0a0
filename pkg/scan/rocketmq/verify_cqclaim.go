package rocketmq

import (
	"math/bits"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/storectl/storectl/internal/storefile"
	rmq "github.com/storectl/storectl/pkg/format/rocketmq"
	"github.com/storectl/storectl/pkg/scan"
)

// The consume queue check looks up, for every unit, the record it points
// at in the record table (linkUnit). A dispatched record knows its own
// unit, though: (topic, queue id, queue offset). During the commitlog walk
// each file's collector reads that unit (in windows, from the consume
// queue files listed before the walk) and, when the unit points back at
// the record and linkUnit would find nothing wrong with it, "claims" it:
// the unit goes into its queue's claimed runs and the record into the
// claimed records. The unit walk after the walk still walks every unit
// (order, ends, placeholders, ranges), but a claimed unit that reaches
// linkUnit is counted as linked without a lookup, and its record counts
// as matched. A claimed unit that does not reach linkUnit (after the
// queue's end, past the recovery end, a queue cut short by a read error)
// gives its record's claim back, so the matched records are what the
// lookups would have marked, and the undispatched ones (which get no
// unit, and which no check of the matched flags looks at: the missing
// unit pass then skips them unread). The consume queues are listed once,
// before the walk: the unit walk takes over that listing
// (checkConsumeQueues), so the claims and the unit walk see the same
// files. Anything that does not fit (a queue whose file names the unit
// walk would skip, more queues than the windows allow, a window or file
// that could not be read) is left to the lookups.

// cqClaimsOff makes Verify use the lookups for every unit (tests compare
// the two ways).
var cqClaimsOff = false

// cqClaimsHook (tests) sees the verifier once the unit walk has given
// back the claims it did not link, before they count.
var cqClaimsHook func(v *verifier)

const (
	// claimWinBytes is one queue's read window in a collector: 819 units
	// (a pread per 819 records of the queue) in a store of at most
	// claimWideQueues queues, else claimNarrowBytes (204 units).
	claimWinBytes    = 819 * rmq.CQUnitSize
	claimNarrowBytes = 204 * rmq.CQUnitSize
	claimWideQueues  = 64
	// claimMaxWins bounds a collector's windows (1 MiB); a queue past it
	// is checked by lookups.
	claimMaxWins = 256
	// claimMaxOpen bounds the consume queue files the collectors open.
	claimMaxOpen = 256
	// claimMaxQueueID bounds a topic's per-queue slice in a collector.
	claimMaxQueueID = 4096
)

// cqClaims is what the collectors claim against: the consume queues as
// listed before the walk.
type cqClaims struct {
	fileSize int64
	winBytes int // a queue's window in a collector
	queues   map[queueKey]*claimQueue
	byTopic  map[string][]*claimQueue // by queue id (nil: none)
	mu       sync.Mutex
	open     int
	// listed and listFindings are the listing (listQueues), which the
	// consume queue check takes over instead of listing again.
	listed       map[queueKey]*queueState
	listFindings []scan.Finding
}

// claimQueue is one queue's files and, after the walk, its claimed units.
type claimQueue struct {
	files []*claimFile
	list  []cqFile // as listed, to compare with the unit walk's listing
	runs  []claimRun
	n     int64 // claimed units
	maxHi int64 // end of the last claimed run
}

type claimFile struct {
	base, end int64 // the units at stream bytes [base, base+end)
	path      string
	once      sync.Once
	f         *os.File
}

// claimRun is the claimed units [lo, hi) of a queue (stream indexes).
type claimRun struct{ lo, hi int64 }

// newCQClaims lists the consume queues as checkConsumeQueues will (nil
// when there are none to claim against).
func newCQClaims(cfg *VerifyConfig) *cqClaims {
	if cqClaimsOff {
		return nil
	}
	pv := &verifier{cfg: cfg, res: &scan.Result{Layout: map[string]any{}}, queues: map[queueKey]*queueState{},
		capped: map[string]int{}, missingFiles: map[string]bool{}}
	if pv.rocksDBConsumeQueue() || pv.listQueues() != nil || len(pv.queues) == 0 {
		return nil
	}
	fileSize, _ := pv.pickCQFileSize()
	if fileSize <= 0 || fileSize%rmq.CQUnitSize != 0 {
		return nil
	}
	cl := &cqClaims{fileSize: fileSize, queues: map[queueKey]*claimQueue{}, byTopic: map[string][]*claimQueue{},
		listed: pv.queues, listFindings: pv.res.Findings}
	for k, q := range pv.queues {
		cq := &claimQueue{list: q.files}
		ok := true
		for i, f := range q.files {
			if f.irregular || f.base < 0 || f.base%rmq.CQUnitSize != 0 || f.base%fileSize != 0 || (i > 0 && f.base <= q.files[i-1].base) {
				ok = false // the unit walk skips it: leave the queue to the lookups
				break
			}
			cq.files = append(cq.files, &claimFile{base: f.base, end: min(f.size, fileSize) / rmq.CQUnitSize * rmq.CQUnitSize, path: f.path})
		}
		if !ok || len(cq.files) == 0 || k.queueID >= claimMaxQueueID || strings.HasPrefix(k.topic, rmq.LMQPrefix) {
			continue
		}
		cl.queues[k] = cq
		qs := cl.byTopic[k.topic]
		for int32(len(qs)) <= k.queueID {
			qs = append(qs, nil)
		}
		qs[k.queueID] = cq
		cl.byTopic[k.topic] = qs
	}
	cl.winBytes = claimNarrowBytes
	if len(cl.queues) <= claimWideQueues {
		cl.winBytes = claimWinBytes
	}
	return cl
}

// file returns f opened (nil when it cannot be, or too many are open).
func (cl *cqClaims) file(f *claimFile) *os.File {
	f.once.Do(func() {
		cl.mu.Lock()
		over := cl.open >= claimMaxOpen
		if !over {
			cl.open++
		}
		cl.mu.Unlock()
		if !over {
			f.f, _ = storefile.Open(f.path)
		}
	})
	return f.f
}

// close closes the files the collectors opened.
func (cl *cqClaims) close() {
	if cl == nil {
		return
	}
	for _, q := range cl.queues {
		for _, f := range q.files {
			f.once.Do(func() {})
			if f.f != nil {
				f.f.Close()
				f.f = nil
			}
		}
	}
}

// claimState is one queue's window and claimed runs in one collector.
type claimState struct {
	q        *claimQueue
	win      []byte
	wlo, whi int64      // stream bytes in win
	cur      claimRun   // the run being extended
	done     []claimRun // the runs before it
}

// claimer is a collector's part of the claims.
type claimer struct {
	cl      *cqClaims
	byTopic [][]claimState // per local topic id, per queue id (q nil: none)
	wins    []byte         // the windows not yet handed out
	nwins   int
	recs    []uint64 // claimed records, by index in the file
}

// addTopic extends byTopic for the next local topic id.
func (c *claimer) addTopic(topic []byte) {
	var qs []claimState
	if m := c.cl.byTopic[string(topic)]; m != nil {
		qs = make([]claimState, len(m))
		for id, q := range m {
			qs[id].q = q
		}
	}
	c.byTopic = append(c.byTopic, qs)
}

// claim reads the unit of record r (local topic id, the file's record
// number i) and claims it when linkUnit would pass it.
func (c *claimer) claim(r *vrec, topic []byte, i int) {
	if !r.dispatched() {
		// No unit to find: counted as matched too, so the missing-unit
		// pass need not read it (it only judges dispatched records).
		setBit(&c.recs, i)
		return
	}
	qs := c.byTopic[r.topic]
	if uint32(r.queueID) >= uint32(len(qs)) || r.flags&vfInnerBatch != 0 {
		return
	}
	st := &qs[r.queueID]
	idx := r.queueOff
	if st.q == nil || idx < 0 || idx >= 1<<58 {
		return
	}
	b := idx * rmq.CQUnitSize
	if b < st.wlo || b+rmq.CQUnitSize > st.whi {
		if !c.load(st, b) {
			return
		}
	}
	w := st.win[b-st.wlo:]
	u := rmq.CQUnit{CommitLogOffset: int64(be64(w)), Size: int32(be32(w[8:])), TagsCode: int64(be64(w[12:]))}
	if u.CommitLogOffset != r.phy || int64(u.Size) != int64(r.size) || !u.Valid() || u.IsPlaceholder() || u.Size == rmq.CQPlaceholderSize {
		return
	}
	if !u.IsExtAddress() && string(topic) != rmq.ScheduleTopic && u.TagsCode != r.tagsCode {
		return
	}
	switch {
	case st.cur.hi == idx && st.cur.hi > st.cur.lo:
		st.cur.hi++
	case st.cur.hi > st.cur.lo:
		st.done = append(st.done, st.cur)
		fallthrough
	default:
		st.cur = claimRun{idx, idx + 1}
	}
	setBit(&c.recs, i)
}

// setBit adds i to the bit set *b, growing it.
func setBit(b *[]uint64, i int) {
	if w := i / 64; w >= len(*b) {
		if w >= cap(*b) {
			nb := make([]uint64, w+1, max(cap(*b)+cap(*b)/4, w+1, 256))
			copy(nb, *b)
			*b = nb
		}
		*b = (*b)[:w+1]
	}
	(*b)[i/64] |= 1 << (i % 64)
}

// orBits adds the members of src, each plus first, to *dst.
func orBits(dst *[]uint64, src []uint64, first int) {
	// Word by word: src's word w covers first+64w .. first+64w+63, the
	// low bits of one dst word and the high bits of the next.
	last := -1 // the highest member
	for w := len(src) - 1; w >= 0; w-- {
		if src[w] != 0 {
			last = first + w*64 + 63 - bits.LeadingZeros64(src[w])
			break
		}
	}
	if last < 0 || first < 0 {
		for w, word := range src { // (no members, or none below 0 to shift)
			for ; word != 0; word &= word - 1 {
				setBit(dst, first+w*64+bits.TrailingZeros64(word))
			}
		}
		return
	}
	setBit(dst, last) // grows dst to hold every member
	d := *dst
	sh := uint(first % 64)
	for w, word := range src {
		if word == 0 {
			continue
		}
		at := first/64 + w
		d[at] |= word << sh
		if hi := word >> (64 - sh); sh > 0 && hi != 0 {
			d[at+1] |= hi
		}
	}
}

// load fills st's window from stream byte b (false: not claimable).
func (c *claimer) load(st *claimState, b int64) bool {
	files := st.q.files
	fi := sort.Search(len(files), func(k int) bool { return files[k].base > b }) - 1
	if fi < 0 {
		return false
	}
	f := files[fi]
	pos := b - f.base
	if pos+rmq.CQUnitSize > f.end {
		return false
	}
	if st.win == nil {
		if c.nwins >= claimMaxWins {
			return false
		}
		if len(c.wins) == 0 { // windows for the queues, 16 at a time
			c.wins = make([]byte, min(16, claimMaxWins-c.nwins, len(c.cl.queues))*c.cl.winBytes)
		}
		c.nwins++
		wb := c.cl.winBytes
		st.win, c.wins = c.wins[:wb:wb], c.wins[wb:]
	}
	fh := c.cl.file(f)
	if fh == nil {
		return false
	}
	n := min(int64(len(st.win)), f.end-pos)
	if readFull(fh, st.win[:n], pos) != nil {
		st.wlo, st.whi = 0, 0
		return false
	}
	st.wlo, st.whi = b, b+n
	return true
}

func be64(b []byte) uint64 {
	_ = b[7]
	return uint64(b[0])<<56 | uint64(b[1])<<48 | uint64(b[2])<<40 | uint64(b[3])<<32 |
		uint64(b[4])<<24 | uint64(b[5])<<16 | uint64(b[6])<<8 | uint64(b[7])
}

func be32(b []byte) uint32 {
	_ = b[3]
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}

// absorbClaims hands a file's claims to the verifier (in file order):
// its claimed records from table index first, its runs to their queues.
func (v *verifier) absorbClaims(c *claimer, first int) {
	if c == nil || c.cl == nil {
		return
	}
	for _, qs := range c.byTopic {
		for i := range qs {
			st := &qs[i]
			if st.q == nil {
				continue
			}
			if st.cur.hi > st.cur.lo {
				st.done = append(st.done, st.cur)
			}
			st.q.runs = append(st.q.runs, st.done...)
			for _, r := range st.done {
				st.q.n += r.hi - r.lo
			}
		}
	}
	if first >= 0 {
		orBits(&v.claimedRecs, c.recs, first)
	}
}

// attachClaims gives the listed queues their claimed units, when the
// claims were made against the unit walk's file size and listing (the
// unit walk takes over the claims' listing, so the listing check only
// guards against a caller that lists again); false: the unit walk looks
// every unit up (and no record's claim counts).
func (v *verifier) attachClaims(fileSize int64) bool {
	cl := v.claims
	if cl == nil || cl.fileSize != fileSize {
		return false
	}
	for k, cq := range cl.queues {
		q := v.queues[k]
		if q == nil || !slices.Equal(q.files, cq.list) {
			return false
		}
	}
	for k, cq := range cl.queues {
		slices.SortFunc(cq.runs, func(a, b claimRun) int { return compareInt64(a.lo, b.lo) })
		for _, r := range cq.runs {
			cq.maxHi = max(cq.maxHi, r.hi)
		}
		v.queues[k].claim = cq
	}
	return true
}

func compareInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// claimedAt reports whether unit idx of the queue was claimed; idx only
// increases over a queue's walk.
func (us *unitScan) claimedAt(idx int64) bool {
	cq := us.q.claim
	if cq == nil {
		return false
	}
	for us.run < len(cq.runs) && cq.runs[us.run].hi <= idx {
		us.run++
	}
	return us.run < len(cq.runs) && cq.runs[us.run].lo <= idx
}

// unclaim gives back the claim of the record unit u points at: its unit
// was claimed but did not reach linkUnit.
func (v *verifier) unclaim(u rmq.CQUnit) {
	if u.CommitLogOffset < 0 || u.CommitLogOffset >= v.recoveryEnd {
		return // its record is not below the recovery end: never matched
	}
	if i := v.recAt(u.CommitLogOffset); i >= 0 && i/64 < len(v.claimedRecs) {
		v.claimedRecs[i/64] &^= 1 << (i % 64)
	}
}

// cutClaims gives back the claims of the units the walk did not reach
// in the queues it cut short (ended at an invalid unit, or stopped on a
// read error): one pass over the claimed records, only then.
func (v *verifier) cutClaims() {
	if !v.claimsCut {
		return
	}
	for w := range min(len(v.claimedRecs), len(v.matched)) {
		for word := v.claimedRecs[w]; word != 0; word &= word - 1 {
			i := w*64 + bits.TrailingZeros64(word)
			if i >= v.nrecs {
				break
			}
			r := v.tab.at(i)
			if q := v.queues[queueKey{v.topics[r.topic], r.queueID}]; q != nil && q.claimCut && r.queueOff >= q.claimUpTo {
				v.claimedRecs[w] &^= 1 << (i % 64)
			}
		}
	}
}

// applyClaims marks the claimed records matched (after the unit walk
// gave back what it did not link).
func (v *verifier) applyClaims() {
	for w := range min(len(v.matched), len(v.claimedRecs)) {
		v.matched[w] |= v.claimedRecs[w]
	}
	if n := v.nrecs; n%64 != 0 && len(v.matched) > 0 {
		v.matched[len(v.matched)-1] &= 1<<(n%64) - 1
	}
	v.claimedRecs = nil
}
