package rabbitmq

// The spilled verify. When the scan spilled its join (joinspill.go: an
// unclean store referencing more ids than joinBudget's worth of table),
// the id table verify's prediction asks per queue entry (found, bad
// body, the hazards' at-risk bits and lost ids, the queue names of a
// missing one) is not there. The prediction asks by id in the order it
// reads the queue entries, so the questions are answered as an external
// join instead, and nothing held grows with the records or the entries:
//
//  1. Pass 1 reads every queue dir as the prediction will (--jobs dirs at
//     once) and sorts its questions, (id, queue, k: the entry's place
//     among the queue's questions), in runs; it keeps per queue their
//     count and a hash of their ids.
//  2. The hazards' victims are sorted by id too, (id, sequence, at-risk
//     bit, lost code), in the order compactVictims marks them.
//  3. One merge of the questions with the join's referenced ids
//     (spilledJoin.ids: id, first copy's file, queue-name set, in id
//     order) and the victims decides each question. Most answers are
//     "found, a good body, at no risk" and are not written; the others
//     (exceptions) go through one more sort, by place, to a temp file.
//  4. The prediction reads each queue's exceptions back in order while
//     it decides its entries (answerCursor, fate's vic.entry), and checks
//     at the queue's end that it asked as many questions of the same ids
//     as pass 1 (a queue dir changed between the reads is an error).

import (
	"bufio"
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sync"
	"unsafe"

	"github.com/storectl/storectl/internal/parallel"
	"github.com/storectl/storectl/internal/runsort"
	"github.com/storectl/storectl/pkg/scan"
)

// verifySpillHook, when set (tests), is called once a spilled verify's
// questions are sorted, with their number of runs.
var verifySpillHook func(askRuns int)

// askKey is one question of pass 1: the entry's id, its queue (index in
// VHostQueues.Queues) and its place among that queue's questions.
type askKey struct {
	id   [16]byte
	q, k uint32
}

var askCodec = runsort.Codec[askKey]{Size: 24,
	Append: func(dst []byte, a askKey) []byte {
		dst = append(dst, a.id[:]...)
		dst = binary.LittleEndian.AppendUint32(dst, a.q)
		return binary.LittleEndian.AppendUint32(dst, a.k)
	},
	Decode: func(b []byte) (a askKey) {
		copy(a.id[:], b)
		a.q = binary.LittleEndian.Uint32(b[16:])
		a.k = binary.LittleEndian.Uint32(b[20:])
		return a
	}}

// victimKey is one victim id of a hazard with an at-risk bit or one the
// configured version loses (lost: 1 + an index into verifySpill.codes),
// (file, seq) its place in compactVictims' order (a later lost code
// wins): the victims the scan hands over as it releases each file
// (scanner.feedVictims) are file's (its index in the listing) hazard
// index<<32 | victim index; sortVictims' own, file 0 and a count.
type victimKey struct {
	id        [16]byte
	file      uint32
	seq       uint64
	bit, lost uint8
}

var victimCodec = runsort.Codec[victimKey]{Size: 30,
	Append: func(dst []byte, v victimKey) []byte {
		dst = append(dst, v.id[:]...)
		dst = binary.LittleEndian.AppendUint32(dst, v.file)
		dst = binary.LittleEndian.AppendUint64(dst, v.seq)
		return append(dst, v.bit, v.lost)
	},
	Decode: func(b []byte) (v victimKey) {
		copy(v.id[:], b)
		v.file = binary.LittleEndian.Uint32(b[16:])
		v.seq = binary.LittleEndian.Uint64(b[20:])
		v.bit, v.lost = b[28], b[29]
		return v
	}}

// victimPlace orders two victims of one id by their place.
func victimPlace(a, b *victimKey) int {
	if c := cmp.Compare(a.file, b.file); c != 0 {
		return c
	}
	return cmp.Compare(a.seq, b.seq)
}

