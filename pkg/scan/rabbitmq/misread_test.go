package rabbitmq

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/storectl/storectl/internal/gen/rabbitmq"
	"github.com/storectl/storectl/internal/testutil"
	rfmt "github.com/storectl/storectl/pkg/format/rabbitmq"
)

// realRecords returns whole frames of real records taken from fixtures:
// the two 3.10 #basic_message{} records of edge case 01 and the 4.0 #mc{}
// records of 0.rdq of the 4.0 crash dataset, with their payload lengths.
func realRecords(t *testing.T) (recs [][]byte, plens []int) {
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
	add(readFile(t, filepath.Join(root, "01-two-valid.rdq")))
	root = testutil.Untar(t, testutil.Testdata("rabbitmq-4.0", "datasets", "crash.tar.gz"))
	add(readFile(t, filepath.Join(root, "rmq40@localhost", "msg_stores", "vhosts", vhostHash, "msg_store_persistent", "0.rdq")))
	return recs, plens
}

// part is one piece of a corpus file: a record or a hole.
type part struct {
	rec    []byte
	hole   int
	fill   byte
	victim bool // a record the §3.4 condition hits
}

// writeVHost writes parts as msg_store_persistent/0.rdq with every record
// referenced by queue q1 and returns the file bytes and record offsets.
func writeVHost(t *testing.T, parts []part) (root, vdir string, b []byte, offs []int64) {
	t.Helper()
	root = t.TempDir()
	vdir = filepath.Join(root, vhostHash)
	var ids [][16]byte
	for _, p := range parts {
		if p.rec == nil {
			for range p.hole {
				b = append(b, p.fill)
			}
			continue
		}
		offs = append(offs, int64(len(b)))
		b = append(b, p.rec...)
		var id [16]byte
		copy(id[:], p.rec[8:24])
		ids = append(ids, id)
	}
	if err := os.MkdirAll(filepath.Join(vdir, "msg_store_persistent"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(vdir, "msg_store_persistent", "0.rdq"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := rabbitmq.WriteQueue(vdir, "/", "q1", ids); err != nil {
		t.Fatal(err)
	}
	return root, vdir, b, offs
}

// victim shrinks (or grows) a real record to Size s and gives it a fresh
// msg id whose last byte is last, in the frame and in the term's id field.
func victim(t *testing.T, rec []byte, plen int, s uint64, fill, last byte, n int) []byte {
	t.Helper()
	v, err := rabbitmq.Resize(rec, plen, s, fill)
	if err != nil {
		t.Fatal(err)
	}
	if fill == 0 && s > 20000 { // a large control: the whole payload zero
		if err := rabbitmq.FillPayload(v, plen+int(s)-int(binary.BigEndian.Uint64(rec)), 0); err != nil {
			t.Fatal(err)
		}
	}
	var id [16]byte
	binary.BigEndian.PutUint64(id[:], 0xC0FFEE00+uint64(n))
	id[15] = last
	if old := rabbitmq.SetID(v, id); old == id {
		t.Fatal("id unchanged")
	}
	if !rfmt.IsExactTerm(v[24 : len(v)-1]) {
		t.Fatal("resized record is not one ETF term")
	}
	return v
}

// TestMisreadCorpus builds files from real records with zero holes where
// the §3.4 condition holds, and controls where it does not. Every victim
// is found at its true offset and referenced; the misread findings are
// exactly the bogus frames of the generation-2 model that hide a record;
// the §3.4 analysis agrees; controls yield no misread finding.
func TestMisreadCorpus(t *testing.T) {
	recs, plens := realRecords(t)
	if len(recs) < 4 {
		t.Fatalf("only %d fixture records", len(recs))
	}
	a, c := recs[0], recs[1] // 3.10 basic_message
	mcA := recs[2]           // 4.0 mc
	ffIdx := -1              // a 4.0 record with an all-0xFF payload
	for i := 2; i < len(recs); i++ {
		m, _ := rfmt.DecodeMessage(recs[i][24:len(recs[i])-1], 0)
		if m.PayloadSize > 300 && m.Payload[0] == 0xFF && m.Payload[len(m.Payload)-1] == 0xFF && m.Payload[100] == 0xFF {
			ffIdx = i
			break
		}
	}
	if ffIdx < 0 {
		t.Fatal("no 0xFF-payload record in the 4.0 fixture")
	}
	v := func(i int, s uint64, fill, last byte, n int) []byte {
		return victim(t, recs[i], plens[i], s, fill, last, n)
	}
	type tc struct {
		name    string
		parts   []part
		victims int // records the §3.4 condition hits
	}
	cases := []tc{
		{"hole-1", []part{{rec: a}, {hole: 1}, {rec: v(0, 4116, 0, 0xFF, 1), victim: true}, {rec: c}}, 1},
		{"hole-5", []part{{rec: a}, {hole: 5}, {rec: v(1, 4200, 0, 0xFF, 2), victim: true}, {rec: c}}, 1},
		{"hole-300", []part{{rec: a}, {hole: 300}, {rec: v(0, 4351, 0, 0xFF, 3), victim: true}, {rec: c}}, 1},
		{"two-victims", []part{{rec: a}, {hole: 5}, {rec: v(0, 4096, 0, 0xFF, 4), victim: true}, {rec: c},
			{hole: 1}, {rec: v(1, 4300, 0, 0xFF, 5), victim: true}}, 2},
		{"hole-at-file-start", []part{{hole: 3}, {rec: v(0, 4116, 0, 0xFF, 6), victim: true}, {rec: c}}, 1},
		{"mc-hole-5", []part{{rec: mcA}, {hole: 5}, {rec: v(2, 4116, 0, 0xFF, 7), victim: true}, {rec: c}}, 1},
		// larger size: the tested body byte (index S/256-17 = 217) lies in an all-0xFF payload
		{"mc-large-ff-payload", []part{{rec: mcA}, {hole: 5}, {rec: v(ffIdx, 60000, 0xFF, 0x11, 8), victim: true}, {rec: c}}, 1},
		// controls
		{"control-ff-fill", []part{{rec: a}, {hole: 5, fill: 0xFF}, {rec: v(0, 4116, 0, 0xFF, 9)}, {rec: c}}, 0},
		{"control-id-fe", []part{{rec: a}, {hole: 5}, {rec: v(0, 4116, 0, 0xFE, 10)}, {rec: c}}, 0},
		{"control-large-zero-payload", []part{{rec: mcA}, {hole: 5}, {rec: v(ffIdx, 60000, 0x00, 0x11, 11)}, {rec: c}}, 0},
		{"control-4352-etf-magic", []part{{rec: a}, {hole: 1}, {rec: v(0, 4400, 0, 0xFF, 12)}, {rec: c}}, 0},
	}
	if m := cases[len(cases)-2].parts[2].rec; binary.BigEndian.Uint64(m)/256-17+24 < 200 {
		t.Fatal("large control does not test a payload byte")
	}
	total := 0
	for _, k := range cases {
		root, vdir, b, offs := writeVHost(t, k.parts)
		s := scanVHostDir(t, root, vdir, "")
		f := s.file(0)
		// every record found at its true offset, referenced
		if len(f.Records) != len(offs) {
			t.Errorf("%s: %d records, want %d", k.name, len(f.Records), len(offs))
			continue
		}
		for i, r := range f.Records {
			if r.Offset != offs[i] || r.Status != StatusReferenced {
				t.Errorf("%s: record %d at %d (%s), want %d referenced", k.name, i, r.Offset, r.Status, offs[i])
			}
		}
		// the generation-2 model's bogus frames
		real, victimAt := map[int64]bool{}, map[int64]bool{}
		for _, o := range offs {
			real[o] = true
		}
		i := 0
		for _, p := range k.parts {
			if p.rec != nil {
				victimAt[offs[i]] = p.victim
				i++
			}
		}
		var bogus, reported []string
		for _, m := range rfmt.ScanData(b, rfmt.ScanOptions{}) {
			if !real[m.Offset] {
				bogus = append(bogus, fmt.Sprintf("%d+%d", m.Offset, m.TotalSize))
			}
		}
		vs := 0
		var primary []string
		for _, h := range codes(s.v.Findings, CodeZeroHoleMisread) {
			reported = append(reported, fmt.Sprintf("%d+%d", h.Offset, h.Length))
			if h.Details["versions"] != VersionsGen2 || h.Severity.String() != "error" {
				t.Errorf("%s: finding %+v", k.name, h)
			}
			if _, ok := h.Details["cascade_inside"]; ok {
				continue // a later bogus frame inside a victim's body; checked against the model above
			}
			if h.Details["analysis_3_4_agrees"] != true {
				t.Errorf("%s: §3.4 analysis disagrees with the model: %+v", k.name, h)
			}
			primary = append(primary, fmt.Sprint(h.Offset))
			for _, v := range h.Details["victims"].([]Victim) {
				if !real[v.Offset] || v.Status != StatusReferenced || !victimAt[v.Offset] {
					t.Errorf("%s: victim %+v is not a record the corpus made a victim", k.name, v)
				}
				vs++
			}
		}
		sort.Strings(bogus)
		sort.Strings(reported)
		if fmt.Sprint(bogus) != fmt.Sprint(reported) || vs != k.victims || len(primary) != k.victims {
			t.Errorf("%s: model bogus %v, reported %v, %d primary victims; want %d", k.name, bogus, reported, vs, k.victims)
		}
		total += vs
		t.Logf("%s: %d records, bogus frames %v, victims %d", k.name, len(offs), bogus, vs)
	}
	if total != 8 {
		t.Errorf("%d victims over the corpus, want 8", total)
	}
}
