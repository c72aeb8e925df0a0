package salvage

import (
	"context"
	"fmt"
	"slices"

	rfmt "github.com/storectl/storectl/pkg/format/rabbitmq"
	"github.com/storectl/storectl/pkg/scan"
	sscan "github.com/storectl/storectl/pkg/scan/stream"
)

// SelectCRCDamaged selects the messages of stream chunks whose data fails
// its CRC: exported as they are, flagged (crc_match false), since some of
// their bytes are not what was published.
const SelectCRCDamaged Selection = "crc-damaged"

// LocationStream is the Location of a stream message.
const LocationStream = "stream"

// ExportStreams exports the messages of the RabbitMQ streams cfg names
// into w (rep: the report to add to; nil makes one). Each message carries
// the AMQP 0-9-1 properties the broker of cfg.BrokerVersion would deliver
// it with (properties_bin, so Publish sends them), its stream and offset.
// Selections: all (every whole message whose chunk matches its CRC, and
// the whole entries of a torn chunk, flagged), lost (what the next start
// drops), after-corruption (intact messages after the first damaged
// chunk of their stream, which a reader stops at), crc-damaged.
func ExportStreams(ctx context.Context, cfg sscan.Config, o Options, w *Writer, rep *Report) (*Report, error) {
	if rep == nil {
		rep = &Report{Store: StoreRabbitMQ, Out: w.Dir(), By: map[string]int{}}
	}
	rules, err := sscan.RulesFor(cfg.BrokerVersion)
	if err != nil {
		return rep, err
	}
	// First pass: what the next start drops and where each stream is
	// first damaged.
	first, err := sscan.ScanStreams(ctx, sscan.Config{Root: cfg.Root, StreamRoots: cfg.StreamRoots, StreamDirs: cfg.StreamDirs,
		Files: cfg.Files, BrokerVersion: cfg.BrokerVersion}, scan.Options{})
	if err != nil {
		return rep, err
	}
	// A segment or index that could not be read: the rest is exported;
	// what it holds is not, and its stream's next start is not predicted
	// (nothing of it is selected as lost).
	rep.noteUnread(first.Result)
	type streamFacts struct {
		dropped     []sscan.Range
		damagePath  string
		damageOff   int64
		crcSkipped  int
		unreachable []sscan.Range
		recovery    sscan.Recovery
	}
	facts := map[string]*streamFacts{}
	for _, st := range first.Streams {
		f := &streamFacts{dropped: st.Recovery.Dropped, unreachable: st.Queue.Unattachable, recovery: st.Recovery, damageOff: -1}
		for _, fd := range first.Findings {
			switch fd.Code {
			case sscan.CodeChunkCRC, sscan.CodeBadChunk, sscan.CodeTornTail:
			default:
				continue
			}
			if dirOf(fd.Path) != st.Info.Dir {
				continue
			}
			if f.damageOff < 0 || fd.Path < f.damagePath || fd.Path == f.damagePath && fd.Offset < f.damageOff {
				f.damagePath, f.damageOff = fd.Path, fd.Offset
			}
		}
		facts[st.Info.Dir] = f
	}
	in := func(rs []sscan.Range, off uint64) bool {
		return slices.ContainsFunc(rs, func(r sscan.Range) bool { return off >= r.From && off < r.To })
	}
	var werr error
	cfg.OnMessage = func(m *sscan.Message) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		f := facts[m.Stream.Dir]
		if f == nil {
			f = &streamFacts{damageOff: -1}
		}
		damaged := !m.CRCMatch && !m.Torn
		var sel []Selection
		var why []string
		want := func(s Selection) bool {
			return slices.Contains(o.Select, s) || s != SelectCRCDamaged && slices.Contains(o.Select, SelectAll)
		}
		add := func(s Selection, reason string) {
			if want(s) {
				sel, why = append(sel, s), append(why, reason)
			}
		}
		switch {
		case damaged:
			if want(SelectCRCDamaged) {
				add(SelectCRCDamaged, fmt.Sprintf("crc-damaged: its chunk (%s@%d) fails its CRC: some bytes are not what was published", m.Path, m.ChunkPos))
			} else {
				f.crcSkipped++
			}
		case m.Torn:
			add(SelectAll, "all: a whole entry of a torn chunk (its CRC cannot be checked)")
		default:
			add(SelectAll, "all: a message of "+m.Path)
		}
		if !damaged || want(SelectCRCDamaged) {
			if in(f.dropped, m.Offset) {
				add(SelectLost, fmt.Sprintf("lost: the next start of RabbitMQ %s drops offset %d", rules.Name, m.Offset))
			}
			if !damaged && !m.Torn && f.damageOff >= 0 && (m.Path > f.damagePath || m.Path == f.damagePath && m.ChunkPos > f.damageOff) {
				add(SelectAfterCorruption, fmt.Sprintf("after-corruption: after the damaged chunk at %s@%d, where a reader of the stream stops", f.damagePath, f.damageOff))
			}
		}
		if len(sel) == 0 {
			return nil
		}
		msg, body, err := streamMessage(m, rules)
		if err != nil {
			rep.Skipped++
			rep.Notes = append(rep.Notes, fmt.Sprintf("%s@%d: %v", m.Path, m.EntryPos, err))
			return nil
		}
		if in(f.unreachable, m.Offset) {
			why = append(why, "a consumer attaching at this offset is not served (the segment's index lacks it)")
		}
		msg.SelectedBy, msg.Why = dedupSel(sel), why
		if f.recovery.Changes() && in(f.dropped, m.Offset) {
			msg.Status = "dropped at recovery: " + rules.Name
		}
		if err := addMessage(w, rep, msg, body); err != nil {
			werr = err
			return err
		}
		return nil
	}
	if _, err := sscan.ScanStreams(ctx, cfg, scan.Options{}); err != nil {
		return rep, err
	}
	if werr != nil {
		return rep, werr
	}
	for dir, f := range facts {
		if f.crcSkipped > 0 {
			rep.Notes = append(rep.Notes, fmt.Sprintf("%s: %d message(s) in chunks that fail their CRC were not exported (--select crc-damaged exports them, flagged)", dir, f.crcSkipped))
		}
	}
	slices.Sort(rep.Notes)
	return rep, nil
}

