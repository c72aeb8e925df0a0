package stream

import (
	"errors"
	"fmt"
	"github.com/storectl/storectl/internal/storefile"
	"io"
	"os"

	"github.com/storectl/storectl/internal/crc32x"
	"github.com/storectl/storectl/internal/fileview"
	"github.com/storectl/storectl/pkg/format"
	"github.com/storectl/storectl/pkg/format/amqp10"
	"github.com/storectl/storectl/pkg/format/osiris"
	"github.com/storectl/storectl/pkg/scan"
)

// maxFindingsPerCode bounds the findings of one code in one file; the
// rest are counted in one CodeTooManyFindings finding.
const maxFindingsPerCode = 200

// chunkRef is what the scan keeps of a chunk.
type chunkRef struct {
	ID         uint64
	NumRecords uint32
	NumEntries uint16
	Epoch      uint64
	Timestamp  int64
	Type       osiris.ChunkType
	Pos, End   int64
	CRCMatch   bool
}

func (c chunkRef) next() uint64 { return c.ID + uint64(c.NumRecords) }

func refOf(c *osiris.Chunk, crcOK bool) chunkRef {
	h := c.Header
	return chunkRef{ID: h.ChunkID, NumRecords: h.NumRecords, NumEntries: h.NumEntries, Epoch: h.Epoch,
		Timestamp: h.Timestamp, Type: h.Type, Pos: c.Pos, End: c.End(), CRCMatch: crcOK}
}

// tornInfo describes a chunk cut short by the end of its segment.
type tornInfo struct {
	Pos          int64
	Avail        int64               // bytes of it that are there
	Header       *osiris.ChunkHeader // nil when the header itself is cut
	WholeEntries int                 // entries entirely within the bytes there
	WholeRecords int                 // records in those entries
	WholeEnd     int64               // file offset where the whole entries end
	Declared     int64               // the chunk's declared size
}

// Message is one message the scan reads, handed to Config.OnMessage.
// Body and the slices of Chunk alias the scan's buffer: they are valid
// only during the call.
type Message struct {
	Stream   *StreamInfo
	Path     string // segment, relative to the data dir
	EntryPos int64  // offset of the entry (for a sub-batch record: of the record) in the file
	// EntrySize is the entry's size with its header (a sub-batch
	// record's with its 4-byte length).
	EntrySize int64
	Offset    uint64 // the message's stream offset
	Chunk     osiris.ChunkHeader
	ChunkPos  int64
	// CRCMatch is false for a chunk whose data fails its CRC, and for the
	// whole entries of a torn chunk (whose CRC cannot be checked).
	CRCMatch bool
	// Torn marks an entry of a chunk cut short by the end of the file.
	Torn bool
	// Resynced marks an entry found past a damaged chunk header, where a
	// reader that walks the segment stops.
	Resynced bool
	SubBatch bool // one record of a sub-batch entry
	Body     []byte
}

// segScan is one segment (and its index) scanned.
type segScan struct {
	p           pair
	rel, relIdx string
	last        bool // the stream's last pair (recovery acts on it)
	size        int64
	headerOK    bool
	readErr     error // the segment could not be read (in full)
	idxErr      error // its index could not be read (in full)

	chunks, userChunks, trackingChunks, crcBad int
	messages, trackingOffsets, crcBadRecords   int64
	badMessages                                int
	first, lastChunk                           *chunkRef
	minEpoch, maxEpoch                         uint64
	validEnd                                   int64 // end of the last whole chunk before any damage
	end                                        string
	torn                                       *tornInfo
	garbageAt                                  int64 // first damaged chunk header, -1 if none
	resyncs                                    int
	bytes                                      int64

	idx       idxState
	tail      []chunkRef // the last pair's chunks (for recovery)
	findings  []scan.Finding
	perCode   map[string]int
	idxAbsent bool
}

