// Package stream plans the repairs of RabbitMQ stream files from the
// stream scanner's findings (pkg/scan/stream): rebuild-index writes every
// missing or damaged .index from its segment, byte for byte what osiris
// writes, and truncate cuts a torn or damaged tail of the last segment the
// way osiris' next start would (or, with KeepWholeEntries, rewrites a torn
// chunk with its whole entries). The plans go through pkg/repair's
// apply/backup/undo path like every other.
package stream

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/storectl/storectl/pkg/format/amqp10"
	"github.com/storectl/storectl/pkg/format/osiris"
	"github.com/storectl/storectl/pkg/repair"
	"github.com/storectl/storectl/pkg/scan"
	sscan "github.com/storectl/storectl/pkg/scan/stream"
)

// Config says what to plan for.
type Config struct {
	Scan        sscan.Config
	ToolVersion string
	// KeepWholeEntries: truncate rewrites a torn last chunk with the
	// entries of it that are whole and decode as AMQP 1.0 messages,
	// instead of cutting the chunk away as osiris does.
	KeepWholeEntries bool
}

// Report says what a plan does, per stream.
type Report struct {
	Streams []StreamReport `json:"streams"`
	// Scan is the scan the plan was derived from.
	Scan *scan.Result `json:"-"`
}

// Scanned is the scan the plan was derived from.
func (r *Report) Scanned() *scan.Result { return r.Scan }

// StreamReport is one stream's part of a plan.
type StreamReport struct {
	Dir     string        `json:"dir"`
	Indexes []IndexReport `json:"indexes,omitempty"`
	Cuts    []CutReport   `json:"cuts,omitempty"`
	Notes   []string      `json:"notes,omitempty"`
}

// IndexReport is one rebuilt index.
type IndexReport struct {
	Path    string `json:"path"`
	Was     string `json:"was"` // missing | differs
	Records int    `json:"records"`
	// Size and NewSize are the index's bytes before and after.
	Size    int64 `json:"size"`
	NewSize int64 `json:"new_size"`
}

// CutReport is one truncated segment.
type CutReport struct {
	Path string `json:"path"`
	From int64  `json:"from"`
	To   int64  `json:"to"`
	// How: "osiris" (the chunk is cut away as the broker's start would) or
	// "whole-entries" (the torn chunk is rewritten with its whole entries).
	How      string `json:"how"`
	Messages int64  `json:"messages_lost"`
	Kept     int    `json:"entries_kept,omitempty"`
}

func scanFor(ctx context.Context, cfg Config) (*sscan.Result, error) {
	res, err := sscan.ScanStreams(ctx, cfg.Scan, scan.Options{})
	if err != nil {
		return nil, err
	}
	if res.Incomplete {
		return res, fmt.Errorf("refusing to plan from an incomplete scan: %v", res.Errors)
	}
	return res, nil
}

func newPlan(cfg Config, plan *repair.Plan) (*repair.Plan, error) {
	if plan != nil {
		return plan, nil
	}
	return repair.NewPlan(cfg.Scan.Root, cfg.ToolVersion, time.Now())
}

