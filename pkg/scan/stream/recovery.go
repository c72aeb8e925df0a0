package stream

import (
	"fmt"
	"sort"
	"strings"

	"github.com/storectl/storectl/pkg/format/osiris"
	"github.com/storectl/storectl/pkg/scan"
)

// Recovery is what the broker's next start does to a stream's files
// under one rule set (osiris_log:init/2; docs/formats/osiris.md).
type Recovery struct {
	Rules  string `json:"rules"`  // RabbitMQ versions
	Osiris string `json:"osiris"` // osiris versions
	// Crash: the stream fails to start (the reason, as osiris exits).
	Crash     string   `json:"crash,omitempty"`
	Deleted   []string `json:"deleted,omitempty"`   // files deleted
	Truncated []Cut    `json:"truncated,omitempty"` // files cut
	// Dropped are the offset ranges the start removes; DropMessages,
	// DropTracking and DropChunks count them.
	Dropped      []Range `json:"dropped,omitempty"`
	DropMessages int64   `json:"drop_messages"`
	DropTracking int64   `json:"drop_tracking_offsets"`
	DropChunks   int     `json:"drop_chunks"`
	// Next is the offset the writer continues at.
	Next  *uint64  `json:"next_offset,omitempty"`
	Notes []string `json:"notes,omitempty"`
	// Unknown are the stream's files that could not be read: the start's
	// outcome is then not predicted (nothing is dropped, cut or deleted
	// here), it is unknown.
	Unknown []string `json:"unknown_waits_on,omitempty"`
	// avoidable: chunks lost only because the index lacks their records.
	avoidable int64
}

// Cut is a file truncated from Size to To bytes.
type Cut struct {
	Path string `json:"path"`
	Size int64  `json:"size"`
	To   int64  `json:"to"`
}

// Changes reports whether the start changes any file.
func (r Recovery) Changes() bool {
	if len(r.Unknown) > 0 {
		return false // not known
	}
	return r.Crash != "" || len(r.Deleted) > 0 || len(r.Truncated) > 0
}

