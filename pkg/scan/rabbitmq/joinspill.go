package rabbitmq

// The spilled join. The scan keeps every referenced id in the id table
// (idtable.go), 20 bytes an id, so its memory grows with the store. When
// the queue indexes reference more ids than joinBudget's worth of table,
// Scan joins the references against the store's records as external sorts
// do instead, and holds nothing that grows with the records:
//
//  1. The references go to a runsort.Sorter (id, queue dir) as the queue
//     indexes are read: sorted runs in an unlinked temp file, each
//     reading goroutine sorting and writing the runs it fills.
//  2. A prepass walks every persistent .rdq (--jobs at once) and sorts the
//     records' keys (id, file, record index, offset) the same way.
//  3. A merge of the two sorted streams decides every record as
//     classify does from the table: an id's first record in file order is
//     its first copy, the others duplicates of it; the referenced ids no
//     record holds are the missing ones (a map: normally none). Each
//     record's decision (12 bytes) is written at its place in a temp file
//     laid out in file order. The ids are merged in key ranges (parts),
//     one goroutine each: an id's references and records are all in its
//     range.
//  4. The scan proper walks the files again in order and reads each
//     file's decisions back when it classifies it.
//
// Memory is then a sort run a goroutine, the merge's read buffers and the
// per-bucket write buffers, whatever the number of records; the cost is a
// second walk of the files and the sorts (docs/performance.md). The
// second walk cannot be dropped: the hazard models need the statuses the
// join decides, and the records between the walks would be the memory
// the join saves. Only the scan of
// an unclean store (no clean-shutdown files) whose caller needs nothing
// from the table afterwards (Scan) spills, or that answers what it needs
// by another join (verify: joinSpill.keepRefs, verify_spill.go).

import (
	"bufio"
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"runtime"
	"sort"
	"strings"
	"sync"
	"unsafe"

	"github.com/storectl/storectl/internal/fileview"
	"github.com/storectl/storectl/internal/parallel"
	"github.com/storectl/storectl/internal/runsort"
	"github.com/storectl/storectl/pkg/scan"
)

// joinHook, when set (tests), is called once a spilled join's sorts are
// ready to merge, with the number of record runs.
var joinHook func(recRuns int)

// defaultJoinBudget is the id table's size past which a scan spills its
// join (about 1.6 million referenced ids).
const defaultJoinBudget = 32 << 20

// joinSpill tunes the spilled join (VHostOptions.join).
type joinSpill struct {
	allow  bool // the caller needs nothing of the id table after the scan
	budget int  // bytes of references held before spilling; defaultJoinBudget when 0, <0: always spill
	runLen int  // records per sorted run; runsort's default when 0 (tests: small, many runs)
	fanIn  int  // runs merged at once; joinFanIn when 0 (tests: small, merge passes)
	// parts is how many key ranges of the ids the join merges at once,
	// one goroutine each (idCuts): the scan's jobs up to maxJoinParts;
	// one when 0.
	parts int
	// keepRefs: the join also writes every referenced id, in id order,
	// to a temp file (spilledJoin.ids) the caller reads afterwards
	// (verify's spilled prediction, verify_spill.go).
	keepRefs bool
}

// joinFanIn is how many runs the join's sorts merge at once: 512 runs of
// joinRunBytes, 1 GiB of keys (38 million records), before a merge pass
// writes and reads them all once more. At runsort's default of 64 a 4
// GiB store of small messages (11.4 M records: 109 runs of references,
// 152 of record keys, 109 of decisions) had merge passes that were 18%
// of rebuild-index's CPU. The runs share runsort's read-ahead (4 KiB a
// run at least: 2 MiB for 512).
const joinFanIn = 512

func (j joinSpill) fan() int {
	if j.fanIn > 0 {
		return j.fanIn
	}
	return joinFanIn
}

func (j joinSpill) refLimit() int {
	switch {
	case j.budget < 0:
		return 0
	case j.budget == 0:
		return defaultJoinBudget / 20
	}
	return j.budget / 20
}

// joinRunBytes bounds one sorted run in memory (each of the join's three
// sorts holds one at a time, the fates sort also its radix scratch): 2
// MiB, not runsort's default 256 Ki records (5-7 MiB of these records),
// whose run buffers and the garbage collector's headroom over them were
// most of a spilled scan's heap. More runs cost a little merge work (a
// deeper heap; past runsort.DefaultFanIn runs, a merge pass).
const joinRunBytes = 2 << 20