// PlanRebuildIndex adds to plan (nil: a new plan) one replace-file per
// index that is missing or does not match its segment record for record:
// the rebuilt index holds one record per whole chunk, as osiris writes
// them. A segment before the stream's first pair (which osiris 1.8.3+
// deletes at start: what retention leaves when it stops between deleting
// the index and the segment, and also every segment of a stream that lost
// all its indexes) gets its index too, with a note.
func PlanRebuildIndex(ctx context.Context, cfg Config, plan *repair.Plan) (*repair.Plan, *Report, error) {
	res, err := scanFor(ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	plan, err = newPlan(cfg, plan)
	if err != nil {
		return nil, nil, err
	}
	rep := &Report{Scan: res.Result}
	for _, st := range res.Streams {
		sr := StreamReport{Dir: st.Info.Dir}
		for _, p := range st.Pairs() {
			switch {
			case p.Segment == "":
				sr.Notes = append(sr.Notes, fmt.Sprintf("%s has no segment: nothing to rebuild it from", p.Index))
				continue
			case p.IndexOK:
				continue
			case p.BeforeFirstPair:
				sr.Notes = append(sr.Notes, fmt.Sprintf("%s has no index and comes before the first indexed segment: the broker's next start would delete it (osiris 1.8.3+); its index is rebuilt, and if retention was deleting it, retention deletes it again when the stream is over its limits", p.Segment))
			}
			seg := filepath.Join(cfg.Scan.Root, filepath.FromSlash(p.Segment))
			idx, n, err := sscan.BuildIndex(seg)
			if err != nil {
				return nil, nil, fmt.Errorf("%s: %w", p.Segment, err)
			}
			rel := p.Index
			was := "differs"
			if rel == "" {
				rel, was = filepath.ToSlash(filepath.Join(filepath.Dir(filepath.FromSlash(p.Segment)), p.Name+".index")), "missing"
			} else if old, err := os.ReadFile(filepath.Join(cfg.Scan.Root, filepath.FromSlash(rel))); err == nil && bytes.Equal(old, idx) {
				continue
			}
			a := repair.Action{Op: repair.OpReplaceFile, Path: rel, Data: idx, Reason: reasonFor(st, p),
				Lost: repair.Loss{Note: fmt.Sprintf("index %s: %d record(s) rebuilt from %s", was, n, p.Segment)}}
			if err := plan.Add(a, repair.SnapshotOptions{}); err != nil {
				return nil, nil, err
			}
			sr.Indexes = append(sr.Indexes, IndexReport{Path: rel, Was: was, Records: n, Size: p.IndexSize, NewSize: int64(len(idx))})
		}
		if len(sr.Indexes) > 0 || len(sr.Notes) > 0 {
			rep.Streams = append(rep.Streams, sr)
		}
	}
	return plan, rep, nil
}

// reasonFor names the finding that calls for a pair's rebuild.
func reasonFor(st *sscan.StreamScan, p sscan.PairInfo) string {
	if p.Index == "" {
		return sscan.CodeIndexMissing
	}
	for _, c := range []string{sscan.CodeIndexShort, sscan.CodeIndexExtra, sscan.CodeIndexMismatch, sscan.CodeIndexZero, sscan.CodeIndexTorn, sscan.CodeIndexHeader} {
		if st.HasFinding(c, p.Index) {
			return c
		}
	}
	return sscan.CodeIndexMismatch
}

// PlanTruncate adds to plan (nil: a new plan) the cuts of each stream's
// last segment: a torn chunk, and whole chunks after the last one whose
// data matches its CRC, go as osiris' next start removes them; the index
// loses its records for them. With KeepWholeEntries a torn user chunk
// whose whole entries all decode as AMQP 1.0 messages is rewritten as a
// chunk of those entries instead (its trailer, the publisher's
// deduplication sequence, is lost).
func PlanTruncate(ctx context.Context, cfg Config, plan *repair.Plan) (*repair.Plan, *Report, error) {
	res, err := scanFor(ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	plan, err = newPlan(cfg, plan)
	if err != nil {
		return nil, nil, err
	}
	rep := &Report{Scan: res.Result}
	for _, st := range res.Streams {
		sr := StreamReport{Dir: st.Info.Dir}
		for _, p := range st.Pairs() {
			if p.Segment == "" {
				continue
			}
			if !p.Last {
				if p.Torn != nil {
					sr.Notes = append(sr.Notes, fmt.Sprintf("%s ends in a torn chunk but is not the last segment: cutting it would not let a reader past it; left as it is (salvage reads what is there)", p.Segment))
				}
				continue
			}
			if err := planCut(cfg, plan, p, &sr); err != nil {
				return nil, nil, err
			}
		}
		if len(sr.Cuts) > 0 || len(sr.Notes) > 0 {
			rep.Streams = append(rep.Streams, sr)
		}
	}
	return plan, rep, nil
}

func planCut(cfg Config, plan *repair.Plan, p sscan.PairInfo, sr *StreamReport) error {
	cut := p.GoodEnd
	if p.Torn == nil && len(p.BadTail) == 0 {
		return nil
	}
	if p.Damaged {
		sr.Notes = append(sr.Notes, fmt.Sprintf("%s has a damaged chunk header: truncate leaves it to the broker's index-driven recovery", p.Segment))
		return nil
	}
	var lost int64
	for _, c := range p.BadTail {
		if c.Type == osiris.ChunkUser {
			lost += int64(c.NumRecords)
		}
	}
	segAbs := filepath.Join(cfg.Scan.Root, filepath.FromSlash(p.Segment))
	how := "osiris"
	var rewrite []byte
	kept := 0
	if t := p.Torn; t != nil {
		if t.Header != nil && t.Header.Type == osiris.ChunkUser {
			lost += int64(t.Header.NumRecords)
		}
		if cfg.KeepWholeEntries && len(p.BadTail) == 0 {
			chunk, n, why := wholeEntries(segAbs, t)
			if chunk != nil {
				rewrite, kept, how = chunk, n, "whole-entries"
				lost -= int64(n)
			} else {
				sr.Notes = append(sr.Notes, fmt.Sprintf("%s: the torn chunk at %d is cut, not rewritten: %s", p.Segment, t.Pos, why))
			}
		}
	}
	size := p.SegmentSize
	note := fmt.Sprintf("cut %s at %d (%d bytes): %d message(s) in damaged or torn chunks, as the broker's next start drops them", p.Segment, cut, size-cut, lost)
	if rewrite != nil {
		note = fmt.Sprintf("rewrite the torn chunk at %d with its %d whole entries (%d bytes), then cut %s there: %d message(s) of it lost, its trailer (publisher deduplication) dropped", p.Torn.Pos, kept, len(rewrite), p.Segment, lost)
		if err := plan.Add(repair.Action{Op: repair.OpWriteRange, Path: p.Segment, Offset: p.Torn.Pos, Length: int64(len(rewrite)), Data: rewrite,
			Reason: sscan.CodeTornTail, Lost: repair.Loss{Note: note}}, repair.SnapshotOptions{}); err != nil {
			return err
		}
		cut = p.Torn.Pos + int64(len(rewrite))
	}
	if cut < size {
		if err := plan.Add(repair.Action{Op: repair.OpTruncateFile, Path: p.Segment, NewSize: cut, Reason: tailReason(p),
			Lost: repair.Loss{Records: lost, Note: note}}, repair.SnapshotOptions{}); err != nil {
			return err
		}
	}
	sr.Cuts = append(sr.Cuts, CutReport{Path: p.Segment, From: size, To: cut, How: how, Messages: lost, Kept: kept})
	if p.Index == "" {
		return nil
	}
	return planIndexCut(cfg, plan, p, cut, rewrite != nil, sr)
}

func tailReason(p sscan.PairInfo) string {
	if p.Torn != nil {
		return sscan.CodeTornTail
	}
	return sscan.CodeChunkCRC
}

// planIndexCut drops the index records that point at or past cut; with a
// rewritten torn chunk its record is added when the index lacks it.
func planIndexCut(cfg Config, plan *repair.Plan, p sscan.PairInfo, cut int64, rewritten bool, sr *StreamReport) error {
	abs := filepath.Join(cfg.Scan.Root, filepath.FromSlash(p.Index))
	b, err := os.ReadFile(abs)
	if err != nil {
		return err
	}
	limit := cut
	if rewritten {
		limit = p.Torn.Pos
	}
	keep := int64(osiris.FileHeaderSize)
	hasTorn := false
	x := osiris.IndexRecords(bytes.NewReader(b), int64(len(b)))
	for x.Next() {
		r := x.Record()
		if r.IsZero() || int64(r.FilePos) >= limit {
			if rewritten && !r.IsZero() && int64(r.FilePos) == p.Torn.Pos {
				hasTorn, keep = true, x.Pos()+osiris.IndexRecordSize
			}
			break
		}
		keep = x.Pos() + osiris.IndexRecordSize
	}
	if rewritten && !hasTorn {
		data := append(append([]byte(nil), b[:keep]...), osiris.AppendIndexRecord(nil, osiris.IndexRecordFor(*p.Torn.Header, p.Torn.Pos))...)
		return plan.Add(repair.Action{Op: repair.OpReplaceFile, Path: p.Index, Data: data, Reason: sscan.CodeTornTail,
			Lost: repair.Loss{Note: "index records past the rewritten chunk dropped, its record added"}}, repair.SnapshotOptions{})
	}
	if keep < int64(len(b)) {
		return plan.Add(repair.Action{Op: repair.OpTruncateFile, Path: p.Index, NewSize: keep, Reason: tailReason(p),
			Lost: repair.Loss{Records: (int64(len(b)) - keep) / osiris.IndexRecordSize, Note: "index records of the cut chunks"}}, repair.SnapshotOptions{})
	}
	return nil
}

// wholeEntries rebuilds a torn user chunk from its whole entries when
// every one of them is an AMQP 1.0 message; else it says why not.
func wholeEntries(seg string, t *sscan.TornChunk) ([]byte, int, string) {
	if t.Header == nil {
		return nil, 0, "its header is cut"
	}
	if t.Header.Type != osiris.ChunkUser {
		return nil, 0, "it is a tracking chunk (kept whole or not at all)"
	}
	if t.WholeEntries == 0 {
		return nil, 0, "no entry of it is whole"
	}
	f, err := os.Open(seg)
	if err != nil {
		return nil, 0, err.Error()
	}
	defer f.Close()
	start := t.Pos + t.Header.DataOffset()
	data := make([]byte, t.WholeEnd-start)
	if _, err := f.ReadAt(data, start); err != nil {
		return nil, 0, err.Error()
	}
	var entries []osiris.Entry
	it := osiris.Entries(data, start)
	for it.Next() {
		e := it.Entry()
		if e.SubBatch {
			return nil, 0, fmt.Sprintf("entry at %d is a sub-batch (its records cannot be checked)", e.Pos)
		}
		if err := amqp10.WalkSections(e.Body, e.Pos+osiris.SimpleEntryHeaderSize, nil); err != nil || len(e.Body) == 0 {
			return nil, 0, fmt.Sprintf("entry at %d is not a whole AMQP 1.0 message (%v)", e.Pos, err)
		}
		e.Body = append([]byte(nil), e.Body...)
		entries = append(entries, e)
	}
	h := t.Header
	chunk := osiris.AppendChunk(nil, osiris.ChunkSpec{Type: h.Type, Timestamp: h.Timestamp, Epoch: h.Epoch, ChunkID: h.ChunkID, Entries: entries})
	if int64(len(chunk)) > t.Avail {
		return nil, 0, "the rewritten chunk would not fit in place"
	}
	return chunk, len(entries), ""
}