// predict simulates the next start of the stream's writer.
func predict(st *StreamScan, rules Rules) Recovery {
	rec := Recovery{Rules: rules.Name, Osiris: rules.Osiris}
	segs := st.segs
	for _, s := range segs {
		// A segment or index that could not be read: what the start
		// keeps, cuts or drops is unknown, not lost (docs/cli.md).
		switch {
		case s.readErr != nil:
			rec.Unknown = append(rec.Unknown, s.rel)
		case s.idxErr != nil:
			rec.Unknown = append(rec.Unknown, s.relIdx)
		}
	}
	if len(rec.Unknown) > 0 {
		rec.Notes = append(rec.Notes, strings.Join(rec.Unknown, ", ")+" could not be read: what the next start does is unknown")
		return rec
	}
	drop := func(s *segScan, from int64) {
		rec.drop(s, from)
	}
	// Segments before the first index/segment pair (the retention race).
	if rules.OrphanSegmentsDeleted {
		for _, s := range segs {
			if s.p.segment != "" && s.p.index != "" {
				break
			}
			if s.p.segment != "" {
				rec.Deleted = append(rec.Deleted, s.rel)
				rec.dropAll(s)
			}
		}
	}
	var ip []*segScan
	for _, s := range segs {
		if s.p.index != "" {
			ip = append(ip, s)
		}
	}
	for len(ip) > 1 {
		l := ip[len(ip)-1]
		if l.p.segment == "" {
			if !rules.MissingLastSegmentDeleted {
				rec.Crash = fmt.Sprintf("missing_file: the last index %s has no segment", l.relIdx)
				return rec
			}
			rec.Deleted = append(rec.Deleted, l.relIdx)
			ip = ip[:len(ip)-1]
			continue
		}
		if l.size <= osiris.ChunkHeaderSize {
			rec.Deleted = append(rec.Deleted, l.relIdx, l.rel)
			rec.dropAll(l)
			ip = ip[:len(ip)-1]
			continue
		}
		break
	}
	// Segments after the last pair that have no index: recovery does not
	// know them; the writer will write their offsets again.
	if len(ip) > 0 {
		for _, s := range segs {
			if s.p.segment != "" && s.p.index == "" && s.p.name > ip[len(ip)-1].p.name {
				rec.dropAll(s)
				rec.Notes = append(rec.Notes, fmt.Sprintf("%s has no index and comes after the last indexed segment: recovery ignores it and the writer reuses its offsets", s.rel))
			}
		}
	}
	if len(ip) == 0 {
		for _, s := range segs {
			if s.p.segment != "" && !contains(rec.Deleted, s.rel) {
				rec.dropAll(s)
			}
		}
		if rec.DropChunks > 0 {
			rec.Notes = append(rec.Notes, "no index file: the writer starts a new, empty log at offset 0")
		}
		zero := uint64(0)
		rec.Next = &zero
		return rec.finish()
	}
	single := len(ip) == 1
	for {
		l := ip[len(ip)-1]
		if l.p.segment == "" { // the only index, no segment
			if !rules.MissingLastSegmentDeleted {
				rec.Crash = fmt.Sprintf("missing_file: %s has no segment", l.relIdx)
				return rec
			}
			rec.Notes = append(rec.Notes, "the only index has no segment: the start writes an empty segment")
			zero := uint64(0)
			rec.Next = &zero
			return rec.finish()
		}
		if !rules.IndexRepair {
			// osiris 1.2: the last record is taken as it is (osiris#79).
			if l.idx.records > 0 && (l.idx.lastValid == nil || l.idx.lastValidPos != l.idx.size-l.idx.tornBytes-osiris.IndexRecordSize) {
				rec.Crash = "badmatch reading the chunk the last index record points at (no index repair before osiris 1.3: osiris#79)"
				return rec
			}
		}
		if l.idx.lastValid == nil {
			if l.idx.records > 0 || l.idx.tornBytes > 0 {
				rec.Truncated = append(rec.Truncated, Cut{l.relIdx, l.idx.size, osiris.FileHeaderSize})
			}
			if single {
				if l.size > osiris.FileHeaderSize {
					rec.Truncated = append(rec.Truncated, Cut{l.rel, l.size, osiris.FileHeaderSize})
				}
				drop(l, osiris.FileHeaderSize)
				n := l.p.first
				rec.Next = &n
				return rec.finish()
			}
			// The writer continues in the segment before; this one's
			// chunks are past its new end.
			drop(l, osiris.FileHeaderSize)
			rec.Notes = append(rec.Notes, fmt.Sprintf("%s has no valid index record: the writer continues in the segment before it", l.rel))
			ip = ip[:len(ip)-1]
			single = len(ip) == 1
			continue
		}
		keep := l.idx.lastValidPos + osiris.IndexRecordSize
		if keep < l.idx.size {
			rec.Truncated = append(rec.Truncated, Cut{l.relIdx, l.idx.size, keep})
		}
		if l.idx.lastValidEnd < l.size {
			rec.Truncated = append(rec.Truncated, Cut{l.rel, l.size, l.idx.lastValidEnd})
		}
		drop(l, l.idx.lastValidEnd)
		n := l.idx.lastValidNext
		rec.Next = &n
		return rec.finish()
	}
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// drop removes from the prediction every chunk of s at or after from.
func (r *Recovery) drop(s *segScan, from int64) {
	if s.tail == nil && s.chunks > 0 && from <= osiris.FileHeaderSize {
		r.dropAll(s)
		return
	}
	for _, c := range s.tail {
		if c.Pos < from {
			continue
		}
		r.dropChunk(c.ID, c.NumRecords, c.Type)
		if c.CRCMatch {
			r.avoidable += int64(c.NumRecords)
		}
	}
	if t := s.torn; t != nil && t.Pos >= from && t.Header != nil {
		r.dropChunk(t.Header.ChunkID, t.Header.NumRecords, t.Header.Type)
	}
}

func (r *Recovery) dropAll(s *segScan) {
	if s.first == nil {
		return
	}
	if s.tail != nil {
		for _, c := range s.tail {
			r.dropChunk(c.ID, c.NumRecords, c.Type)
		}
	} else {
		r.DropChunks += s.chunks
		r.DropMessages += s.messages
		r.DropTracking += s.trackingOffsets
		r.Dropped = append(r.Dropped, Range{s.first.ID, s.lastChunk.next()})
	}
	if t := s.torn; t != nil && t.Header != nil {
		r.dropChunk(t.Header.ChunkID, t.Header.NumRecords, t.Header.Type)
	}
}

func (r *Recovery) dropChunk(id uint64, n uint32, t osiris.ChunkType) {
	r.DropChunks++
	if t == osiris.ChunkUser {
		r.DropMessages += int64(n)
	} else {
		r.DropTracking += int64(n)
	}
	if k := len(r.Dropped); k > 0 && r.Dropped[k-1].To == id {
		r.Dropped[k-1].To = id + uint64(n)
	} else {
		r.Dropped = append(r.Dropped, Range{id, id + uint64(n)})
	}
}

func (r Recovery) finish() Recovery {
	sort.Slice(r.Dropped, func(i, j int) bool { return r.Dropped[i].From < r.Dropped[j].From })
	return r
}

// findings is the recovery finding of a stream, if its next start changes
// anything.
func (r Recovery) findings(st *StreamScan) []scan.Finding {
	if !r.Changes() {
		return nil
	}
	var parts []string
	if r.Crash != "" {
		parts = append(parts, "the stream fails to start: "+r.Crash)
	}
	for _, c := range r.Truncated {
		parts = append(parts, fmt.Sprintf("cuts %s from %d to %d bytes", c.Path, c.Size, c.To))
	}
	for _, d := range r.Deleted {
		parts = append(parts, "deletes "+d)
	}
	sev := scan.Warning
	if r.DropMessages > 0 || r.Crash != "" {
		sev = scan.Error
	}
	msg := fmt.Sprintf("the next start of RabbitMQ %s %s", r.Rules, strings.Join(parts, ", "))
	if r.DropChunks > 0 {
		msg += fmt.Sprintf(", dropping %d chunk(s): %d message(s) and %d tracking offset(s) (offsets %s)", r.DropChunks, r.DropMessages, r.DropTracking, rangesString(r.Dropped))
	}
	repair := scan.RepairNone
	switch {
	case r.avoidable > 0:
		repair = scan.RepairRebuildIndex
		msg += fmt.Sprintf("; %d of these messages are in whole, valid chunks the index has no record for: rebuild-index keeps them", r.avoidable)
	case len(r.Truncated) > 0:
		repair = scan.RepairTruncate
	}
	return []scan.Finding{{Code: CodeRecovery, Severity: sev, Path: st.Info.Dir, Repair: repair, Message: msg,
		Details: map[string]any{"recovery": r}}}
}

func rangesString(rs []Range) string {
	var s []string
	for _, r := range rs {
		if r.To == r.From+1 {
			s = append(s, fmt.Sprint(r.From))
		} else {
			s = append(s, fmt.Sprintf("%d-%d", r.From, r.To-1))
		}
	}
	return strings.Join(s, ", ")
}
