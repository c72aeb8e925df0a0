package rocketmq

import (
	"context"
	"fmt"
	"os"
	"slices"

	"github.com/storectl/storectl/internal/prefetch"
	rmq "github.com/storectl/storectl/pkg/format/rocketmq"
	"github.com/storectl/storectl/pkg/scan"
)

// indexPrefetch is how many entries' slot-table elements are prefetched
// together; indexAhead is how many such groups ahead of the group checked.
const (
	indexPrefetch = 16
	indexAhead    = 2
)

// indexGroup is a group of decoded entries with their slots.
type indexGroup struct {
	n     int
	ents  [indexPrefetch]rmq.IndexEntry
	slots [indexPrefetch]int64 // the slot of each entry with a key hash >= 0 (else 0)
	pf    [indexPrefetch]int64 // the slot-table elements to prefetch (-1: none)
}

// indexEntries reads entries 1..used-1 in order and checks each against
// its chain predecessor (indexStructure's half of the entry checks).
func (v *verifier) indexEntries(ctx context.Context, fh *os.File, w *indexWalk) error {
	lay := w.lay
	buf := make([]byte, indexReadSize)
	w.entriesDone = 1
	var ring [indexAhead + 1]indexGroup
	for n0 := int64(1); n0 < w.used; {
		if err := ctx.Err(); err != nil {
			return err
		}
		k := min(int64(len(buf))/rmq.IndexEntrySize, w.used-n0)
		off := lay.EntryOffset(n0)
		if err := readFull(fh, buf[:k*rmq.IndexEntrySize], off); err != nil {
			return err
		}
		// The slots' newest entries (20 MB at the defaults) are read at
		// random: a group's elements are prefetched indexAhead groups
		// before it is checked, so the cache misses of several groups are
		// in flight while one is checked (a load of each, the way before,
		// stalled on its miss: four fifths of this loop's time).
		groups := (k + indexPrefetch - 1) / indexPrefetch
		load := func(gi int64) {
			g := &ring[gi%int64(len(ring))]
			i0 := gi * indexPrefetch
			g.n = int(min(indexPrefetch, k-i0))
			for j := range g.n {
				e := rmq.IndexEntryOf((*[rmq.IndexEntrySize]byte)(buf[(i0+int64(j))*rmq.IndexEntrySize:]))
				g.ents[j], g.slots[j], g.pf[j] = e, 0, -1
				if e.KeyHash >= 0 {
					g.slots[j] = slotOf(e.KeyHash, lay.Slots)
					g.pf[j] = g.slots[j]
				}
			}
			prefetch.Int32s(w.last, g.pf[:g.n])
		}
		for gi := range min(int64(indexAhead), groups) {
			load(gi)
		}
		for gi := range groups {
			if gi+indexAhead < groups {
				load(gi + indexAhead)
			}
			g := &ring[gi%int64(len(ring))]
			for j := range g.n {
				v.indexEntry(w, n0+gi*indexPrefetch+int64(j), g.ents[j], g.slots[j])
			}
		}
		n0 += k
		w.entriesDone = n0
	}
	return nil
}

// indexRecordsSplit is the fewest entries whose record checks
// indexEntryRecords runs as two halves at once (tests set it low).
var indexRecordsSplit = int64(1 << 18)