// runs is the run length for records of size bytes in memory.
func (j joinSpill) runs(size uintptr) int {
	if j.runLen > 0 {
		return j.runLen
	}
	return joinRunBytes / int(size)
}

// runsShared is runs for a sorter that n goroutines fill at once (AddN:
// a run buffer each), so that together they hold one run's bytes.
func (j joinSpill) runsShared(size uintptr, n int) int {
	if j.runLen > 0 {
		return j.runLen
	}
	return max(1, joinRunBytes/int(size)/max(n, 1))
}

var refCodec = runsort.Codec[refSlot]{Size: 20,
	Append: func(dst []byte, r refSlot) []byte {
		dst = append(dst, r.id[:]...)
		return binary.LittleEndian.AppendUint32(dst, uint32(r.q))
	},
	Decode: func(b []byte) (r refSlot) {
		copy(r.id[:], b)
		r.q = int32(binary.LittleEndian.Uint32(b[16:]))
		return r
	}}

func compareRef(a, b refSlot) int {
	if c := compareID(&a.id, &b.id); c != 0 {
		return c
	}
	return cmp.Compare(a.q, b.q)
}

// recKey is one persistent record in the prepass: its id, its file (index
// in the listing), its index in the file and its offset.
type recKey struct {
	id      [16]byte
	file, k int32
	off     uint32
}

var recCodec = runsort.Codec[recKey]{Size: 28,
	Append: func(dst []byte, r recKey) []byte {
		dst = append(dst, r.id[:]...)
		dst = binary.LittleEndian.AppendUint32(dst, uint32(r.file))
		dst = binary.LittleEndian.AppendUint32(dst, uint32(r.k))
		return binary.LittleEndian.AppendUint32(dst, r.off)
	},
	Decode: func(b []byte) (r recKey) {
		copy(r.id[:], b)
		r.file = int32(binary.LittleEndian.Uint32(b[16:]))
		r.k = int32(binary.LittleEndian.Uint32(b[20:]))
		r.off = binary.LittleEndian.Uint32(b[24:])
		return r
	}}

func compareRec(a, b recKey) int {
	if c := compareID(&a.id, &b.id); c != 0 {
		return c
	}
	if c := cmp.Compare(a.file, b.file); c != 0 {
		return c
	}
	return cmp.Compare(a.k, b.k)
}

// fateSize is a record's decision in the fates file: 1 + its queue-name
// set (0: unreferenced), 1 + the listing index of its first copy's file
// (0: it is the first copy) and that copy's offset.
const fateSize = 12

type recFate struct {
	set, first int32
	off        uint32
}

// spilledJoin is a scan's spilled join from the references on.
type spilledJoin struct {
	cfg     joinSpill
	refs    *runsort.Sorter[refSlot]
	files   []rdqFile // the persistent store's listing, the same for both walks
	listErr error     // why it could not be listed
	rel     []string  // their paths as findings give them
	count   []int     // records per file; -1: the prepass could not read it
	base    []int64   // where a file's decisions start in fates (records before it)
	fates   *os.File
	// missing holds the referenced ids no record holds, with 1 + their
	// set: missingLean's answer.
	missing map[[16]byte]int32
	buf     []byte // a file's decisions while it is classified
	cur     []recFate
	// ids holds, when cfg.keepRefs, every referenced id in id order with
	// 1 + its first copy's file (0: no record holds it) and 1 + its set
	// (refIDSize bytes each, idsN of them), in the sections idsSecs
	// (offset, bytes) one after the other: one a part of the join.
	ids     *os.File
	idsN    int64
	idsSecs [][2]int64
}

// idsReader reads the referenced ids (keepRefs) in id order, buffered.
func (j *spilledJoin) idsReader() io.Reader {
	rs := make([]io.Reader, len(j.idsSecs))
	for i, sec := range j.idsSecs {
		rs[i] = io.NewSectionReader(j.ids, sec[0], sec[1])
	}
	return bufio.NewReaderSize(io.MultiReader(rs...), 1<<16)
}

