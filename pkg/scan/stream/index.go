package stream

import (
	"errors"
	"fmt"
	"github.com/storectl/storectl/internal/storefile"
	"io"
	"os"

	"github.com/storectl/storectl/pkg/format"
	"github.com/storectl/storectl/pkg/format/osiris"
	"github.com/storectl/storectl/pkg/scan"
)

// indexWalk reads an index front to back beside its segment's chunks:
// each chunk takes the record at its position, so the comparison holds
// one record at a time whatever the index's size.
type indexWalk struct {
	path, rel string
	f         *os.File
	x         *osiris.IndexReader
	seg       io.ReaderAt
	segSize   int64
	st        *idxState
	rules     Rules

	have   bool
	rec    osiris.IndexRecord
	recPos int64

	// the current run of chunks without a record
	runFrom, runTo uint64
	runPos         int64
	runChunks      int
	// the current run of records that point at no chunk
	xFrom    int64
	xN       int
	xFirst   osiris.IndexRecord
	xPastEOF bool
}

// openIndex opens the pair's index (nil: no index, or unreadable).
func openIndex(sc *scanCtx, s *segScan, path string) *indexWalk {
	if path == "" {
		return nil
	}
	f, err := storefile.Open(path)
	if err != nil {
		s.idxErr = err
		return nil
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		s.idxErr = err
		return nil
	}
	s.idx.present, s.idx.size = true, st.Size()
	w := &indexWalk{path: path, rel: s.relIdx, f: f, st: &s.idx, rules: sc.rules, xFrom: -1, runPos: -1}
	x, err := osiris.NewIndexReader(f, st.Size())
	if err != nil {
		var ce *format.CorruptError
		if !errors.As(err, &ce) {
			f.Close()
			s.idxErr = err
			return nil
		}
		s.add(scan.Finding{Code: CodeIndexHeader, Severity: scan.Warning, Path: s.relIdx, Offset: ce.Offset, Length: min(st.Size(), osiris.FileHeaderSize),
			Expected: "OSII version 1", Actual: headerBytes(f, st.Size()), Repair: scan.RepairRebuildIndex,
			Message: "the file does not start with an osiris index header (osiris does not check it, and reads its records from byte 8 anyway)",
			Details: map[string]any{"error": format.WithPath(err, s.relIdx).Error()}})
		x = osiris.IndexRecords(f, st.Size())
		x.Read = min(st.Size(), osiris.FileHeaderSize)
	} else {
		s.idx.headerOK = true
	}
	w.x = x
	w.advance()
	return w
}

func (w *indexWalk) close() { w.f.Close() }

// read is how many bytes of the index were read.
func (w *indexWalk) read() int64 { return w.x.Read }

func (w *indexWalk) advance() {
	w.have = w.x.Next()
	if w.have {
		w.rec, w.recPos = w.x.Record(), w.x.Pos()
		w.st.records++
	}
}

// attach gives the walk the segment it indexes (for on-disk checks).
func (w *indexWalk) attach(seg io.ReaderAt, size int64) { w.seg, w.segSize = seg, size }

// chunk matches the next record(s) with the whole chunk ref.
func (w *indexWalk) chunk(s *segScan, ref chunkRef) {
	for {
		if !w.have {
			w.miss(s, ref)
			return
		}
		r := w.rec
		switch {
		case r.IsZero():
			w.zero(s)
			w.advance()
			continue
		case int64(r.FilePos) < ref.Pos:
			w.stray(s, r)
			w.advance()
			continue
		case int64(r.FilePos) > ref.Pos:
			w.miss(s, ref)
			return
		}
		w.flushStray(s)
		w.endRun(s, false)
		want := osiris.IndexRecordFor(osiris.ChunkHeader{ChunkID: ref.ID, Timestamp: ref.Timestamp, Epoch: ref.Epoch, Type: ref.Type}, ref.Pos)
		if r == want {
			w.st.matched++
			rr := ref
			w.st.lastMatched = &rr
		} else {
			w.st.mismatch++
			s.add(scan.Finding{Code: CodeIndexMismatch, Severity: scan.Error, Path: w.rel, Offset: w.recPos, Length: osiris.IndexRecordSize,
				Expected: recString(want), Actual: recString(r), Repair: scan.RepairRebuildIndex,
				Message: fmt.Sprintf("the index record for the chunk at %d disagrees with the chunk (%s)", ref.Pos, recDiff(want, r)),
				Details: map[string]any{"segment": s.rel, "chunk_pos": ref.Pos, "chunk_id": ref.ID}})
		}
		// osiris' start-up check of a record: a chunk header at its
		// position whose data matches the CRC (is_valid_chunk_on_disk/2).
		if ref.CRCMatch {
			w.valid(r, ref.next(), ref.End)
		}
		w.advance()
		return
	}
}

