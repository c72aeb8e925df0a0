package rabbitmq

// What RabbitMQ's own scanners (§3.1–3.3) would make of a file whose real
// records are known: the generation-2 zero-hole misread (§3.4), the
// off-by-nine stop of generations 2 and 3 before 4.1.5 (§3.3), and the
// generation-1 stop and crash (§3.1). The models in pkg/format/rabbitmq
// (ScanData, ScanGen1) are run on the file and their output is compared
// with the real records; the §3.4 condition is also evaluated directly
// and the two must agree.
//
// FileHazards is the one place these rules live: scan runs it on the
// files, harden (pkg/repair/rabbitmq) on the bytes of a file with its
// planned rewrites applied.

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"hash/maphash"
	"math/bits"
	"slices"
	"sort"

	"github.com/storectl/storectl/pkg/format"
	rfmt "github.com/storectl/storectl/pkg/format/rabbitmq"
)

// Version ranges of the scanner generations (§0).
const (
	VersionsGen1        = "3.10.0-3.13.0"
	VersionsGen2        = "3.13.1-4.0.2"
	VersionsOffByNine   = "3.13.1-4.1.4"
	VersionsGen3Unfixed = "4.0.3-4.1.4"
)

// HazardRecord is a real record of a file as the hazard rules see it:
// where it is, its msg id and its status (Status*): a validating scanner
// (generation 3) walks byte by byte through the ones it rejects
// (unreferenced, duplicate).
type HazardRecord struct {
	Offset, TotalSize int64
	MsgID             [16]byte
	Status            string
}

func (r *HazardRecord) end() int64 { return r.Offset + r.TotalSize }

func (r *HazardRecord) victim() Victim {
	return Victim{ID: r.MsgID, Offset: r.Offset, Size: r.TotalSize, Status: r.Status}
}

// live reports whether a validating scanner accepts the record.
func (r *HazardRecord) live() bool { return LiveStatus(r.Status) }

// FileHazards applies the hazard rules of RabbitMQ's scanner generations
// to one .rdq file: b is the whole file, recs its real records in file
// order with their statuses, gaps the ranges no record covers (the tail
// included), in file order. With models the generation-1 and generation-2
// scanner models are run: they find nothing in a file that is a gap-free
// run of records, so a caller may leave them out there. The off-by-nine
// rule always runs. The hazards come zero-hole misreads first (by
// offset), then the generation-1 stop or crash, then off-by-nine windows;
// each lists the records it loses as Victims.
func FileHazards(b []byte, recs []HazardRecord, gaps []Gap, models bool) []Hazard {
	return fileHazards(b, recs, gaps, models, nil)
}

// fileHazards is FileHazards whose generation-1 model tells reached, when
// not nil, how far it has read (rfmt.ScanGen1Reached).
func fileHazards(b []byte, recs []HazardRecord, gaps []Gap, models bool, reached func(int64)) []Hazard {
	var out []Hazard
	if models {
		if gapCandidates(b, gaps, reached) || inFileDup(recs) {
			out = misread(b, recs, out)
		}
		out = gen1(b, recs, out, reached)
	}
	return offByNine(b, recs, gaps, out, reached)
}

// hazards analyses one file; fs.Records must carry their statuses. The
// models run where the file is not a gap-free run of records (gaps, a
// frame without its marker, a second copy of an id first met in the same
// file).
func hazards(b []byte, fs *FileScan, reached func(int64)) {
	irregular := len(fs.Gaps) > 0 || len(fs.BadMarkers) > 0
	for _, r := range fs.Records {
		if r.Status == StatusDuplicate && r.FirstPath == fs.Path {
			irregular = true
		}
	}
	recs := appendHazardRecords(hazardRecs.get(), fs.Records)
	fs.ModelsRun = irregular
	hs := fileHazards(b, recs, fs.Gaps, irregular, reached)
	// The hazards hold copies (Victims), not the records: the next file
	// reuses them.
	clear(recs)
	hazardRecs.put(recs)
	for _, h := range hs {
		if h.Code == CodeScannerCrash {
			fs.ShortFrames = append(fs.ShortFrames, h.Offset)
		}
		if in, ok := h.Details["cascade_inside"].(Location); ok {
			in.Path = fs.Path // FileHazards knows offsets, not paths
			h.Details["cascade_inside"] = in
		}
	}
	fs.Hazards = append(fs.Hazards, hs...)
}