// refIDSize is one referenced id in spilledJoin.ids: id, first, set.
const refIDSize = 16 + 4 + 4

func (j *spilledJoin) close() {
	if j == nil {
		return
	}
	if j.refs != nil {
		j.refs.Close()
	}
	if j.fates != nil {
		j.fates.Close()
		j.fates = nil
	}
	if j.ids != nil {
		j.ids.Close()
		j.ids = nil
	}
}

// takeSpill moves the references taken so far into a sorter (the caller
// holds b.mu). They are sorted and written as runs in place, on as many
// goroutines as the queue dirs are read with (serially, the 1.6 million
// references a spill starts with were a tenth of a second on one core with
// every reader waiting); the last, partial run stays in memory for the
// next references to fill.
func (b *leanRefsBuilder) takeSpill() {
	b.sorter = &runsort.Sorter[refSlot]{Compare: compareRef, Key: func(r *refSlot) uint64 { return idKey(&r.id) }, Codec: refCodec, RunLen: b.join.runs(unsafe.Sizeof(refSlot{})), FanIn: b.join.fan(), Sort: sortRefs,
		Cuts: idCuts(b.join.parts)}
	if b.slots == nil {
		return
	}
	slots := b.slots.Slice()
	n := b.sorter.RunLen
	full := len(slots) / n
	parallel.For(full, runtime.GOMAXPROCS(0), func(i int) {
		b.sorter.AddRun(slots[i*n : (i+1)*n]) // its error is the sorter's, reported at Iter
	})
	rest := slots[full*n:]
	b.sorter.AddN(len(rest), func(i int) refSlot { return rest[i] })
	b.slots.Free()
	b.slots = nil
}

// buildSpill makes the lean references of a spilled join: the name
// lists are interned as the join meets them; the references stay sorted
// in their runs.
func (b *leanRefsBuilder) buildSpill(q *VHostQueues) (*leanRefs, *spilledJoin, []int32, []string) {
	l := &leanRefs{dir: q.Dir}
	names := make([]string, len(q.Queues))
	index := make([]int32, len(b.ord))
	for i := range index {
		index[i] = -1
	}
	for qi, qd := range q.Queues {
		names[qi] = queueName(qd)
		if o, ok := b.ord[qd]; ok {
			index[o] = int32(qi)
		}
	}
	j := &spilledJoin{cfg: b.join, refs: b.sorter}
	b.sorter, b.ord = nil, nil
	return l, j, index, names
}

// prepass walks the persistent store's files and sorts their record keys.
func (s *scanner) prepass(ctx context.Context, j *spilledJoin, dir string) (*runsort.Sorter[recKey], error) {
	recs := &runsort.Sorter[recKey]{Compare: compareRec, Key: func(r *recKey) uint64 { return idKey(&r.id) }, Codec: recCodec, RunLen: j.cfg.runs(unsafe.Sizeof(recKey{})), FanIn: j.cfg.fan(), Cuts: idCuts(j.cfg.parts),
		Sort: func(rs []recKey) { // keys differ: (file, k) is a record's place
			sortByID(rs, func(r *recKey) *[16]byte { return &r.id }, func(a, b *recKey) int {
				if c := cmp.Compare(a.file, b.file); c != 0 {
					return c
				}
				return cmp.Compare(a.k, b.k)
			})
		}}
	files, err := listRDQ(dir)
	if err != nil {
		j.listErr = err // the scan proper's error; every reference is missing
		return recs, nil
	}
	j.files = files
	j.rel = make([]string, len(files))
	j.count = make([]int, len(files))
	for i, f := range files {
		j.rel[i] = s.rel(f.path)
	}
	var mu sync.Mutex
	var addErr error
	parallel.For(len(files), s.opts.Jobs, func(i int) {
		keys, ok := walkOnly(ctx, files[i], int32(i))
		defer keys.free()
		if !ok {
			j.count[i] = -1
			return
		}
		j.count[i] = len(keys.s)
		// Each job sorts and writes the runs it fills (until 2026-12-07
		// under one lock, which a job's run held the other job behind).
		if err := recs.AddN(len(keys.s), func(k int) recKey { return keys.s[k] }); err != nil {
			mu.Lock()
			addErr = cmp.Or(addErr, err)
			mu.Unlock()
		}
	})
	if err := errors.Join(addErr, ctx.Err()); err != nil {
		recs.Close()
		return nil, err
	}
	return recs, nil
}

