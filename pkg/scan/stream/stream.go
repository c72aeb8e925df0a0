package stream

import (
	"fmt"
	"path/filepath"

	"github.com/storectl/storectl/internal/parallel"
	"github.com/storectl/storectl/pkg/format/osiris"
	"github.com/storectl/storectl/pkg/scan"
)

// StreamInfo names a stream: its dir (relative to the data dir) and what
// the dir's name says.
type StreamInfo struct {
	Dir  string `json:"dir"`
	Name Name   `json:"name"`
}

// StreamScan is one stream dir scanned.
type StreamScan struct {
	Info     StreamInfo
	abs      string
	segs     []*segScan
	strays   []string
	findings []scan.Finding
	files    []scan.File
	errs     []error
	bytes    int64
	rules    Rules
	// Recovery is what the next start does under rules; ByVersion under
	// every rule set.
	Recovery  Recovery
	ByVersion map[string]Recovery
	Queue     Queue
}

// visit hands every message of a chunk to the scan's callback.
func (sc *scanCtx) visit(s *segScan, c *osiris.Chunk, crcOK, torn, resynced bool) error {
	if c.Header.Type != osiris.ChunkUser {
		return nil
	}
	if sc.onMsg == nil && !sc.decode {
		return nil
	}
	it := osiris.Entries(c.Data, c.Pos+c.Header.DataOffset())
	off := c.Header.ChunkID
	for it.Next() {
		e := it.Entry()
		m := Message{Stream: sc.stream, Path: s.rel, EntryPos: e.Pos, EntrySize: e.Size(), Offset: off, Chunk: c.Header,
			ChunkPos: c.Pos, CRCMatch: crcOK, Torn: torn, Resynced: resynced, Body: e.Body}
		if e.SubBatch {
			if e.Compression != osiris.CompressionNone {
				off += uint64(e.Records())
				continue // compressed stream-protocol batch: not readable as messages
			}
			i := uint64(0)
			err := osiris.SubBatchRecords(e.Body, e.Pos+osiris.SubBatchEntryHeaderSize, func(_ int, pos int64, rec []byte) error {
				mm := m
				mm.SubBatch, mm.EntryPos, mm.EntrySize, mm.Offset, mm.Body = true, pos, int64(len(rec))+4, off+i, rec
				i++
				return sc.message(s, &mm)
			})
			if err != nil {
				return err
			}
			off += uint64(e.Records())
			continue
		}
		if err := sc.message(s, &m); err != nil {
			return err
		}
		off++
	}
	return nil
}

func (sc *scanCtx) message(s *segScan, m *Message) error {
	if sc.onMsg == nil {
		return nil
	}
	return sc.onMsg(m)
}

// scanStream scans one stream dir: every pair, then the checks across
// them and the prediction of the next start.
func scanStream(sc *scanCtx, dir string, jobs int) *StreamScan {
	st := &StreamScan{abs: dir, rules: sc.rules}
	st.Info = StreamInfo{Dir: scan.Rel(sc.root, dir), Name: ParseNameWith(filepath.Base(dir), sc.vhosts)}
	c := *sc
	c.stream = &st.Info
	df := listStreamDir(dir)
	if df.err != nil {
		st.errs = append(st.errs, df.err)
		return st
	}
	st.strays = df.strays
	st.segs = make([]*segScan, len(df.pairs))
	// The last pair with a segment is the one the next start repairs
	// (an index without its segment after it is deleted or fatal).
	last := len(df.pairs) - 1
	for last >= 0 && df.pairs[last].segment == "" {
		last--
	}
	run := func(i int) {
		if c.tokens != nil {
			c.tokens <- struct{}{}
			defer func() { <-c.tokens }()
		}
		st.segs[i] = scanSegment(&c, df.pairs[i], i == last, i >= last-1)
	}
	if sc.onMsg != nil || jobs <= 1 {
		for i := range df.pairs {
			run(i)
		}
	} else {
		parallel.For(len(df.pairs), jobs, run)
	}
	st.cross(sc)
	st.Recovery = predict(st, sc.rules)
	st.ByVersion = map[string]Recovery{}
	for _, r := range AllRules() {
		st.ByVersion[r.Name] = predict(st, r)
	}
	st.report(sc)
	return st
}