func recString(r osiris.IndexRecord) string {
	return fmt.Sprintf("chunk_id=%d timestamp=%d epoch=%d file_pos=%d type=%d", r.ChunkID, r.Timestamp, r.Epoch, r.FilePos, r.Type)
}

func recDiff(want, got osiris.IndexRecord) string {
	var d []string
	if want.ChunkID != got.ChunkID {
		d = append(d, fmt.Sprintf("chunk id %d, record says %d", want.ChunkID, got.ChunkID))
	}
	if want.Timestamp != got.Timestamp {
		d = append(d, "timestamp differs")
	}
	if want.Epoch != got.Epoch {
		d = append(d, fmt.Sprintf("epoch %d, record says %d", want.Epoch, got.Epoch))
	}
	if want.Type != got.Type {
		d = append(d, fmt.Sprintf("type %d, record says %d", want.Type, got.Type))
	}
	if len(d) == 0 {
		return "same fields"
	}
	return fmt.Sprint(d)
}

// valid records r as valid on disk (the last one wins, as osiris' backward
// scan finds it).
func (w *indexWalk) valid(r osiris.IndexRecord, next uint64, end int64) {
	rr := r
	w.st.lastValid, w.st.lastValidPos = &rr, w.recPos
	w.st.lastValidNext, w.st.lastValidEnd = next, end
}

func (w *indexWalk) zero(s *segScan) {
	w.st.zero++
	s.add(scan.Finding{Code: CodeIndexZero, Severity: scan.Warning, Path: w.rel, Offset: w.recPos, Length: osiris.IndexRecordSize,
		Repair: scan.RepairRebuildIndex, Message: "an all-zero index record (preallocated or zero-filled space; osiris skips it at start, but an offset lookup reads it as chunk 0)"})
}

// miss extends the run of chunks without a record.
func (w *indexWalk) miss(s *segScan, ref chunkRef) {
	w.flushStray(s)
	if w.runChunks == 0 {
		w.runFrom, w.runPos = ref.ID, ref.Pos
	}
	w.runTo = ref.next()
	w.runChunks++
	w.st.missing++
}

// endRun reports the current run of unindexed chunks: at the end of the
// index (atEnd) it is a short index.
func (w *indexWalk) endRun(s *segScan, atEnd bool) {
	if w.runChunks == 0 {
		return
	}
	rg := Range{w.runFrom, w.runTo}
	if atEnd {
		w.st.unreachable = append(w.st.unreachable, rg)
		msg := fmt.Sprintf("the index has no record for the last %d chunk(s) of its segment (offsets %d-%d, from byte %d)", w.runChunks, rg.From, rg.To-1, w.runPos)
		if s.last {
			msg += ": the next start truncates the segment after the last indexed chunk and these whole chunks are lost (rebuild-index keeps them)"
		} else {
			msg += ": a consumer attaching at these offsets is sent to the end of the stream and gets nothing of them"
		}
		s.add(scan.Finding{Code: CodeIndexShort, Severity: scan.Error, Path: w.rel, Offset: osiris.FileHeaderSize + int64(w.st.records)*osiris.IndexRecordSize, Repair: scan.RepairRebuildIndex,
			Expected: fmt.Sprintf("%d more record(s)", w.runChunks), Actual: "end of index", Message: msg,
			Details: map[string]any{"segment": s.rel, "chunk_pos": w.runPos, "offsets": rg, "chunks": w.runChunks}})
	} else {
		s.add(scan.Finding{Code: CodeIndexMismatch, Severity: scan.Warning, Path: w.rel, Offset: w.recPos, Length: 0, Repair: scan.RepairRebuildIndex,
			Message: fmt.Sprintf("the index has no record for %d chunk(s) of its segment (offsets %d-%d, from byte %d); offset lookups there start at an earlier chunk", w.runChunks, rg.From, rg.To-1, w.runPos),
			Details: map[string]any{"segment": s.rel, "chunk_pos": w.runPos, "offsets": rg, "chunks": w.runChunks}})
	}
	w.runChunks = 0
}

