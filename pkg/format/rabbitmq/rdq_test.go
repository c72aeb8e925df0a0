package rabbitmq

import (
	"encoding/binary"
	"errors"
	"os"
	"testing"

	"github.com/storectl/storectl/internal/testutil"
	"github.com/storectl/storectl/pkg/format"
)

func rdqTestFile(t testing.TB) []byte {
	b, err := os.ReadFile(testutil.Testdata("rabbitmq-mc", "mc-4.1.8.rdq"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDecodeEntry(t *testing.T) {
	const base = 0x1000
	tests := []struct {
		name      string
		mutate    func([]byte) []byte
		wantField string
		wantErr   error
		check     func(*testing.T, Entry)
	}{
		{name: "valid", check: func(t *testing.T, e Entry) {
			if !e.WriteOK || e.TotalSize != 174 || e.Size != 165 || len(e.Body) != 149 || e.Body[0] != 131 {
				t.Fatalf("entry %+v", e)
			}
			if err := e.CheckBody(); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "end of data", mutate: func(b []byte) []byte { return make([]byte, 8) }, check: func(t *testing.T, e Entry) {
			if !e.IsEnd() {
				t.Fatal("zero size not end")
			}
		}},
		{name: "bad marker", mutate: func(b []byte) []byte { b[173] = 0; return b }, check: func(t *testing.T, e Entry) {
			if e.WriteOK {
				t.Fatal("WriteOK with marker 0")
			}
		}},
		{name: "body not a term", mutate: func(b []byte) []byte { b[24] = 0; return b }, check: func(t *testing.T, e Entry) {
			var ce *format.CorruptError
			if err := e.CheckBody(); !errors.As(err, &ce) || ce.Offset != base+24 || ce.Field != "version" {
				t.Fatalf("CheckBody = %v", err)
			}
		}},
		{name: "short header", mutate: func(b []byte) []byte { return b[:7] }, wantField: "size", wantErr: format.ErrShort},
		{name: "torn", mutate: func(b []byte) []byte { return b[:100] }, wantField: "size", wantErr: format.ErrShort},
		{name: "size below 16", mutate: func(b []byte) []byte { binary.BigEndian.PutUint64(b, 5); return b }, wantField: "size", wantErr: format.ErrInvalid},
		{name: "huge size", mutate: func(b []byte) []byte { binary.BigEndian.PutUint64(b, 1<<63); return b }, wantField: "size", wantErr: format.ErrTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := rdqTestFile(t)[:174:174]
			b = append([]byte(nil), b...)
			if tt.mutate != nil {
				b = tt.mutate(b)
			}
			e, err := DecodeEntry(b, base, DefaultMaxEntrySize)
			if tt.wantErr == nil {
				if err != nil {
					t.Fatal(err)
				}
				tt.check(t, e)
				return
			}
			var ce *format.CorruptError
			if !errors.As(err, &ce) || !errors.Is(err, tt.wantErr) || ce.Field != tt.wantField || ce.Offset != base {
				t.Fatalf("err = %v", err)
			}
		})
	}
}

// TestDecodeEntryMCFile walks the mc fixture with DecodeEntry and compares
// with the tag's own scanner output.
func TestDecodeEntryMCFile(t *testing.T) {
	b := rdqTestFile(t)
	want := testutil.ReadJSONL[rdqOracleRecord](t, testutil.Testdata("rabbitmq-mc", "mc-4.1.8.scan.jsonl"))
	var got []ScanRecord
	for off := 0; off < len(b); {
		e, err := DecodeEntry(b[off:], int64(off), DefaultMaxEntrySize)
		if err != nil || !e.WriteOK || e.CheckBody() != nil {
			t.Fatalf("@%d: %v %+v", off, err, e)
		}
		c := CheckCandidate(b, off, 0)
		if c.Evidence != EvAll || c.MsgID != e.MsgID {
			t.Fatalf("@%d: evidence %v", off, c.Evidence)
		}
		got = append(got, ScanRecord{MsgID: e.MsgID, Offset: e.Offset, TotalSize: e.TotalSize})
		off += int(e.TotalSize)
	}
	rdqCompare(t, "mc-4.1.8", rdqFromScan(got), want)
}

func TestCheckCandidate(t *testing.T) {
	rec := rdqTestRecord([16]byte{1}, []byte{131, 106})
	tests := []struct {
		name string
		b    []byte
		pos  int
		want Evidence
	}{
		{"full", rec, 0, EvAll},
		{"short", rec[:10], 0, EvSizeMin},
		{"zero window", make([]byte, 40), 0, 0},
		{"size 16 empty body", rdqTestRecord([16]byte{}, nil), 0, EvFits | EvMarker},
		{"bad marker", append(rec[:len(rec)-1:len(rec)-1], 0), 0, EvSizeMin | EvFits | EvETFMagic | EvExactTerm},
		{"not a term", rdqTestRecord([16]byte{}, []byte{131, 1}), 0, EvSizeMin | EvFits | EvMarker | EvETFMagic},
		{"out of range", rec, len(rec), 0},
	}
	for _, tt := range tests {
		if c := CheckCandidate(tt.b, tt.pos, 100); c.Evidence != tt.want || c.Offset != 100+int64(tt.pos) {
			t.Errorf("%s: evidence %v offset %d, want %v", tt.name, c.Evidence, c.Offset, tt.want)
		}
	}
	if EvAll.String() != "size,fits,marker,etf-magic,etf-term" || Evidence(0).String() != "none" {
		t.Fatalf("String = %q", EvAll.String())
	}
}

func FuzzRDQ(f *testing.F) {
	b := rdqTestFile(f)
	f.Add(b[:174+229])
	f.Add(rdqTestRecord([16]byte{1}, []byte{131, 106}))
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 5, 'a', 'b', 'c', 'd', 'e', 255})
	f.Fuzz(func(t *testing.T, b []byte) {
		for p := range b {
			if fr := StrictFrame(b, p); fr.Fits && (fr.End >= len(b) || fr.End < p) {
				t.Fatalf("frame at %d ends at %d of %d", p, fr.End, len(b))
			}
		}
		e, err := DecodeEntry(b, 0, DefaultMaxEntrySize)
		if err != nil {
			var ce *format.CorruptError
			if !errors.As(err, &ce) {
				t.Fatalf("not a CorruptError: %v", err)
			}
		} else if !e.IsEnd() {
			if e.TotalSize > int64(len(b)) || int64(len(e.Body))+25 != e.TotalSize {
				t.Fatalf("entry %+v exceeds input %d", e, len(b))
			}
			_ = e.CheckBody()
		}
		g1, err := ScanGen1(b)
		if err == nil && g1.End > int64(len(b)) {
			t.Fatalf("gen1 end %d > %d", g1.End, len(b))
		}
		// Both models return records in file order, each past the last
		// (harden's losses merge them with the file's records).
		inOrder := func(name string, rs []ScanRecord) {
			for i := 1; i < len(rs); i++ {
				if rs[i].Offset < rs[i-1].Offset+rs[i-1].TotalSize {
					t.Fatalf("%s: record %+v not after %+v", name, rs[i], rs[i-1])
				}
			}
		}
		inOrder("gen1", g1.Records)
		for _, o := range []ScanOptions{{}, {LargeMessageShortcut: true}, {LargeMessageShortcut: true, OffByNineFix: true}} {
			rs := ScanData(b, o)
			for _, r := range rs {
				if r.Offset+r.TotalSize > int64(len(b)) {
					t.Fatalf("record %+v past end", r)
				}
			}
			inOrder("ScanData", rs)
		}
		for pos := 0; pos < len(b) && pos < 64; pos++ {
			_ = CheckCandidate(b, pos, 0)
		}
	})
}

func BenchmarkDecodeEntry(b *testing.B) {
	data := rdqTestFile(b)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		for off := 0; off < len(data); {
			e, err := DecodeEntry(data[off:], int64(off), DefaultMaxEntrySize)
			if err != nil {
				b.Fatal(err)
			}
			off += int(e.TotalSize)
		}
	}
}