// cross runs the checks that need more than one pair.
func (st *StreamScan) cross(sc *scanCtx) {
	var prev *segScan
	for i, s := range st.segs {
		st.bytes += s.bytes
		if s.readErr != nil {
			st.errs = append(st.errs, fmt.Errorf("%s: %w", s.rel, s.readErr))
		}
		if s.idxErr != nil {
			st.errs = append(st.errs, fmt.Errorf("%s: %w", s.relIdx, s.idxErr))
		}
		if s.p.segment == "" {
			st.findings = append(st.findings, scan.Finding{Code: CodeOrphanIndex, Severity: scan.Error, Path: s.relIdx,
				Repair: scan.RepairNone, Message: orphanIndexMessage(st, i, sc.rules),
				Details: map[string]any{"segment": s.p.name + ".segment"}})
			continue
		}
		if s.p.index == "" {
			st.findings = append(st.findings, missingIndexFinding(st, i, sc.rules))
		}
		if s.first != nil && s.first.ID != s.p.first {
			st.findings = append(st.findings, scan.Finding{Code: CodeSegmentName, Severity: scan.Error, Path: s.rel, Offset: s.first.Pos,
				Expected: fmt.Sprint(s.first.ID), Actual: s.p.name, Repair: scan.RepairNone,
				Message: fmt.Sprintf("the segment is named %s but its first chunk is %d: offset lookups choose segments by name", s.p.name, s.first.ID)})
		}
		if prev != nil && prev.lastChunk != nil && s.first != nil {
			pn := prev.lastChunk.next()
			switch {
			case s.first.ID > pn:
				st.findings = append(st.findings, scan.Finding{Code: CodeChunkIDGap, Severity: scan.Error, Path: s.rel, Offset: s.first.Pos,
					Expected: fmt.Sprint(pn), Actual: fmt.Sprint(s.first.ID), Repair: scan.RepairNone,
					Message: fmt.Sprintf("%s ends at offset %d but this segment starts at %d: offsets %d-%d are in no segment", prev.rel, pn, s.first.ID, pn, s.first.ID-1),
					Details: map[string]any{"missing": Range{pn, s.first.ID}, "previous": prev.rel}})
			case s.first.ID < pn:
				st.findings = append(st.findings, scan.Finding{Code: CodeChunkOverlap, Severity: scan.Error, Path: s.rel, Offset: s.first.Pos,
					Expected: fmt.Sprint(pn), Actual: fmt.Sprint(s.first.ID), Repair: scan.RepairNone,
					Message: fmt.Sprintf("%s ends at offset %d but this segment starts at %d: offsets %d-%d are in both", prev.rel, pn, s.first.ID, s.first.ID, min(pn, s.lastChunk.next())-1),
					Details: map[string]any{"overlap": Range{s.first.ID, min(pn, s.lastChunk.next())}, "previous": prev.rel}})
			}
			if s.first.Epoch < prev.lastChunk.Epoch {
				st.findings = append(st.findings, scan.Finding{Code: CodeEpochRegress, Severity: scan.Error, Path: s.rel, Offset: s.first.Pos,
					Expected: fmt.Sprintf(">= %d", prev.lastChunk.Epoch), Actual: fmt.Sprint(s.first.Epoch), Repair: scan.RepairNone,
					Message: fmt.Sprintf("this segment starts with epoch %d after %s ended with epoch %d: epochs only grow", s.first.Epoch, prev.rel, prev.lastChunk.Epoch),
					Details: map[string]any{"chunk_id": s.first.ID, "previous": prev.rel}})
			}
		}
		switch {
		case s.readErr != nil:
			prev = nil // where its chunks end is unknown: no gap or overlap is drawn across it
		case s.lastChunk != nil:
			prev = s
		}
	}
	for _, p := range st.strays {
		sev := scan.Info
		msg := "a file that is neither an osiris segment nor an index: osiris ignores it"
		if sc.rules.StrayFileCrash {
			sev, msg = scan.Error, fmt.Sprintf("a file that is neither an osiris segment nor an index: osiris %s crashes on it at start (orphaned_segments/1, rabbitmq-server PR #12704)", sc.rules.Osiris)
		}
		st.findings = append(st.findings, scan.Finding{Code: CodeStrayFile, Severity: sev, Path: scan.Rel(sc.root, p),
			Repair: scan.RepairNone, Message: msg})
	}
}

