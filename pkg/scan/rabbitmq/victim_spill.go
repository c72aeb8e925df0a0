package rabbitmq

// Victim lists on disk. After 3.13.2+ compaction nearly every .rdq has a
// zero hole, and the generation-1 model then loses every later record of
// the file: its victim list is most of the store. A released file's long
// lists go to an unlinked temp
// file, 33 bytes a victim, and are read back only when their finding is
// written, so they do not stay on the heap for the whole scan.

import (
	"encoding/binary"
	"errors"
	"slices"

	"github.com/storectl/storectl/pkg/scan"
)

const (
	// spillVictimLen is one victim on disk: id, offset, size, status.
	spillVictimLen = 16 + 8 + 8 + 1
	// spillReadChunk victims are read back at a time.
	spillReadChunk = 4096
)

// spillMinVictims: shorter lists stay in memory (a write per list costs
// more than the bytes it frees). Tests lower it to spill every list.
var spillMinVictims = 256

// errVictimsDropped is each's error for a list victimSummaryOf kept no
// victims of (a scan whose released files' victims nobody reads).
var errVictimsDropped = errors.New("victim list not kept: the scan that found it did not keep released files' victims")

// statusCodes numbers the Status* constants on disk.
var statusCodes = []string{StatusReferenced, StatusUnreferenced, StatusDuplicate, StatusUnknown}

// victimSpill is the temp file of one scan (a scan.Spill, made at the
// first put; newScanner names it). It is safe for concurrent use.
type victimSpill struct{ file scan.Spill }

// put writes vs and returns where, or ok false when the file cannot be
// used (the caller keeps the list in memory).
func (s *victimSpill) put(vs Victims) (sv *spilledVictims, ok bool) {
	buf := make([]byte, 0, len(vs)*spillVictimLen)
	for _, v := range vs {
		code := byte(255)
		for i, st := range statusCodes {
			if v.Status == st {
				code = byte(i)
			}
		}
		if code == 255 {
			return nil, false // not a status the file can hold
		}
		buf = append(buf, v.ID[:]...)
		buf = binary.LittleEndian.AppendUint64(buf, uint64(v.Offset))
		buf = binary.LittleEndian.AppendUint64(buf, uint64(v.Size))
		buf = append(buf, code)
	}
	off, ok := s.file.Put(buf)
	if !ok {
		return nil, false
	}
	sv = victimSummaryOf(vs)
	sv.f, sv.off = &s.file, off
	return sv, true
}

// spilledVictims is a victim list in the spill file, with what findings
// ask of it without reading it.
type spilledVictims struct {
	f    *scan.Spill
	off  int64
	n    int
	head Victims // the first InlineVictims
	last Victim
	live int // victims referenced (or of unknown status)
}

// each reads the list back in chunks and calls fn for every victim.
func (s *spilledVictims) each(fn func(Victim)) error {
	if s.f == nil {
		return errVictimsDropped
	}
	buf := make([]byte, min(s.n, spillReadChunk)*spillVictimLen)
	for i := 0; i < s.n; {
		k := min(s.n-i, spillReadChunk)
		b := buf[:k*spillVictimLen]
		if err := s.f.ReadAt(b, s.off+int64(i)*spillVictimLen, "victims"); err != nil {
			return err
		}
		for j := 0; j < k; j++ {
			r := b[j*spillVictimLen:]
			var v Victim
			copy(v.ID[:], r[:16])
			v.Offset = int64(binary.LittleEndian.Uint64(r[16:]))
			v.Size = int64(binary.LittleEndian.Uint64(r[24:]))
			if c := int(r[32]); c < len(statusCodes) {
				v.Status = statusCodes[c]
			}
			fn(v)
		}
		i += k
	}
	return nil
}

// VictimCount is the number of victims, in memory or spilled.
func (h *Hazard) VictimCount() int {
	if h.spill != nil {
		return h.spill.n
	}
	return len(h.Victims)
}

// EachVictim calls fn for every victim, in memory or spilled.
func (h *Hazard) EachVictim(fn func(Victim)) error {
	if h.spill != nil {
		return h.spill.each(fn)
	}
	for _, v := range h.Victims {
		fn(v)
	}
	return nil
}

// firstVictim returns the first victim.
func (h *Hazard) firstVictim() (Victim, bool) {
	if head := h.victimHead(); len(head) > 0 {
		return head[0], true
	}
	return Victim{}, false
}

// victimHead returns the first InlineVictims victims (all when fewer).
func (h *Hazard) victimHead() Victims {
	if h.spill != nil {
		return h.spill.head
	}
	return h.Victims[:min(len(h.Victims), InlineVictims)]
}

// lastVictim returns the last victim.
func (h *Hazard) lastVictim() (Victim, bool) {
	if h.spill != nil {
		return h.spill.last, true
	}
	if n := len(h.Victims); n > 0 {
		return h.Victims[n-1], true
	}
	return Victim{}, false
}

func (v Victim) live() bool { return LiveStatus(v.Status) }

// liveVictims counts the victims that are referenced or of unknown status.
func (h *Hazard) liveVictims() int {
	if h.spill != nil {
		return h.spill.live
	}
	n := 0
	for _, v := range h.Victims {
		if v.live() {
			n++
		}
	}
	return n
}

// victimSummary puts what a finding says of the victims into d and
// returns how many of them are live: their count, how many of them a
// queue references (live_victim_count), the first InlineVictims of them (victims), the last one and the
// offsets of the first and last (docs/cli.md). The whole list is in the
// record lines (--records: each victim's lost_by names the hazard), so a
// finding's size does not grow with the file's records.
func (h *Hazard) victimSummary(d map[string]any) (live int) {
	n, live := h.VictimCount(), h.liveVictims()
	d["victim_count"] = n
	d["live_victim_count"] = live
	d["victims"] = h.victimHead()
	first, ok := h.firstVictim()
	if !ok {
		return live
	}
	last, _ := h.lastVictim()
	d["victims_first_offset"], d["victims_last_offset"] = first.Offset, last.Offset
	if n > InlineVictims {
		d["last_victim"] = last
	}
	return live
}

// spillVictims moves the long victim lists of fs's hazards (all but
// zero-hole misreads, whose message lists every victim) to s.spill. With
// s.dropVictims (nothing reads a released file's victims: the scanner is
// freed before its caller could), a list keeps only what the findings
// say of it (victimSummaryOf), and nothing is written.
func (s *scanner) spillVictims(fs *FileScan) {
	for i := range fs.Hazards {
		h := &fs.Hazards[i]
		if h.Code == CodeZeroHoleMisread || len(h.Victims) < spillMinVictims {
			continue
		}
		if s.dropVictims {
			h.spill, h.Victims = victimSummaryOf(h.Victims), nil
			continue
		}
		if sv, ok := s.spill.put(h.Victims); ok {
			h.spill, h.Victims = sv, nil
		}
	}
}

// victimSummaryOf is a victim list's spilledVictims without the list: its count,
// head, last and live count, as put keeps them. Its each fails.
func victimSummaryOf(vs Victims) *spilledVictims {
	sv := &spilledVictims{n: len(vs), head: slices.Clone(vs[:min(len(vs), InlineVictims)]), last: vs[len(vs)-1]}
	for _, v := range vs {
		if v.live() {
			sv.live++
		}
	}
	return sv
}
