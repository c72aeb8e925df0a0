package timer

import (
	"context"
	"encoding/binary"
	"errors"
	"io/fs"
	"math"
	"math/bits"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/storectl/storectl/internal/storefile"
	rmq "github.com/storectl/storectl/pkg/format/rocketmq"
	ftimer "github.com/storectl/storectl/pkg/format/timer"
	"github.com/storectl/storectl/pkg/scan"
)

// Prepass lets the commitlog scan a command runs anyway check the records
// the timer units point at as it walks them, so that the timer scan does
// not read the commitlog a second time:
//
//	pre, err := timer.Prepare(ctx, root)  // reads the timerlog once
//	cfg.Tap = pre.Tap                      // rocketmq.Config of the commitlog scan
//	rocketmq.ScanCommitLog(ctx, cfg, opts)
//	timer.Scan(ctx, timer.Config{..., Prepass: pre}, opts)
//
// For every unit whose record the walk reads, the tap marks whether the
// unit's target checks out (the record at offsetPy decodes, is sizePy
// bytes of the timer topic, its TIMER_OUT_MS, REAL_TOPIC hash and DELETE
// key agree with the unit) exactly as Scan's own lookup would decide it.
// Scan then skips the lookup of a marked unit that nothing else needs (it
// is not pending, not expired, and lies below the recovery end, which
// only the scan knows); every other unit is looked up in the commitlog as
// before, so a unit the tap could not mark costs a read, never a wrong
// verdict.
//
// The tap follows the units in timerlog order, which is the order the
// broker wrote them in and so the order of their records: a unit whose
// record comes before one already passed (out of order) is not marked.
// Memory is one bit per 52-byte step of the timerlog, a small index (the
// range of offsets per 4096 units) and one read buffer per commitlog file
// being scanned.
type Prepass struct {
	files  []preFile
	chunks []preChunk
	maxHi  []int64         // maxHi[k]: the highest offsetPy of chunks 0..k
	marks  []atomic.Uint64 // bit per step: the unit there checks out
	units  int
	early  *early    // a walk Begin started, for Scan to finish
	tail   *tailPlan // the re-puts the tap collects for that walk's readTail
	// TapMaxSize is the record limit (rocketmq.Config.MaxMessageSize, 0
	// its default) of the commitlog scan that calls Tap: the tap's
	// records stand for readTail's only when the two walks agree on it.
	TapMaxSize int

	// The targets the tap keeps (captureFrom): of a marked unit whose
	// slot time is at or after keepFrom (the units Scan keeps the ids of:
	// pending and expired), at most keepMax of them.
	keepFrom, precision int64
	keepMax             int
	kept                atomic.Int64
	keptMu              sync.Mutex
	cursors             []*preCursor // every Tap's, for keptTargets
}

// keptTarget is the target of the unit at step k, as the tap resolved it
// from the record the commitlog scan read: what Scan's own lookup
// (target(u, true)) finds there, when the recovery end does not decide.
type keptTarget struct {
	k int64
	t target
}

// tapMaxSize is TapMaxSize as the commitlog scan applies it.
func (p *Prepass) tapMaxSize() int {
	if p.TapMaxSize <= 0 {
		return rmq.DefaultMaxRecordSize
	}
	return p.TapMaxSize
}

type preFile struct {
	path       string
	base, size int64
	step       int64 // index of its first 52-byte step
}

// preChunk is up to chunkUnits consecutive units of one timerlog file.
type preChunk struct {
	file     int
	pos, end int64 // file positions of its first unit and past its last
	lo, hi   int64 // lowest and highest offsetPy of its units
}

const chunkUnits = 4096

// maxTargetSize is the record size limit of the timer scan's own lookups
// (NewFileCommitLog's default): a record the tap marks is one they read
// whole.
const maxTargetSize = rmq.DefaultMaxRecordSize

