package dledger

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"sync"

	"github.com/storectl/storectl/internal/fileview"
	"github.com/storectl/storectl/internal/storefile"
	"github.com/storectl/storectl/pkg/format"
	fdl "github.com/storectl/storectl/pkg/format/dledger"
	rmq "github.com/storectl/storectl/pkg/format/rocketmq"
	"github.com/storectl/storectl/pkg/scan"
	rmqscan "github.com/storectl/storectl/pkg/scan/rocketmq"
)

type formatCorrupt = format.CorruptError

// Record is the `record` of one inner message (scan --records): the
// commitlog record fields plus where its DLedger entry sits.
type Record struct {
	rmqscan.Record
	DLedgerIndex int64 `json:"dledger_index"`
	DLedgerTerm  int64 `json:"dledger_term"`
	EntryOffset  int64 `json:"entry_offset"` // file offset of the 48-byte header
}

// walk reads every data file entry by entry, once: the entry checks, the
// recovery walk, the abnormal recovery's sums and the consume queue merge
// all go along with it, so memory does not grow with the log.
//
// Each file is cut into segments of about segmentSize at positions where
// an entry header seems to start (its pos field is its own offset), and
// scan.Options.Jobs goroutines frame and decode the segments (headers,
// inner records, body CRC: the bulk of the CPU) from windows of their own
// mapping of the file, while the checks that need log order take the
// segments' items in order on the scan's goroutine. A cut is only a
// guess: a segment's walk must land exactly on the next one's start,
// else (a damaged entry, a resync, a body that looked like a header) it
// walks on to the end of the file and the file's later segments are not
// used, so the items are always those of one walk from the file's start.
// At most jobs+3 segments are out at once. A record callback
// (Options.Records, Config.OnMessage) or --jobs 1 makes it one segment
// per file on one goroutine, so that records come in order.
func (s *scanner) walk(ctx context.Context) error {
	if len(s.data) == 0 {
		s.add(scan.Finding{Code: CodeNoDataFiles, Severity: scan.Warning, Path: s.rel + "/" + fdl.DataDir,
			Message: "the DLedger data dir holds no files"})
	}
	jobs := max(s.opts.Jobs, 1)
	split := true
	if jobs == 1 || s.opts.Records != nil || s.cfg.OnMessage != nil {
		jobs, split = 1, false
	}
	ctx, cancel := context.WithCancel(ctx)
	p := &pipe{s: s, ctx: ctx, split: split, tokens: make(chan struct{}, jobs+3)}
	p.ordered, p.work = make(chan *segment, cap(p.tokens)), make(chan *segment, cap(p.tokens))
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
	}()
	wg.Add(1 + jobs)
	go func() {
		defer wg.Done()
		p.dispatch()
	}()
	for range jobs {
		go func() {
			defer wg.Done()
			p.worker()
		}()
	}
	for i := range s.data {
		err := s.checkFile(i, p)
		if cerr := ctx.Err(); cerr != nil {
			return cerr
		}
		if err != nil {
			s.unreadData(i, err)
		}
	}
	if s.merge != nil {
		for c := s.merge.peek(); c != nil; c = s.merge.peek() {
			s.cqUnmatched(c)
			s.advanceCQ()
		}
	}
	return nil
}

// unreadData reports data file i, which the walk could not read (in
// full): what it holds is unknown. When the recovery walk reached it
// unstopped, where recovery stops is unknown too: the entries after it
// are neither kept nor dropped (recoverEntry), and the consume queue
// units from its base on are not judged (finishCQ).
func (s *scanner) unreadData(i int, err error) {
	f := &s.data[i]
	s.res.Unread(f.rel, err)
	s.unreadSpans = append(s.unreadSpans, [2]int64{f.base, f.base + f.size})
	s.wGap = true // the next entry's index is not wLast+1's to check
	if s.unread != "" {
		return
	}
	s.unread, s.unreadFrom = f.rel, f.base
	if i >= s.start && !s.rStopped {
		s.rUnread = true
		s.stopRecovery("") // not a stop: the walk cannot see past here
	}
}

