package rabbitmq

// The test-made misread corpus of the RabbitMQ scan issue (a copy of
// pkg/salvage/corpus_test.go, which cannot be imported from here)
// (pkg/scan/rabbitmq/misread_test.go), rebuilt here from the same
// fixture records with the internal/gen/rabbitmq surgery helpers.

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	gen "github.com/storectl/storectl/internal/gen/rabbitmq"
	"github.com/storectl/storectl/internal/testutil"
	rfmt "github.com/storectl/storectl/pkg/format/rabbitmq"
)

const hdVHostHash = "628WB79CIFDYO9LJI6DKMI09L"

// hdFixtureRecords returns whole frames of real records (3.10 edge case 01,
// 4.0 crash dataset 0.rdq) with their payload lengths.
func hdFixtureRecords(t *testing.T) (recs [][]byte, plens []int) {
	t.Helper()
	add := func(b []byte) {
		for _, c := range rfmt.ScanData(b, rfmt.ScanOptions{}) {
			rec := b[c.Offset : c.Offset+c.TotalSize]
			m, err := rfmt.DecodeMessage(rec[24:len(rec)-1], 0)
			if err != nil {
				t.Fatal(err)
			}
			recs, plens = append(recs, append([]byte(nil), rec...)), append(plens, int(m.PayloadSize))
		}
	}
	root := testutil.Untar(t, testutil.Testdata("rabbitmq", "datasets", "edge-cases.tar.gz"))
	add(hdRead(t, filepath.Join(root, "01-two-valid.rdq")))
	root = testutil.Untar(t, testutil.Testdata("rabbitmq-4.0", "datasets", "crash.tar.gz"))
	add(hdRead(t, filepath.Join(root, "rmq40@localhost", "msg_stores", "vhosts", hdVHostHash, "msg_store_persistent", "0.rdq")))
	return recs, plens
}