// newVictimSorter is the sorter of the victims by id and place.
func newVictimSorter(cfg joinSpill, cuts []uint64, writers int) *runsort.Sorter[victimKey] {
	return &runsort.Sorter[victimKey]{Codec: victimCodec, Key: func(v *victimKey) uint64 { return idKey(&v.id) },
		RunLen: cfg.runsShared(unsafe.Sizeof(victimKey{}), writers), FanIn: cfg.fan(), Cuts: cuts,
		Compare: func(a, b victimKey) int {
			if c := compareID(&a.id, &b.id); c != 0 {
				return c
			}
			return victimPlace(&a, &b)
		},
		Sort: func(vs []victimKey) { // keys differ: (file, seq) is a victim's place
			sortByID(vs, func(v *victimKey) *[16]byte { return &v.id }, victimPlace)
		}}
}

// victimFeed is the spilled verify's victims sort, filled as the scan
// releases each persistent file (scanner.feedVictims), so no victim list
// goes to the victims' temp file and is read back: released files keep
// only their lists' summaries (scanner.dropVictims).
type victimFeed struct {
	vics  *runsort.Sorter[victimKey]
	mu    sync.Mutex
	codes []string // lost codes: victimKey.lost - 1 indexes it
	index map[string]uint8
	err   error
}

// code is the lost code of a hazard code (1 + its index in codes).
func (f *victimFeed) code(c string) (uint8, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if k, ok := f.index[c]; ok {
		return k, nil
	}
	if len(f.codes) >= 255 {
		return 0, fmt.Errorf("more than 255 hazard codes")
	}
	f.codes = append(f.codes, c)
	f.index[c] = uint8(len(f.codes))
	return uint8(len(f.codes)), nil
}

func (f *victimFeed) fail(err error) {
	f.mu.Lock()
	f.err = cmp.Or(f.err, err)
	f.mu.Unlock()
}

// startVictimFeed makes the scan hand its victims to a sort of their own
// (a spilled verify: s.sj with keepRefs), in the join's key ranges.
func (s *scanner) startVictimFeed() {
	s.vfeed = &victimFeed{vics: newVictimSorter(s.sj.cfg, idCuts(s.sj.cfg.parts), s.opts.Jobs), index: map[string]uint8{}}
	s.dropVictims = true
}

// feedVictims adds the victims of persistent file idx's hazards that
// compactVictims would mark to s.vfeed, in their place order. It runs
// before the file's release, on the file's goroutine.
func (s *scanner) feedVictims(idx int, fs *FileScan) {
	f := s.vfeed
	if f == nil || fs.Transient {
		return
	}
	var batch []victimKey
	flush := func() {
		if err := f.vics.AddN(len(batch), func(i int) victimKey { return batch[i] }); err != nil {
			f.fail(err)
		}
		batch = batch[:0]
	}
	for hi := range fs.Hazards {
		h := &fs.Hazards[hi]
		bit, lose := victimClass(h, s.ver)
		if bit == 0 && !lose {
			continue
		}
		lost := uint8(0)
		if lose {
			c, err := f.code(h.Code)
			if err != nil {
				f.fail(err)
				return
			}
			lost = c
		}
		vi := uint64(0)
		err := h.EachVictim(func(vic Victim) {
			if batch == nil {
				batch = make([]victimKey, 0, askBatch)
			}
			batch = append(batch, victimKey{id: vic.ID, file: uint32(idx), seq: uint64(hi)<<32 | vi, bit: bit, lost: lost})
			vi++
			if len(batch) == askBatch {
				flush()
			}
		})
		if err != nil {
			f.fail(err)
			return
		}
	}
	if len(batch) > 0 {
		flush()
	}
}

// entryAnswer is what a question's id is: 1 + its first copy's file in
// the join's listing (0: none), 1 + its queue-name set (0: not
// referenced), its at-risk bits and 1 + its lost code (0: none).
type entryAnswer struct {
	first, set int32
	risk, lost uint8
}

// verifySpill holds the answers of a spilled verify.
type verifySpill struct {
	s     *scanner
	bad   map[fileIDPath]int64
	dirs  []string // the queue dirs, as pass 1 read them
	codes []string // lost codes: entryAnswer.lost - 1 indexes it
	count []uint32 // per queue: its questions (pass 1)
	hash  []uint64 // and a hash of their ids
	base  []int64  // per queue: the place of its first question in exc
	// exc holds every question's answer at its place (answerSize bytes:
	// packAnswer), queue by queue in pass 1's order.
	exc *os.File
}