// item is one thing the decode stage found in a file, in file order.
// What only a stop, an end, an error or a failed inner record carries is
// in x, so the item of a good entry is 88 bytes (224 when it held them
// all, the whole header and the inner record's store host and offset): the checks read every item from another CPU's cache, and that
// read was most of their time.
type item struct {
	h     head
	in    innerFacts
	x     *itemExtra
	bodyN int32
	kind  uint8 // itemEntry, itemStop (a rejected or torn entry), itemEnd, itemErr
}

// head is the part of an entry header the checks read (32 bytes of its
// 48: channel and the two CRCs DLedger never computes are not checked,
// and the body length is bodyN).
type head struct {
	pos, index, term int64
	magic, size      int32
}

// set copies those fields of h, one by one (see Reader.HeaderRef).
func (e *head) set(h *fdl.Header) {
	e.pos, e.index, e.term, e.magic, e.size = h.Pos, h.Index, h.Term, h.Magic, h.Size
}

// itemExtra is the rare part of an item.
type itemExtra struct {
	err    error  // itemEntry: the inner record's; itemStop: the header's; itemErr: I/O
	end    string // itemStop, itemEnd: why the walk stopped
	endPos int64
	msgID  string // itemEntry with err: the inner record's message id, when it decoded
}

// err is the item's error, if any.
func (it *item) err() error {
	if it.x == nil {
		return nil
	}
	return it.x.err
}

const (
	itemEntry = iota
	itemStop
	itemEnd
	itemErr
)

const batchSize = 512

// segmentSize is how much of a file one segment covers (a variable for
// the tests); segBatches is how many batches a segment's channel holds
// (its worker waits when the checks are further behind).
var segmentSize int64 = 4 << 20

const segBatches = 16

// prefetchAhead is how far past the entry it decodes a segment's walk
// prefetches the mapping.
var prefetchAhead int64 = 4 << 10

// batches recycles the decode stage's item batches: checkFile hands each
// one back when it has taken its items, so a scan allocates a few
// batches, not one per 512 entries.
var batches = sync.Pool{New: func() any { b := make([]item, 0, batchSize); return &b }}

func getBatch() []item { return (*batches.Get().(*[]item))[:0] }

func putBatch(b []item) {
	clear(b) // drop the strings and errors it points at
	b = b[:0]
	batches.Put(&b)
}

// segment is a run of one file's entries: from start to where the next
// segment starts (stop), or to the end of the file.
type segment struct {
	file  int
	start int64 // file position of its first entry
	stop  int64 // the next segment's start; -1: the end of the file
	last  bool  // the file's last segment
	ch    chan []item
	// tail: its walk did not land on stop (it stopped, resynced or went
	// past it) and went on to the end of the file: the file's later
	// segments are not used. Set before ch is closed.
	tail bool
}

// pipe is the walk's stages: dispatch sends each segment, in order, to
// ordered (for the checks) and to work (for a worker).
type pipe struct {
	s       *scanner
	ctx     context.Context
	split   bool
	tokens  chan struct{} // one per segment out and not yet checked
	ordered chan *segment
	work    chan *segment
}

// dispatch cuts the files into segments.
func (p *pipe) dispatch() {
	defer close(p.work)
	defer close(p.ordered)
	for i := range p.s.data {
		starts := []int64{0}
		if p.split {
			starts = p.s.cuts(&p.s.data[i])
		}
		for k, st := range starts {
			seg := &segment{file: i, start: st, stop: -1, last: k+1 == len(starts), ch: make(chan []item, segBatches)}
			if !seg.last {
				seg.stop = starts[k+1]
			}
			select {
			case p.tokens <- struct{}{}:
			case <-p.ctx.Done():
				return
			}
			p.ordered <- seg // both hold as many segments as there are tokens: no wait
			p.work <- seg
		}
	}
}

// cuts returns file positions to start segments at: 0, then after every
// segmentSize the first position where a header passes Header.Check
// within the next 8 KiB (a guess the walk checks).
func (s *scanner) cuts(f *dataFile) []int64 {
	out := []int64{0}
	if f.size < 2*segmentSize {
		return out
	}
	fh, err := storefile.Open(f.path)
	if err != nil {
		return out
	}
	defer fh.Close()
	buf := make([]byte, 8<<10+fdl.BodyOffset)
	for at := segmentSize; at+segmentSize <= f.size; at += segmentSize {
		n, _ := fh.ReadAt(buf, at)
		for k := 0; k+fdl.BodyOffset <= n; k++ {
			if buf[k+3] != fdl.Magic1 || buf[k] != 0 {
				continue
			}
			pos := at + int64(k)
			if h, _ := fdl.DecodeHeader(buf[k:], f.base+pos); h.Check(f.base+pos) == nil {
				out = append(out, pos)
				break
			}
		}
	}
	return out
}