// Prepare reads the timerlog under root (the units timer recovery walks
// in each file: up to its first BLANK, zeros or rejected unit) and indexes
// them for Tap. A root without timerlog/ gives an empty Prepass.
func Prepare(ctx context.Context, root string) (*Prepass, error) {
	p := &Prepass{keepFrom: math.MaxInt64, precision: 1}
	dir := filepath.Join(root, LogDir)
	files, err := scan.OffsetFiles(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return p, nil
	}
	if err != nil {
		return nil, err
	}
	for _, f := range files {
		p.files = append(p.files, preFile{path: f.Path, base: f.Base, size: f.Size})
	}
	steps := int64(0)
	for i := range p.files {
		p.files[i].step = steps
		steps += (p.files[i].size + ftimer.UnitSize - 1) / ftimer.UnitSize
	}
	p.marks = make([]atomic.Uint64, (steps+63)/64)
	for i := range p.files {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if err := p.index(i); err != nil {
			return nil, err
		}
	}
	p.maxHi = make([]int64, len(p.chunks))
	hi := int64(-1 << 63)
	for k, c := range p.chunks {
		hi = max(hi, c.hi)
		p.maxHi[k] = hi
	}
	return p, nil
}

// index adds file i's chunks: the units LogReader would walk (up to the
// first step that is not a unit: a BLANK, zeros, a bad size or magic, a
// short tail), read 1 MiB at a time with direct loads of the two fields
// that say a step is a unit and its offsetPy. A file of more than
// 2*indexSplit units is read as two halves at once, split at a chunk
// boundary (the second half's chunks are those the one walk would make),
// and the second half counts only when the first ran to its end: the
// copies out of the page cache are most of index's time, and nothing
// else runs yet (on the 1 GiB timer store, Prepare took 15 ms).
func (p *Prepass) index(i int) error {
	f := p.files[i]
	steps := f.size / ftimer.UnitSize
	if steps < 2*indexSplit {
		r, err := indexRange(f.path, i, 0, steps)
		if err != nil {
			return err
		}
		p.addIndexed(r)
		return nil
	}
	mid := steps / 2 / chunkUnits * chunkUnits
	var (
		second indexed
		err2   error
		wg     sync.WaitGroup
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		second, err2 = indexRange(f.path, i, mid, steps)
	}()
	first, err := indexRange(f.path, i, 0, mid)
	wg.Wait()
	if err != nil {
		return err
	}
	p.addIndexed(first)
	if first.whole {
		if err2 != nil {
			return err2
		}
		p.addIndexed(second)
	}
	return nil
}

// indexSplit is the fewest steps (a multiple of chunkUnits) each half of
// a file that index reads as two must have; a variable for the tests.
var indexSplit int64 = 64 * chunkUnits

// indexed is what indexRange found in a range of one file's steps.
type indexed struct {
	chunks []preChunk
	units  int
	whole  bool // every step of the range is a unit that was read
}

func (p *Prepass) addIndexed(r indexed) {
	p.chunks = append(p.chunks, r.chunks...)
	p.units += r.units
}

// indexRange reads the steps [from, to) of timerlog file i (at path) up to
// the first that is not a unit; from is a multiple of chunkUnits.
func indexRange(path string, i int, from, to int64) (indexed, error) {
	var r indexed
	fh, err := storefile.Open(path)
	if err != nil {
		return r, err
	}
	defer fh.Close()
	const span = (1 << 20) / ftimer.UnitSize * ftimer.UnitSize
	end := to * ftimer.UnitSize
	buf := make([]byte, min(span, end-from*ftimer.UnitSize))
	var c *preChunk
	n := 0
	be := binary.BigEndian
	for at := from * ftimer.UnitSize; at < end; {
		want := min(int64(len(buf)), end-at)
		k, _ := fh.ReadAt(buf[:want], at)
		// An I/O error leaves the rest unindexed: its units are looked
		// up as before.
		b := buf[:k/ftimer.UnitSize*ftimer.UnitSize]
		for q := 0; q < len(b); q += ftimer.UnitSize {
			u := b[q : q+ftimer.UnitSize]
			if be.Uint32(u) != ftimer.UnitSize || be.Uint32(u[12:]) > 0xF { // ftimer.Unit.Valid
				return r, nil
			}
			pos, py := at+int64(q), int64(be.Uint64(u[28:]))
			if c == nil || n == chunkUnits {
				r.chunks = append(r.chunks, preChunk{file: i, pos: pos, lo: py, hi: py})
				c, n = &r.chunks[len(r.chunks)-1], 0
			}
			c.end = pos + ftimer.UnitSize
			c.lo, c.hi = min(c.lo, py), max(c.hi, py)
			n++
			r.units++
		}
		if int64(k) < want {
			return r, nil
		}
		at += want
	}
	r.whole = true
	return r, nil
}