func (vs *verifySpill) close() {
	if vs != nil && vs.exc != nil {
		vs.exc.Close()
		vs.exc = nil
	}
}

// mixID adds id to a queue's hash of its questions.
func mixID(h uint64, id *[16]byte) uint64 {
	const prime = 0x100000001b3
	h = (h ^ binary.LittleEndian.Uint64(id[:8])) * prime
	return (h ^ binary.LittleEndian.Uint64(id[8:])) * prime
}

// askQueue calls fn with the ids of one queue dir's questions, in the
// order the prediction asks them (leanPredict.queue: segment by segment;
// a queue whose segments overlap again whole, in seq order). A read
// error ends the questions: the prediction reports it.
func askQueue(ctx context.Context, dir string, segEntries int, fn func(id [16]byte)) {
	each := func(es []QueueEntry) {
		for i := range es {
			if id, ok := askedID(es[i]); ok {
				fn(id) // by value: a pointer made each id a heap object
			}
		}
	}
	_, err := ReadQueueDirSegmentsIDs(dir, segEntries, func(_ *QueueDir, es []QueueEntry) error {
		each(es)
		return ctx.Err()
	})
	if errors.Is(err, ErrSegmentOrder) {
		if qd, err := ReadQueueDir(dir, segEntries); err == nil {
			each(qd.Entries)
		}
	}
}

// askBatch questions of a queue are added to the sorter at a time.
const askBatch = 4096

// buildVerifySpill answers every question of the prediction of v (whose
// scan s spilled its join with keepRefs).
func buildVerifySpill(ctx context.Context, v *VHostScan, ver brokerVersion, s *scanner, bad map[fileIDPath]int64) (vs *verifySpill, err error) {
	j := s.sj
	vq := v.Queues
	vs = &verifySpill{s: s, bad: bad, dirs: make([]string, len(vq.Queues)),
		count: make([]uint32, len(vq.Queues)), hash: make([]uint64, len(vq.Queues))}
	defer func() {
		if err != nil {
			vs.close()
			vs = nil
		}
	}()
	if j.ids == nil {
		return nil, errors.New("spilled join without its referenced ids")
	}
	// The questions and victims are cut into the join's key ranges (its
	// sections of j.ids), and merge answers each range on its own
	// goroutine.
	cuts := idCuts(len(j.idsSecs))
	vics, err := vs.sortVictims(v, ver, j.cfg, cuts)
	if err != nil {
		return nil, err
	}
	defer vics.Close()
	asks := &runsort.Sorter[askKey]{Codec: askCodec, Key: func(a *askKey) uint64 { return idKey(&a.id) }, RunLen: j.cfg.runsShared(unsafe.Sizeof(askKey{}), s.opts.Jobs), FanIn: j.cfg.fan(), Cuts: cuts,
		Compare: func(a, b askKey) int {
			if c := compareID(&a.id, &b.id); c != 0 {
				return c
			}
			if c := cmp.Compare(a.q, b.q); c != 0 {
				return c
			}
			return cmp.Compare(a.k, b.k)
		},
		Sort: func(as []askKey) { // keys differ: (q, k) is a question's place
			sortByID(as, func(a *askKey) *[16]byte { return &a.id }, func(a, b *askKey) int {
				if c := cmp.Compare(a.q, b.q); c != 0 {
					return c
				}
				return cmp.Compare(a.k, b.k)
			})
		}}
	defer asks.Close()
	var mu sync.Mutex
	var addErr error
	parallel.For(len(vq.Queues), s.opts.Jobs, func(qi int) {
		vs.dirs[qi] = vq.Queues[qi].Dir
		batch := make([]askKey, 0, askBatch)
		flush := func() {
			// AddN sorts and writes the runs it fills on this goroutine,
			// without a lock (Add under one made the dirs' readers wait
			// on every run's sort).
			if err := asks.AddN(len(batch), func(i int) askKey { return batch[i] }); err != nil {
				mu.Lock()
				addErr = cmp.Or(addErr, err)
				mu.Unlock()
			}
			batch = batch[:0]
		}
		var k uint32
		var h uint64
		askQueue(ctx, vq.Queues[qi].Dir, vq.SegmentEntryCount, func(id [16]byte) {
			if k == ^uint32(0) {
				return // past 4 billion questions: the prediction's count disagrees (an error)
			}
			batch = append(batch, askKey{id: id, q: uint32(qi), k: k})
			k++
			h = mixID(h, &id)
			if len(batch) == askBatch {
				flush()
			}
		})
		flush()
		vs.count[qi], vs.hash[qi] = k, h
	})
	if err := errors.Join(addErr, ctx.Err()); err != nil {
		return nil, err
	}
	if verifySpillHook != nil {
		verifySpillHook(asks.Runs())
	}
	if err := vs.merge(j, asks, vics); err != nil {
		return nil, err
	}
	return vs, nil
}

