package rocketmq

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/storectl/storectl/internal/testutil"
	"github.com/storectl/storectl/pkg/format"
)

// decodeLine is one line of a fixture's decode oracle: what the broker's
// own CommitLog.checkMessageAndReturnSize made of each record ("msg",
// "blank") and where and why its walk of a file stopped ("stop",
// "file_summary").
type decodeLine struct {
	Kind        string `json:"kind"`
	File        string `json:"file"`
	Pos         int64  `json:"pos"`
	PhyOffset   int64  `json:"phy_offset"`
	TotalSize   int64  `json:"total_size"`
	StoredPhy   int64  `json:"stored_phy_offset"`
	Topic       string `json:"topic"`
	QueueOffset int64  `json:"queue_offset"`
	MsgID       string `json:"msg_id"`
	BodySHA256  string `json:"body_sha256"`
	End         string `json:"end"`
	EndPos      int64  `json:"end_pos"`
	Messages    int    `json:"messages"`
}

// TestReaderOracles walks every commitlog file of every RocketMQ fixture
// (read from the tarballs in memory) with Reader and compares it with the
// broker's decode of the same file: the same records at the same offsets
// with the same fields, and the walk stops where the broker's stops, for
// the broker's reason. The one difference is the stored-offset check of
// rocketmq #10017, which the broker's recovery lacks: Reader stops at the
// first stale record with ErrStale.
func TestReaderOracles(t *testing.T) {
	oracles, _ := filepath.Glob(testutil.Testdata("rocketmq", "*.decode.jsonl"))
	if len(oracles) < 7 {
		t.Fatalf("only %d decode oracles", len(oracles))
	}
	files, recs := 0, 0
	for _, o := range oracles {
		ds := strings.TrimSuffix(filepath.Base(o), ".decode.jsonl")
		tar := testutil.ReadTar(t, testutil.Testdata("rocketmq", ds+".tar.gz"))
		byFile := map[string][]decodeLine{}
		var order []string
		for _, l := range testutil.ReadJSONL[decodeLine](t, o) {
			if l.File == "" || (l.Kind != "msg" && l.Kind != "file_summary") {
				continue
			}
			if _, ok := byFile[l.File]; !ok {
				order = append(order, l.File)
			}
			byFile[l.File] = append(byFile[l.File], l)
		}
		for _, name := range order {
			b, ok := tar["store/commitlog/"+name]
			if !ok {
				t.Fatalf("%s: no commitlog/%s in the tarball", ds, name)
			}
			base, err := ParseFileName(name)
			if err != nil {
				t.Fatal(err)
			}
			recs += checkReaderFile(t, ds+"/"+name, b, base, byFile[name])
			files++
		}
	}
	if files < 29 || recs < 2000 {
		t.Fatalf("compared %d files, %d records", files, recs)
	}
}

