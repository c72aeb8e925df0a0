package rabbitmq

import (
	"encoding/binary"
	"encoding/hex"

	rfmt "github.com/storectl/storectl/pkg/format/rabbitmq"
	rscan "github.com/storectl/storectl/pkg/scan/rabbitmq"
)

// MinDummyRecord is the smallest dummy record: 8 size + 16 id + 6 ETF
// header (0x83, BINARY_EXT 0x6D, Len:32) + 1 marker, with an empty binary.
const MinDummyRecord = 31

// crashPenalty weighs a generation-1 scanner crash (the whole vhost fails
// to start) above any number of single lost records.
const crashPenalty = 1 << 20

// dummyIDPrefix starts every dummy msg id: 8 bytes 0xFF (so 8-byte
// windows a scanner tests inside the id decode to sizes far beyond any
// file) then "hard", then a 32-bit counter.
var dummyIDPrefix = [12]byte{0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 'h', 'a', 'r', 'd'}

// DummyRecord returns a total-byte dummy record with msg id id:
// <<Size:64, Id:16/binary, 131, 109, Len:32, 0:Len/unit:8, 255>>, Size =
// total − 9 (an ETF binary of zeros, §7b). total must be ≥ MinDummyRecord.
func DummyRecord(total int64, id [16]byte) []byte {
	b := make([]byte, total)
	binary.BigEndian.PutUint64(b, uint64(total-rfmt.RDQOverhead))
	copy(b[8:24], id[:])
	b[24], b[25] = 0x83, 0x6D
	binary.BigEndian.PutUint32(b[26:], uint32(total-MinDummyRecord))
	b[total-1] = rfmt.RDQWriteOK
	return b
}

// evaluator scores a file's bytes by what the scanner models lose: real
// referenced records generation 2 (3.13.1–4.0.2) and generation 3 (4.0.3+,
// with and without the large-message shortcut and the off-by-nine fix,
// as a dirty recovery runs it) do not return, plus records generation 1
// (≤3.13.0) found in the original file but not any more (real records
// only: a bogus frame it took before is no loss).
type evaluator struct {
	b          []byte
	recs       []*rscan.Record // first copies that matter: referenced (or unknown)
	valid      map[[16]byte]bool
	ids        map[[16]byte]bool
	gen1Before map[int64]bool
	gen1Crash  bool
	lost       int
	next       uint32
}

func newEvaluator(b []byte, f *rscan.FileScan, v *rscan.VHostScan) *evaluator {
	e := &evaluator{b: b, valid: map[[16]byte]bool{}, ids: map[[16]byte]bool{}, gen1Before: map[int64]bool{}}
	for _, r := range f.Records {
		e.ids[r.MsgID] = true
		if r.Status == rscan.StatusReferenced || r.Status == rscan.StatusUnknown {
			e.recs = append(e.recs, r)
			e.valid[r.MsgID] = true
		}
	}
	for id := range v.Refs {
		if raw, err := hex.DecodeString(id); err == nil && len(raw) == 16 {
			var k [16]byte
			copy(k[:], raw)
			e.ids[k] = true
		}
	}
	res, err := rfmt.ScanGen1(b)
	e.gen1Crash = err != nil
	real := map[int64]int64{}
	for _, r := range f.Records {
		real[r.Offset] = r.TotalSize
	}
	for _, r := range res.Records {
		if real[r.Offset] == r.TotalSize { // bogus frames it took do not count
			e.gen1Before[r.Offset] = true
		}
	}
	e.lost = e.metric(b)
	return e
}

// metric counts what the models lose on b.
func (e *evaluator) metric(b []byte) int {
	n := 0
	count := func(got []rfmt.ScanRecord) {
		at := make(map[int64]int64, len(got))
		for _, r := range got {
			at[r.Offset] = r.TotalSize
		}
		for _, r := range e.recs {
			if at[r.Offset] != r.TotalSize {
				n++
			}
		}
	}
	count(rfmt.ScanData(b, rfmt.ScanOptions{}))
	for _, o := range []rfmt.ScanOptions{{}, {LargeMessageShortcut: true}, {LargeMessageShortcut: true, OffByNineFix: true}} {
		located := map[[16]byte]bool{}
		o.Valid = func(r rfmt.ScanRecord) rfmt.Validity {
			if e.valid[r.MsgID] && !located[r.MsgID] {
				located[r.MsgID] = true
				return rfmt.Valid
			}
			return rfmt.Invalid
		}
		count(rfmt.ScanData(b, o))
	}
	res, err := rfmt.ScanGen1(b)
	if err != nil && !e.gen1Crash {
		n += crashPenalty
	}
	found := map[int64]bool{}
	for _, r := range res.Records {
		found[r.Offset] = true
	}
	for off := range e.gen1Before {
		if !found[off] {
			n++
		}
	}
	return n
}

// dummyID returns a fresh dummy msg id no record or reference uses.
func (e *evaluator) dummyID() [16]byte {
	for {
		var id [16]byte
		copy(id[:], dummyIDPrefix[:])
		binary.BigEndian.PutUint32(id[12:], e.next)
		e.next++
		if !e.ids[id] {
			e.ids[id] = true
			return id
		}
	}
}

// choose picks the rewrite of gap g that the models score best, if it
// scores no worse than leaving the gap, applies it to e.b and returns
// it; FillNone when neither helps.
func (e *evaluator) choose(g rscan.Gap, _ uint32) (fill string, data []byte, id string) {
	orig := append([]byte(nil), e.b[g.Offset:g.Offset+g.Length]...)
	type cand struct {
		fill string
		data []byte
		id   [16]byte
	}
	var cands []cand
	if g.Length >= MinDummyRecord {
		did := e.dummyID()
		cands = append(cands, cand{FillDummy, DummyRecord(g.Length, did), did})
	}
	ff := make([]byte, g.Length)
	for i := range ff {
		ff[i] = 0xFF
	}
	cands = append(cands, cand{fill: FillFF, data: ff})
	best, bestScore := -1, e.lost
	for i, c := range cands {
		copy(e.b[g.Offset:], c.data)
		if s := e.metric(e.b); s <= bestScore && (best < 0 || s < bestScore) {
			best, bestScore = i, s
		}
		copy(e.b[g.Offset:], orig)
	}
	if best < 0 {
		return FillNone, nil, ""
	}
	c := cands[best]
	copy(e.b[g.Offset:], c.data)
	e.lost = bestScore
	if c.fill == FillDummy {
		id = hex.EncodeToString(c.id[:])
	}
	return c.fill, c.data, id
}