// hazardRecords is what FileHazards needs of a file's records.
func hazardRecords(rs []*Record) []HazardRecord {
	return appendHazardRecords(make([]HazardRecord, 0, len(rs)), rs)
}

// appendHazardRecords appends hazardRecords(rs) to out.
func appendHazardRecords(out []HazardRecord, rs []*Record) []HazardRecord {
	out = slices.Grow(out, len(rs))
	for _, r := range rs {
		out = append(out, HazardRecord{Offset: r.Offset, TotalSize: r.TotalSize, MsgID: r.MsgID, Status: r.Status})
	}
	return out
}

// hazardRecs holds hazards' record lists for reuse.
var hazardRecs reuseList[HazardRecord]

// gapCandidates reports whether any gap position holds a frame the
// generation-2 model would accept: Size ≥ 16 that fits in the file with a
// 0xFF marker after it (clause A without the buffer limit, a superset).
// When none does and no record is a duplicate within the file, the model
// walks the gaps byte by byte and accepts exactly the real records, so it
// finds no bogus frame, and the §3.4 analysis (whose candidates are gap
// positions meeting the same test) predicts none: misread would report
// nothing and is skipped.
//
// The markers lie anywhere after their gaps: they are read in file order,
// maxMarks at a time, so that a caller's mapping (reached, when not nil:
// fileview.Stream) brings in a window at a time, not a page here and
// there all over the file (each with the kernel's fault-around).
func gapCandidates(b []byte, gaps []Gap, reached func(int64)) bool {
	n := len(b)
	const maxMarks = 16 << 10
	var marks []int
	next := 0 // the next offset to tell reached
	tell := func(off int) {
		if reached != nil && off >= next {
			reached(int64(off))
			next = off + rfmt.ReachedStep
		}
	}
	check := func() bool {
		slices.Sort(marks)
		next = 0 // a new pass
		for _, m := range marks {
			tell(m)
			if b[m] == rfmt.RDQWriteOK {
				return true
			}
		}
		marks, next = marks[:0], 0
		return false
	}
	for _, g := range gaps {
		for p, end := int(g.Offset), int(g.Offset+g.Length); p < end && n-p >= 8; {
			tell(p)
			size := binary.BigEndian.Uint64(b[p:])
			if size == 0 {
				p = skipZeroWindow(b, p)
				continue
			}
			if size >= rfmt.RDQMinSize && size < uint64(n-p-rfmt.RDQSizeFieldLen) {
				if marks = append(marks, p+rfmt.RDQSizeFieldLen+int(size)); len(marks) == maxMarks && check() {
					return true
				}
			}
			p++
		}
	}
	return check()
}

// inFileDup reports whether two records of the file share a msg id: the
// model rejects the second copy (its ids are per file) and walks through
// it byte by byte. Statuses cannot tell (transient files have none, and
// both copies of an id first seen in an earlier file are duplicates).
//
// The set is open addressing over indexes into recs (a quarter to a half
// full, slots found by a seeded hash: ids chosen to collide cannot make
// probes long), reused from file to file: a Go map of a 16 MiB file's
// 44,000 ids made 1.5 MB of garbage and cost 50-70 ns an id.
func inFileDup(recs []HazardRecord) bool {
	if len(recs) < 2 {
		return false
	}
	size := 1 << bits.Len(uint(2*len(recs)-1)) // ≥ 2 slots an id
	t := dupTables.get()
	if cap(t) < size {
		t = make([]uint32, size)
	} else {
		t = t[:size]
		clear(t)
	}
	defer dupTables.put(t)
	mask := size - 1
	for i := range recs {
		id := &recs[i].MsgID
		for h := int(maphash.Comparable(dupSeed, *id)) & mask; ; h = (h + 1) & mask {
			j := t[h]
			if j == 0 {
				t[h] = uint32(i + 1)
				break
			}
			if recs[j-1].MsgID == *id {
				return true
			}
		}
	}
	return false
}

// dupTables holds inFileDup's slot tables (0 empty, else 1 + an index
// into recs) for reuse; dupSeed seeds their hash.
var (
	dupTables reuseList[uint32]
	dupSeed   = maphash.MakeSeed()
)