func checkReaderFile(t *testing.T, name string, b []byte, base int64, lines []decodeLine) int {
	t.Helper()
	r := NewReader(bytes.NewReader(b), int64(len(b)), base, 0)
	var sum decodeLine
	n := 0
	for _, l := range lines {
		if l.Kind == "file_summary" {
			sum = l
			continue
		}
		if l.StoredPhy != l.PhyOffset { // stale: Reader stops here
			if r.Next() || r.End() != EndCorrupt || !errors.Is(r.Err(), ErrStale) || r.Offset() != l.Pos {
				t.Fatalf("%s@%d: stale record: Next went on or stopped wrongly (end %d, err %v, at %d)", name, l.Pos, r.End(), r.Err(), r.Offset())
			}
			return n
		}
		if !r.Next() {
			t.Fatalf("%s@%d: Next stopped (end %d at %d: %v); the broker decoded a record here", name, l.Pos, r.End(), r.Offset(), r.Err())
		}
		m := r.Message()
		body := sha256.Sum256(m.Body)
		if r.Offset() != l.Pos || int64(m.TotalSize) != l.TotalSize || string(m.Topic) != l.Topic ||
			m.QueueOffset != l.QueueOffset || m.MsgID() != l.MsgID || hex.EncodeToString(body[:]) != l.BodySHA256 {
			t.Fatalf("%s@%d: Reader has %d bytes %s/%d %s, broker %+v", name, r.Offset(), m.TotalSize, m.Topic, m.QueueOffset, m.MsgID(), l)
		}
		n++
	}
	if r.Next() {
		t.Fatalf("%s: a record at %d past the broker's %d", name, r.Offset(), n)
	}
	if n != sum.Messages || r.Offset() != sum.EndPos {
		t.Fatalf("%s: %d records, stop at %d; broker: %d, %d", name, n, r.Offset(), sum.Messages, sum.EndPos)
	}
	var ce *format.CorruptError
	switch sum.End {
	case "blank":
		if r.End() != EndBlank || r.Err() != nil {
			t.Fatalf("%s: end %d (%v), broker: BLANK", name, r.End(), r.Err())
		}
	case "zero": // zeros where the next record would be: the magic fails
		if r.End() != EndCorrupt || !errors.As(r.Err(), &ce) || !errors.Is(r.Err(), format.ErrMagic) || !format.AllZero(r.Raw()[:8]) {
			t.Fatalf("%s: end %d (%v), broker: zeros", name, r.End(), r.Err())
		}
	case "invalid": // the torn-crc fixture's flipped body byte
		if r.End() != EndCorrupt || !errors.Is(r.Err(), format.ErrChecksum) || !IsFramed(r.Err()) {
			t.Fatalf("%s: end %d (%v), broker: CRC failure", name, r.End(), r.Err())
		}
	default:
		t.Fatalf("%s: oracle end %q", name, sum.End)
	}
	if r.MaxRead() < r.Offset() || r.MaxRead() > int64(len(b)) {
		t.Fatalf("%s: MaxRead %d", name, r.MaxRead())
	}
	return n
}

// TestReadMessageAt reads single records at random offsets and agrees
// with the Reader's walk; reads are bounded by the file.
func TestReadMessageAt(t *testing.T) {
	tar := testutil.ReadTar(t, testutil.Testdata("rocketmq", "rmq533-d-torn-crc.tar.gz"))
	b := tar["store/commitlog/00000000000000786432"]
	ra := bytes.NewReader(b)
	r := NewReader(ra, int64(len(b)), 786432, 0)
	for r.Next() {
		m, err := ReadMessageAt(ra, int64(len(b)), 786432, r.Offset(), 0)
		if err != nil || !bytes.Equal(m.Raw, r.Message().Raw) {
			t.Fatalf("@%d: %v", r.Offset(), err)
		}
	}
	stop := r.Offset()
	if _, err := ReadMessageAt(ra, int64(len(b)), 786432, stop, 0); !errors.Is(err, format.ErrChecksum) {
		t.Fatalf("@%d (the flipped byte's record): %v", stop, err)
	}
	if _, err := ReadMessageAt(ra, int64(len(b)), 786432, int64(len(b))-3, 0); !errors.Is(err, format.ErrShort) {
		t.Fatalf("3 bytes before EOF: %v", err)
	}
	if _, err := ReadMessageAt(failingReader{}, 1<<20, 0, 0, 0); !errors.Is(err, errDisk) {
		t.Fatalf("read error: %v", err)
	}
}

var errDisk = errors.New("disk says no")

type failingReader struct{}

func (failingReader) ReadAt([]byte, int64) (int, error) { return 0, errDisk }

// TestReaderIOError: a read error ends the walk at EndIO with that error,
// never as corruption.
func TestReaderIOError(t *testing.T) {
	r := NewReader(failingReader{}, 1<<20, 0, 0)
	if r.Next() || r.End() != EndIO || !errors.Is(r.Err(), errDisk) {
		t.Fatalf("end %d err %v", r.End(), r.Err())
	}
	// A file shorter than the size it was opened with.
	r = NewReader(bytes.NewReader(make([]byte, 100)), 1<<20, 0, 0)
	if r.Next() || r.End() != EndIO || !errors.Is(r.Err(), io.ErrUnexpectedEOF) {
		t.Fatalf("short file: end %d err %v", r.End(), r.Err())
	}
}

