package stream

import (
	"errors"
	"github.com/storectl/storectl/internal/storefile"

	"github.com/storectl/storectl/pkg/format"
	"github.com/storectl/storectl/pkg/format/osiris"
)

// PairInfo is what a repair planner needs of one scanned segment/index
// pair. Paths are relative to the data dir ("" when the file is missing).
type PairInfo struct {
	Name        string // the 20-digit name
	First       uint64 // the first chunk id the name says
	Segment     string
	Index       string
	SegmentSize int64
	IndexSize   int64
	// Last: the pair the broker's next start repairs.
	Last bool
	// BeforeFirstPair: a segment without its index before the stream's
	// first index/segment pair (what retention leaves when it is
	// interrupted between deleting the index and the segment).
	BeforeFirstPair bool
	// IndexOK: the index holds exactly one matching record per whole chunk
	// of the segment, and nothing else.
	IndexOK bool
	Chunks  int
	// Messages are the user records of the segment's whole chunks.
	Messages int64
	// GoodEnd is the end of the last whole chunk whose data matches its
	// CRC, with only damaged or torn chunks after it (where osiris' start
	// truncates a last segment when its index is whole).
	GoodEnd int64
	// BadTail are the whole chunks after GoodEnd (CRC failures).
	BadTail []TailChunk
	Torn    *TornChunk
	// Damaged: the segment has a damaged chunk header somewhere.
	Damaged bool
}

// TailChunk is a whole chunk at a segment's end.
type TailChunk struct {
	Pos, End   int64
	ChunkID    uint64
	NumRecords uint32
	Type       osiris.ChunkType
}

// TornChunk is a chunk cut short by the end of its segment.
type TornChunk struct {
	Pos          int64
	Avail        int64
	Header       *osiris.ChunkHeader // nil when the header is cut
	WholeEntries int
	WholeRecords int
	WholeEnd     int64
}

// Dir is the stream dir's absolute path.
func (st *StreamScan) Dir() string { return st.abs }

// Pairs describes the stream's pairs in name order.
func (st *StreamScan) Pairs() []PairInfo {
	out := make([]PairInfo, 0, len(st.segs))
	seenPair := false
	for _, s := range st.segs {
		p := PairInfo{Name: s.p.name, First: s.p.first, Segment: s.rel, Index: s.relIdx, SegmentSize: s.size,
			IndexSize: s.idx.size, Last: s.last, Chunks: s.chunks, Messages: s.messages, Damaged: s.garbageAt >= 0}
		if s.p.segment != "" && s.p.index != "" {
			seenPair = true
		}
		p.BeforeFirstPair = s.p.segment != "" && s.p.index == "" && !seenPair
		x := s.idx
		p.IndexOK = x.present && x.headerOK && x.mismatch == 0 && x.missing == 0 && x.extra == 0 &&
			x.zero == 0 && x.tornBytes == 0 && x.records == s.chunks && s.readErr == nil
		p.GoodEnd = s.validEnd
		if s.tail != nil {
			p.GoodEnd = osiris.FileHeaderSize
			for _, c := range s.tail {
				if c.CRCMatch {
					p.GoodEnd, p.BadTail = c.End, nil
					continue
				}
				p.BadTail = append(p.BadTail, TailChunk{Pos: c.Pos, End: c.End, ChunkID: c.ID, NumRecords: c.NumRecords, Type: c.Type})
			}
		}
		if t := s.torn; t != nil {
			p.Torn = &TornChunk{Pos: t.Pos, Avail: t.Avail, Header: t.Header, WholeEntries: t.WholeEntries, WholeRecords: t.WholeRecords, WholeEnd: t.WholeEnd}
		}
		out = append(out, p)
	}
	return out
}

// BuildIndex is the index osiris would have written for the segment at
// path: its header and one record per whole chunk, in file order (chunks
// past a damaged header included, found as the scan finds them). It reads
// the segment once.
func BuildIndex(path string) ([]byte, int, error) {
	f, err := storefile.Open(path)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, 0, err
	}
	size := st.Size()
	out := osiris.AppendIndexHeader(nil)
	sr := osiris.SegmentChunks(f, size)
	n := 0
	var prev *chunkRef
	for {
		for sr.Next() {
			c := sr.Chunk()
			out = osiris.AppendIndexRecord(out, osiris.IndexRecordFor(c.Header, c.Pos))
			n++
			r := refOf(c, true)
			prev = &r
		}
		err := sr.Err()
		if err == nil {
			return out, n, nil
		}
		var ce *format.CorruptError
		if !errors.As(err, &ce) {
			return nil, n, err
		}
		if h, part := sr.Partial(); part != nil || h != nil {
			return out, n, nil // a torn tail has no record
		}
		next := resync(f, size, sr.Pos(), prev, nil)
		if next < 0 {
			return out, n, nil
		}
		sr.SeekChunk(next)
	}
}

// HasFinding reports whether the stream has a finding of code at path.
func (st *StreamScan) HasFinding(code, path string) bool {
	for _, f := range st.findings {
		if f.Code == code && f.Path == path {
			return true
		}
	}
	return false
}