// idxState is the index compared with its segment.
type idxState struct {
	present, headerOK bool
	size              int64
	records, zero     int
	tornBytes         int64
	matched           int
	missing           int   // chunks without a record
	missingFrom       int64 // first stream offset of a chunk without a record after the last matched one, -1
	mismatch, extra   int
	// lastValid is the last record (in file order) that points at a valid
	// chunk, as osiris' backward scan at start finds it.
	lastValid     *osiris.IndexRecord
	lastValidPos  int64  // offset of that record in the index
	lastValidNext uint64 // the offset after that record's chunk
	lastValidEnd  int64  // the file offset where that chunk ends
	// lastMatched is the last chunk whose record matched.
	lastMatched *chunkRef
	// unreachable: offset ranges of chunks no record points at.
	unreachable []Range
}

// Range is a half-open range of stream offsets [From, To).
type Range struct {
	From uint64 `json:"from"`
	To   uint64 `json:"to"` // exclusive
}

func (s *segScan) add(f scan.Finding) {
	if s.perCode == nil {
		s.perCode = map[string]int{}
	}
	s.perCode[f.Code]++
	switch n := s.perCode[f.Code]; {
	case n <= maxFindingsPerCode:
		s.findings = append(s.findings, f)
	case n == maxFindingsPerCode+1:
		s.findings = append(s.findings, scan.Finding{Code: CodeTooManyFindings, Severity: f.Severity, Path: f.Path,
			Offset: f.Offset, Repair: f.Repair, Message: fmt.Sprintf("more than %d %s findings in this file; the rest are counted in the summary only", maxFindingsPerCode, f.Code),
			Details: map[string]any{"code": f.Code}})
	}
}

// countingReader counts the bytes read through it (bytes scanned) and
// tells the progress callback.
type countingReader struct {
	r        io.ReaderAt
	n        int64
	progress func(int64)
}

func (c *countingReader) ReadAt(p []byte, off int64) (int, error) {
	n, err := c.r.ReadAt(p, off)
	c.n += int64(n)
	if c.progress != nil && n > 0 {
		c.progress(int64(n))
	}
	return n, err
}

// slicingReader is a countingReader over a mapped segment: the segment
// reader takes its windows from the mapping (osiris.Slicer), counted as
// ReadAt would have read them.
type slicingReader struct {
	*countingReader
	v *fileview.File
}

func (c slicingReader) Slice(off int64, n, read int) ([]byte, error) {
	b, err := c.v.Slice(off, n)
	if err != nil {
		return nil, err
	}
	c.n += int64(read)
	if c.progress != nil && read > 0 {
		c.progress(int64(read))
	}
	return b, nil
}

// scanCtx is what a segment scan needs from the stream scan.
type scanCtx struct {
	root     string
	stream   *StreamInfo
	rules    Rules
	decode   bool // decode every message fully (records, salvage)
	onMsg    func(*Message) error
	progress func(int64)
	vhosts   []string
	// tokens are the scan's jobs (nil: one, or records in order): a
	// segment scan holds one, and its helpers take the spare ones.
	tokens chan struct{}
}