// worker frames and decodes segments, each file through its own view.
func (p *pipe) worker() {
	w := &walker{file: -1, m: new(rmq.Message), names: &topicNames{m: map[string]string{}}}
	defer w.closeView()
	for seg := range p.work {
		p.runSegment(w, seg)
	}
}

// walker is a worker's state: its view of the file it is in, and the
// inner record and topic names it reuses.
type walker struct {
	file  int
	v     *fileview.File
	err   error // opening file
	m     *rmq.Message
	names *topicNames
	batch []item
}

func (w *walker) closeView() {
	if w.v != nil {
		w.v.Close()
		w.v = nil
	}
}

// runSegment walks seg and closes its channel.
func (p *pipe) runSegment(w *walker, seg *segment) {
	defer close(seg.ch)
	f := &p.s.data[seg.file]
	if w.file != seg.file {
		w.closeView()
		w.file = seg.file
		w.v, w.err = fileview.Open(f.path)
	}
	w.batch = getBatch()
	if w.err != nil {
		seg.tail = true
		w.batch = append(w.batch, item{kind: itemErr, x: &itemExtra{err: w.err}})
	} else if err := p.walkSegment(w, f, seg); err != nil { // a fault: the file shrank under the mapping
		seg.tail = true
		w.batch = append(w.batch, item{kind: itemErr, x: &itemExtra{err: err}})
	}
	if w.batch != nil {
		p.send(seg, w.batch)
		w.batch = nil
	}
}

// send hands a batch to the checks; false when the scan was cancelled.
func (p *pipe) send(seg *segment, b []item) bool {
	select {
	case seg.ch <- b:
		return true
	case <-p.ctx.Done():
		return false
	}
}

// plainReader hides fileview.File's Slice from the reader, for a file
// that can't be mapped (Slice's windows would then be reused): the reader
// copies with pread.
type plainReader struct{ v *fileview.File }

func (r plainReader) ReadAt(b []byte, off int64) (int, error) { return r.v.ReadAt(b, off) }

// walkSegment reads seg's entries with the DLedger reader, resyncing past
// a rejected entry, and sends what it finds in batches. A memory fault
// (the file shrank under its mapping) is err, a *fileview.FaultError
// with the file offset.
func (p *pipe) walkSegment(w *walker, f *dataFile, seg *segment) (err error) {
	defer fileview.Guard(&err)()
	s := p.s
	var ra io.ReaderAt = plainReader{w.v}
	if w.v.Mapped() {
		ra = w.v // a dledger.Slicer: windows of the mapping, no copy
	}
	r := fdl.NewReader(ra, f.size, f.base, s.cfg.MaxMessageSize+fdl.BodyOffset)
	r.Restart(seg.start)
	pf := int64(0) // the file position prefetched up to
	for {
		if seg.stop >= 0 && !seg.tail {
			switch at := r.Offset() - f.base; {
			case at == seg.stop:
				return nil // the next segment goes on from here
			case at > seg.stop:
				seg.tail = true // the cut was not an entry's start: walk on
			}
		}
		if !r.Next() {
			seg.tail = true
			end, endPos := r.End()
			err := r.Err()
			var ce *format.CorruptError
			if err != nil && !errors.As(err, &ce) {
				w.batch = append(w.batch, item{kind: itemErr, x: &itemExtra{err: err}})
				return nil
			}
			if err == nil {
				w.batch = append(w.batch, item{kind: itemEnd, x: &itemExtra{end: end, endPos: endPos}})
				return nil
			}
			st := item{kind: itemStop, x: &itemExtra{err: err, end: end, endPos: endPos}}
			st.h.set(r.HeaderRef())
			w.batch = append(w.batch, st)
			next := s.resync(w.v, f, endPos+1)
			if next < 0 {
				w.batch = append(w.batch, item{kind: itemEnd, x: &itemExtra{end: end, endPos: endPos}})
				return nil
			}
			r.Restart(next)
			continue
		}
		b := w.batch
		n := len(b)
		if n < cap(b) {
			b = b[:n+1]
		} else {
			b = append(b, item{})
		}
		it := &b[n]
		it.kind = itemEntry
		it.h.set(r.HeaderRef())
		if next := r.Offset() - f.base; pf < next+prefetchAhead && w.v.Mapped() {
			// The walk is memory-bound: ask for the bytes
			// prefetchAhead past this entry while it is decoded.
			if a := r.Ahead(); len(a) > 0 {
				from := max(pf-next, 0)
				to := min(prefetchAhead, int64(len(a)))
				if from < to {
					fileview.Prefetch(a[from:to])
				}
				pf = next + to
			}
		}
		body := r.Body()
		it.bodyN = int32(len(body))
		it.x = s.decodeInner(f, &it.h, body, w.names, w.m, &it.in)
		w.batch = b
		if len(b) >= batchSize {
			w.batch = nil
			if !p.send(seg, b) {
				return nil
			}
			w.batch = getBatch()
		}
	}
}

