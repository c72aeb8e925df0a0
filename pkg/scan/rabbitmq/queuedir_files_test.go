package rabbitmq

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	rfmt "github.com/storectl/storectl/pkg/format/rabbitmq"
)

// The queue dir reader's tests on hand-made v1 files and on real v2
// files with one slot torn or one .qs byte flipped.

const qxQ1 = "6GR38JRPIL3M68J7JM8E1SMBO" // queues/<hash> of q1 in the 3.10 captures

// qxQSSlots returns the (.qs offset, blob size) of every location-2 slot
// of a .qi, from the raw bytes.
func qxQSSlots(qi []byte) [][2]uint64 {
	var out [][2]uint64
	for off := rfmt.QIHeaderSize; off+rfmt.QIEntrySize <= len(qi); off += rfmt.QIEntrySize {
		e := qi[off:]
		if e[0] == 1 && e[3] == 2 {
			out = append(out, [2]uint64{binary.BigEndian.Uint64(e[4:]), uint64(binary.BigEndian.Uint32(e[12:]))})
		}
	}
	return out
}

// qxIDXPub builds a segment publish record as rabbit_queue_index writes it.
func qxIDXPub(rel uint16, persistent bool, id byte, size uint32, emb []byte) []byte {
	return rfmt.AppendIDXRecord(nil, rfmt.IDXRecord{Kind: rfmt.IDXPublish, RelSeq: rel, Persistent: persistent, MsgID: [16]byte{id}, Size: size, Embedded: emb})
}

func qxIDXRel(rel uint16) []byte {
	return rfmt.AppendIDXRecord(nil, rfmt.IDXRecord{Kind: rfmt.IDXDelAck, RelSeq: rel})
}

// qxJPub builds a journal publish record.
func qxJPub(seq uint64, persistent bool, id byte, emb []byte) []byte {
	return rfmt.AppendJournalRecord(nil, rfmt.JournalRecord{Kind: rfmt.JournalPublish, SeqID: seq, Persistent: persistent, MsgID: [16]byte{id}, Size: 7, Embedded: emb})
}

func qxJOp(kind uint64, seq uint64) []byte {
	return rfmt.AppendJournalRecord(nil, rfmt.JournalRecord{Kind: rfmt.JournalKind(kind), SeqID: seq})
}