// Tap is a rocketmq.Config.Tap: for commitlog file i (first offset base)
// it returns the function that marks the units pointing at its records
// and, for a file the begun walk's readTail would read, collects its
// re-puts (tailPlan).
func (p *Prepass) Tap(i int, base int64) func(m *rmq.Message, phy int64) {
	var c *preCursor
	if ci := sort.Search(len(p.maxHi), func(k int) bool { return p.maxHi[k] >= base }); ci < len(p.chunks) {
		c = &preCursor{p: p, ci: ci - 1, rv: newResolver()}
		c.advance()
		p.keptMu.Lock()
		p.cursors = append(p.cursors, c)
		p.keptMu.Unlock()
	}
	t := p.tail.collect(base)
	switch {
	case t == nil && c == nil:
		return nil
	case t == nil:
		return c.record
	case c == nil:
		return t.record
	}
	return func(m *rmq.Message, phy int64) {
		c.record(m, phy)
		t.record(m, phy)
	}
}

// preCursor walks the units of the chunks from one start on, in
// timerlog order, against the records of one commitlog file.
type preCursor struct {
	p    *Prepass
	rv   *resolver
	kept []keptTarget // the targets it resolved (captureFrom)
	ci   int          // current chunk
	buf  []byte
	k    int // next unit in buf
	u    ftimer.Unit
	k64  int64 // u's step index
	ok   bool  // u is a unit to match
}

// record takes the record at phy: it passes the units that point before
// it (into a record, or out of order) and marks those that point at it.
func (c *preCursor) record(m *rmq.Message, phy int64) {
	for c.ok && c.u.OffsetPy < phy {
		c.advance()
	}
	for c.ok && c.u.OffsetPy == phy {
		if !m.IsBlank() && m.PhysicalOffset == phy && m.TotalSize <= maxTargetSize && int(m.TotalSize) == len(m.Raw) {
			if c.rv.checksOut(&c.u, m) {
				c.p.mark(c.k64)
				if c.p.keeps(c.u.DeliverMs()) && c.p.kept.Add(1) <= int64(c.p.keepMax) {
					c.kept = append(c.kept, keptTarget{c.k64, c.rv.resolve(&c.u, m, nil, true)})
				}
			}
		}
		c.advance()
	}
	if !c.ok {
		c.buf = nil
	}
}

// keeps reports whether a marked unit of deliver time d has its target
// kept (captureFrom): its slot time d/precision*precision is at or after
// keepFrom. A slot time is at most d when d >= 0, so a d below keepFrom
// (all but the pending units) needs no division.
func (p *Prepass) keeps(d int64) bool {
	if d >= 0 && d < p.keepFrom {
		return false
	}
	return d/p.precision*p.precision >= p.keepFrom
}

// advance loads the next unit; ok is false after the last chunk.
func (c *preCursor) advance() {
	for {
		if c.k+ftimer.UnitSize <= len(c.buf) {
			ch := &c.p.chunks[c.ci]
			f := &c.p.files[ch.file]
			pos := ch.pos + int64(c.k)
			b := c.buf[c.k : c.k+ftimer.UnitSize]
			c.k += ftimer.UnitSize
			// ftimer.Unit.Valid on the bytes, then the unit decoded
			// straight into c.u (a whole unit decodes without error).
			if binary.BigEndian.Uint32(b) == ftimer.UnitSize && ftimer.MagicOK(int32(binary.BigEndian.Uint32(b[12:]))) {
				ftimer.DecodeUnitTo(&c.u, (*[ftimer.UnitSize]byte)(b), f.base+pos)
				c.k64, c.ok = f.step+pos/ftimer.UnitSize, true
				return
			}
			continue
		}
		c.ci++
		if c.ci >= len(c.p.chunks) {
			c.ok = false
			return
		}
		if !c.load() {
			c.ok = false
			return
		}
	}
}