// scanSegment scans one pair: every chunk of the segment, compared with
// the index record by record as both are read front to back.
func scanSegment(sc *scanCtx, p pair, last, keepTail bool) (s *segScan) {
	s = &segScan{p: p, last: last, garbageAt: -1, end: scan.EndEOF}
	s.idx.missingFrom = -1
	if p.segment != "" {
		s.rel = scan.Rel(sc.root, p.segment)
	}
	if p.index != "" {
		s.relIdx = scan.Rel(sc.root, p.index)
	}
	if p.segment == "" {
		return s
	}
	f, err := storefile.Open(p.segment)
	if err != nil {
		s.readErr = err
		return s
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		s.readErr = err
		return s
	}
	s.size = st.Size()
	// Read through fileview: the chunks from windows of its mapping (a
	// file that shrinks under the scan is a read error naming the offset),
	// other reads with pread, and the pages the scan brought in (not the
	// broker's) dropped behind it.
	cr := &countingReader{r: f, progress: sc.progress}
	var chunks io.ReaderAt = cr
	mapped := false // the chunks stay valid until Close (split.go needs that)
	if v, err := fileview.Open(p.segment); err == nil {
		defer v.Close()
		defer fileview.Guard(&s.readErr)()
		cr.r = v
		if v.Mapped() && mapSegments {
			chunks, mapped = slicingReader{cr, v}, true
		}
	}
	defer func() { s.bytes += cr.n }()

	ix := openIndex(sc, s, p.index)
	if ix != nil {
		defer ix.close()
		defer func() { s.bytes += ix.read() }()
	}
	var ra io.ReaderAt = cr
	reached := func(int64) {}
	if ix != nil {
		ix.attach(ra, s.size)
	}
	var hdr [osiris.FileHeaderSize]byte
	n, _ := ra.ReadAt(hdr[:min(s.size, osiris.FileHeaderSize)], 0)
	if err := osiris.DecodeSegmentHeader(hdr[:n], 0); err != nil {
		ce := err.(*format.CorruptError)
		if s.size < osiris.FileHeaderSize {
			s.end = scan.EndShort
			s.add(scan.Finding{Code: CodeSegmentHeader, Severity: scan.Error, Path: s.rel, Offset: 0, Length: s.size,
				Expected: "OSIL version 1", Actual: fmt.Sprintf("%q", hdr[:n]), Repair: scan.RepairNone,
				Message: fmt.Sprintf("the segment is %d bytes, shorter than its 8-byte header", s.size)})
			if ix != nil {
				ix.finish(s, nil)
			}
			return s
		}
		// osiris never checks the header: its chunks are read from byte 8.
		s.add(scan.Finding{Code: CodeSegmentHeader, Severity: scan.Warning, Path: s.rel, Offset: ce.Offset, Length: osiris.FileHeaderSize,
			Expected: "OSIL version 1", Actual: fmt.Sprintf("%q", hdr[:n]), Repair: scan.RepairNone,
			Message: "the file does not start with an osiris segment header (osiris does not check it, and reads chunks from byte 8 anyway)",
			Details: map[string]any{"error": format.WithPath(err, s.rel).Error()}})
	} else {
		s.headerOK = true
	}
	sr := osiris.SegmentChunks(chunks, s.size)
	s.walk(sc, sr, ra, ix, keepTail, mapped, reached)
	if s.chunks == 0 && s.torn == nil && s.end == scan.EndEOF {
		s.add(scan.Finding{Code: CodeEmptySegment, Severity: scan.Info, Path: s.rel, Offset: 0, Length: s.size,
			Repair: scan.RepairNone, Message: "the segment holds no chunk (only its header)"})
	}
	if ix != nil {
		ix.finish(s, nil)
	}
	return s
}