// checkFile runs the in-order checks over the segments of file i.
func (s *scanner) checkFile(i int, p *pipe) error {
	f := &s.data[i]
	if i >= s.abnStart && !s.abnStopped {
		s.abnBase, s.abnSum = f.base, 0
	}
	var ioErr error
	skip := false // a segment ran on to the end of the file: the later ones are not used
	for {
		seg, ok := <-p.ordered
		if !ok {
			return p.ctx.Err()
		}
		for batch := range seg.ch {
			for k := range batch {
				if skip || ioErr != nil {
					break
				}
				it := &batch[k]
				switch it.kind {
				case itemErr:
					ioErr = it.x.err
				case itemEnd:
					if f.cut < 0 {
						f.end, f.endPos = it.x.end, it.x.endPos
					}
				case itemStop:
					s.stopEntry(f, it)
				case itemEntry:
					s.checkEntry(f, it)
				}
			}
			putBatch(batch)
		}
		skip = skip || seg.tail
		<-p.tokens
		if seg.last {
			break
		}
	}
	if ioErr != nil {
		return ioErr
	}
	s.recoverFileEnd(i)
	if f.end != fdl.EndBlank && i >= s.abnStart {
		s.abnStopped = true
	}
	bytes := min(f.size, f.endPos+fdl.BodyOffset)
	s.res.Files = append(s.res.Files, scan.File{Path: f.rel, Kind: "dledger-data", Size: f.size, BytesScanned: bytes, Records: f.n,
		FirstValid: map[bool]int64{true: 0, false: -1}[f.n > 0], LastValid: f.lastPos, ValidEnd: f.endPos, End: endName(f.end)})
	s.res.BytesScanned += bytes
	if s.opts.Progress != nil {
		s.opts.Progress(bytes)
	}
	return nil
}