// load reads chunk c.ci into the buffer. The file is opened for the one
// read: a commitlog file's walk can end anywhere in the units, with no
// call to say so, so the cursor holds no descriptor between records.
func (c *preCursor) load() bool {
	ch := c.p.chunks[c.ci]
	fh, err := storefile.Open(c.p.files[ch.file].path)
	if err != nil {
		return false
	}
	defer fh.Close()
	n := int(ch.end - ch.pos)
	if cap(c.buf) < n {
		c.buf = make([]byte, n)
	}
	c.buf = c.buf[:n]
	if k, _ := fh.ReadAt(c.buf, ch.pos); k < n {
		c.buf = c.buf[:k/ftimer.UnitSize*ftimer.UnitSize]
	}
	c.k = 0
	return true
}

// step is the step index of timerlog offset off, -1 when no file holds a
// unit there.
func (p *Prepass) step(off int64) int64 {
	i := sort.Search(len(p.files), func(i int) bool { return p.files[i].base > off }) - 1
	if i < 0 || off >= p.files[i].base+p.files[i].size || (off-p.files[i].base)%ftimer.UnitSize != 0 {
		return -1
	}
	return p.files[i].step + (off-p.files[i].base)/ftimer.UnitSize
}

// mark marks step k.
func (p *Prepass) mark(k int64) { p.marks[k/64].Or(1 << (k % 64)) }

// clean reports whether the tap found the target of the unit at timerlog
// offset off to check out.
func (p *Prepass) clean(off int64) bool {
	k := p.step(off)
	return k >= 0 && p.marks[k/64].Load()&(1<<(k%64)) != 0
}

// allClean reports whether the tap found the targets of the n units from
// timerlog offset off on (one file's consecutive steps) all to check out.
func (p *Prepass) allClean(off int64, n int) bool {
	i := sort.Search(len(p.files), func(i int) bool { return p.files[i].base > off }) - 1
	if i < 0 || n <= 0 || (off-p.files[i].base)%ftimer.UnitSize != 0 || off+int64(n)*ftimer.UnitSize > p.files[i].base+p.files[i].size {
		return false
	}
	k := p.files[i].step + (off-p.files[i].base)/ftimer.UnitSize
	for end := k + int64(n); k < end; {
		w, b := k/64, k%64
		span := min(64-b, end-k)
		mask := ^uint64(0) >> (64 - span) << b // span bits from bit b
		if p.marks[w].Load()&mask != mask {
			return false
		}
		k += span
	}
	return true
}

// Marked is how many units the tap marked, of how many indexed.
func (p *Prepass) Marked() (marked int64, units int) {
	for i := range p.marks {
		marked += int64(bits.OnesCount64(p.marks[i].Load()))
	}
	return marked, p.units
}

// captureFrom has the tap keep the targets of the marked units whose slot
// time is at or after fromMs (at most max of them): Scan needs the ids of
// those units (pending, expired) whatever the tap found, and would look
// each record up again in the commitlog; the tap has it decoded already.
// Begin calls it, from the checkpoint, before the commitlog scan.
func (p *Prepass) captureFrom(fromMs, precisionMs int64, max int) {
	p.keepFrom, p.precision, p.keepMax = fromMs, precisionMs, max
}

// keptTargets are the targets the tap kept, by step (nil: none), once
// the commitlog scan that called Tap is done.
func (p *Prepass) keptTargets() map[int64]*target {
	if p == nil {
		return nil
	}
	p.keptMu.Lock()
	defer p.keptMu.Unlock()
	n := 0
	for _, c := range p.cursors {
		n += len(c.kept)
	}
	if n == 0 {
		return nil
	}
	m := make(map[int64]*target, n)
	for _, c := range p.cursors {
		for i := range c.kept {
			m[c.kept[i].k] = &c.kept[i].t
		}
	}
	p.cursors = nil // and their read buffers
	return m
}