// TestStrictFrame: at every position of a real 4.1.8 store file and of the
// hand-made frames of TestCheckCandidate, StrictFrame finds a record
// exactly where the full evidence test does, and for a frame that fits
// reads the same marker and term facts.
func TestStrictFrame(t *testing.T) {
	rec := rdqTestRecord([16]byte{1}, []byte{131, 106})
	inputs := [][]byte{rdqTestFile(t), rec, rec[:10], make([]byte, 40),
		append(rec[:len(rec)-1:len(rec)-1], 0), rdqTestRecord([16]byte{}, []byte{131, 1}), rdqTestRecord([16]byte{}, nil)}
	records, fits := 0, 0
	for i, b := range inputs {
		for p := range b {
			f, c := StrictFrame(b, p), CheckCandidate(b, p, 0)
			if f.Record() != (c.Evidence == EvAll) {
				t.Fatalf("input %d at %d: frame %+v, evidence %v", i, p, f, c.Evidence)
			}
			if !f.Fits {
				continue
			}
			fits++
			if f.OK != c.Evidence.Has(EvMarker) || f.Term != c.Evidence.Has(EvETFMagic|EvExactTerm) {
				t.Fatalf("input %d at %d: frame %+v, evidence %v", i, p, f, c.Evidence)
			}
			if f.Record() {
				records++
				if f.End != p+RDQSizeFieldLen+int(f.Size) {
					t.Fatalf("input %d at %d: end %d for size %d", i, p, f.End, f.Size)
				}
			}
		}
	}
	if records < 3 {
		t.Fatalf("only %d records found (%d frames that fit)", records, fits)
	}
	t.Logf("%d records, %d frames that fit", records, fits)
}