// checkEntry is everything the scan checks of one entry, in log order.
func (s *scanner) checkEntry(f *dataFile, it *item) {
	h := &it.h
	pos := h.pos - f.base
	f.lastPos = pos
	e := entry{pos: h.pos, size: h.size, index: h.index, term: h.term, file: f.idx, inner: &it.in}
	switch {
	case s.wLast == -1:
	case s.wGap && h.index <= s.wLast:
		s.add(scan.Finding{Code: CodeIndexOrder, Severity: scan.Error, Path: f.rel, Offset: pos + 8, Length: 8,
			Expected: fmt.Sprintf("> %d", s.wLast), Actual: fmt.Sprint(h.index), Repair: scan.RepairTruncate,
			Message: "entry index is not above the last entry's before the data file that could not be read: DLedger's recovery stops here at the latest and drops this entry and every one after it"})
	case !s.wGap && h.index != s.wLast+1:
		s.add(scan.Finding{Code: CodeIndexOrder, Severity: scan.Error, Path: f.rel, Offset: pos + 8, Length: 8,
			Expected: fmt.Sprint(s.wLast + 1), Actual: fmt.Sprint(h.index), Repair: scan.RepairTruncate,
			Message: "entry index does not follow the previous entry's: DLedger's recovery stops here and drops this entry and every one after it"})
	}
	s.wGap = false
	if h.term < s.wTerm {
		s.add(scan.Finding{Code: CodeTermOrder, Severity: scan.Error, Path: f.rel, Offset: pos + 16, Length: 8,
			Expected: fmt.Sprintf(">= %d", s.wTerm), Actual: fmt.Sprint(h.term), Repair: scan.RepairTruncate,
			Message: "entry term is lower than the previous entry's: DLedger's recovery stops here"})
	}
	s.wLast, s.wTerm = h.index, h.term
	switch u, st := s.idx.unit(h.index); st {
	case unitNone:
		e.idxDiff = "missing"
	case unitOK:
		e.idxDiff = u.Mismatch(&fdl.Header{Magic: h.magic, Size: h.size, Index: h.index, Term: h.term, Pos: h.pos})
	} // unitUnread: its index file could not be read; nothing is said of the unit
	if e.idxDiff != "" {
		rel, off := s.indexLoc(h.index)
		s.add(scan.Finding{Code: map[bool]string{true: CodeIndexMissing, false: CodeIndexMismatch}[e.idxDiff == "missing"],
			Severity: scan.Warning, Path: rel, Offset: off, Length: fdl.IndexUnitSize, Repair: scan.RepairRebuildIndex,
			Details: map[string]any{"field": e.idxDiff, "entry_index": h.index, "entry_path": f.rel, "entry_offset": pos},
			Message: fmt.Sprintf("the index unit of entry %d disagrees with the entry (%s): when recovery reaches it, it truncates the index there and rebuilds it from the data", h.index, e.idxDiff)})
	}
	if it.x != nil {
		s.reportInner(f, pos, h, it)
	}
	s.recoverEntry(f, &e)
	if f.idx >= s.abnStart && !s.abnStopped {
		if e.inner.ok {
			s.abnSum += int64(e.inner.size)
		} else {
			s.abnStopped = true
		}
	}
	s.matchCQ(&e)
	f.n++
}

// stopEntry reports the entry the reader stopped at (rejected or torn);
// entries found past it by resync are on disk but past where recovery
// stops.
func (s *scanner) stopEntry(f *dataFile, it *item) {
	var ce *format.CorruptError
	errors.As(it.x.err, &ce)
	if f.cut >= 0 {
		return
	}
	f.cut, f.end, f.endPos = f.n, it.x.end, it.x.endPos
	s.recoverCut(f.idx)
	code, msg := CodeBadEntry, "DLedger rejects this entry header ("+ce.Field+"): its recovery stops here"
	switch {
	case it.x.end == fdl.EndTorn:
		code, msg = CodeTorn, "the entry runs past the end of its file: DLedger's recovery stops here"
	case ce.Field == "pos":
		code, msg = CodeBadPos, "the entry's pos field is not where it sits: DLedger's recovery stops here"
	}
	s.add(scan.Finding{Code: code, Severity: scan.Error, Path: f.rel, Offset: ce.Offset - f.base, Length: fdl.BodyOffset,
		Repair: scan.RepairTruncate, Details: map[string]any{"error": ce.Error(), "entry_index": it.h.index},
		Message: msg})
}

// resync finds the first position at or after from where a header passes
// Header.Check (pos == its own offset), or -1.
func (s *scanner) resync(fh io.ReaderAt, f *dataFile, from int64) int64 {
	const chunk = 1 << 20
	buf := make([]byte, chunk+fdl.BodyOffset)
	for at := from; at+fdl.BodyOffset <= f.size; at += chunk {
		n, _ := fh.ReadAt(buf[:min(int64(len(buf)), f.size-at)], at)
		for k := 0; k+fdl.BodyOffset <= n; k++ {
			if buf[k+3] != fdl.Magic1 || buf[k] != 0 {
				continue
			}
			h, _ := fdl.DecodeHeader(buf[k:], f.base+at+int64(k))
			if h.Check(f.base+at+int64(k)) == nil && int64(k)+at+int64(h.Size) <= f.size {
				return at + int64(k)
			}
		}
	}
	return -1
}

func endName(e string) string {
	switch e {
	case fdl.EndBlank:
		return scan.EndBlank
	case fdl.EndZero:
		return scan.EndZero
	case fdl.EndEOF:
		return scan.EndEOF
	case fdl.EndTorn:
		return scan.EndTorn
	}
	return scan.EndGarbage
}