// indexEntryRecords reads entries 1..entriesDone-1 again, after the
// commitlog walk, and checks each against the record it points at
// (indexRecords' half of the entry checks). A large file's entries are
// checked as two halves at once, the upper one by a verifier and walk
// state of its own (its own record lookups, counters and findings), then
// joined: the same counts and findings as one walk in order. The records
// pass ran on alone after the consume queue check ended (the last tenth
// of a verify of small messages).
func (v *verifier) indexEntryRecords(fh *os.File, w *indexWalk) error {
	end := w.entriesDone
	if end-1 < indexRecordsSplit || indexSequential {
		return v.indexEntryRange(fh, w, 1, end)
	}
	mid := 1 + (end-1)/2
	hv := *v
	hv.tab = v.tab.reader()
	hv.hint, hv.entriesLinked, hv.cur = 0, 0, recCursor{}
	var err error
	if hv.store, err = OpenStore(v.cfg.Config); err != nil { // whatIsAt's reads: a Store of its own
		return v.indexEntryRange(fh, w, 1, end)
	}
	defer hv.store.Close()
	hw := &indexWalk{f: w.f, lay: w.lay, used: w.used, out: newOrderedFindings(w.out.keep)}
	done := make(chan error, 1)
	go func() { done <- hv.indexEntryRange(fh, hw, mid, end) }()
	err = v.indexEntryRange(fh, w, 1, mid)
	herr := <-done
	if err != nil { // the walk in order stops there: nothing of the upper half
		return err
	}
	if hv.tab.err != nil && v.tab.err == nil {
		v.tab.err = hv.tab.err
	}
	v.entriesLinked += hv.entriesLinked
	w.expired += hw.expired
	w.unknown += hw.unknown
	w.beyond += hw.beyond
	w.maxTS = max(w.maxTS, hw.maxTS)
	if hs := &hw.spanUnknown; hs.n > 0 {
		su := &w.spanUnknown
		if su.n == 0 {
			su.first, su.pos = hs.first, hs.pos
		}
		su.n += hs.n
		for _, r := range hs.waits {
			if !slices.Contains(su.waits, r) {
				su.waits = append(su.waits, r)
			}
		}
		slices.Sort(su.waits)
	}
	w.out.absorb(hw.out)
	return herr
}

// indexEntryRange checks entries [from, to) against their records.
func (v *verifier) indexEntryRange(fh *os.File, w *indexWalk, from, to int64) error {
	lay := w.lay
	buf := make([]byte, indexReadSize)
	for n0 := from; n0 < to; {
		k := min(int64(len(buf))/rmq.IndexEntrySize, to-n0)
		if err := readFull(fh, buf[:k*rmq.IndexEntrySize], lay.EntryOffset(n0)); err != nil {
			return err
		}
		for j := range k {
			v.indexEntryRecord(w, n0+j, rmq.IndexEntryOf((*[rmq.IndexEntrySize]byte)(buf[j*rmq.IndexEntrySize:])))
		}
		n0 += k
	}
	return nil
}

// indexEntrySummary adds the counted entries' findings (beyond the
// recovery end, past an unread file, expired).
func (v *verifier) indexEntrySummary(w *indexWalk) {
	lay := w.lay
	if w.beyond > 0 {
		f := w.f
		fd := scan.Finding{Code: CodeIndexBeyondEnd, Severity: w.beyondSev, Path: f.rel, Offset: lay.EntryOffset(1),
			Repair: scan.RepairRebuildIndex, Evidence: map[string]string{"below_recovery_end": "fail"},
			Details: map[string]any{"entries": w.beyond, "recovery_end": v.recoveryEnd},
			Message: fmt.Sprintf("%d index entries point at or past the commitlog recovery end (messages recovery drops)%s", w.beyond,
				map[bool]string{true: "; the broker deletes this index file at load after the unclean shutdown", false: ""}[w.beyondSev == scan.Info])}
		if v.abort && v.cpUnread {
			// Whether the broker deletes the file at load compares its
			// end time with the checkpoint's index time.
			fd.Details["waits_on"] = []string{"checkpoint"}
			fd.Message += "; whether the broker deletes this index file at load waits on the checkpoint, which could not be read"
		}
		v.res.Add(fd)
	}
	if w.unknown > 0 {
		v.res.Add(scan.Finding{Code: CodeIndexUnknown, Severity: scan.Warning, Path: w.f.rel, Offset: lay.EntryOffset(1),
			Repair: scan.RepairNone, Details: map[string]any{"entries": w.unknown, "recovery_end_at_least": v.recoveryEnd, "waits_on": []string{v.unread}},
			Message: fmt.Sprintf("%d index entries point at or past commitlog offset %d, %s: whether recovery keeps their messages is unknown, not lost",
				w.unknown, v.recoveryEnd, v.pastUnread())})
	}
	if su := &w.spanUnknown; su.n > 0 {
		v.res.Add(scan.Finding{Code: CodeIndexUnknown, Severity: scan.Warning, Path: w.f.rel, Offset: lay.EntryOffset(1),
			Repair: scan.RepairNone, Details: map[string]any{"entries": su.n, "waits_on": su.waits},
			Message: fmt.Sprintf("%d index entries point %s: whether their messages are there is unknown, not lost", su.n, su.into())})
	}
	if w.expired > 0 {
		v.res.Add(scan.Finding{Code: CodeIndexBadEntry, Severity: scan.Info, Path: w.f.rel, Offset: lay.EntryOffset(1),
			Repair: scan.RepairNone, Details: map[string]any{"entries": w.expired, "commitlog_min_offset": v.minPhy},
			Message: fmt.Sprintf("%d index entries point below the commitlog's first file (expired messages; normal)", w.expired)})
	}
}

