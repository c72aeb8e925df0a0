package rabbitmq

// The test-made misread corpus of the RabbitMQ scan issue: .rdq files
// built from real fixture records with zero holes where the §3.4
// condition of docs/formats/rabbitmq-classic.md makes the generation-2 scanner misread
// a record (victims), and controls where it does not. The scan, salvage
// and repair tests of RabbitMQ all run on it.

import (
	"archive/tar"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"

	"github.com/storectl/storectl/pkg/format/etf"

	rfmt "github.com/storectl/storectl/pkg/format/rabbitmq"
)

// VHostHash is the directory name of vhost "/" in every RabbitMQ fixture
// and in the corpus stores WriteCorpusNode writes.
const VHostHash = "628WB79CIFDYO9LJI6DKMI09L"

// TB is the part of testing.TB the corpus helpers use to fail a test or
// benchmark (this package does not import testing: cmd/genstore uses it).
type TB interface {
	Helper()
	Fatal(args ...any)
}

// maxFixtureFile bounds the bytes read from one fixture tarball member:
// the .rdq files the corpus uses are a few hundred KiB, and a broken
// tarball must not make the reader allocate without bound.
const maxFixtureFile = 64 << 20

// corpusSources are the fixture files whose records the corpus is made
// of: a tarball under testdata and the member inside it.
var corpusSources = []struct {
	tarball []string
	member  string
}{
	{[]string{"rabbitmq", "datasets", "edge-cases.tar.gz"}, "01-two-valid.rdq"},
	{[]string{"rabbitmq-4.0", "datasets", "crash.tar.gz"},
		"rmq40@localhost/msg_stores/vhosts/" + VHostHash + "/msg_store_persistent/0.rdq"},
}

// FixtureRecords returns whole frames of real records with their payload
// lengths: the two 3.10 #basic_message{} records of edge case 01 and the
// 4.0 #mc{} records of 0.rdq of the 4.0 crash dataset, in file order. It
// reads them from the tarballs under testdata, the repository's testdata
// directory, and fails t when they cannot be read or decoded.
func FixtureRecords(t TB, testdata string) (recs [][]byte, plens []int) {
	t.Helper()
	recs, plens, err := fixtureRecords(testdata)
	if err != nil {
		t.Fatal(err)
	}
	return recs, plens
}

func fixtureRecords(testdata string) (recs [][]byte, plens []int, err error) {
	for _, src := range corpusSources {
		tarball := filepath.Join(append([]string{testdata}, src.tarball...)...)
		b, err := readTarMember(tarball, src.member)
		if err != nil {
			return nil, nil, err
		}
		for _, c := range rfmt.ScanData(b, rfmt.ScanOptions{}) {
			rec := b[c.Offset : c.Offset+c.TotalSize]
			m, err := rfmt.DecodeMessage(rec[24:len(rec)-1], 0)
			if err != nil {
				return nil, nil, fmt.Errorf("%s: %s at %d: %w", tarball, src.member, c.Offset, err)
			}
			recs, plens = append(recs, append([]byte(nil), rec...)), append(plens, int(m.PayloadSize))
		}
	}
	return recs, plens, nil
}

// readTarMember returns the bytes of the regular file name in a .tar.gz.
func readTarMember(tarball, name string) ([]byte, error) {
	f, err := os.Open(tarball)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", tarball, err)
	}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil, fmt.Errorf("%s: no %s", tarball, name)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", tarball, err)
		}
		if h.Typeflag != tar.TypeReg || path.Clean(h.Name) != name {
			continue
		}
		if h.Size > maxFixtureFile {
			return nil, fmt.Errorf("%s: %s is %d bytes, more than %d", tarball, name, h.Size, maxFixtureFile)
		}
		return io.ReadAll(io.LimitReader(tr, maxFixtureFile))
	}
}

// CaseSkipFrame names the corpus case whose 20-byte gap is long enough
// for harden's skip frame; the scan and salvage corpus tests, whose victim
// totals were set before it was added, leave it out.
const CaseSkipFrame = "hole-20-skip-frame"

// CorpusRecord is a record of a corpus file: its whole frame, its payload
// (the bytes of Frame at the offset PayloadOffset finds, not taken through
// the decoder) and whether the corpus made it a victim of the §3.4
// zero-hole misread.
type CorpusRecord struct {
	Frame   []byte
	Payload []byte
	Victim  bool
}

// CorpusPart is one piece of a corpus file: a record, or (Rec nil) a hole
// of Hole bytes of Fill.
type CorpusPart struct {
	Rec  *CorpusRecord
	Hole int
	Fill byte
}

// CorpusCase is one corpus file: its parts in file order and the number
// of records the §3.4 condition hits.
type CorpusCase struct {
	Name    string
	Parts   []CorpusPart
	Victims int
}

// corpusBuilder makes corpus records from fixture records and keeps the
// first error, so that the case table stays one line a case.
type corpusBuilder struct {
	recs  [][]byte
	plens []int
	err   error
}