// walkOnly maps and walks one file (Stream: a window of pages at a
// time) as scanner.open does (no progress:
// the scan proper reports the bytes) and returns its records' keys
// (walkKeys; the caller frees them); ok is false when the scan proper
// will not classify it (an error).
func walkOnly(ctx context.Context, f rdqFile, file int32) (keys *fileKeys, ok bool) {
	keys = newFileKeys()
	if ctx.Err() != nil {
		return keys, false
	}
	v, err := fileview.Open(f.path)
	if err != nil {
		return keys, false
	}
	defer v.Close()
	if v.Size() > MaxFileSize {
		return keys, false
	}
	err = func() (err error) {
		defer fileview.Guard(&err)()
		b, reached, err := v.Stream()
		if err != nil {
			return err
		}
		walkKeys(b, file, keys, reached)
		return nil
	}()
	return keys, err == nil
}

// join merges the sorted references with the sorted record keys and
// writes every record's decision in file order to the fates file. The
// ids are merged in cfg.parts key ranges at once, one goroutine each
// (idCuts): an id's references and records are all in its range, so each
// range decides its records alone. (Until 2026-12-07 one merge, 17% of a
// scan's wall time on one core.)
func (s *scanner) join(j *spilledJoin, recs *runsort.Sorter[recKey], index []int32, names []string) error {
	defer recs.Close()
	l := s.lrefs
	var total int64
	j.base = make([]int64, len(j.files))
	for i, n := range j.count {
		j.base[i] = total
		total += int64(max(n, 0))
	}
	f, err := scan.UnlinkedTemp("storectl-join-*")
	if err != nil {
		return err
	}
	j.fates = f
	rits, err := j.refs.IterParts()
	if err != nil {
		return err
	}
	runs := recs.Runs()
	kits, err := recs.IterParts()
	if err != nil {
		return err
	}
	if len(rits) != len(kits) {
		return fmt.Errorf("spilled join: %d parts of references, %d of records", len(rits), len(kits))
	}
	if joinHook != nil {
		joinHook(runs)
	}
	np := len(kits)
	fw := newFateStore(j, total, np)
	defer fw.close() // an error before done
	if j.cfg.keepRefs {
		if j.ids, err = scan.UnlinkedTemp("storectl-joinids-*"); err != nil {
			return err
		}
	}
	parts := make([]*joinPart, np)
	var idsAt int64
	for p := range parts {
		jp := &joinPart{p: int32(p), np: int32(np), index: index, names: names, fates: fw.parts[p],
			single: make([]int32, len(names)), intern: map[string]int32{}, missing: map[[16]byte]int32{}}
		if j.ids != nil {
			// Part p's ids go after the room the parts before it may
			// need: one id for each of their references at most.
			jp.idsAt = idsAt
			jp.idsW = bufio.NewWriterSize(io.NewOffsetWriter(j.ids, idsAt), 1<<16)
			idsAt += int64(rits[p].Len()) * refIDSize
		}
		parts[p] = jp
	}
	parallel.For(np, np, func(p int) { parts[p].run(rits[p], kits[p]) })
	j.missing = map[[16]byte]int32{}
	nsets := 0
	for _, jp := range parts {
		if jp.err != nil {
			return jp.err
		}
		maps.Copy(j.missing, jp.missing)
		nsets = max(nsets, len(jp.sets))
		if j.ids != nil {
			j.idsSecs = append(j.idsSecs, [2]int64{jp.idsAt, jp.idsN * refIDSize})
			j.idsN += jp.idsN
		}
	}
	// Part p's set i is set i*np+p (joinPart.set); the places no part
	// filled are never referenced.
	l.sets = make([][]string, nsets*np)
	for p, jp := range parts {
		for i, ns := range jp.sets {
			l.sets[i*np+p] = ns
		}
	}
	recs.Close()
	j.refs.Close()
	j.refs = nil
	return fw.done()
}