// walk reads every chunk of the segment, comparing each with the index.
func (s *segScan) walk(sc *scanCtx, sr *osiris.SegmentReader, ra io.ReaderAt, ix *indexWalk, keepTail, mapped bool, reached func(int64)) {
	s.validEnd = osiris.FileHeaderSize
	var prev *chunkRef
	take := func(c *osiris.Chunk, k *chunkCheck) error {
		ref := refOf(c, k.crcOK)
		s.chunk(sc, c, ref, prev, k)
		if ix != nil {
			ix.chunk(s, ref)
		}
		if keepTail {
			s.tail = append(s.tail, ref)
		}
		prev = &ref
		if s.garbageAt < 0 {
			s.validEnd = ref.End
		}
		if err := sc.visit(s, c, k.crcOK, false, s.garbageAt >= 0); err != nil {
			return err
		}
		reached(ref.End)
		return nil
	}
	// The chunks' data checks run on helpers when the scan has jobs to
	// spare and the chunks are slices of the mapping (split.go); else
	// each chunk is checked as it is read (SegmentReader's own buffer is
	// reused by the next read).
	var sp *splitter
	if mapped {
		sp = newSplitter(sc)
	}
	if sp != nil {
		defer sp.wait() // before the mapping goes, also after a fault
	}
	var k chunkCheck
	for {
		for sr.Next() {
			c := sr.Chunk()
			var err error
			if sp != nil {
				err = sp.add(c, take)
			} else {
				checkChunk(c, sc.decode, &k)
				err = take(c, &k)
			}
			if err != nil {
				s.readErr = err
				return
			}
		}
		if sp != nil {
			if err := sp.flush(take); err != nil {
				s.readErr = err
				return
			}
		}
		err := sr.Err()
		if err == nil {
			return
		}
		var ce *format.CorruptError
		if !errors.As(err, &ce) {
			s.readErr = err
			return
		}
		h, part := sr.Partial()
		if part != nil && errors.Is(err, format.ErrShort) {
			s.tornTail(sc, sr.Pos(), h, part, prev)
			return
		}
		// A damaged chunk header: a reader stops here. Look for the next
		// chunk (the index may know it) so the scan still sees the rest.
		pos := sr.Pos()
		if s.garbageAt < 0 {
			s.garbageAt = pos
		}
		next := resync(ra, s.size, pos, prev, ix)
		length := next - pos
		if next < 0 {
			length = s.size - pos
		}
		msg := "no chunk header where the previous chunk ends: a reader of this segment stops here (the broker exits the reader with invalid_chunk_header)"
		if next >= 0 {
			msg += fmt.Sprintf("; the next valid chunk storectl found is at %d", next)
		}
		s.add(scan.Finding{Code: CodeBadChunk, Severity: scan.Error, Path: s.rel, Offset: pos, Length: length,
			Repair: scan.RepairNone, Message: msg,
			Details: map[string]any{"error": format.WithPath(err, s.rel).Error(), "resync_at": next}})
		if next < 0 {
			s.end = scan.EndGarbage
			return
		}
		s.resyncs++
		sr.SeekChunk(next)
	}
}

func headerBytes(f *os.File, size int64) string {
	b := make([]byte, min(size, osiris.FileHeaderSize))
	n, _ := f.ReadAt(b, 0)
	return fmt.Sprintf("%q", b[:n])
}

// chunkCheck is what the checks of one chunk's data found: its CRC, its
// entries and the user entries that are not AMQP 1.0 messages. It is
// worked out from the chunk alone (checkChunk), so chunks can be checked
// on other goroutines and accounted in file order (chunk).
type chunkCheck struct {
	crcOK            bool
	entries, records int
	iterErr          error
	bad              []badEntry
}

// badEntry is a user entry whose AMQP 1.0 sections do not walk.
type badEntry struct {
	pos, size int64
	err       error
}

// checkChunk checks the data of chunk c: the CRC, the entries (they must
// fill the data) and, unless decode (the messages are decoded anyway), the
// AMQP sections of a user chunk whose CRC matches. It only reads c.
func checkChunk(c *osiris.Chunk, decode bool, k *chunkCheck) {
	h := &c.Header
	*k = chunkCheck{crcOK: c.CRCMatch(), bad: k.bad[:0]}
	it := osiris.Entries(c.Data, c.Pos+h.DataOffset())
	walk := h.Type == osiris.ChunkUser && !decode && k.crcOK
	for it.Next() {
		e := it.Entry()
		k.entries++
		k.records += e.Records()
		if walk && !e.SubBatch { // stream protocol batches: opaque, possibly compressed
			if err := amqp10.WalkSections(e.Body, e.Pos+int64(e.HeaderSize()), nil); err != nil {
				k.bad = append(k.bad, badEntry{e.Pos, e.Size(), err})
			}
		}
	}
	k.iterErr = it.Err()
}