func (c *corpusBuilder) fail(err error) *CorpusRecord {
	if c.err == nil {
		c.err = err
	}
	return &CorpusRecord{}
}

// whole is fixture record i as it is.
func (c *corpusBuilder) whole(i int) *CorpusRecord {
	off, err := PayloadOffset(c.recs[i], c.plens[i])
	if err != nil {
		return c.fail(err)
	}
	return &CorpusRecord{Frame: c.recs[i], Payload: c.recs[i][off : off+c.plens[i]]}
}

// resized is ResizedRecord of fixture record i.
func (c *corpusBuilder) resized(i int, s uint64, fill, last byte, n int, victim bool) *CorpusRecord {
	r, err := ResizedRecord(c.recs[i], c.plens[i], s, fill, last, n)
	if err != nil {
		return c.fail(err)
	}
	r.Victim = victim
	return r
}

// ResizedRecord is how the corpus makes its victims and controls: a copy
// of the real record rec (payload length plen) shrunk or grown to Size s,
// its payload padded with fill (a large zero-fill record gets an all-zero
// payload), with the fresh msg id 0xC0FFEE00+n whose last byte is last,
// in the frame and in the term's id field. It fails unless the result is
// one ETF term with a new id.
func ResizedRecord(rec []byte, plen int, s uint64, fill, last byte, n int) (*CorpusRecord, error) {
	v, err := Resize(rec, plen, s, fill)
	if err != nil {
		return nil, err
	}
	nplen := plen + int(s) - int(binary.BigEndian.Uint64(rec))
	if fill == 0 && s > 20000 { // a large control: the whole payload zero
		if err := FillPayload(v, nplen, 0); err != nil {
			return nil, err
		}
	}
	var id [16]byte
	binary.BigEndian.PutUint64(id[:], 0xC0FFEE00+uint64(n))
	id[15] = last
	if old := SetID(v, id); old == id {
		return nil, fmt.Errorf("corpus record %d: id unchanged", n)
	}
	if !etf.IsExactTerm(v[24 : len(v)-1]) {
		return nil, fmt.Errorf("corpus record %d: resized record is not one ETF term", n)
	}
	off, err := PayloadOffset(v, nplen)
	if err != nil {
		return nil, err
	}
	return &CorpusRecord{Frame: v, Payload: v[off : off+nplen]}, nil
}

// MisreadCorpus builds the cases of the misread corpus from the fixture
// records under testdata: holes of 1, 5, 20 and 300 bytes before victims,
// two victims, a hole at file start, #mc{} records, a large record whose
// tested byte is in an all-0xFF payload, and controls (0xFF fill, an id
// not ending in 0xFF, a large zero payload, a size whose tested byte is
// the ETF magic), in a fixed order (two-victims is
// case 3). Case CaseSkipFrame is the one gap long enough for harden's
// skip frame. It fails t when a case cannot be built.
func MisreadCorpus(t TB, testdata string) []CorpusCase {
	t.Helper()
	cases, err := misreadCorpus(testdata)
	if err != nil {
		t.Fatal(err)
	}
	return cases
}