func qxCat(parts ...[]byte) []byte {
	var b []byte
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

// TestIDXReplay checks the segment + journal combination rules.
func TestIDXReplay(t *testing.T) {
	dir := filepath.Join(t.TempDir(), rfmt.QueueDirName("/", "qr"))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	seg0 := qxCat(
		qxIDXPub(0, true, 10, 1, nil), qxIDXRel(0), qxIDXRel(0), // acked in the segment
		qxIDXPub(1, true, 11, 1, nil), qxIDXRel(1), // delivered, acked in the journal
		qxIDXPub(2, true, 12, 1, nil),              // live, journal repeats its publish
		qxIDXPub(3, false, 13, 1, nil),             // transient: dropped at recovery
		qxIDXPub(4, true, 14, 1, []byte{131, 106}), // embedded: no store ref
	)
	seg1 := qxCat(qxIDXPub(0, true, 20, 1, nil)) // seq 8 with 8 entries per segment
	jrn := qxCat(qxJOp(3, 1), qxJPub(2, true, 12, nil), qxJOp(2, 2),
		qxJPub(5, true, 15, nil), qxJOp(3, 6), // ack without publish: ignored
		qxJPub(7, true, 17, nil), qxJOp(2, 7), qxJOp(3, 7)) // published and acked in the journal
	for name, b := range map[string][]byte{"0.idx": seg0, "1.idx": seg1, "journal.jif": jrn,
		".queue_name": []byte("VHOST: /\nQUEUE: qr\n")} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	q, err := ReadQueueDir(dir, 8)
	if err != nil {
		t.Fatal(err)
	}
	type want struct {
		seq       uint64
		id        byte
		loc       EntryLocation
		drop      string
		delivered bool
	}
	exp := []want{{2, 12, LocationSharedStore, "", true}, {3, 13, LocationSharedStore, DropTransient, false},
		{4, 14, LocationEmbedded, "", false}, {5, 15, LocationSharedStore, "", false}, {8, 20, LocationSharedStore, "", false}}
	if len(q.Entries) != len(exp) || len(q.Anomalies) != 0 {
		t.Fatalf("entries %+v, anomalies %v", q.Entries, q.Anomalies)
	}
	for i, w := range exp {
		e := q.Entries[i]
		if e.SeqID != w.seq || e.MsgID[:2] != string("0123456789abcdef"[w.id>>4])+string("0123456789abcdef"[w.id&15]) ||
			e.Location != w.loc || e.Drop != w.drop || e.Delivered != w.delivered || e.IndexVersion != 1 {
			t.Errorf("entry %d: %+v, want %+v", i, e, w)
		}
	}
	if len(q.Refs) != 3 { // seqs 2, 5, 8: persistent, unacked, not embedded
		t.Errorf("refs %+v", q.Refs)
	}
	// A del/ack for a slot with no publish and a RelSeq past the segment
	// size are anomalies with their offsets.
	bad := qxCat(qxIDXRel(6), qxIDXPub(9, true, 1, 1, nil))
	if err := os.WriteFile(filepath.Join(dir, "2.idx"), bad, 0o644); err != nil {
		t.Fatal(err)
	}
	q, err = ReadQueueDir(dir, 8)
	if err != nil || len(q.Anomalies) != 2 || q.Anomalies[0].Code != CodeIDXUnknownSeq || q.Anomalies[0].Offset != 0 ||
		q.Anomalies[1].Code != CodeIDXBadRecord || q.Anomalies[1].Offset != 2 {
		t.Errorf("anomalies %v, %v", q.Anomalies, err)
	}
}

// TestQueueDirQITorn cuts the last present slot of a real .qi in half:
// the queue dir reader reports it at its file and offset and the entry is
// gone.
func TestQueueDirQITorn(t *testing.T) {
	dir := filepath.Join(qxExtract(t, "rabbitmq/datasets/crash-cqv2.tar.gz"), "queues", qxQ1)
	qi, err := os.ReadFile(filepath.Join(dir, "0.qi"))
	if err != nil {
		t.Fatal(err)
	}
	whole, err := rfmt.ReadQI(qi)
	if err != nil || len(whole.Records) == 0 {
		t.Fatalf("fixture: %d records, %v", len(whole.Records), err)
	}
	last := whole.Records[len(whole.Records)-1]
	before, err := ReadQueueDir(dir, 2048)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(filepath.Join(dir, "0.qi"), last.Offset+13); err != nil {
		t.Fatal(err)
	}
	after, err := ReadQueueDir(dir, 2048)
	if err != nil {
		t.Fatal(err)
	}
	if len(after.Entries) != len(before.Entries)-1 || len(after.Anomalies) != 1 ||
		after.Anomalies[0].Code != CodeQITorn || after.Anomalies[0].Offset != last.Offset ||
		after.Anomalies[0].Path != filepath.Join(dir, "0.qi") {
		t.Errorf("queue dir after tear: %d entries (was %d), anomalies %v", len(after.Entries), len(before.Entries), after.Anomalies)
	}
}

// TestQueueDirQSCRC flips one blob byte of a real .qs and expects the queue
// dir reader to report it at the entry's CRC field and drop the entry.
func TestQueueDirQSCRC(t *testing.T) {
	dir := filepath.Join(qxExtract(t, "rabbitmq/datasets/crash-cqv2.tar.gz"), "queues", qxQ1)
	qi, err := os.ReadFile(filepath.Join(dir, "0.qi"))
	if err != nil {
		t.Fatal(err)
	}
	s := qxQSSlots(qi)[1]
	p := filepath.Join(dir, "0.qs")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	b[s[0]+8+s[1]-3] ^= 0x20
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	q, err := ReadQueueDir(dir, 2048)
	if err != nil {
		t.Fatal(err)
	}
	if len(q.Anomalies) != 1 || q.Anomalies[0].Code != CodeQSCRC || q.Anomalies[0].Path != p ||
		q.Anomalies[0].Offset != int64(s[0])+5 {
		t.Fatalf("anomalies %v, want one %s at %s@%d", q.Anomalies, CodeQSCRC, p, s[0]+5)
	}
	dropped := 0
	for _, e := range q.Entries {
		if e.Drop != "" {
			dropped++
			if e.Drop != "bad_crc" || e.StoreOffset != s[0] {
				t.Errorf("dropped %+v", e)
			}
		}
	}
	if dropped != 1 {
		t.Errorf("%d entries dropped, want 1", dropped)
	}
	// Without its .qi the .qs is an orphan.
	if err := os.Remove(filepath.Join(dir, "0.qi")); err != nil {
		t.Fatal(err)
	}
	q, err = ReadQueueDir(dir, 2048)
	if err != nil || len(q.Entries) != 0 || len(q.Anomalies) != 1 || q.Anomalies[0].Code != CodeQSOrphan {
		t.Errorf("orphan .qs: %d entries, %v, %v", len(q.Entries), q.Anomalies, err)
	}
}
