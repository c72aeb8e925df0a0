package salvage

// Small messages never reach an .rdq (docs/formats/rabbitmq-classic.md
// §2.2): below
// queue_index_embed_msgs_below they live in the queue's own files, a CQ
// v2 per-queue store entry (<S>.qs, found through its .qi slot, §5.2) or
// a v1 index record with the message embedded (EmbSize > 0, §5.3). They
// are exported like .rdq records, from the body terms the queue index
// reader (pkg/scan/rabbitmq ReadQueueDir, one queue dir at a time after
// the scan) sliced out.

import (
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"

	"github.com/storectl/storectl/internal/storefile"
	"github.com/storectl/storectl/pkg/format/etf"

	rfmt "github.com/storectl/storectl/pkg/format/rabbitmq"
	"github.com/storectl/storectl/pkg/scan"
	rscan "github.com/storectl/storectl/pkg/scan/rabbitmq"
)

// maxQSRead bounds the .qs bytes read to rescue an entry whose size check
// failed: a .qs holds at most 4096 entries below
// queue_index_embed_msgs_below (4 KiB by default), far under 1 GiB.
const maxQSRead = 1 << 30

// queueMsg is a message held by a queue's own files, with every queue
// holding a copy of it.
type queueMsg struct {
	m    Message
	body []byte
}

// queueMessages decodes the queue-store and embedded entries of v that o
// selects: all of them for all, the .qs entries the broker cannot read
// (CRC or size check fails) for lost. One message per msg id (the id
// annotation inside the body): a message routed to several queues has a
// copy in each, and its Queues lists them all. skip holds ids exported
// from an .rdq already. The scan read the queue dirs for their references
// only: each dir's entries are read again here, one dir at a time.
func queueMessages(root string, v *rscan.VHostScan, o Options, rep *Report, skip map[[16]byte]bool) ([]*queueMsg, error) {
	if v.Queues == nil || !(o.has(SelectAll) || o.has(SelectLost)) {
		return nil, nil
	}
	var out []*queueMsg
	byID := map[string]*queueMsg{}
	take := func(name string, e *rscan.QueueEntry) {
		if e.Location != rscan.LocationQueueStore && e.Location != rscan.LocationEmbedded {
			return
		}
		lost := e.Location == rscan.LocationQueueStore && (e.Drop == "bad_crc" || e.Drop == "bad_size")
		var sel []Selection
		var why []string
		if o.has(SelectAll) {
			sel, why = append(sel, SelectAll), append(why, fmt.Sprintf("all: a %s message of queue %s (a small message, never in an .rdq)", e.Location, name))
		}
		if lost && o.has(SelectLost) {
			sel = append(sel, SelectLost)
			why = append(why, fmt.Sprintf("lost: the broker drops this .qs entry of queue %s at recovery (%s); exported because its body still decodes as one message term", name, e.Drop))
		}
		if len(sel) == 0 {
			return
		}
		m, body, err := queueMessage(root, v, e, lost)
		if err != nil {
			rep.Skipped++
			rep.Notes = append(rep.Notes, fmt.Sprintf("%s@%d (%s of queue %s): not exported: %v", m.Path, m.Offset, e.Location, name, err))
			return
		}
		key := m.MsgID + "/" + fmt.Sprint(lost)
		if id, err := hex.DecodeString(m.MsgID); err == nil && len(id) == 16 && skip[[16]byte(id)] && !lost {
			return
		}
		if x := byID[key]; x != nil && m.MsgID != "" {
			x.m.Queues = append(x.m.Queues, name)
			return
		}
		m.Queues = []string{name}
		m.SelectedBy, m.Why = dedupSel(sel), why
		x := &queueMsg{m: m, body: body}
		byID[key] = x
		out = append(out, x)
	}
	for _, qd := range v.Queues.Queues {
		name := qd.Hash
		if qd.HasName {
			name = qd.Name.Name
		}
		// One segment at a time, keeping only the entries held in the
		// queue's own files: the whole entry list (most of them pointing
		// into .rdq files) held 52 of the 114 MiB in use at the end of
		// salvage --select all of a generated 256 MiB store of small
		// messages. Segments that overlap in seq ids (ErrSegmentOrder,
		// possibly after some were handed over) are read whole instead.
		var own []rscan.QueueEntry
		err := rscan.ErrSegmentOrder
		if !wholeQueueDirs {
			_, err = rscan.ReadQueueDirSegments(qd.Dir, v.Queues.SegmentEntryCount, func(_ *rscan.QueueDir, entries []rscan.QueueEntry) error {
				for _, e := range entries {
					if e.Location == rscan.LocationQueueStore || e.Location == rscan.LocationEmbedded {
						own = append(own, e)
					}
				}
				return nil
			})
		}
		if errors.Is(err, rscan.ErrSegmentOrder) {
			wholeReads.Add(1)
			var full *rscan.QueueDir
			if full, err = rscan.ReadQueueDir(qd.Dir, v.Queues.SegmentEntryCount); err == nil {
				own = full.Entries
			}
		}
		if err != nil {
			return nil, err
		}
		for i := range own {
			take(name, &own[i])
		}
	}
	return out, nil
}