func misreadCorpus(testdata string) ([]CorpusCase, error) {
	recs, plens, err := fixtureRecords(testdata)
	if err != nil {
		return nil, err
	}
	if len(recs) < 4 {
		return nil, fmt.Errorf("only %d fixture records", len(recs))
	}
	c := &corpusBuilder{recs: recs, plens: plens}
	ffIdx := -1 // a 4.0 record with an all-0xFF payload
	for i := 2; i < len(recs); i++ {
		p := c.whole(i).Payload
		if len(p) > 300 && p[0] == 0xFF && p[len(p)-1] == 0xFF && p[100] == 0xFF {
			ffIdx = i
			break
		}
	}
	if ffIdx < 0 {
		return nil, errors.New("no 0xFF-payload record in the 4.0 fixture")
	}
	v := c.resized
	a, b, mcA := c.whole(0), c.whole(1), c.whole(2) // 3.10 basic_message, 3.10, 4.0 mc
	cases := []CorpusCase{
		{"hole-1", []CorpusPart{{Rec: a}, {Hole: 1}, {Rec: v(0, 4116, 0, 0xFF, 1, true)}, {Rec: b}}, 1},
		{"hole-5", []CorpusPart{{Rec: a}, {Hole: 5}, {Rec: v(1, 4200, 0, 0xFF, 2, true)}, {Rec: b}}, 1},
		{"hole-300", []CorpusPart{{Rec: a}, {Hole: 300}, {Rec: v(0, 4351, 0, 0xFF, 3, true)}, {Rec: b}}, 1},
		{"two-victims", []CorpusPart{{Rec: a}, {Hole: 5}, {Rec: v(0, 4096, 0, 0xFF, 4, true)}, {Rec: b},
			{Hole: 1}, {Rec: v(1, 4300, 0, 0xFF, 5, true)}}, 2},
		{CaseSkipFrame, []CorpusPart{{Rec: a}, {Hole: 20}, {Rec: v(0, 4116, 0, 0xFF, 13, true)}, {Rec: b}}, 1},
		{"hole-at-file-start", []CorpusPart{{Hole: 3}, {Rec: v(0, 4116, 0, 0xFF, 6, true)}, {Rec: b}}, 1},
		{"mc-hole-5", []CorpusPart{{Rec: mcA}, {Hole: 5}, {Rec: v(2, 4116, 0, 0xFF, 7, true)}, {Rec: b}}, 1},
		// larger size: the tested body byte (index S/256-17 = 217) lies in an all-0xFF payload
		{"mc-large-ff-payload", []CorpusPart{{Rec: mcA}, {Hole: 5}, {Rec: v(ffIdx, 60000, 0xFF, 0x11, 8, true)}, {Rec: b}}, 1},
		// controls
		{"control-ff-fill", []CorpusPart{{Rec: a}, {Hole: 5, Fill: 0xFF}, {Rec: v(0, 4116, 0, 0xFF, 9, false)}, {Rec: b}}, 0},
		{"control-id-fe", []CorpusPart{{Rec: a}, {Hole: 5}, {Rec: v(0, 4116, 0, 0xFE, 10, false)}, {Rec: b}}, 0},
		{"control-large-zero-payload", []CorpusPart{{Rec: mcA}, {Hole: 5}, {Rec: v(ffIdx, 60000, 0x00, 0x11, 11, false)}, {Rec: b}}, 0},
		{"control-4352-etf-magic", []CorpusPart{{Rec: a}, {Hole: 1}, {Rec: v(0, 4400, 0, 0xFF, 12, false)}, {Rec: b}}, 0},
	}
	if c.err != nil {
		return nil, c.err
	}
	return cases, nil
}

// CorpusFile lays parts out as the bytes of one .rdq file; it returns the
// bytes, the msg ids of its records in file order and the records by
// offset.
func CorpusFile(parts []CorpusPart) (b []byte, ids [][16]byte, at map[int64]*CorpusRecord) {
	at = map[int64]*CorpusRecord{}
	for _, p := range parts {
		if p.Rec == nil {
			for range p.Hole {
				b = append(b, p.Fill)
			}
			continue
		}
		at[int64(len(b))] = p.Rec
		b = append(b, p.Rec.Frame...)
		var id [16]byte
		copy(id[:], p.Rec.Frame[8:24])
		ids = append(ids, id)
	}
	return b, ids, at
}

// WriteCorpusFile writes parts as vdir/msg_store_persistent/0.rdq with
// every record referenced by queue q1 of vhost "/" (a v2 index); it
// returns the file bytes and the records by offset. It fails t when a
// file cannot be written.
func WriteCorpusFile(t TB, vdir string, parts []CorpusPart) (b []byte, at map[int64]*CorpusRecord) {
	t.Helper()
	b, at, err := writeCorpusFile(vdir, parts)
	if err != nil {
		t.Fatal(err)
	}
	return b, at
}

func writeCorpusFile(vdir string, parts []CorpusPart) (b []byte, at map[int64]*CorpusRecord, err error) {
	b, ids, at := CorpusFile(parts)
	if err := os.MkdirAll(filepath.Join(vdir, "msg_store_persistent"), 0o755); err != nil {
		return nil, nil, err
	}
	if err := os.WriteFile(filepath.Join(vdir, "msg_store_persistent", "0.rdq"), b, 0o644); err != nil {
		return nil, nil, err
	}
	if err := WriteQueue(vdir, "/", "q1", ids); err != nil {
		return nil, nil, err
	}
	return b, at, nil
}

// WriteCorpusNode writes parts as a node data dir root whose vhost "/"
// (root/msg_stores/vhosts/VHostHash, with its .vhost file) holds the files
// of WriteCorpusFile; it returns the vhost dir and the records by offset.
// It fails t when a file cannot be written.
func WriteCorpusNode(t TB, root string, parts []CorpusPart) (vdir string, at map[int64]*CorpusRecord) {
	t.Helper()
	vdir, at, err := writeCorpusNode(root, parts)
	if err != nil {
		t.Fatal(err)
	}
	return vdir, at
}

func writeCorpusNode(root string, parts []CorpusPart) (vdir string, at map[int64]*CorpusRecord, err error) {
	vdir = filepath.Join(root, "msg_stores", "vhosts", VHostHash)
	if err := os.MkdirAll(vdir, 0o755); err != nil {
		return "", nil, err
	}
	if err := os.WriteFile(filepath.Join(vdir, ".vhost"), []byte("/"), 0o644); err != nil {
		return "", nil, err
	}
	if _, at, err = writeCorpusFile(vdir, parts); err != nil {
		return "", nil, err
	}
	return vdir, at, nil
}