// stray accounts a record that points at no chunk start.
func (w *indexWalk) stray(s *segScan, r osiris.IndexRecord) {
	if w.xN == 0 {
		w.xFrom, w.xFirst = w.recPos, r
	}
	w.xN++
	w.st.extra++
	if int64(r.FilePos) >= w.segSize {
		w.xPastEOF = true
	}
	// osiris checks the record the same way whatever it points at.
	if int64(r.FilePos) < w.segSize && w.seg != nil && validAt(w.seg, w.segSize, int64(r.FilePos)) {
		if h, ok := headerAt(w.seg, int64(r.FilePos)); ok {
			w.valid(r, h.NextOffset(), int64(r.FilePos)+h.Size())
		}
	}
}

func (w *indexWalk) flushStray(s *segScan) {
	if w.xN == 0 {
		return
	}
	msg := fmt.Sprintf("%d index record(s) point at no chunk of the segment (first: chunk %d at byte %d)", w.xN, w.xFirst.ChunkID, w.xFirst.FilePos)
	if w.xPastEOF {
		msg += "; some point past the segment's end (the index was written after a chunk the segment lost)"
	}
	s.add(scan.Finding{Code: CodeIndexExtra, Severity: scan.Error, Path: w.rel, Offset: w.xFrom, Length: int64(w.xN) * osiris.IndexRecordSize,
		Repair: scan.RepairRebuildIndex, Message: msg,
		Details: map[string]any{"segment": s.rel, "records": w.xN, "first_chunk_id": w.xFirst.ChunkID, "first_file_pos": w.xFirst.FilePos}})
	w.xN, w.xPastEOF = 0, false
}

// finish reports what is left after the segment's last chunk.
func (w *indexWalk) finish(s *segScan, _ *chunkRef) {
	for w.have {
		if w.rec.IsZero() {
			w.zero(s)
		} else {
			w.stray(s, w.rec)
		}
		w.advance()
	}
	w.flushStray(s)
	w.endRun(s, true)
	if err := w.x.Err(); err != nil {
		var ce *format.CorruptError
		if errors.As(err, &ce) && errors.Is(err, format.ErrShort) {
			w.st.tornBytes = w.st.size - ce.Offset
			s.add(scan.Finding{Code: CodeIndexTorn, Severity: scan.Warning, Path: w.rel, Offset: ce.Offset, Length: w.st.tornBytes,
				Expected: fmt.Sprint(osiris.IndexRecordSize), Actual: fmt.Sprint(w.st.tornBytes), Repair: scan.RepairRebuildIndex,
				Message: fmt.Sprintf("the index ends %d bytes into a record (osiris reads it from the last whole record and truncates the rest at start)", w.st.tornBytes)})
		} else {
			s.idxErr = err
		}
	}
}

// positionsAfter lists the file positions of the records past pos (for a
// resync after a damaged chunk), reading the index again on its own.
func (w *indexWalk) positionsAfter(pos int64) []int64 {
	x := osiris.IndexRecords(w.f, w.st.size)
	var out []int64
	for x.Next() {
		if r := x.Record(); !r.IsZero() && int64(r.FilePos) > pos {
			out = append(out, int64(r.FilePos))
			if len(out) >= 64 {
				break
			}
		}
	}
	return out
}

// headerAt reads the chunk header at pos.
func headerAt(r io.ReaderAt, pos int64) (osiris.ChunkHeader, bool) {
	var hb [osiris.ChunkHeaderSize]byte
	if _, err := r.ReadAt(hb[:], pos); err != nil {
		return osiris.ChunkHeader{}, false
	}
	h, err := osiris.DecodeChunkHeader(hb[:], pos)
	return h, err == nil
}
