package rabbitmq

import (
	"encoding/binary"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
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
	return rabbitmq.FixtureRecords(t, testutil.Testdata())
}

// part is one piece of a hand-made file: a record or a hole.
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
	cp := make([]rabbitmq.CorpusPart, len(parts))
	for i, p := range parts {
		cp[i] = rabbitmq.CorpusPart{Hole: p.hole, Fill: p.fill}
		if p.rec != nil {
			cp[i].Rec = &rabbitmq.CorpusRecord{Frame: p.rec, Victim: p.victim}
		}
	}
	root = t.TempDir()
	vdir = filepath.Join(root, vhostHash)
	b, at := rabbitmq.WriteCorpusFile(t, vdir, cp)
	return root, vdir, b, slices.Sorted(maps.Keys(at))
}

// victim is rabbitmq.ResizedRecord: a real record resized to Size s with
// a fresh msg id whose last byte is last.
func victim(t *testing.T, rec []byte, plen int, s uint64, fill, last byte, n int) []byte {
	t.Helper()
	v, err := rabbitmq.ResizedRecord(rec, plen, s, fill, last, n)
	if err != nil {
		t.Fatal(err)
	}
	return v.Frame
}

// TestMisreadCorpus builds files from real records with zero holes where
// the §3.4 condition holds, and controls where it does not. Every victim
// is found at its true offset and referenced; the misread findings are
// exactly the bogus frames of the generation-2 model that hide a record;
// the §3.4 analysis agrees; controls yield no misread finding.
func TestMisreadCorpus(t *testing.T) {
	cases := slices.DeleteFunc(rabbitmq.MisreadCorpus(t, testutil.Testdata()),
		func(k rabbitmq.CorpusCase) bool { return k.Name == rabbitmq.CaseSkipFrame })
	if m := cases[len(cases)-2].Parts[2].Rec.Frame; binary.BigEndian.Uint64(m)/256-17+24 < 200 {
		t.Fatal("large control does not test a payload byte")
	}
	total := 0
	for _, k := range cases {
		root := t.TempDir()
		vdir := filepath.Join(root, vhostHash)
		b, at := rabbitmq.WriteCorpusFile(t, vdir, k.Parts)
		offs := slices.Sorted(maps.Keys(at))
		s := scanVHostDir(t, root, vdir, "")
		f := s.file(0)
		// every record found at its true offset, referenced
		if len(f.Records) != len(offs) {
			t.Errorf("%s: %d records, want %d", k.Name, len(f.Records), len(offs))
			continue
		}
		for i, r := range f.Records {
			if r.Offset != offs[i] || r.Status != StatusReferenced {
				t.Errorf("%s: record %d at %d (%s), want %d referenced", k.Name, i, r.Offset, r.Status, offs[i])
			}
		}
		// the generation-2 model's bogus frames
		real, victimAt := map[int64]bool{}, map[int64]bool{}
		for _, o := range offs {
			real[o] = true
		}
		for o, r := range at {
			victimAt[o] = r.Victim
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
				t.Errorf("%s: finding %+v", k.Name, h)
			}
			if _, ok := h.Details["cascade_inside"]; ok {
				continue // a later bogus frame inside a victim's body; checked against the model above
			}
			if h.Details["analysis_3_4_agrees"] != true {
				t.Errorf("%s: §3.4 analysis disagrees with the model: %+v", k.Name, h)
			}
			primary = append(primary, fmt.Sprint(h.Offset))
			for _, v := range h.Details["victims"].(Victims) {
				if !real[v.Offset] || v.Status != StatusReferenced || !victimAt[v.Offset] {
					t.Errorf("%s: victim %+v is not a record the corpus made a victim", k.Name, v)
				}
				vs++
			}
		}
		sort.Strings(bogus)
		sort.Strings(reported)
		if fmt.Sprint(bogus) != fmt.Sprint(reported) || vs != k.Victims || len(primary) != k.Victims {
			t.Errorf("%s: model bogus %v, reported %v, %d primary victims; want %d", k.Name, bogus, reported, vs, k.Victims)
		}
		total += vs
		t.Logf("%s: %d records, bogus frames %v, victims %d", k.Name, len(offs), bogus, vs)
	}
	if total != 8 {
		t.Errorf("%d victims over the corpus, want 8", total)
	}
}