// chunk accounts one whole chunk, checked (k), against the previous one.
func (s *segScan) chunk(sc *scanCtx, c *osiris.Chunk, ref chunkRef, prev *chunkRef, k *chunkCheck) {
	h := c.Header
	s.chunks++
	if s.first == nil {
		r := ref
		s.first = &r
		s.minEpoch, s.maxEpoch = h.Epoch, h.Epoch
	}
	r := ref
	s.lastChunk = &r
	if h.Type == osiris.ChunkUser {
		s.userChunks++
		s.messages += int64(h.NumRecords)
	} else {
		s.trackingChunks++
		s.trackingOffsets += int64(h.NumRecords)
	}
	if prev != nil {
		switch {
		case h.ChunkID > prev.next():
			s.add(scan.Finding{Code: CodeChunkIDGap, Severity: scan.Error, Path: s.rel, Offset: c.Pos, Length: c.Header.Size(),
				Expected: fmt.Sprint(prev.next()), Actual: fmt.Sprint(h.ChunkID), Repair: scan.RepairNone,
				Message: fmt.Sprintf("chunk ids jump from %d to %d: offsets %d-%d are in no chunk", prev.next(), h.ChunkID, prev.next(), h.ChunkID-1),
				Details: map[string]any{"missing": Range{prev.next(), h.ChunkID}}})
		case h.ChunkID < prev.next():
			s.add(scan.Finding{Code: CodeChunkOverlap, Severity: scan.Error, Path: s.rel, Offset: c.Pos, Length: c.Header.Size(),
				Expected: fmt.Sprint(prev.next()), Actual: fmt.Sprint(h.ChunkID), Repair: scan.RepairNone,
				Message: fmt.Sprintf("chunk %d starts before the previous chunk's offsets end (%d): offsets %d-%d are in two chunks", h.ChunkID, prev.next(), h.ChunkID, min(prev.next(), h.NextOffset())-1),
				Details: map[string]any{"overlap": Range{h.ChunkID, min(prev.next(), h.NextOffset())}}})
		}
		if h.Epoch < prev.Epoch {
			s.add(scan.Finding{Code: CodeEpochRegress, Severity: scan.Error, Path: s.rel, Offset: c.Pos, Length: c.Header.Size(),
				Expected: fmt.Sprintf(">= %d", prev.Epoch), Actual: fmt.Sprint(h.Epoch), Repair: scan.RepairNone,
				Message: fmt.Sprintf("chunk %d has epoch %d after a chunk of epoch %d: epochs only grow (the log holds chunks of an older leader after a newer one's)", h.ChunkID, h.Epoch, prev.Epoch),
				Details: map[string]any{"chunk_id": h.ChunkID}})
		}
	}
	s.minEpoch, s.maxEpoch = min(s.minEpoch, h.Epoch), max(s.maxEpoch, h.Epoch)
	if !ref.CRCMatch {
		s.crcBad++
		if h.Type == osiris.ChunkUser {
			s.crcBadRecords += int64(h.NumRecords)
		}
		s.add(crcFinding(s, sc.rules, c))
	}
	// The entries must fill the data exactly and add up to the counts.
	for _, b := range k.bad {
		s.badMessage(b.pos, b.size, b.err)
	}
	entries, records := k.entries, k.records
	if k.iterErr != nil || entries != int(h.NumEntries) || records != int(h.NumRecords) {
		msg := fmt.Sprintf("the chunk's data holds %d entries of %d records, its header says %d entries of %d records", entries, records, h.NumEntries, h.NumRecords)
		d := map[string]any{"chunk_id": h.ChunkID, "entries": entries, "records": records}
		if k.iterErr != nil {
			msg = fmt.Sprintf("the chunk's data does not split into entries after %d of %d", entries, h.NumEntries)
			d["error"] = format.WithPath(k.iterErr, s.rel).Error()
		}
		s.add(scan.Finding{Code: CodeEntryFraming, Severity: scan.Error, Path: s.rel, Offset: c.Pos, Length: h.Size(),
			Repair: scan.RepairNone, Message: msg, Details: d})
	}
}