// dirOf is the stream dir of a stream file's path.
func dirOf(p string) string {
	for i := len(p) - 1; i >= 0; i-- {
		if p[i] == '/' {
			return p[:i]
		}
	}
	return p
}

// streamMessage makes the messages.jsonl line and body of a stream
// message: the fields of a classic one, plus stream and offset.
func streamMessage(m *sscan.Message, rules sscan.Rules) (Message, []byte, error) {
	d := sscan.DecodeMessage(m)
	if d.Err != nil {
		return Message{}, nil, d.Err
	}
	rec := sscan.NewRecord(m)
	dl := sscan.To091(d, rules)
	pb, err := rfmt.AppendBasicProperties(nil, dl.Properties)
	if err != nil {
		return Message{}, nil, fmt.Errorf("AMQP 0-9-1 properties: %w", err)
	}
	crc := m.CRCMatch
	off := m.Offset
	out := Message{Store: StoreRabbitMQ, MsgID: rec.MsgID, Path: m.Path, Offset: m.EntryPos, RecordSize: m.EntrySize,
		Location: LocationStream, VHost: rec.VHost, Queues: []string{rec.Queue}, Status: "on disk", Term: "amqp-1.0",
		PropertiesBin: pb, Properties: PropsJSON(&dl.Properties), Stream: rec.Stream, StreamOffset: &off,
		ChunkID: &rec.ChunkID, ChunkTimestamp: rec.Timestamp, CRCMatch: &crc, Torn: m.Torn}
	ex := ""
	if rec.Exchange != nil {
		ex = *rec.Exchange
	}
	out.Exchange = &ex
	rk := rec.Queue
	if rec.RoutingKey != nil {
		rk = *rec.RoutingKey
	}
	out.RoutingKeys = []string{rk}
	return out, append([]byte(nil), dl.Body...), nil
}