// nextFirst is the first offset after pair i: the next pair's name, or
// the end of pair i's chunks.
func (st *StreamScan) nextFirst(i int) uint64 {
	for j := i + 1; j < len(st.segs); j++ {
		if st.segs[j].p.segment != "" {
			return st.segs[j].p.first
		}
	}
	if s := st.segs[i]; s.lastChunk != nil {
		return s.lastChunk.next()
	}
	return st.segs[i].p.first
}

func missingIndexFinding(st *StreamScan, i int, rules Rules) scan.Finding {
	s := st.segs[i]
	rg := Range{s.p.first, st.nextFirst(i)}
	beforeFirstPair := true
	for _, o := range st.segs[:i] {
		if o.p.segment != "" && o.p.index != "" {
			beforeFirstPair = false
		}
	}
	var conseq string
	switch {
	case beforeFirstPair && rules.OrphanSegmentsDeleted:
		conseq = fmt.Sprintf("RabbitMQ %s deletes it at the next start (a segment before the first index/segment pair: orphaned_segments/1), with its %d messages", rules.Name, s.messages)
	case i == len(st.segs)-1:
		conseq = "the next start ignores it: the writer resumes after the previous segment's last indexed chunk and will write those offsets again"
	default:
		conseq = fmt.Sprintf("a consumer attaching at offsets %d-%d is sent to the end of the stream and gets none of them; one reading from an earlier offset still passes through it; the broker never rebuilds the index", rg.From, rg.To-1)
	}
	return scan.Finding{Code: CodeIndexMissing, Severity: scan.Error, Path: s.rel, Length: s.size, Repair: scan.RepairRebuildIndex,
		Expected: s.p.name + ".index", Actual: "missing",
		Message: "the segment has no index file: " + conseq,
		Details: map[string]any{"offsets": rg, "messages": s.messages, "chunks": s.chunks}}
}

func orphanIndexMessage(st *StreamScan, i int, rules Rules) string {
	if i == len(st.segs)-1 {
		if rules.MissingLastSegmentDeleted {
			return fmt.Sprintf("the index has no segment: RabbitMQ %s deletes it at the next start (osiris PR #142)", rules.Name)
		}
		return fmt.Sprintf("the index has no segment: RabbitMQ %s fails to start the stream (missing_file)", rules.Name)
	}
	return "the index has no segment: offset lookups that choose it fail (missing_file)"
}

// unattachable lists, per pair, the offsets a consumer attaching there
// cannot be served (osiris find_segment_for_offset/2 ends past the last
// valid record, or finds no index).
func (st *StreamScan) unattachable() []Range {
	var out []Range
	for i, s := range st.segs {
		if s.p.segment == "" || s.last && s.p.index != "" || s.readErr != nil || s.idxErr != nil {
			continue // an unread segment or index: what lookups find is unknown
		}
		to := st.nextFirst(i)
		from := s.p.first
		if s.p.index != "" {
			if s.idx.lastValid == nil {
				from = s.p.first
			} else {
				from = s.idx.lastValidNext
			}
		}
		if from < to {
			out = append(out, Range{from, to})
		}
	}
	return out
}

// report builds the stream's files, findings and queue line.
func (st *StreamScan) report(sc *scanCtx) {
	for _, s := range st.segs {
		if s.p.segment != "" {
			f := scan.File{Path: s.rel, Kind: "segment", Size: s.size, BytesScanned: s.size, Records: int(s.messages),
				FirstValid: -1, LastValid: -1, ValidEnd: s.validEnd, End: s.end}
			if s.readErr != nil {
				f.End = ""
			}
			if s.first != nil {
				f.FirstValid, f.LastValid = s.first.Pos, s.lastChunk.Pos
			}
			st.files = append(st.files, f)
		}
		if s.idxErr != nil { // no end: the session names it unreadable
			st.files = append(st.files, scan.File{Path: s.relIdx, Kind: "index", Size: s.idx.size, FirstValid: -1, LastValid: -1})
		} else if s.p.index != "" && s.idx.present {
			end := scan.EndEOF
			if s.idx.tornBytes > 0 {
				end = scan.EndTorn
			}
			ve := s.idx.size - s.idx.tornBytes
			st.files = append(st.files, scan.File{Path: s.relIdx, Kind: "index", Size: s.idx.size, BytesScanned: s.idx.size,
				Records: s.idx.records, FirstValid: -1, LastValid: -1, ValidEnd: ve, End: end})
		}
		st.findings = append(st.findings, s.findings...)
	}
	st.findings = append(st.findings, st.Recovery.findings(st)...)
	st.Queue = st.queue()
}