// decodeInner checks the RocketMQ record in an entry's body (the decode
// stage: no findings, no shared state but the record callbacks, which run
// with one decode goroutine).
func (s *scanner) decodeInner(f *dataFile, h *head, body []byte, names *topicNames, m *rmq.Message, in *innerFacts) *itemExtra {
	phy := h.pos + fdl.BodyOffset
	err := rmq.CheckMessageInto(m, body, phy, s.cfg.MaxMessageSize)
	// Field by field into the item (a literal returned by value is built
	// on the stack and copied, the copy's loads stalling on its stores).
	in.ok = err == nil
	in.decoded = m.Raw != nil && (err == nil || errors.Is(err, format.ErrChecksum) || errors.Is(err, rmq.ErrStale))
	in.queueID, in.queueOff, in.size = m.QueueID, m.QueueOffset, m.TotalSize
	in.topic = ""
	if in.decoded {
		in.topic = names.get(m.Topic)
	}
	if err == nil && int(m.TotalSize) != len(body) {
		in.ok = false
		err = format.Corrupt(phy, "totalSize", fmt.Errorf("%w: inner record is %d bytes, the entry body %d", format.ErrInvalid, m.TotalSize, len(body)))
	}
	var x *itemExtra
	if err != nil {
		x = &itemExtra{err: err}
		if m.Raw != nil {
			x.msgID = m.MsgID()
		}
	}
	if s.cfg.OnMessage != nil {
		_ = s.cfg.OnMessage(m, phy, err)
	}
	if s.opts.Records != nil && in.decoded {
		pos := h.pos - f.base
		rec := Record{Record: rmqscan.NewRecord(m, f.rel, f.base, pos+fdl.BodyOffset), DLedgerIndex: h.index, DLedgerTerm: h.term, EntryOffset: pos}
		_ = s.opts.Records(rec)
	}
	return x
}

// reportInner reports an inner record that fails a check.
func (s *scanner) reportInner(f *dataFile, pos int64, h *head, it *item) {
	err := it.x.err
	code, msg := CodeInnerBad, "the entry's body is not a valid RocketMQ record; DLedger keeps it, RocketMQ's recovery stops at it"
	switch {
	case errors.Is(err, format.ErrChecksum) && isField(err, "bodyCRC"):
		code, msg = CodeInnerBodyCRC, "the inner message's body CRC does not match: DLedger never checks a CRC and keeps it, the broker's reput delivers it damaged, an abnormal recovery stops its dispatch here"
	case errors.Is(err, format.ErrChecksum):
		code, msg = CodeInnerPropCRC, "the inner message's __CRC32# property does not match its properties"
	case errors.Is(err, rmq.ErrStale):
		code, msg = CodeInnerStale, "the inner record's PHYSICALOFFSET is not the entry pos + 48: the append hook did not write it, or the entry is stale"
	}
	s.add(scan.Finding{Code: code, Severity: scan.Error, Path: f.rel, Offset: pos + fdl.BodyOffset, Length: int64(it.bodyN),
		MsgID: it.x.msgID, Repair: scan.RepairNone, Details: map[string]any{"error": err.Error(), "entry_index": h.index, "phy_offset": h.pos + fdl.BodyOffset},
		Message: msg})
}

func isField(err error, field string) bool {
	var ce *format.CorruptError
	return errors.As(err, &ce) && ce.Field == field
}

// indexLoc is the index file and offset of entry idx's unit.
func (s *scanner) indexLoc(idx int64) (string, int64) {
	at := idx * fdl.IndexUnitSize
	i := sort.Search(len(s.index), func(i int) bool { return s.index[i].base > at }) - 1
	if i < 0 {
		return s.rel + "/" + fdl.IndexDir, at
	}
	return s.index[i].rel, at - s.index[i].base
}

var _ = rmq.CQUnitSize

// topicNames interns a file's topic names: the first few in a small table
// compared without hashing (a log has few topics), the rest in a map.
type topicNames struct {
	recent [8]string
	n      int
	m      map[string]string
}

func (t *topicNames) get(b []byte) string {
	for _, s := range t.recent[:t.n] {
		if string(b) == s {
			return s
		}
	}
	s, ok := t.m[string(b)]
	if !ok {
		s = string(b)
		t.m[s] = s
		if t.n < len(t.recent) {
			t.recent[t.n] = s
			t.n++
		}
	}
	return s
}