func hdRead(t testing.TB, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// hdRec is a record of a corpus file with its payload (taken from the
// frame at the offset gen.PayloadOffset finds, not through the decoder).
type hdRec struct {
	frame   []byte
	payload []byte
	victim  bool
}

type hdPart struct {
	rec  *hdRec
	hole int
	fill byte
}

type hdCase struct {
	name    string
	parts   []hdPart
	victims int
}

// corpus builds the cases of TestMisreadCorpus: holes of 1, 5, 300 bytes
// before victims, two victims, a hole at file start, #mc{} records, a
// large record whose tested byte is in an all-0xFF payload, and controls.
func hdCorpus(t *testing.T) []hdCase {
	recs, plens := hdFixtureRecords(t)
	if len(recs) < 4 {
		t.Fatalf("only %d fixture records", len(recs))
	}
	whole := func(i int) *hdRec {
		off, err := gen.PayloadOffset(recs[i], plens[i])
		if err != nil {
			t.Fatal(err)
		}
		return &hdRec{frame: recs[i], payload: recs[i][off : off+plens[i]]}
	}
	ffIdx := -1
	for i := 2; i < len(recs); i++ {
		p := whole(i).payload
		if len(p) > 300 && p[0] == 0xFF && p[len(p)-1] == 0xFF && p[100] == 0xFF {
			ffIdx = i
			break
		}
	}
	if ffIdx < 0 {
		t.Fatal("no 0xFF-payload record in the 4.0 fixture")
	}
	v := func(i int, s uint64, fill, last byte, n int, victim bool) *hdRec {
		rec, err := gen.Resize(recs[i], plens[i], s, fill)
		if err != nil {
			t.Fatal(err)
		}
		nplen := plens[i] + int(s) - int(binary.BigEndian.Uint64(recs[i]))
		if fill == 0 && s > 20000 {
			if err := gen.FillPayload(rec, nplen, 0); err != nil {
				t.Fatal(err)
			}
		}
		var id [16]byte
		binary.BigEndian.PutUint64(id[:], 0xC0FFEE00+uint64(n))
		id[15] = last
		gen.SetID(rec, id)
		off, err := gen.PayloadOffset(rec, nplen)
		if err != nil {
			t.Fatal(err)
		}
		return &hdRec{frame: rec, payload: rec[off : off+nplen], victim: victim}
	}
	a, c, mcA := whole(0), whole(1), whole(2)
	return []hdCase{
		{"hole-1", []hdPart{{rec: a}, {hole: 1}, {rec: v(0, 4116, 0, 0xFF, 1, true)}, {rec: c}}, 1},
		{"hole-5", []hdPart{{rec: a}, {hole: 5}, {rec: v(1, 4200, 0, 0xFF, 2, true)}, {rec: c}}, 1},
		{"hole-300", []hdPart{{rec: a}, {hole: 300}, {rec: v(0, 4351, 0, 0xFF, 3, true)}, {rec: c}}, 1},
		{"two-victims", []hdPart{{rec: a}, {hole: 5}, {rec: v(0, 4096, 0, 0xFF, 4, true)}, {rec: c},
			{hole: 1}, {rec: v(1, 4300, 0, 0xFF, 5, true)}}, 2},
		{"hole-20-skip-frame", []hdPart{{rec: a}, {hole: 20}, {rec: v(0, 4116, 0, 0xFF, 13, true)}, {rec: c}}, 1},
		{"hole-at-file-start", []hdPart{{hole: 3}, {rec: v(0, 4116, 0, 0xFF, 6, true)}, {rec: c}}, 1},
		{"mc-hole-5", []hdPart{{rec: mcA}, {hole: 5}, {rec: v(2, 4116, 0, 0xFF, 7, true)}, {rec: c}}, 1},
		{"mc-large-ff-payload", []hdPart{{rec: mcA}, {hole: 5}, {rec: v(ffIdx, 60000, 0xFF, 0x11, 8, true)}, {rec: c}}, 1},
		{"control-ff-fill", []hdPart{{rec: a}, {hole: 5, fill: 0xFF}, {rec: v(0, 4116, 0, 0xFF, 9, false)}, {rec: c}}, 0},
		{"control-id-fe", []hdPart{{rec: a}, {hole: 5}, {rec: v(0, 4116, 0, 0xFE, 10, false)}, {rec: c}}, 0},
		{"control-large-zero-payload", []hdPart{{rec: mcA}, {hole: 5}, {rec: v(ffIdx, 60000, 0x00, 0x11, 11, false)}, {rec: c}}, 0},
		{"control-4352-etf-magic", []hdPart{{rec: a}, {hole: 1}, {rec: v(0, 4400, 0, 0xFF, 12, false)}, {rec: c}}, 0},
	}
}

// hdWriteCase writes a case as node/msg_stores/vhosts/<hash>/msg_store_persistent/0.rdq
// with every record referenced by q1; it returns the data dir, the vhost
// dir and the records by offset.
func hdWriteCase(t *testing.T, parts []hdPart) (root, vdir string, at map[int64]*hdRec) {
	t.Helper()
	root = t.TempDir()
	vdir = filepath.Join(root, "msg_stores", "vhosts", hdVHostHash)
	var b []byte
	var ids [][16]byte
	at = map[int64]*hdRec{}
	for _, p := range parts {
		if p.rec == nil {
			for range p.hole {
				b = append(b, p.fill)
			}
			continue
		}
		at[int64(len(b))] = p.rec
		b = append(b, p.rec.frame...)
		var id [16]byte
		copy(id[:], p.rec.frame[8:24])
		ids = append(ids, id)
	}
	if err := os.MkdirAll(filepath.Join(vdir, "msg_store_persistent"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(vdir, ".vhost"), []byte("/"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(vdir, "msg_store_persistent", "0.rdq"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := gen.WriteQueue(vdir, "/", "q1", ids); err != nil {
		t.Fatal(err)
	}
	return root, vdir, at
}

// hdSpecRecord is one {MsgId, TotalSize, Offset} of a scanner.
type hdSpecRecord struct {
	id     string
	offset int64
	total  int64
}

// hdGen2Spec is the generation-2 scanner of RabbitMQ 3.13.1–4.0.2
// (scan_data/6 without a validity Fun), written from §3.2 of
// rabbitmq-format.md for files that fit one 4 MiB scan block (the whole
// file is buffered, so "read more" always hits end of file):
//
//	A. size ≥ 16, the frame fits, marker 0xFF: a new id is accepted and
//	   the scan jumps TotalSize; an id already seen advances one byte;
//	B. the frame does not fit and size < FileSize − pos: read more → EOF:
//	   return what was accepted;
//	C. fewer than 8 bytes left: return;
//	D. otherwise advance one byte.
func hdGen2Spec(b []byte) []hdSpecRecord {
	if len(b) > 4<<20 {
		panic("hdGen2Spec models single-block files only")
	}
	var acc []hdSpecRecord
	seen := map[string]bool{}
	n := len(b)
	for pos := 0; ; {
		rest := n - pos
		if rest < 8 {
			return acc
		}
		size := binary.BigEndian.Uint64(b[pos:])
		fits := rest >= 9 && size <= uint64(rest-9)
		if fits && size >= 16 && b[pos+8+int(size)] == 0xFF {
			id := string(b[pos+8 : pos+24])
			if seen[id] {
				pos++
				continue
			}
			seen[id] = true
			acc = append(acc, hdSpecRecord{id, int64(pos), int64(size) + 9})
			pos += int(size) + 9
			continue
		}
		if !fits && size < uint64(rest) {
			return acc
		}
		pos++
	}
}