// predicted34 is rfmt.PredictMisread over a file's records: bogus
// candidate offset -> total size.
func predicted34(b []byte, recs []HazardRecord) map[int64]int64 {
	out := map[int64]int64{}
	for _, r := range recs {
		if off, size, ok := rfmt.PredictMisread(b, r.Offset, r.TotalSize); ok {
			out[off] = size
		}
	}
	return out
}

// misread appends to out every bogus candidate of the generation-2 model
// that hides a real record, and every §3.4 prediction the model does not
// reproduce, in offset order.
func misread(b []byte, recs []HazardRecord, out []Hazard) []Hazard {
	model := rfmt.ScanData(b, rfmt.ScanOptions{})
	real := make(map[int64]*HazardRecord, len(recs))
	for i := range recs {
		real[recs[i].Offset] = &recs[i]
	}
	found := map[int64]bool{}
	var bogus []rfmt.ScanRecord
	for _, c := range model {
		if r := real[c.Offset]; r != nil && r.TotalSize == c.TotalSize {
			found[c.Offset] = true
		} else {
			bogus = append(bogus, c)
		}
	}
	pred := predicted34(b, recs)
	from := len(out)
	for _, c := range bogus {
		h := Hazard{Code: CodeZeroHoleMisread, Offset: c.Offset, Length: c.TotalSize,
			Versions: VersionsGen2, Gens: []int{2}, When: []string{"dirty recovery", "compaction"}}
		for i := range recs {
			if r := &recs[i]; !found[r.Offset] && r.Offset > c.Offset && r.Offset < c.Offset+c.TotalSize {
				h.Victims = append(h.Victims, r.victim())
			}
		}
		if len(h.Victims) == 0 {
			continue
		}
		ps, ok := pred[c.Offset]
		h.Details = map[string]any{"model": "generation-2 scan_data", "bogus_msg_id": hexID(c.MsgID),
			"hole": holeKind(b, c.Offset, h.Victims[0].Offset), "analysis_3_4_agrees": ok && ps == c.TotalSize}
		if in := inside(recs, c.Offset); in != nil {
			// The scanner got here by an earlier bogus jump into this
			// record and resumed byte-wise inside its body (§3.4).
			h.Details["cascade_inside"] = Location{Offset: in.Offset} // the caller fills Path
			h.Details["hole"] = "inside a record"
			delete(h.Details, "analysis_3_4_agrees")
		}
		out = append(out, h)
	}
	// §3.4 predictions the model did not reproduce (it was out of step).
	for off, size := range pred {
		hit := false
		for _, c := range bogus {
			hit = hit || (c.Offset == off && c.TotalSize == size)
		}
		if hit {
			continue
		}
		h := Hazard{Code: CodeZeroHoleMisread, Offset: off, Length: size, Versions: VersionsGen2,
			Gens: []int{2}, When: []string{"dirty recovery", "compaction"},
			Details: map[string]any{"model": "§3.4 analysis only", "analysis_3_4_agrees": true, "model_agrees": false}}
		for i := range recs {
			if r := &recs[i]; r.Offset > off && r.Offset < off+size {
				h.Victims = append(h.Victims, r.victim())
			}
		}
		out = append(out, h)
	}
	sort.SliceStable(out[from:], func(i, j int) bool { return out[from+i].Offset < out[from+j].Offset })
	return out
}

// inside returns the real record strictly containing off, or nil.
func inside(recs []HazardRecord, off int64) *HazardRecord {
	i := sort.Search(len(recs), func(i int) bool { return recs[i].Offset >= off })
	if i > 0 && recs[i-1].end() > off {
		return &recs[i-1]
	}
	return nil
}

// holeKind says what lies between a bogus frame and its first victim.
func holeKind(b []byte, from, to int64) string {
	for _, c := range b[from:to] {
		if c != 0 {
			return "stale"
		}
	}
	return "zero"
}