// FuzzReader: any bytes give a walk that terminates, moves forward, stays
// inside the file and ends with a typed error.
func FuzzReader(f *testing.F) {
	recs := fixtureRecords(f)
	f.Add(bytes.Join(recs, nil))
	f.Add(append(append([]byte{}, recs[0]...), make([]byte, 64)...))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		r := NewReader(bytes.NewReader(b), int64(len(b)), 0, 1<<16)
		r.window = 64 // many windows on small inputs
		last := int64(-1)
		for r.Next() {
			if r.Offset() <= last || r.Offset()+int64(r.Message().TotalSize) > int64(len(b)) {
				t.Fatalf("record at %d (%d bytes) after %d in %d bytes", r.Offset(), r.Message().TotalSize, last, len(b))
			}
			last = r.Offset()
		}
		var ce *format.CorruptError
		switch r.End() {
		case EndEOF:
			if r.Offset() != int64(len(b)) {
				t.Fatalf("EOF at %d of %d", r.Offset(), len(b))
			}
		case EndBlank:
		case EndCorrupt:
			if !errors.As(r.Err(), &ce) {
				t.Fatalf("corrupt end without *CorruptError: %v", r.Err())
			}
			if next, err := r.Resync(r.Offset() + 1); err != nil || next >= int64(len(b)) || (next >= 0 && next <= r.Offset()) {
				t.Fatalf("Resync = %d, %v", next, err)
			}
		default:
			t.Fatalf("end %d, err %v", r.End(), r.Err())
		}
		if l, err := r.LastNonZero(0, int64(len(b))); err != nil || l >= int64(len(b)) {
			t.Fatalf("LastNonZero = %d, %v", l, err)
		}
	})
}

// holeyFile is a sparse file in memory: zeros but for blob at off, whose
// extent is the only data; it counts the bytes read from it.
type holeyFile struct {
	size, off int64
	blob      []byte
	read      int64
}

func (h *holeyFile) ReadAt(p []byte, off int64) (int, error) {
	h.read += int64(len(p))
	clear(p)
	if off < h.off+int64(len(h.blob)) && h.off < off+int64(len(p)) {
		s := max(off, h.off)
		copy(p[s-off:], h.blob[s-h.off:])
	}
	if off+int64(len(p)) > h.size {
		return int(max(0, h.size-off)), io.EOF
	}
	return len(p), nil
}

func (h *holeyFile) DataExtent(off int64) (int64, int64, error) {
	if off < h.off+int64(len(h.blob)) {
		return h.off, h.off + int64(len(h.blob)), nil
	}
	return h.size, h.size, nil
}