// slotOf is the slot of key hash h >= 0 among slots: h % slots, in 32
// bits where they suffice (a shorter division).
func slotOf(h int32, slots int64) int64 {
	if slots > 0 && slots <= 1<<32-1 {
		return int64(uint32(h) % uint32(slots))
	}
	return int64(h) % slots
}

// indexEntry checks entry n, whose slot (when e.KeyHash >= 0) is slot,
// against its chain predecessor.
func (v *verifier) indexEntry(w *indexWalk, n int64, e rmq.IndexEntry, slot int64) {
	lay := w.lay
	sub := 0
	bad := func(code, msg string, ev map[string]string, exp, act string) {
		sub++
		w.out.add(phaseEntries, n, sub, v.entryFinding(w, n, e, code, msg, ev, exp, act))
	}
	if w.keyHash != nil {
		w.keyHash[n] = e.KeyHash
	}
	// Chain: strictly decreasing, same bucket, one successor each.
	switch p := int64(e.PrevIndex); {
	case e.KeyHash < 0:
		bad(CodeIndexBadEntry, "key hash is negative (the broker stores abs(hashCode))", map[string]string{"key_hash": "fail"}, ">= 0", fmtInt(int64(e.KeyHash)))
	case p < 0 || p >= n:
		bad(CodeIndexBadChain, "previous entry number is not below this one (chains must strictly decrease)",
			map[string]string{"decreasing": "fail"}, "< "+fmtInt(n), fmtInt(p))
	case p > 0:
		switch {
		case w.keyHash != nil:
			if w.keyHash[p] >= 0 && int64(w.keyHash[p])%lay.Slots != slot {
				bad(CodeIndexBadChain, fmt.Sprintf("previous entry %d is in another slot", p), map[string]string{"same_slot": "fail"},
					fmtInt(slot), fmtInt(int64(w.keyHash[p])%lay.Slots))
			}
		case int64(w.last[slot]) != p:
			// Not the newest entry of the slot: judged from entry p's own
			// hash after the walk, in this place of the findings (sub).
			sub++
			w.join.add(chainPair{target: p, source: n, slot: slot, kind: pairPrev, sub: int8(sub),
				phy: e.PhyOffset, keyHash: e.KeyHash, timeDiff: e.TimeDiff, prev: e.PrevIndex})
		}
		if w.referenced.Has(p) {
			bad(CodeIndexBadChain, fmt.Sprintf("previous entry %d is already another entry's predecessor", p),
				map[string]string{"single_parent": "fail"}, "", "")
		}
		w.referenced.Add(p)
	}
	if w.last != nil && e.KeyHash >= 0 {
		w.last[slot] = int32(n)
	}
	if n == 1 {
		w.firstPhy = e.PhyOffset
	}
	w.maxPhy = max(w.maxPhy, e.PhyOffset)
}