func (s *segScan) badMessage(pos, size int64, err error) {
	s.badMessages++
	s.add(scan.Finding{Code: CodeBadMessage, Severity: scan.Warning, Path: s.rel, Offset: pos, Length: size,
		Repair: scan.RepairNone, Message: "an entry of a user chunk is not an AMQP 1.0 message (RabbitMQ cannot convert it for an AMQP 0-9-1 consumer)",
		Details: map[string]any{"error": format.WithPath(err, s.rel).Error()}})
}

// crcFinding reports a chunk whose data fails its CRC, with what a
// consumer of the configured version gets from it.
func crcFinding(s *segScan, rules Rules, c *osiris.Chunk) scan.Finding {
	h := c.Header
	var conseq string
	switch {
	case h.Type != osiris.ChunkUser:
		conseq = "a tracking chunk: writer deduplication or stored consumer offsets recovered from it may be wrong"
	case rules.ReaderChecksCRC:
		conseq = fmt.Sprintf("RabbitMQ %s checks the CRC when a consumer reads the chunk: the reader exits with crc_validation_failure and consumers get nothing from offset %d on", rules.Name, h.ChunkID)
	case h.NumEntries == 1:
		conseq = fmt.Sprintf("RabbitMQ %s checks the CRC of a one-entry chunk only when a consumer reads with credit above 1 (then the reader exits with crc_validation_failure); with credit 1 the damaged message is delivered as it is", rules.Name)
	default:
		conseq = fmt.Sprintf("RabbitMQ %s does not check the CRC of a chunk of several entries on the AMQP 0-9-1 read path: its %d messages (offsets %d-%d) are delivered as they are, some of them damaged", rules.Name, h.NumRecords, h.ChunkID, h.NextOffset()-1)
	}
	return scan.Finding{Code: CodeChunkCRC, Severity: scan.Error, Path: s.rel, Offset: c.Pos, Length: h.Size(),
		Expected: fmt.Sprint(h.CRC), Actual: fmt.Sprint(osiris.CRC(c.Data)), Repair: scan.RepairNone,
		Evidence: map[string]string{"header": "pass", "crc": "fail"},
		Message:  "the chunk's data does not match its CRC: " + conseq,
		Details: map[string]any{"chunk_id": h.ChunkID, "type": h.Type.String(), "entries": h.NumEntries, "records": h.NumRecords,
			"offsets": Range{h.ChunkID, h.NextOffset()}, "epoch": h.Epoch, "timestamp": h.Timestamp}}
}