// offByNine finds the first 8-byte window v at a position p a scanner
// tests byte by byte with v in [R−8, R−1], R = bytes to EOF, and appends
// its hazard to out. Generation 2 tests gap bytes; generation 3 before
// 4.1.5 also walks through every record its validity Fun rejects
// (unreferenced, duplicate). reached, when not nil, is told where each
// region it reads starts (in ascending order).
func offByNine(b []byte, recs []HazardRecord, gaps []Gap, out []Hazard, reached func(int64)) []Hazard {
	n := len(b)
	p2, p3 := offByNineHits(b, offByNineRegions(recs, gaps), reached)
	emit := func(p int, gen2, gen3 bool) {
		h := Hazard{Code: CodeOffByNine, Offset: int64(p), Length: 8,
			When:    []string{"dirty recovery", "compaction"},
			Details: map[string]any{"value": binary.BigEndian.Uint64(b[p:]), "bytes_to_eof": n - p}}
		switch {
		case gen2 && gen3:
			h.Versions, h.Gens = VersionsOffByNine, []int{2, 3}
		case gen2:
			h.Versions, h.Gens = VersionsGen2, []int{2}
		default:
			h.Versions, h.Gens = VersionsGen3Unfixed, []int{3}
		}
		for i := range recs {
			if r := &recs[i]; r.Offset > int64(p) && (gen2 || r.live()) {
				h.Victims = append(h.Victims, r.victim())
			}
		}
		if len(h.Victims) > 0 {
			out = append(out, h)
		}
	}
	switch {
	case p3 >= 0 && p3 == p2:
		emit(p3, true, true)
	default:
		if p3 >= 0 {
			emit(p3, false, true)
		}
		if p2 >= 0 {
			emit(p2, true, false)
		}
	}
	return out
}

// modelFound returns whether the model found a record at an offset,
// asked for recs' offsets in their order.
func modelFound(model []rfmt.ScanRecord, recs []HazardRecord) func(off int64) bool {
	ascending := true
	for i := 1; i < len(recs) && ascending; i++ {
		ascending = recs[i-1].Offset < recs[i].Offset
	}
	if !ascending {
		m := make(map[int64]bool, len(model))
		for _, r := range model {
			m[r.Offset] = true
		}
		return func(off int64) bool { return m[off] }
	}
	j := 0
	return func(off int64) bool {
		for j < len(model) && model[j].Offset < off {
			j++
		}
		return j < len(model) && model[j].Offset == off
	}
}

// gen1 runs the generation-1 model and appends its hazard to out: a
// crash (Size < 16 frame with marker 0xFF) or records it never reaches
// (zero word, oversize length).
func gen1(b []byte, recs []HazardRecord, out []Hazard, reached func(int64)) []Hazard {
	res, err := rfmt.ScanGen1Reached(b, reached)
	var ce *format.CorruptError
	if err != nil && errors.As(err, &ce) {
		h := Hazard{Code: CodeScannerCrash, Offset: ce.Offset, Length: 0, Versions: VersionsGen1,
			Gens: []int{1}, When: []string{"dirty recovery"},
			Details: map[string]any{"size": binary.BigEndian.Uint64(b[ce.Offset:]),
				"effect": "rabbit_msg_file:scanner/4 crashes with badmatch; the message store and the whole vhost fail to start"}}
		for i := range recs {
			h.Victims = append(h.Victims, recs[i].victim())
		}
		return append(out, h)
	}
	// The model's offsets ascend strictly (each is the sum of the frames
	// before it), and so do a scanned file's records: whether the model
	// found a record is then a merge of the two lists. Records in another
	// order (a caller's own) are looked up in a map of the model's.
	found := modelFound(res.Records, recs)
	stop := int64(0)
	var vs Victims
	for i := range recs {
		r := &recs[i]
		if found(r.Offset) {
			if len(vs) == 0 {
				stop = r.end()
			}
			continue
		}
		if vs == nil { // every later record may be lost: one allocation, not a doubling series
			vs = make(Victims, 0, len(recs)-i)
		}
		vs = append(vs, r.victim())
	}
	if len(vs) == 0 {
		return out
	}
	reason := "misaligned frame"
	if int(stop)+8 <= len(b) {
		switch v := binary.BigEndian.Uint64(b[stop:]); {
		case v == 0:
			reason = "zero word"
		case v > uint64(len(b))-uint64(stop)-rfmt.RDQOverhead:
			reason = "oversize length"
		}
	}
	return append(out, Hazard{Code: CodeGen1Stop, Offset: stop, Length: 8,
		Versions: VersionsGen1, Gens: []int{1}, When: []string{"dirty recovery"}, Victims: vs,
		Details: map[string]any{"reason": reason}})
}