// TestReaderSkipsHoles: over an io.ReaderAt that knows its data extents
// (Extenter), LastNonZero and Resync jump over a 1 TiB file's holes: one
// record half a TiB in is found, and the last non-zero byte is its last,
// reading a few windows (they read 1 TiB of zeros before, issue 21
// defect 9).
func TestReaderSkipsHoles(t *testing.T) {
	rec := fixtureRecords(t)[0]
	m, err := DecodeMessage(rec, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	const pos = 1 << 39
	base := m.PhysicalOffset - pos
	for _, garbage := range []bool{false, true} {
		h := &holeyFile{size: 1 << 40, off: pos, blob: rec}
		if garbage { // a stray byte at 0: the walk fails there and resyncs
			h.off, h.blob = 0, []byte{1}
		}
		r := NewReader(h, h.size, base, 0)
		if r.Next() || r.End() != EndCorrupt {
			t.Fatalf("first record: end %d err %v", r.End(), r.Err())
		}
		last, err := r.LastNonZero(0, h.size)
		want := pos + int64(len(rec)) - 1
		if garbage {
			want = 0
		}
		if err != nil || last != want {
			t.Fatalf("LastNonZero %d %v, want %d", last, err, want)
		}
		if !garbage {
			got, err := r.Resync(1)
			if err != nil || got != pos {
				t.Fatalf("Resync %d %v, want %d", got, err, pos)
			}
		} else if got, err := r.Resync(1); err != nil || got != -1 {
			t.Fatalf("Resync %d %v, want -1", got, err)
		}
		if h.read > 8*DefaultReadWindow {
			t.Fatalf("garbage=%v: read %d bytes of a 1 TiB file holding %d", garbage, h.read, len(h.blob))
		}
	}
}

// sliceReaderAt is an io.ReaderAt over b that also hands its bytes out in
// place (Slicer), as a mapped file does.
type sliceReaderAt struct {
	*bytes.Reader
	b      []byte
	slices int
}

func (s *sliceReaderAt) Slice(off int64, n int) ([]byte, error) {
	if off < 0 || n < 0 || off+int64(n) > int64(len(s.b)) {
		return nil, io.ErrUnexpectedEOF
	}
	s.slices++
	return s.b[off : off+int64(n)], nil
}

// TestReaderSlicer: over a Slicer the Reader walks every fixture file as
// it does reading through its buffer (the same records at the same
// offsets, the same end, error, Raw and MaxRead), its messages alias the
// Slicer's bytes (no copy), and past a damaged record Resync and
// LastNonZero find what they find reading.
func TestReaderSlicer(t *testing.T) {
	tars, _ := filepath.Glob(testutil.Testdata("rocketmq", "*.tar.gz"))
	files := 0
	for _, tp := range tars {
		for name, b := range testutil.ReadTar(t, tp) {
			dir, file := filepath.Split(name)
			base, err := ParseFileName(file)
			if dir != "store/commitlog/" || err != nil || len(b) == 0 {
				continue
			}
			files++
			damaged := append([]byte(nil), b...)
			damaged[len(b)/3] ^= 0x5A // somewhere in a record, or in the zeros after the last
			for _, data := range [][]byte{b, damaged} {
				compareSlicer(t, tp+":"+name, data, base)
			}
		}
	}
	if files < 20 {
		t.Fatalf("only %d commitlog files in the fixtures", files)
	}
}

func compareSlicer(t *testing.T, name string, b []byte, base int64) {
	t.Helper()
	sl := &sliceReaderAt{Reader: bytes.NewReader(b), b: b}
	rp := NewReader(bytes.NewReader(b), int64(len(b)), base, 0)
	rs := NewReader(sl, int64(len(b)), base, 0)
	n := 0
	for {
		okp, oks := rp.Next(), rs.Next()
		if okp != oks || rp.Offset() != rs.Offset() || rp.End() != rs.End() || fmt.Sprint(rp.Err()) != fmt.Sprint(rs.Err()) {
			t.Fatalf("%s: record %d: read %v at %d (end %d, %v), sliced %v at %d (end %d, %v)", name, n,
				okp, rp.Offset(), rp.End(), rp.Err(), oks, rs.Offset(), rs.End(), rs.Err())
		}
		if !okp {
			break
		}
		mp, ms := rp.Message(), rs.Message()
		if !bytes.Equal(mp.Raw, ms.Raw) || mp.MsgID() != ms.MsgID() || !bytes.Equal(mp.Body, ms.Body) {
			t.Fatalf("%s@%d: the messages differ", name, rp.Offset())
		}
		if len(ms.Raw) > 0 && &ms.Raw[0] != &b[rs.Offset()] {
			t.Fatalf("%s@%d: the sliced message is a copy", name, rs.Offset())
		}
		n++
	}
	if !bytes.Equal(rp.Raw(), rs.Raw()) || rp.MaxRead() != rs.MaxRead() {
		t.Fatalf("%s: Raw or MaxRead differ (%d, %d)", name, rp.MaxRead(), rs.MaxRead())
	}
	if rp.End() == EndCorrupt {
		from := rp.Offset() + 1
		cp, errp := rp.Resync(from)
		cs, errs := rs.Resync(from)
		if cp != cs || fmt.Sprint(errp) != fmt.Sprint(errs) {
			t.Fatalf("%s: Resync from %d: read %d (%v), sliced %d (%v)", name, from, cp, errp, cs, errs)
		}
		lp, errp := rp.LastNonZero(from, int64(len(b)))
		ls, errs := rs.LastNonZero(from, int64(len(b)))
		if lp != ls || fmt.Sprint(errp) != fmt.Sprint(errs) {
			t.Fatalf("%s: LastNonZero from %d: read %d (%v), sliced %d (%v)", name, from, lp, errp, ls, errs)
		}
	}
	if sl.slices == 0 {
		t.Fatalf("%s: the Reader never sliced", name)
	}
}