// tornTail accounts a chunk cut short by the end of the segment.
func (s *segScan) tornTail(sc *scanCtx, pos int64, h *osiris.ChunkHeader, part []byte, prev *chunkRef) {
	t := &tornInfo{Pos: pos, Avail: int64(len(part))}
	s.torn, s.end = t, scan.EndTorn
	d := map[string]any{"available": t.Avail}
	msg := fmt.Sprintf("the segment ends %d bytes into a chunk", t.Avail)
	if h == nil {
		msg = fmt.Sprintf("the segment ends inside a chunk header (%d of %d bytes)", t.Avail, osiris.ChunkHeaderSize)
	} else {
		t.Header, t.Declared = h, h.Size()
		d["chunk_id"], d["declared_size"], d["entries"], d["records"] = h.ChunkID, t.Declared, h.NumEntries, h.NumRecords
		d["offsets"] = Range{h.ChunkID, h.NextOffset()}
		data := part[min(int64(len(part)), h.DataOffset()):min(int64(len(part)), h.DataOffset()+int64(h.DataSize))]
		it := osiris.Entries(data, pos+h.DataOffset())
		for it.Next() {
			t.WholeEntries++
			t.WholeRecords += it.Entry().Records()
		}
		t.WholeEnd = pos + h.DataOffset() + int64(it.Consumed())
		d["whole_entries"], d["whole_records"], d["whole_end"] = t.WholeEntries, t.WholeRecords, t.WholeEnd
		msg = fmt.Sprintf("the segment ends %d bytes into chunk %d of %d bytes (%d records): %d of its %d entries are whole (their CRC cannot be checked: it covers the whole data)",
			t.Avail, h.ChunkID, t.Declared, h.NumRecords, t.WholeEntries, h.NumEntries)
		if prev != nil && h.ChunkID != prev.next() {
			d["expected_chunk_id"] = prev.next()
		}
		if t.WholeEntries > 0 && sc.onMsg != nil {
			c := osiris.Chunk{Header: *h, Pos: pos, Data: data[:it.Consumed()]}
			if err := sc.visit(s, &c, false, true, s.garbageAt >= 0); err != nil {
				s.readErr = err
			}
		}
	}
	if s.last {
		msg += "; the next start cuts the segment at " + fmt.Sprint(pos) + ", dropping the chunk"
	} else {
		msg += "; this is not the last segment: the broker's recovery does not look at it, and a reader stops here"
	}
	s.add(scan.Finding{Code: CodeTornTail, Severity: scan.Error, Path: s.rel, Offset: pos, Length: t.Avail,
		Expected: fmt.Sprint(t.Declared), Actual: fmt.Sprint(t.Avail), Repair: scan.RepairTruncate, Message: msg, Details: d})
}

// resync finds the next chunk after a damaged header at pos: first an
// index record past pos that points at a valid chunk, else a byte search
// for a header whose chunk fits the file and matches its CRC. -1: none.
func resync(r io.ReaderAt, size, pos int64, prev *chunkRef, ix *indexWalk) int64 {
	if ix != nil {
		for _, fp := range ix.positionsAfter(pos) {
			if validAt(r, size, fp) {
				return fp
			}
		}
	}
	const win = 1 << 20
	buf := make([]byte, win+osiris.ChunkHeaderSize)
	for at := pos + 1; at < size; at += win {
		n, _ := r.ReadAt(buf[:min(int64(len(buf)), size-at)], at)
		for i := 0; i < n && i < win; i++ {
			if buf[i] != osiris.ChunkMagic<<4|osiris.ChunkVersion {
				continue
			}
			p := at + int64(i)
			if i+osiris.ChunkHeaderSize <= n {
				h, err := osiris.DecodeChunkHeader(buf[i:i+osiris.ChunkHeaderSize], p)
				if err != nil || p+h.Size() > size || (prev != nil && h.ChunkID < prev.next()) {
					continue
				}
			}
			if validAt(r, size, p) {
				return p
			}
		}
	}
	return -1
}

// validAt reports whether a whole chunk whose data matches its CRC starts
// at pos: osiris' is_valid_chunk_on_disk/2 (it reads the header, then the
// data, and compares erlang:crc32/1 with the header's CRC).
func validAt(r io.ReaderAt, size, pos int64) bool {
	var hb [osiris.ChunkHeaderSize]byte
	if pos < osiris.FileHeaderSize || pos+osiris.ChunkHeaderSize > size {
		return false
	}
	if _, err := r.ReadAt(hb[:], pos); err != nil {
		return false
	}
	h, err := osiris.DecodeChunkHeader(hb[:], pos)
	if err != nil || pos+h.DataOffset()+int64(h.DataSize) > size {
		return false
	}
	buf := make([]byte, min(int64(h.DataSize), 1<<20))
	var crc uint32
	for off, left := pos+h.DataOffset(), int64(h.DataSize); left > 0; {
		b := buf[:min(left, int64(len(buf)))]
		if _, err := r.ReadAt(b, off); err != nil {
			return false
		}
		crc = crc32x.Update(crc, b)
		off += int64(len(b))
		left -= int64(len(b))
	}
	return crc == h.CRC
}
