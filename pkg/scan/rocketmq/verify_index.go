package rocketmq

import (
	"context"
	"errors"
	"fmt"
	"github.com/storectl/storectl/internal/bitset"
	"io"
	"math/bits"
	"os"
	"slices"

	"github.com/storectl/storectl/internal/offheap"
	"github.com/storectl/storectl/internal/storefile"
	rmq "github.com/storectl/storectl/pkg/format/rocketmq"
	"github.com/storectl/storectl/pkg/scan"
)

// indexReadSize is how many entry bytes are read at once: a multiple of
// the entry size, keeping memory flat for 420 MB default files.
const indexReadSize = 52428 * rmq.IndexEntrySize

// indexWalk is the state of one index file's entry walk.
type indexWalk struct {
	f    *indexFile
	lay  rmq.IndexLayout
	used int64 // entries 1..used-1 are in use
	// last[s] is the newest entry seen so far whose key hash maps to slot
	// s (0: none): a prev or slot head equal to it is in the right slot
	// without looking at its hash. Other cases (only in damaged files) are
	// judged after the walk (chainJoin).
	last       []int32
	referenced bitset.Set // some later entry's prev points here
	head       bitset.Set // some slot points here
	join       *chainJoin
	out        *orderedFindings
	// keyHash (tests only, indexInMemory): every entry's key hash, the
	// chain checks judged from it as they come, for comparison.
	keyHash        []int32
	maxPhy, maxTS  int64
	beyond         int
	unknown        int         // entries past an unread commitlog file (verifier.unread)
	spanUnknown    spanUnknown // entries below the recovery end into verifier.unreadSpans
	beyondSev      scan.Severity
	expired        int
	firstPhy       int64
	firstTS        int64
	firstTSChecked bool
	// entriesDone is the first entry indexStructure did not walk (an
	// error stopped it there; w.used when it did not); entriesOK and
	// structureOK say that its entries walk, and all of it, finished.
	entriesDone            int64
	entriesOK, structureOK bool
}

// readFull reads len(b) bytes of f at off; a short read (the file ends
// first) is io.ErrUnexpectedEOF. The index check and the consume queue
// cursors (verify_cqmerge.go) read through it.
func readFull(f *os.File, b []byte, off int64) error {
	n, err := f.ReadAt(b, off)
	if n < len(b) {
		if err == nil || errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return err
	}
	return nil
}

// An index file is checked in two halves, so that the larger one can run
// beside the commitlog walk (Verify): indexStructure judges what the file
// says of itself (size, header counts, the slot chains, the slot heads,
// reachability; it needs no record), indexRecords, after the walk, every
// used entry against the record it points at and the header's ranges
// against the entries. Both add to the file's orderedFindings, which lists
// them in the order of one walk that did both (an entry's record findings
// after its chain findings: sub numbers from entryRecordSub).

// entryRecordSub is the first sub number of an entry's record findings:
// above those of its chain checks (at most two).
const entryRecordSub = 8

