package rocketmq

import (
	"context"
	"encoding/binary"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	gen "github.com/storectl/storectl/internal/gen/rocketmq"
	"github.com/storectl/storectl/internal/testutil"
	rmq "github.com/storectl/storectl/pkg/format/rocketmq"
	"github.com/storectl/storectl/pkg/scan"
)

const genMapped = 256 << 10

type span struct{ phy, size int64 }

// genStore writes a small generated store and returns its records.
func genStore(t *testing.T, propCRC bool) (string, *gen.Summary, []span) {
	t.Helper()
	root := t.TempDir()
	sum, err := gen.Generate(root, gen.Config{MappedFileSize: genMapped, TotalBytes: 3 << 20, Seed: 7, PropCRC: propCRC})
	if err != nil {
		t.Fatal(err)
	}
	var spans []span
	res, err := ScanCommitLog(context.Background(), Config{Root: root, OnMessage: func(m *rmq.Message, phy int64) error {
		spans = append(spans, span{phy, int64(m.TotalSize)})
		return nil
	}}, scan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range warnings(res) {
		t.Fatalf("generated store not clean: %+v", f)
	}
	if len(spans) != sum.Messages || *res.RecoveryEnd != sum.End {
		t.Fatalf("records %d/%d, recovery end %d/%d", len(spans), sum.Messages, *res.RecoveryEnd, sum.End)
	}
	return root, sum, spans
}

func scanRoot(t *testing.T, root string, jobs int) *scan.Result {
	t.Helper()
	res, err := ScanCommitLog(context.Background(), Config{Root: root}, scan.Options{Jobs: jobs})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// patch rewrites the commitlog file holding phy with fn(file bytes, pos).
func patch(t *testing.T, root string, phy int64, fn func(b []byte, pos int64) []byte) {
	t.Helper()
	base := phy / genMapped * genMapped
	p := filepath.Join(root, "commitlog", rmq.FormatFileName(base))
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, fn(b, phy-base), 0o644); err != nil {
		t.Fatal(err)
	}
}

func codes(res *scan.Result) map[string]int {
	_, c := res.Counts()
	return c
}

func TestGeneratedStoreScansClean(t *testing.T) {
	root, sum, _ := genStore(t, true)
	var n, crcs int
	res, err := ScanCommitLog(context.Background(), Config{Root: root}, scan.Options{Records: func(r any) error {
		n++
		if r.(Record).PropCRC != "" {
			crcs++
		}
		return nil
	}})
	if err != nil || n != sum.Messages || crcs != n || len(res.Files) != len(sum.Files) {
		t.Fatalf("n=%d crcs=%d err=%v files=%d", n, crcs, err, len(res.Files))
	}
	// Parallel scans give the same result.
	a, b := scanRoot(t, root, 1), scanRoot(t, root, 4)
	if !reflect.DeepEqual(a.Files, b.Files) || !reflect.DeepEqual(a.Findings, b.Findings) || *a.RecoveryEnd != *b.RecoveryEnd {
		t.Fatal("Jobs changes the result")
	}
}

func TestShortFile(t *testing.T) {
	root, _, spans := genStore(t, false)
	last := spans[len(spans)-1]
	patch(t, root, last.phy, func(b []byte, pos int64) []byte { return b[:pos+last.size/2] })
	res := scanRoot(t, root, 1)
	c := codes(res)
	if c[CodeShortFile] != 1 || c[CodeTornTail] != 1 || *res.RecoveryEnd != last.phy || res.Files[len(res.Files)-1].End != scan.EndShort {
		t.Fatalf("codes %v end %d want %d, files %+v", c, *res.RecoveryEnd, last.phy, res.Files[len(res.Files)-1])
	}
}

func TestZeroedTailFromMiddleOfRecord(t *testing.T) {
	root, _, spans := genStore(t, false)
	last := spans[len(spans)-1]
	patch(t, root, last.phy, func(b []byte, pos int64) []byte { clear(b[pos+last.size/2:]); return b })
	res := scanRoot(t, root, 1)
	c := codes(res)
	if c[CodeTornTail] != 1 || len(warnings(res)) != 1 || *res.RecoveryEnd != last.phy || res.Files[len(res.Files)-1].End != scan.EndTorn {
		t.Fatalf("codes %v end %d want %d", c, *res.RecoveryEnd, last.phy)
	}
}

func TestGarbageThenSalvage(t *testing.T) {
	root, _, spans := genStore(t, false)
	// Overwrite 3000 bytes from the 5th record of file 0 with random data.
	start := spans[5].phy
	rng := rand.New(rand.NewPCG(1, 2))
	patch(t, root, start, func(b []byte, pos int64) []byte {
		for i := pos; i < pos+3000; i++ {
			b[i] = byte(rng.Uint32())
		}
		return b
	})
	var wantSalvage []int64
	testutil.RecoverFromFirstFile(t, root)
	for _, s := range spans {
		if s.phy >= start+3000 && s.phy < genMapped {
			wantSalvage = append(wantSalvage, s.phy)
		}
	}
	res := scanRoot(t, root, 2)
	var got []int64
	var garbage, beyond int
	for _, f := range res.Findings {
		switch f.Code {
		case CodeSalvage:
			got = append(got, f.Offset)
			if f.Severity != scan.Warning || f.MsgID == "" || f.Details["phy_offset"] != f.Offset {
				t.Errorf("salvage finding %+v", f)
			}
		case CodeGarbage:
			garbage++
			if f.Offset != start || f.Length < 3000 || f.Severity != scan.Error || f.Repair != scan.RepairTruncate {
				t.Errorf("garbage finding %+v", f)
			}
		case CodeBeyondRecovery:
			beyond++
		}
	}
	if *res.RecoveryEnd != start || garbage != 1 || !reflect.DeepEqual(got, wantSalvage) || beyond != len(res.Files)-1 {
		t.Fatalf("end %d (want %d), garbage %d, beyond %d, salvage %v want %v", *res.RecoveryEnd, start, garbage, beyond, got, wantSalvage)
	}
	if res.Files[0].End != scan.EndGarbage || res.Files[0].ValidEnd != start {
		t.Fatalf("file 0: %+v", res.Files[0])
	}
}

func TestHostileLengths(t *testing.T) {
	for name, tc := range map[string]struct {
		mutate func(b []byte, pos int64, size int64)
		code   string
	}{
		"negative":       {func(b []byte, pos, _ int64) { binary.BigEndian.PutUint32(b[pos:], 0xFFFFFFF0) }, CodeGarbage},
		"huge":           {func(b []byte, pos, _ int64) { binary.BigEndian.PutUint32(b[pos:], 0x7FFFFFF0) }, CodeGarbage},
		"past EOF":       {func(b []byte, pos, _ int64) { binary.BigEndian.PutUint32(b[pos:], uint32(int64(len(b))-pos+100)) }, CodeTornTail},
		"body length":    {func(b []byte, pos, _ int64) { binary.BigEndian.PutUint32(b[pos+84:], 0x7FFFFFFF) }, CodeGarbage},
		"V1 topic >=128": {topicLen0x85, CodeGarbage},
	} {
		t.Run(name, func(t *testing.T) {
			root, _, spans := genStore(t, false)
			var victim span
			for _, s := range spans[len(spans)-10:] { // an IPv4/IPv4 record near the end
				victim = s
			}
			patch(t, root, victim.phy, func(b []byte, pos int64) []byte { tc.mutate(b, pos, victim.size); return b })
			res := scanRoot(t, root, 1)
			if *res.RecoveryEnd != victim.phy || codes(res)[tc.code] != 1 {
				t.Fatalf("end %d want %d; findings %+v", *res.RecoveryEnd, victim.phy, res.Findings)
			}
		})
	}
}

// topicLen0x85 sets a V1 record's topic length byte to 0x85: -123 in Java.
func topicLen0x85(b []byte, pos, _ int64) {
	m, err := rmq.DecodeMessage(b[pos:], 0, 0)
	if err != nil {
		panic(err)
	}
	b[pos+int64(len(m.Raw)-len(m.Properties)-2-len(m.Topic)-1)] = 0x85
}

func TestPropCRCHeaderFlip(t *testing.T) {
	ds := "rmq533-e-propcrc-clean"
	root := filepath.Join(testutil.Untar(t, testutil.Testdata("rocketmq", ds+".tar.gz")), "store")
	o := readOracle(t, ds+".decode.jsonl")
	verified := 0
	res, err := ScanCommitLog(context.Background(), Config{Root: root}, scan.Options{Records: func(r any) error {
		if r.(Record).PropCRC != "" {
			verified++
		}
		return nil
	}})
	if err != nil || verified != len(o.msgs) || res.Extra["prop_crc_verified"] != len(o.msgs) {
		t.Fatalf("verified %d property CRCs of %d records (%v)", verified, len(o.msgs), err)
	}
	// As d-torn-hdr / f-propcrc-hdr: flip BORNTIMESTAMP's low byte of the last message.
	last := o.msgs[len(o.msgs)-1]
	p := filepath.Join(root, "commitlog", last.File)
	b, _ := os.ReadFile(p)
	b[last.Pos+47] ^= 0xFF
	os.WriteFile(p, b, 0o644)
	res = scanRoot(t, root, 1)
	fs := warnings(res)
	if len(fs) != 1 || fs[0].Code != CodePropCRC || fs[0].Evidence["body_crc"] != "pass" || fs[0].Evidence["prop_crc"] != "fail" ||
		fs[0].Offset != last.Pos || *res.RecoveryEnd != last.PhyOffset {
		t.Fatalf("findings %+v end %d", fs, *res.RecoveryEnd)
	}
}

func TestRecordAt(t *testing.T) {
	ds := "rmq533-c-stale"
	root := filepath.Join(testutil.Untar(t, testutil.Testdata("rocketmq", ds+".tar.gz")), "store")
	inj, _ := readInject(t, ds)
	s, err := OpenStore(Config{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, m := range readOracle(t, ds+".decode.jsonl").msgs {
		got, err := s.RecordAt(m.PhyOffset)
		stale := m.PhyOffset >= inj.StaleRegionPhy[0]
		if stale != (err != nil) || got.MsgID() != m.MsgID {
			t.Fatalf("phy %d: %v (stale %v)", m.PhyOffset, err, stale)
		}
	}
	if _, err := s.RecordAt(1 << 40); err == nil {
		t.Fatal("offset beyond the store accepted")
	}
	if _, err := s.RecordAt(5); err == nil {
		t.Fatal("mid-record offset accepted")
	}
}