// indexEntryRecord checks entry n against the record it points at.
func (v *verifier) indexEntryRecord(w *indexWalk, n int64, e rmq.IndexEntry) {
	h := &w.f.hdr
	sub := entryRecordSub - 1
	bad := func(code, msg string, ev map[string]string, exp, act string) {
		sub++
		w.out.add(phaseEntries, n, sub, v.entryFinding(w, n, e, code, msg, ev, exp, act))
	}
	switch {
	case e.PhyOffset < v.minPhy:
		w.expired++
		return
	case e.PhyOffset >= v.recoveryEnd && v.unread != "":
		w.unknown++
		return
	case e.PhyOffset >= v.recoveryEnd:
		w.beyond++
		return
	}
	ri, r := v.cur.find(v.tab, e.PhyOffset, v.nrecs, v.recAt)
	if ri < 0 && len(v.unreadSpans) > 0 {
		if rel := v.unreadAt(e.PhyOffset); rel != "" {
			w.spanUnknown.add(rel, w.f.rel, 0) // no record read there: unknown
			return
		}
	}
	if ri < 0 {
		bad(CodeIndexBadEntry, v.whatIsAt(e.PhyOffset), map[string]string{"record_start": "fail"}, "", fmtInt(e.PhyOffset))
		return
	}
	v.entriesLinked++
	if n == 1 {
		w.firstTS, w.firstTSChecked = r.storeTS, true
	}
	w.maxTS = max(w.maxTS, r.storeTS)
	if !v.tab.hasHash(r, e.KeyHash) {
		bad(CodeIndexBadEntry, fmt.Sprintf("key hash matches no key of the record at %d (topic#UNIQ_KEY, topic#KEYS)", r.phy),
			map[string]string{"record_start": "pass", "key_hash": "fail"}, "", fmtInt(int64(e.KeyHash)))
		return
	}
	if e.PhyOffset < h.BeginPhyOffset || e.PhyOffset > h.EndPhyOffset {
		bad(CodeIndexBadEntry, "offset is outside the header's [beginPhyOffset, endPhyOffset]",
			map[string]string{"phy_range": "fail"}, fmt.Sprintf("[%d, %d]", h.BeginPhyOffset, h.EndPhyOffset), fmtInt(e.PhyOffset))
	}
	if r.storeTS < h.BeginTimestamp || r.storeTS > h.EndTimestamp {
		bad(CodeIndexBadEntry, "record's store time is outside the header's [beginTimestamp, endTimestamp]",
			map[string]string{"time_range": "fail"}, fmt.Sprintf("[%d, %d]", h.BeginTimestamp, h.EndTimestamp), fmtInt(r.storeTS))
	}
	// Entry 1's timeDiff was computed against the header before entry 1
	// reset beginTimestamp (§5 quirk): only later entries are checked.
	if n >= 2 && h.BeginTimestamp > 0 {
		want := min(max((r.storeTS-h.BeginTimestamp)/1000, 0), 1<<31-1)
		if int64(e.TimeDiff) != want {
			bad(CodeIndexBadEntry, "timeDiff does not match the record's store time", map[string]string{"time_diff": "fail"},
				fmtInt(want), fmtInt(int64(e.TimeDiff)))
		}
	}
}

// indexHeaderVsEntries checks the header's begin/end values against the
// entries: the first entry sets the begin values, every entry the end.
func (v *verifier) indexHeaderVsEntries(w *indexWalk) {
	f, h := w.f, w.f.hdr
	if w.used <= 1 {
		return
	}
	type hc struct {
		name     string
		off      int64
		want, at int64
		ok       bool
	}
	checks := []hc{{"beginPhyOffset", 16, w.firstPhy, h.BeginPhyOffset, true}, {"endPhyOffset", 24, w.maxPhy, h.EndPhyOffset, true},
		{"beginTimestamp", 0, w.firstTS, h.BeginTimestamp, w.firstTSChecked}}
	if w.beyond == 0 && w.unknown == 0 && w.spanUnknown.n == 0 && w.expired == 0 && w.maxTS > 0 {
		checks = append(checks, hc{"endTimestamp", 8, w.maxTS, h.EndTimestamp, true})
	}
	for i, c := range checks {
		if c.ok && c.want != c.at {
			fd := v.indexFinding(f, CodeIndexBadHeader, c.off, 8, "header "+c.name+" does not match the entries", map[string]string{c.name: "fail"})
			fd.Expected, fd.Actual = fmtInt(c.want), fmtInt(c.at)
			w.out.add(phaseHeader, int64(i), 0, fd)
		}
	}
}

// entryFinding is a finding about entry n (its fields in the details).
func (v *verifier) entryFinding(w *indexWalk, n int64, e rmq.IndexEntry, code, msg string, ev map[string]string, exp, act string) scan.Finding {
	fd := v.indexFinding(w.f, code, w.lay.EntryOffset(n), rmq.IndexEntrySize, fmt.Sprintf("entry %d: %s", n, msg), ev)
	fd.Expected, fd.Actual = exp, act
	fd.Details = map[string]any{"entry": n, "phy_offset": e.PhyOffset, "key_hash": fmtInt(int64(e.KeyHash)),
		"time_diff": e.TimeDiff, "prev_index": e.PrevIndex}
	return fd
}