// maxJoinParts bounds the join's parts: each holds a read-ahead per run
// (shared out of the same total, 4 KiB at least) and a block of decisions
// per fate bucket (16 KiB, up to fateBuckets of them), so memory grows
// with the parts, and parts past the cores gain nothing (a --jobs of 64
// would buffer 64 MiB of decisions at 4 GiB).
const maxJoinParts = 8

// joinParts is the join's parts at --jobs jobs.
func joinParts(jobs int) int { return min(max(jobs, 1), maxJoinParts) }

// idCuts splits the ids' keys (idKey) into n ranges of equal width for
// the join's parts (runsort.Sorter.Cuts). Msg ids are uniformly spread
// (rabbit_guid), so the parts hold about as many ids each; skewed ids
// make one part longer, never the decisions different.
func idCuts(n int) []uint64 {
	if n <= 1 {
		return nil
	}
	cuts := make([]uint64, n-1)
	for p := range cuts {
		cuts[p] = uint64(p+1) * (math.MaxUint64 / uint64(n))
	}
	return cuts
}

// joinPart merges one key range of the spilled join.
type joinPart struct {
	p, np  int32
	index  []int32 // a reference's queue dir ordinal -> index in names (-1: dropped)
	names  []string
	fates  *fatePart
	single []int32 // 1 + the set of a queue's name alone
	intern map[string]int32
	sets   [][]string // this part's queue-name sets
	// missing holds the part's referenced ids no record holds, with 1 +
	// their set.
	missing map[[16]byte]int32
	idsW    *bufio.Writer // the part's referenced ids (keepRefs), at idsAt
	idsAt   int64
	idsN    int64
	err     error
}

// set gives ns (sorted names) its index in leanRefs.sets, interning it in
// the part on first sight: set i of part p is i*np+p, which the parts
// number without sharing a lock or an order.
func (jp *joinPart) set(ns []string) int32 {
	k := strings.Join(ns, "\x00")
	i, ok := jp.intern[k]
	if !ok {
		i = int32(len(jp.sets))
		jp.intern[k] = i
		jp.sets = append(jp.sets, ns)
	}
	return i*jp.np + jp.p
}

// keepRef writes one referenced id to the part's ids (when kept), in id
// order.
func (jp *joinPart) keepRef(id *[16]byte, first, set int32) {
	if jp.idsW == nil {
		return
	}
	// Encoded in the writer's own buffer (a local array passed to Write
	// escaped: a heap object a referenced id).
	b := jp.idsW.AvailableBuffer()
	b = append(b, id[:]...)
	b = binary.LittleEndian.AppendUint32(b, uint32(first))
	b = binary.LittleEndian.AppendUint32(b, uint32(set))
	jp.idsW.Write(b) // its error stays in idsW, returned by Flush
	jp.idsN++
}

// run merges the part's references (rit) with its record keys (kit) and
// decides each record as classify does from the table: an id's first
// record in file order is its first copy, the others duplicates of it.
func (jp *joinPart) run(rit *runsort.Iter[refSlot], kit *runsort.Iter[recKey]) {
	// The next referenced id and 1 + its set (refs of a dir not in q.Queues
	// dropped, as build does).
	var refID [16]byte
	refSet, refOK := int32(0), false
	var pend refSlot
	pendOK := rit.Next()
	if pendOK {
		pend = rit.Record()
	}
	var grp []int32
	nextRef := func() {
		refOK = false
		for pendOK && !refOK {
			id := pend.id
			grp = grp[:0]
			for pendOK && pend.id == id {
				if qi := jp.index[pend.q]; qi >= 0 {
					grp = append(grp, qi)
				}
				if pendOK = rit.Next(); pendOK {
					pend = rit.Record()
				}
			}
			if len(grp) == 0 {
				continue
			}
			if len(grp) == 1 {
				qi := grp[0]
				if jp.single[qi] == 0 {
					jp.single[qi] = jp.set([]string{jp.names[qi]}) + 1
				}
				refSet = jp.single[qi]
			} else {
				ns := make([]string, 0, len(grp))
				for _, qi := range grp {
					ns = append(ns, jp.names[qi])
				}
				sort.Strings(ns)
				refSet = jp.set(ns) + 1
			}
			refID, refOK = id, true
		}
	}
	nextRef()
	fw := jp.fates
	var cur recKey
	curOK := kit.Next()
	if curOK {
		cur = kit.Record()
	}
	for curOK || refOK {
		if !curOK || (refOK && compareID(&refID, &cur.id) < 0) {
			jp.missing[refID] = refSet // referenced, in no record
			jp.keepRef(&refID, 0, refSet)
			nextRef()
			continue
		}
		id := cur.id
		sid := int32(0)
		if refOK && refID == id {
			sid = refSet
			nextRef()
		}
		first := cur
		if sid != 0 {
			jp.keepRef(&id, first.file+1, sid)
		}
		fw.put(cur.file, cur.k, recFate{set: sid})
		for curOK = kit.Next(); curOK; curOK = kit.Next() {
			if cur = kit.Record(); cur.id != id {
				break
			}
			fw.put(cur.file, cur.k, recFate{set: sid, first: first.file + 1, off: first.off})
		}
	}
	jp.err = errors.Join(rit.Err(), kit.Err(), fw.err)
	if jp.idsW != nil && jp.err == nil {
		jp.err = jp.idsW.Flush()
	}
}

