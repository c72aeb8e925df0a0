package dledger

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/storectl/storectl/pkg/format"
)

func mustCorrupt(t *testing.T, err error) {
	t.Helper()
	var ce *format.CorruptError
	if err != nil && !errors.As(err, &ce) {
		t.Fatalf("error is not *CorruptError: %v", err)
	}
}

func fixtureFile(f *testing.F, rel string, n int) []byte {
	fh, err := os.Open(filepath.Join(storeDir(f, dlDatasets[0]), "dledger-n0", rel))
	if err != nil {
		f.Fatal(err)
	}
	defer fh.Close()
	b := make([]byte, n)
	k, _ := fh.ReadAt(b, 0)
	return b[:k]
}

// FuzzReader walks arbitrary data file contents: no panic, progress,
// every entry passes Header.Check and fits the file, errors are
// *CorruptError.
func FuzzReader(f *testing.F) {
	data := fixtureFile(f, "data/00000000000000000000", 1<<20)
	f.Add(data[:8000])
	f.Add(data[261000:])
	f.Add(AppendBlank(nil, 64))
	f.Fuzz(func(t *testing.T, b []byte) {
		r := NewReader(bytes.NewReader(b), int64(len(b)), 0, 1<<16)
		n := 0
		for r.Next() {
			h := r.Header()
			if h.Check(h.Pos) != nil || int(h.Size) != BodyOffset+len(r.Body()) || h.Pos+int64(h.Size) > int64(len(b)) {
				t.Fatalf("accepted a bad entry %+v", h)
			}
			n++
			if n > len(b)/BodyOffset+1 {
				t.Fatal("no progress")
			}
		}
		mustCorrupt(t, r.Err())
	})
}

// FuzzDecodeHeader: DecodeHeader's direct loads and DecodeIndexUnit's
// decode what the field-by-field decoders do, for every input.
func FuzzDecodeHeader(f *testing.F) {
	data := fixtureFile(f, "data/00000000000000000000", 4096)
	for off := 0; off+BodyOffset < len(data); off += 333 {
		f.Add(data[off : off+BodyOffset+off%5])
	}
	f.Add(make([]byte, BodyOffset-1))
	f.Add(make([]byte, IndexUnitSize-3))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := DecodeHeader(b, 9)
		w, werr := decodeHeaderFields(b, 9)
		if h != w || (err == nil) != (werr == nil) || err != nil && err.Error() != werr.Error() {
			t.Fatalf("DecodeHeader %+v, %v; field by field %+v, %v", h, err, w, werr)
		}
		u, err := DecodeIndexUnit(b, 9)
		v, verr := decodeIndexUnitFields(b, 9)
		if u != v || (err == nil) != (verr == nil) || err != nil && err.Error() != verr.Error() {
			t.Fatalf("DecodeIndexUnit %+v, %v; field by field %+v, %v", u, err, v, verr)
		}
	})
}

func FuzzDecodeIndexUnit(f *testing.F) {
	idx := fixtureFile(f, "index/00000000000000000000", 4096)
	for off := 0; off < len(idx); off += 31 * IndexUnitSize {
		f.Add(idx[off : off+IndexUnitSize])
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		u, err := DecodeIndexUnit(b, 0)
		mustCorrupt(t, err)
		if err == nil && !bytes.Equal(AppendIndexUnit(nil, u), b[:IndexUnitSize]) {
			t.Fatal("index unit does not round-trip")
		}
	})
}

func FuzzDecodeProperties(f *testing.F) {
	f.Add(fixtureFile(f, CheckpointFile, 4096))
	f.Add(fixtureFile(f, TermFile, 4096))
	f.Add([]byte("a\\\n  b=c\\u0041\r\n#x\n k : v"))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := DecodeProperties(b)
		mustCorrupt(t, err)
		_, _ = DecodeCheckpoint(b)
		_, _ = DecodeTerm(b)
		if err == nil {
			for _, e := range p {
				if e.Offset < 0 || e.Offset > int64(len(b)) {
					t.Fatalf("offset %d out of range", e.Offset)
				}
			}
		}
	})
}