// indexStructure is the first half of checking one index file (§5): size,
// header counts, the chains and slot heads. It returns the walk for
// indexRecords (nil when the file has no header to walk) and the error
// that stopped it, if any; w.entriesDone says how far the entries got.
func (v *verifier) indexStructure(ctx context.Context, f *indexFile, lay rmq.IndexLayout) (*indexWalk, error) {
	if want := lay.Size(); f.size != want {
		v.add(f.rel, scan.Finding{Code: CodeIndexBadHeader, Severity: scan.Warning, Path: f.rel, Offset: min(f.size, want),
			Length: abs(want - f.size), Repair: scan.RepairRebuildIndex, Expected: fmtInt(want), Actual: fmtInt(f.size),
			Evidence: map[string]string{"file_size": "fail"},
			Message:  fmt.Sprintf("index file size does not fit %d slots and %d entries; the broker maps it at full size, so missing bytes read as zeros", lay.Slots, lay.Entries)})
	}
	if f.size < rmq.IndexHeaderSize {
		return nil, nil
	}
	fh, err := storefile.Open(f.path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	var hb [rmq.IndexHeaderSize]byte
	if err := readFull(fh, hb[:], 0); err != nil {
		return nil, err
	}
	f.hdr, _ = rmq.DecodeIndexHeader(hb[:], 0) // 40 bytes: never fails
	f.hdrOK = true
	h := f.hdr
	w := &indexWalk{f: f, lay: lay, used: max(int64(h.IndexCount), 1)}
	if w.used > lay.Entries {
		v.add(f.rel, v.indexFinding(f, CodeIndexBadHeader, 36, 4, fmt.Sprintf("indexCount %d exceeds the %d entries of the file", h.IndexCount, lay.Entries),
			map[string]string{"index_count": "fail"}))
		w.used = lay.Entries
	}
	if h.HashSlotCount < 0 || int64(h.HashSlotCount) > lay.Slots {
		v.add(f.rel, v.indexFinding(f, CodeIndexBadHeader, 32, 4, fmt.Sprintf("hashSlotCount %d is outside [0, %d]", h.HashSlotCount, lay.Slots),
			map[string]string{"hash_slot_count": "fail"}))
	}
	// Only what the file holds can be read: a short file ends the walk.
	inFile := (f.size - lay.EntryOffset(0)) / rmq.IndexEntrySize
	w.used = max(min(w.used, inFile), 1)
	w.referenced = bitset.New(w.used)
	w.out = newOrderedFindings(maxFindingsPerUnit + 1 - v.capped[f.rel])
	defer func() { w.last, w.referenced, w.head, w.keyHash = nil, nil, nil, nil }() // not needed by indexRecords
	if indexInMemory {
		w.keyHash = make([]int32, w.used)
	} else {
		// The slot table is written and read at random, entry after
		// entry: outside the heap, in huge pages where the kernel has them.
		last := offheap.New[int32]()
		defer last.Free()
		w.last = last.Extend(int(lay.Slots))
		last.AdviseHugePages()
		w.join = newChainJoin()
		defer w.join.close()
	}
	if err := v.indexEntries(ctx, fh, w); err != nil {
		return w, err
	}
	w.entriesOK = true
	if err := v.indexSlots(fh, w); err != nil {
		return w, err
	}
	if err := v.chainChecks(fh, w); err != nil {
		return w, err
	}
	w.structureOK = true
	if n := w.used; n < inFile && n < lay.Entries {
		var eb [rmq.IndexEntrySize]byte
		if err := readFull(fh, eb[:], lay.EntryOffset(n)); err == nil && slices.ContainsFunc(eb[:], func(b byte) bool { return b != 0 }) {
			w.out.add(phaseTail, 0, 0, v.indexFinding(f, CodeIndexBadHeader, 36, 4,
				fmt.Sprintf("entry %d (at indexCount) holds data: the header's indexCount is too low", n), map[string]string{"index_count": "fail"}))
		}
	}
	return w, nil
}

// indexRecords is the second half of checking one index file, after the
// commitlog walk and indexStructure: the entries indexStructure walked
// against their records, the header against the entries, then the file's
// findings in walk order. errA is indexStructure's error, returned after
// what was found before it, as one walk that stopped there would.
func (v *verifier) indexRecords(w *indexWalk, errA error) error {
	defer w.out.flush(v, w.f.rel) // also after an error: what was found so far, in order
	w.beyondSev = scan.Warning
	if v.abort && v.cpPresent && w.f.hdr.EndTimestamp > v.cp.IndexMsgTimestamp {
		w.beyondSev = scan.Info // the broker deletes this file at load after an abnormal exit
	}
	if w.entriesDone > 1 {
		fh, err := storefile.Open(w.f.path)
		if err != nil {
			return err
		}
		defer fh.Close()
		if err := v.indexEntryRecords(fh, w); err != nil {
			return err
		}
	}
	if !w.entriesOK {
		return errA
	}
	v.indexEntrySummary(w)
	if !w.structureOK {
		return errA
	}
	v.indexHeaderVsEntries(w)
	return nil
}

// indexSlots checks the slot heads: in range, in the right bucket, and
// every used entry reached exactly once (as a head or as a prev).
func (v *verifier) indexSlots(fh *os.File, w *indexWalk) error {
	f, lay := w.f, w.lay
	head := bitset.New(w.used)
	w.head = head
	nonEmpty := int64(0)
	buf := make([]byte, min(lay.Slots*rmq.IndexSlotSize, indexReadSize))
	slotsInFile := min(lay.Slots, (f.size-rmq.IndexHeaderSize)/rmq.IndexSlotSize)
	for s0 := int64(0); s0 < slotsInFile; {
		n := min(int64(len(buf))/rmq.IndexSlotSize, slotsInFile-s0)
		if err := readFull(fh, buf[:n*rmq.IndexSlotSize], lay.SlotOffset(s0)); err != nil {
			return err
		}
		for i := int64(0); i < n; i++ {
			s := s0 + i
			b := buf[i*4:]
			val := int64(int32(uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])))
			switch {
			case val == 0:
				continue
			case val < 0 || val >= w.used:
				w.out.add(phaseSlots, s, 0, v.indexFinding(f, CodeIndexBadChain, lay.SlotOffset(s), 4,
					fmt.Sprintf("slot %d points at entry %d, outside the used entries 1..%d", s, val, w.used-1),
					map[string]string{"slot_range": "fail"}))
				continue
			}
			nonEmpty++
			switch {
			case w.keyHash != nil:
				if got := int64(w.keyHash[val]) % lay.Slots; w.keyHash[val] >= 0 && got != s {
					w.out.add(phaseSlots, s, 1, v.slotHeadFinding(w, s, val, got))
				}
			case int64(w.last[s]) != val: // not the slot's newest entry: is it in this slot at all?
				w.join.add(chainPair{target: val, source: s, slot: s, kind: pairHead})
			}
			head.Add(val)
		}
		s0 += n
	}
	if nonEmpty != int64(f.hdr.HashSlotCount) {
		fd := v.indexFinding(f, CodeIndexBadHeader, 32, 4, "header hashSlotCount differs from the number of used slots",
			map[string]string{"hash_slot_count": "fail"})
		fd.Expected, fd.Actual = fmtInt(nonEmpty), fmtInt(int64(f.hdr.HashSlotCount))
		w.out.add(phaseSlotCount, 0, 0, fd)
	}
	// Entries 1..used-1, 64 at a time: an entry needs a look only when it
	// is both a head and referenced, or neither (a healthy file has none).
	for wi := int64(0); wi*64 < w.used; wi++ {
		hw, rw := head[wi], w.referenced[wi]
		odd := hw&rw | ^(hw | rw)
		if wi == 0 {
			odd &^= 1 // entry 0 is no entry
		}
		if end := w.used - wi*64; end < 64 {
			odd &= 1<<end - 1
		}
		for ; odd != 0; odd &= odd - 1 {
			n := wi*64 + int64(bits.TrailingZeros64(odd))
			v.indexReach(w, n, head.Has(n), w.referenced.Has(n))
		}
	}
	return nil
}

// indexReach adds the finding of entry n that is a slot head (h) and
// another entry's predecessor (r), or neither.
func (v *verifier) indexReach(w *indexWalk, n int64, h, r bool) {
	f, lay := w.f, w.lay
	switch {
	case h && r:
		w.out.add(phaseReach, n, 0, v.indexFinding(f, CodeIndexBadChain, lay.EntryOffset(n), rmq.IndexEntrySize,
			fmt.Sprintf("entry %d is both a slot head and another entry's predecessor (a loop or crossed chains)", n),
			map[string]string{"single_parent": "fail"}))
	case !h && !r:
		w.out.add(phaseReach, n, 0, v.indexFinding(f, CodeIndexBadChain, lay.EntryOffset(n), rmq.IndexEntrySize,
			fmt.Sprintf("entry %d is on no slot chain: lookups cannot reach it", n),
			map[string]string{"reachable": "fail"}))
	}
}

func (v *verifier) slotHeadFinding(w *indexWalk, s, val, got int64) scan.Finding {
	return v.indexFinding(w.f, CodeIndexBadChain, w.lay.SlotOffset(s), 4,
		fmt.Sprintf("slot %d heads entry %d whose key hash belongs to slot %d", s, val, got),
		map[string]string{"slot": "fail"})
}