// fateStore writes the decisions to the fates file in file order. The
// merge meets them in id order; places (a record's index among all the
// store's records) are dense, so no sort is needed to put them back:
// each decision goes to the bucket of its place range (span places),
// whose entries are written in blocks to a temp file as they fill, and
// done reads each bucket back, puts its decisions at their places in
// memory and writes the range to the fates file. Each decision is
// written and read twice, as a run and its merge would, without a
// comparison. (Until 2026-12-04 a runsort by place: its radix-sorted runs
// and their merge were 0.32 of the join's 1.05 CPU s on 1 GiB of small
// messages.) Each part of the join fills buckets of its own (fatePart),
// and done puts the buckets in place on as many goroutines.
type fateStore struct {
	j     *spilledJoin
	total int64
	span  int64 // places per bucket
	n     int   // buckets
	parts []*fatePart
	tmp   fateTmp
}

// fatePart is one part's buckets.
type fatePart struct {
	w      *fateStore
	bufs   [][]byte // per bucket: entries not yet written
	blocks [][]int64
	err    error
}

// fateTmp is the buckets' temp file, which the parts append blocks to.
type fateTmp struct {
	mu  sync.Mutex
	f   *os.File
	end int64
}

// put appends b and returns its offset.
func (t *fateTmp) put(b []byte) (int64, error) {
	t.mu.Lock()
	if t.f == nil {
		f, err := scan.UnlinkedTemp("storectl-fates-*")
		if err != nil {
			t.mu.Unlock()
			return 0, err
		}
		t.f = f
	}
	f, off := t.f, t.end
	t.end += int64(len(b))
	t.mu.Unlock()
	_, err := f.WriteAt(b, off)
	return off, err
}

// fateEntry is a bucketed decision: its place in the bucket and the
// decision.
const (
	fateEntry = 4 + fateSize
	// fateBlock is the entries a bucket writes at a time.
	fateBlock = (16 << 10) / fateEntry * fateEntry
	// fateBuckets bounds the buckets (their blocks in memory): past
	// fateBuckets*span records, the span grows instead.
	fateBuckets = 512
)

func newFateStore(j *spilledJoin, total int64, parts int) *fateStore {
	span := int64(joinRunBytes / fateSize)
	if j.cfg.runLen > 0 {
		span = int64(j.cfg.runLen) // tests: many buckets
	}
	span = max(span, (total+fateBuckets-1)/fateBuckets, 1)
	n := int((total + span - 1) / span)
	w := &fateStore{j: j, total: total, span: span, n: n}
	for range max(parts, 1) {
		w.parts = append(w.parts, &fatePart{w: w, bufs: make([][]byte, n), blocks: make([][]int64, n)})
	}
	return w
}

func appendFate(dst []byte, f recFate) []byte {
	dst = binary.LittleEndian.AppendUint32(dst, uint32(f.set))
	dst = binary.LittleEndian.AppendUint32(dst, uint32(f.first))
	return binary.LittleEndian.AppendUint32(dst, f.off)
}

func decodeFate(b []byte) recFate {
	return recFate{set: int32(binary.LittleEndian.Uint32(b)), first: int32(binary.LittleEndian.Uint32(b[4:])),
		off: binary.LittleEndian.Uint32(b[8:])}
}