// sortVictims sorts the victim ids compactVictims would mark: the
// scan's feed of them when it had one (scanner.feedVictims), else read
// from the hazards.
func (vs *verifySpill) sortVictims(v *VHostScan, ver brokerVersion, cfg joinSpill, cuts []uint64) (*runsort.Sorter[victimKey], error) {
	if f := vs.s.vfeed; f != nil {
		vs.s.vfeed = nil
		if f.err != nil {
			f.vics.Close()
			return nil, f.err
		}
		vs.codes = f.codes
		return f.vics, nil
	}
	vics := newVictimSorter(cfg, cuts, 1)
	codes := map[string]uint8{}
	var seq uint64
	var addErr error
	err := eachVictimHazard(v, ver, func(h *Hazard, bit uint8, lose bool) error {
		lost := uint8(0)
		if lose {
			c, ok := codes[h.Code]
			if !ok {
				if len(vs.codes) >= 255 {
					return fmt.Errorf("more than 255 hazard codes")
				}
				vs.codes = append(vs.codes, h.Code)
				c = uint8(len(vs.codes))
				codes[h.Code] = c
			}
			lost = c
		}
		err := h.EachVictim(func(vic Victim) {
			if err := vics.Add(victimKey{id: vic.ID, seq: seq, bit: bit, lost: lost}); err != nil && addErr == nil {
				addErr = err
			}
			seq++
		})
		return errors.Join(err, addErr)
	})
	if err != nil {
		vics.Close()
		return nil, err
	}
	return vics, nil
}

// refIDReader reads spilledJoin.ids in order.
type refIDReader struct {
	r          io.Reader
	left       int64
	buf        [refIDSize]byte
	id         [16]byte
	first, set int32
	err        error
}

func (r *refIDReader) next() bool {
	if r.left == 0 || r.err != nil {
		return false
	}
	if _, r.err = io.ReadFull(r.r, r.buf[:]); r.err != nil {
		return false
	}
	r.left--
	copy(r.id[:], r.buf[:16])
	r.first = int32(binary.LittleEndian.Uint32(r.buf[16:]))
	r.set = int32(binary.LittleEndian.Uint32(r.buf[20:]))
	return true
}