// obnRegion is a range of bytes a scanner tests byte by byte: a gap
// (generations 2 and 3) or a record generation 3 rejects.
type obnRegion struct {
	from, to int
	gap      bool
}

// offByNineRegions returns the gaps and the rejected records' bytes past
// their first, by start.
func offByNineRegions(recs []HazardRecord, gaps []Gap) []obnRegion {
	var regs []obnRegion
	for _, g := range gaps {
		regs = append(regs, obnRegion{int(g.Offset), int(g.Offset + g.Length), true})
	}
	for i := range recs {
		if r := &recs[i]; r.Status == StatusUnreferenced || r.Status == StatusDuplicate {
			regs = append(regs, obnRegion{int(r.Offset) + 1, int(r.end()), false})
		}
	}
	// Disjoint ranges: any sort gives one order. The gaps and the records
	// each come in file order, so this is a merge of two sorted runs.
	slices.SortFunc(regs, func(a, b obnRegion) int { return cmp.Compare(a.from, b.from) })
	return regs
}

// obnHit reports whether the window at p is an off-by-nine value: v in
// [R−8, R−1], R = bytes to EOF.
func obnHit(b []byte, p int) bool {
	n := len(b)
	if n-p < 8 {
		return false
	}
	v, r := binary.BigEndian.Uint64(b[p:]), uint64(n-p)
	return v < r && v+8 >= r
}

// next4Zero returns how far past p the first position q < to is whose
// b[q:q+4] is zero and whose window b[q:q+8] is in b; -1 for none. It
// tests 5 positions a step with one 8-byte load: z marks b's zero bytes
// (0x80 in each, exactly, no borrow between bytes), and byte j of
// z & z>>8 & z>>16 & z>>24 says bytes j..j+3 are zero.
func next4Zero(b []byte, p, to int) int {
	const lo7 = 0x7f7f7f7f7f7f7f7f
	for q := p; q < to && q+8 <= len(b); q += 5 {
		w := binary.LittleEndian.Uint64(b[q:])
		z := ^(((w & lo7) + lo7) | w | lo7)
		if m := z & (z >> 8) & (z >> 16) & (z >> 24); m != 0 {
			if c := q + bits.TrailingZeros64(m)/8; c < to && c+8 <= len(b) {
				return c - p
			}
			return -1
		}
	}
	return -1
}

// offByNineHits returns the first hit of generation 2 (gaps) and of
// generation 3 (every region), -1 for none.
func offByNineHits(b []byte, regs []obnRegion, reached func(int64)) (p2, p3 int) {
	n := len(b)
	p2, p3 = -1, -1
	wide := uint64(n) > 1<<32 // a hit's v may then have fewer than 4 leading zero bytes
	next := 0                 // the next offset to tell reached
	for _, g := range regs {
		if reached != nil && g.from >= next && (p2 < 0 || p3 < 0) {
			reached(int64(g.from))
			next = g.from + rfmt.ReachedStep
		}
		for p := g.from; p < g.to && (p2 < 0 || p3 < 0); p++ {
			// v < R ≤ len(b): a window that can hit starts with the zero
			// bytes v's bound leaves (4 for any file under 4 GiB), so
			// jump to the next 4 zero bytes (next4Zero: 8 bytes a step;
			// IndexByte stopped at every zero of the records' terms).
			var z int
			if wide {
				z = bytes.IndexByte(b[p:g.to], 0)
			} else {
				z = next4Zero(b, p, g.to)
			}
			if z < 0 {
				break
			}
			p += z
			if n-p > 8 && binary.BigEndian.Uint64(b[p:]) == 0 {
				// A zero window is v = 0, a hit only 8 bytes before EOF:
				// no position of a zero run hits until its windows reach
				// the run's end (skipZeroWindow), or EOF's last window.
				q := skipZeroWindow(b, p)
				if q >= n-7 {
					q = max(p+1, n-8)
				}
				p = q - 1 // the loop's p++ makes it q
				continue
			}
			if !obnHit(b, p) {
				continue
			}
			if p3 < 0 {
				p3 = p
			}
			if g.gap && p2 < 0 {
				p2 = p
			}
		}
	}
	return p2, p3
}