// wholeQueueDirs makes queueMessages read every queue dir whole, as
// ReadQueueDirSegments' ErrSegmentOrder does (tests compare the two);
// wholeReads counts the dirs read whole.
var (
	wholeQueueDirs bool
	wholeReads     atomic.Int64
)

// queueMessage decodes one entry. A lost .qs entry is decoded from what
// its bytes hold (the first term of the blob, or of the bytes after the
// entry header when the size check failed); a readable one must be one
// term followed only by zero padding.
func queueMessage(root string, v *rscan.VHostScan, e *rscan.QueueEntry, lost bool) (Message, []byte, error) {
	m := Message{Store: StoreRabbitMQ, MsgID: e.MsgID, VHost: v.VHost, Location: e.Location.String(), Status: rscan.StatusReferenced}
	if e.Drop != "" {
		m.Status = "dropped at recovery: " + e.Drop
	}
	body, bodyOff := e.Body, e.Offset
	switch e.Location {
	case rscan.LocationQueueStore:
		m.Path, m.Offset = scan.Rel(root, e.StorePath), int64(e.StoreOffset)
		m.RecordSize = rfmt.QSEntryHeaderSize + int64(e.StoreSize)
		io := e.Offset
		m.IndexPath, m.IndexOffset = scan.Rel(root, e.Path), &io
		bodyOff = m.Offset + rfmt.QSEntryHeaderSize
		if body == nil && lost {
			body = rescueQS(e)
		}
	default:
		m.Path, m.Offset = scan.Rel(root, e.Path), e.Offset
		hdr := int64(rfmt.IDXPublishSize)
		if filepath.Base(e.Path) == "journal.jif" {
			hdr = rfmt.JournalPublishSize
		}
		m.RecordSize = hdr + int64(len(body))
		bodyOff += hdr
	}
	if len(body) == 0 {
		return m, nil, fmt.Errorf("no message bytes (%s)", e.Drop)
	}
	if lost {
		body = firstTerm(body)
	} else {
		body = rfmt.TrimQSPadding(body)
	}
	dm, err := rfmt.DecodeMessage(body, bodyOff)
	if err != nil {
		return m, nil, err
	}
	if len(dm.ID) == 16 {
		m.MsgID = fmt.Sprintf("%x", dm.ID)
	}
	return fillDecoded(m, dm)
}

// rescueQS reads the bytes after the header of a .qs entry whose size
// check failed (bad_size: the size field disagrees with the .qi slot, or
// the entry runs past the end of the file); nil if there are none.
func rescueQS(e *rscan.QueueEntry) []byte {
	b, err := storefile.ReadFile(e.StorePath)
	if err != nil || len(b) > maxQSRead || e.StoreOffset >= uint64(len(b)) {
		return nil
	}
	start := e.StoreOffset + rfmt.QSEntryHeaderSize
	if start >= uint64(len(b)) {
		return nil
	}
	end := min(uint64(len(b)), start+uint64(e.StoreSize))
	return b[start:end]
}

// firstTerm returns the first complete term of b (b itself when none).
func firstTerm(b []byte) []byte {
	if n, err := etf.SkipTerm(b); err == nil && n > 0 && n <= len(b) {
		return b[:n]
	}
	return b
}

// fillDecoded copies what a decoded body term says into m and returns the
// payload (copied: dm aliases the file bytes).
func fillDecoded(m Message, dm rfmt.Message) (Message, []byte, error) {
	if dm.Content == nil {
		return m, nil, fmt.Errorf("%s message: only AMQP 0-9-1 content is exported", dm.Protocol)
	}
	m.Term, m.RoutingKeys = dm.Record, dm.RoutingKeys
	m.PropertiesBin, m.Properties = dm.Content.PropertiesBin, PropsJSON(dm.Properties)
	x := dm.Exchange
	m.Exchange = &x
	return m, append([]byte(nil), dm.Payload...), nil
}

// queueNote says in the report how many small messages came from queue files.
func queueNote(dir string, qm []*queueMsg) string {
	n := map[string]int{}
	for _, x := range qm {
		n[x.m.Location]++
	}
	var parts []string
	for _, l := range []string{"queue-store", "embedded"} {
		if n[l] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n[l], l))
		}
	}
	return fmt.Sprintf("%s: %s message(s) exported from queue index files (never in an .rdq)", dir, strings.Join(parts, ", "))
}
