package rabbitmq

import (
	"encoding/binary"
	"encoding/hex"

	rfmt "github.com/storectl/storectl/pkg/format/rabbitmq"
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

// MinSkipFrame is the smallest skip frame: a Size of 1 (Size 0 is the
// zero word generation 1 stops at) plus the 8-byte size and the marker.
const MinSkipFrame = 10

// skipMarker ends a skip frame: not 0xFF, so generation 1 skips the frame
// without taking it (and does not crash on its Size < 16), and not 0x00,
// so the next record is not preceded by a zero hole (§3.4).
const skipMarker = 0xFE

// SkipFrame returns a total-byte frame <<Size:64, 0xFF × Size, 0xFE>>,
// Size = total − 9, for gaps too short for a dummy record: generation 1
// (rabbit_msg_file:scan/4) jumps over it whole. 8-byte windows inside it
// either start with 0xFF (sizes past any file) or hold a few
// zero bytes then Size and 0xFF bytes: sizes the planner's models check.
// total must be ≥ MinSkipFrame.
func SkipFrame(total int64) []byte {
	b := filler(total)
	binary.BigEndian.PutUint64(b, uint64(total-rfmt.RDQOverhead))
	b[total-1] = skipMarker
	return b
}

func hexID(id [16]byte) string { return hex.EncodeToString(id[:]) }

// idAlloc hands out dummy msg ids that no record of the vhost (in any
// file: a dummy id seen twice would be a duplicate record) and no queue
// reference uses: used holds the ids with the dummy prefix known so far
// (hardenVHost), planned the ids handed out.
type idAlloc struct {
	used    map[[16]byte]bool
	planned map[[16]byte]bool
	next    uint32
}

// hasDummyPrefix reports whether id starts like every dummy id: only such
// an id can be one the allocator hands out.
func hasDummyPrefix(id [16]byte) bool { return [12]byte(id[:12]) == dummyIDPrefix }

func (a *idAlloc) id() [16]byte {
	for {
		var id [16]byte
		copy(id[:], dummyIDPrefix[:])
		binary.BigEndian.PutUint32(id[12:], a.next)
		a.next++
		if !a.used[id] {
			a.used[id], a.planned[id] = true, true
			return id
		}
	}
}

// Model indexes of models.lost.
const (
	modelGen1      = iota // ≤3.13.0, every real record, crash = crashPenalty
	modelGen2             // 3.13.1–4.0.2, every real record
	modelGen3             // 4.0.3–4.0.6 dirty recovery, live records
	modelGen3Large        // 4.0.7–4.1.4
	modelGen3Fixed        // 4.1.5+
)

var modelNames = [...]string{"generation-1 (3.10.0-3.13.0)", "generation-2 (3.13.1-4.0.2)",
	"generation-3 (4.0.3-4.0.6)", "generation-3 (4.0.7-4.1.4)", "generation-3 (4.1.5+)"}

// losses counts, per model, the original records it does not return:
// every real record for generations 1 and 2 (what they lose is what the
// scan reports), the live ones for the validating generation 3 (it
// rejects the rest by design). Dummies are not counted: they are ours.
func (s *sim) losses(m *models) {
	if m.gen1Err != nil {
		m.lost[modelGen1] += crashPenalty
	}
	m.lost[modelGen1] += s.missing(m.gen1.Records, false, true)
	m.lost[modelGen2] += s.missing(m.gen2, false, false)
	for i := range m.gen3 {
		m.lost[modelGen3+i] += s.missing(m.gen3[i], true, false)
	}
	for _, n := range m.lost {
		m.lostSum += n
	}
}

// missing counts the original records (the live ones only, with live)
// that got does not return at their offset with their size (anySize: at
// their offset): a merge, as the scanner models return records in file
// order, each past the last (FuzzRDQ checks it), and s.orig is in file
// order.
func (s *sim) missing(got []rfmt.ScanRecord, live, anySize bool) int {
	n, j := 0, 0
	for _, r := range s.orig {
		for j < len(got) && got[j].Offset < r.off {
			j++
		}
		if live && !r.live() {
			continue
		}
		if j == len(got) || got[j].Offset != r.off || !anySize && got[j].TotalSize != r.total {
			n++
		}
	}
	return n
}