// merge decides every question and writes the answers in place order.
// The questions, victims and referenced ids of each key range (the
// join's parts: j.idsSecs) are merged on a goroutine of their own. A
// question's place (queue, k) is dense (base[q] + k, pass 1 counted
// them), so the answers go back to place order as the join's decisions
// go back to file order (fateStore: buckets of place ranges, put in place
// in memory), not through a sort by place: nearly every answer of a store
// whose files a generation-1 stop puts at risk is an exception, and their
// sort (radix runs, a merge) was a twentieth of such a verify's CPU.
func (vs *verifySpill) merge(j *spilledJoin, asks *runsort.Sorter[askKey], vics *runsort.Sorter[victimKey]) error {
	aits, err := asks.IterParts()
	if err != nil {
		return err
	}
	vits, err := vics.IterParts()
	if err != nil {
		return err
	}
	np := len(aits)
	if len(vits) != np || len(j.idsSecs) != np {
		return fmt.Errorf("spilled verify: %d parts of questions, %d of victims, %d of referenced ids", np, len(vits), len(j.idsSecs))
	}
	vs.base = make([]int64, len(vs.count))
	var total int64
	for q, n := range vs.count {
		vs.base[q] = total
		total += int64(n)
	}
	f, err := scan.UnlinkedTemp("storectl-answers-*")
	if err != nil {
		return err
	}
	vs.exc = f
	// The fate store's "files" are the queues, its output the answers.
	fw := newFateStore(&spilledJoin{cfg: j.cfg, base: vs.base, fates: f}, total, np)
	defer fw.close() // an error before done
	errs := make([]error, np)
	parallel.For(np, np, func(p int) {
		sec := j.idsSecs[p]
		refs := &refIDReader{r: bufio.NewReaderSize(io.NewSectionReader(j.ids, sec[0], sec[1]), 1<<16), left: sec[1] / refIDSize}
		errs[p] = vs.mergePart(j, aits[p], vits[p], refs, fw.parts[p])
	})
	if err := errors.Join(errs...); err != nil {
		return err
	}
	asks.Close()
	vics.Close()
	return fw.done()
}

// answerSize is an answer in exc: a fate (fateSize) packed by packAnswer.
const answerSize = fateSize

// packAnswer puts an answer in a fate: set and first as they are, the
// risk bits, lost code and whether it is an exception (not "found, a
// good body, at no risk") in off.
func packAnswer(a entryAnswer, exc bool) recFate {
	f := recFate{set: a.set, first: a.first, off: uint32(a.risk) | uint32(a.lost)<<8}
	if exc {
		f.off |= 1 << 16
	}
	return f
}

// unpackAnswer is packAnswer's inverse.
func unpackAnswer(f recFate) (a entryAnswer, exc bool) {
	return entryAnswer{set: f.set, first: f.first, risk: uint8(f.off), lost: uint8(f.off >> 8)}, f.off>>16&1 != 0
}

// mergePart decides the questions of one key range (ait) from its
// victims (vit) and referenced ids (refs) and puts every answer at its
// place (fp).
func (vs *verifySpill) mergePart(j *spilledJoin, ait *runsort.Iter[askKey], vit *runsort.Iter[victimKey], refs *refIDReader, fp *fatePart) error {
	refOK := refs.next()
	var vic victimKey
	vicOK := vit.Next()
	if vicOK {
		vic = vit.Record()
	}
	var lastID [16]byte
	var last recFate
	have := false
	for ait.Next() {
		a := ait.Record()
		if !have || a.id != lastID {
			have, lastID = true, a.id
			ans := entryAnswer{}
			for refOK && compareID(&refs.id, &a.id) < 0 {
				refOK = refs.next()
			}
			if refOK && refs.id == a.id {
				ans.first, ans.set = refs.first, refs.set
			}
			for vicOK && compareID(&vic.id, &a.id) < 0 {
				if vicOK = vit.Next(); vicOK {
					vic = vit.Record()
				}
			}
			for vicOK && vic.id == a.id {
				ans.risk |= vic.bit
				if vic.lost != 0 {
					ans.lost = vic.lost
				}
				if vicOK = vit.Next(); vicOK {
					vic = vit.Record()
				}
			}
			exc := !(ans.first > 0 && ans.set > 0) || ans.risk != 0 || ans.lost != 0
			if !exc {
				_, exc = vs.bad[fileIDPath{j.rel[ans.first-1], a.id}]
			}
			last = packAnswer(ans, exc)
		}
		if a.k > math.MaxInt32 {
			return fmt.Errorf("spilled verify: more than %d questions of queue %s", math.MaxInt32, vs.dirs[a.q])
		}
		fp.put(int32(a.q), int32(a.k), last)
	}
	return errors.Join(ait.Err(), vit.Err(), refs.err, fp.err)
}