func (fp *fatePart) put(file, k int32, f recFate) {
	if fp.err != nil {
		return
	}
	w := fp.w
	place := w.j.base[file] + int64(k)
	if place < 0 || place >= w.total {
		fp.err = fmt.Errorf("record %d of file %d: place %d outside the %d records", k, file, place, w.total)
		return
	}
	bk := place / w.span
	b := fp.bufs[bk]
	if b == nil {
		b = make([]byte, 0, fateBlock)
	}
	b = appendFate(binary.LittleEndian.AppendUint32(b, uint32(place-bk*w.span)), f)
	if len(b) == fateBlock {
		off, err := w.tmp.put(b)
		if err != nil {
			fp.err = err
			return
		}
		fp.blocks[bk] = append(fp.blocks[bk], off)
		b = b[:0]
	}
	fp.bufs[bk] = b
}

// close releases the buckets' temp file.
func (w *fateStore) close() {
	if w.tmp.f != nil {
		w.tmp.f.Close()
		w.tmp.f = nil
	}
}

// fateScratch is what done puts one bucket in place with.
type fateScratch struct {
	seen  []bool
	block []byte
	out   []byte // the bucket's decisions in place order
}

// done writes the decisions in place order to the fates file, a bucket
// at a time on as many goroutines as there are parts. Every place must
// have had exactly one decision.
func (w *fateStore) done() error {
	defer w.close()
	for _, fp := range w.parts {
		if fp.err != nil {
			return fp.err
		}
	}
	jobs := min(len(w.parts), w.n)
	free := make(chan *fateScratch, jobs)
	for range jobs {
		free <- &fateScratch{seen: make([]bool, w.span), block: make([]byte, fateBlock), out: make([]byte, w.span*fateSize)}
	}
	errs := make([]error, w.n)
	parallel.For(w.n, jobs, func(bk int) {
		sc := <-free
		defer func() { free <- sc }()
		errs[bk] = w.bucket(bk, sc)
	})
	for _, err := range errs {
		if err != nil {
			return err // the first bucket's, whatever the order they ran in
		}
	}
	return nil
}

// bucket puts bucket bk's decisions in place and writes them.
func (w *fateStore) bucket(bk int, sc *fateScratch) error {
	lo := int64(bk) * w.span
	n := min(w.span, w.total-lo)
	seen, out := sc.seen[:n], sc.out[:n*fateSize]
	clear(seen)
	got := int64(0)
	take := func(b []byte) error {
		for i := 0; i+fateEntry <= len(b); i += fateEntry {
			at := int64(binary.LittleEndian.Uint32(b[i:]))
			if at >= n || seen[at] {
				return fmt.Errorf("spilled join: place %d decided twice or out of range", lo+at)
			}
			seen[at] = true
			copy(out[at*fateSize:], b[i+4:i+fateEntry])
			got++
		}
		return nil
	}
	for _, fp := range w.parts {
		for _, off := range fp.blocks[bk] {
			if _, err := w.tmp.f.ReadAt(sc.block, off); err != nil {
				return err
			}
			if err := take(sc.block); err != nil {
				return err
			}
		}
		if err := take(fp.bufs[bk]); err != nil {
			return err
		}
		fp.bufs[bk], fp.blocks[bk] = nil, nil
	}
	if got != n {
		return fmt.Errorf("spilled join: %d of places %d-%d decided", got, lo, lo+n-1)
	}
	_, err := w.j.fates.WriteAt(out, lo*fateSize)
	return err
}

// load reads file i's decisions (the scan proper classifies it next).
func (j *spilledJoin) load(i int, n int) error {
	if j.count[i] != n {
		return fmt.Errorf("%s changed while it was scanned (%d records, %d before)", j.files[i].path, n, j.count[i])
	}
	j.cur = j.cur[:0]
	if n == 0 {
		return nil
	}
	size := n * fateSize
	if cap(j.buf) < size {
		j.buf = make([]byte, size)
	}
	j.buf = j.buf[:size]
	if _, err := j.fates.ReadAt(j.buf, j.base[i]*fateSize); err != nil {
		return err
	}
	for k := 0; k < n; k++ {
		j.cur = append(j.cur, decodeFate(j.buf[k*fateSize:]))
	}
	return nil
}