// answerCursor reads one queue's answers back while the prediction
// decides its entries (victimIDs.cur; at is called by fate through
// victimIDs.entry for every question, in pass 1's order).
type answerCursor struct {
	vs   *verifySpill
	q    int
	k    uint32
	h    uint64
	over bool // more questions than pass 1 asked
	// The queue's answers not read yet: left of them from place from.
	from, left int64
	buf        []byte
	pend       []recFate // the chunk read (packAnswer), pend[pi:] not taken yet
	pi         int
	err        error
	// The current question: its id and answer (plain: found, a good
	// body, at no risk, not written).
	id    [16]byte
	plain bool
	a     entryAnswer
	// names holds the sets of the queue's ids that are missing or bad
	// (queueNames asks only of them).
	names map[[16]byte]int32
}

func (vs *verifySpill) cursor(q int) *answerCursor {
	return &answerCursor{vs: vs, q: q, from: vs.base[q], left: int64(vs.count[q])}
}

// answerChunk exceptions are read at a time.
const answerChunk = 4096

func (c *answerCursor) fill() {
	if c.left == 0 || c.err != nil {
		return
	}
	n := min(c.left, answerChunk)
	size := int(n) * answerSize
	if cap(c.buf) < size {
		c.buf = make([]byte, size)
	}
	b := c.buf[:size]
	if _, err := c.vs.exc.ReadAt(b, c.from*answerSize); err != nil {
		c.err = err
		return
	}
	c.pend, c.pi = c.pend[:0], 0
	for i := 0; i < int(n); i++ {
		c.pend = append(c.pend, decodeFate(b[i*answerSize:]))
	}
	c.from += n
	c.left -= n
}

// at moves to the next question, about id.
func (c *answerCursor) at(id [16]byte) {
	if c.k == ^uint32(0) {
		c.over = true
	}
	c.id = id
	c.h = mixID(c.h, &id)
	if c.pi == len(c.pend) {
		c.fill()
	}
	c.plain = true
	if c.pi < len(c.pend) { // the answer at this place (none past pass 1's count: over)
		a, exc := unpackAnswer(c.pend[c.pi])
		c.pi++
		c.plain = !exc
		if exc {
			c.a = a
		}
		if exc && (!(c.a.first > 0 && c.a.set > 0) || c.bad() != nil) {
			if c.names == nil {
				c.names = map[[16]byte]int32{}
			}
			c.names[id] = c.a.set
		}
	}
	c.k++
}

// bad returns the bad-body record of the current question, or nil.
func (c *answerCursor) bad() *Record {
	if c.a.first <= 0 {
		return nil
	}
	p := c.vs.s.sj.rel[c.a.first-1]
	if off, ok := c.vs.bad[fileIDPath{p, c.id}]; ok {
		return &Record{Path: p, Offset: off, MsgID: c.id, Status: StatusReferenced, BadBody: true}
	}
	return nil
}

// lookup is leanPredict.lookup for the current question.
func (c *answerCursor) lookup([16]byte) *Record {
	if c.plain {
		return foundRecord
	}
	if c.a.first <= 0 || c.a.set <= 0 {
		return nil
	}
	if r := c.bad(); r != nil {
		return r
	}
	return foundRecord
}

func (c *answerCursor) risk() uint8 {
	if c.plain {
		return 0
	}
	return c.a.risk
}

func (c *answerCursor) lostBy() string {
	if c.plain || c.a.lost == 0 {
		return ""
	}
	return c.vs.codes[c.a.lost-1]
}

// queueNames is leanPredict.queueNames for the queue's missing and bad
// ids.
func (c *answerCursor) queueNames(id string) []string {
	b, ok := decodeID(id)
	if !ok {
		return nil
	}
	if set := c.names[b]; set > 0 {
		return c.vs.s.lrefs.sets[set-1]
	}
	return nil
}

// end checks, once the queue's entries are decided, that they asked
// what pass 1 did.
func (c *answerCursor) end() error {
	if c.err != nil {
		return c.err
	}
	if c.over || c.k != c.vs.count[c.q] || c.h != c.vs.hash[c.q] || c.left != 0 || c.pi != len(c.pend) {
		return fmt.Errorf("%s changed while it was read (%d store lookups, %d before)", c.vs.dirs[c.q], c.k, c.vs.count[c.q])
	}
	return nil
}
