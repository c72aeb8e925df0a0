package timer

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

func fixtureBytes(f *testing.F, rel string) []byte {
	b, err := os.ReadFile(filepath.Join(storeDir(f, timerDatasets[0]), rel))
	if err != nil {
		f.Fatal(err)
	}
	return b
}

func FuzzDecodeEntry(f *testing.F) {
	log := fixtureBytes(f, "timerlog/00000000000000000000")
	for off := 0; off < 4056; off += 13 * UnitSize {
		f.Add(log[off : off+UnitSize])
	}
	f.Add(log[4056:])
	f.Add(make([]byte, UnitSize))
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := DecodeEntry(b, 100)
		mustCorrupt(t, err)
		if err == nil && e.Kind == EntryUnit {
			if !e.Unit.Valid() {
				t.Fatal("an accepted unit is not Valid")
			}
			if got := AppendUnit(nil, e.Unit); !bytes.Equal(got, b[:UnitSize]) {
				t.Fatal("unit does not round-trip")
			}
		}
	})
}

// FuzzDecodeUnit: the direct loads of DecodeUnit decode what the
// field-by-field decoder does, for every input.
func FuzzDecodeUnit(f *testing.F) {
	log := fixtureBytes(f, "timerlog/00000000000000000000")
	for off := 0; off < 4056; off += 13 * UnitSize {
		f.Add(log[off : off+UnitSize+off%7])
	}
	f.Add(make([]byte, UnitSize-1))
	f.Fuzz(func(t *testing.T, b []byte) {
		u, err := DecodeUnit(b, 7)
		w, werr := decodeUnitFields(b, 7)
		if u != w || (err == nil) != (werr == nil) || err != nil && err.Error() != werr.Error() {
			t.Fatalf("DecodeUnit %+v, %v; field by field %+v, %v", u, err, w, werr)
		}
	})
}

// FuzzLogReader walks arbitrary file contents: no panic, progress in
// 52-byte steps, each entry DecodeEntry's, End within the file, errors
// are *CorruptError.
func FuzzLogReader(f *testing.F) {
	log := fixtureBytes(f, "timerlog/00000000000000000000")
	f.Add(log)
	f.Add(log[:1000])
	f.Add(append(append([]byte(nil), log[:UnitSize*3]...), 0xFF))
	f.Fuzz(func(t *testing.T, b []byte) {
		r := NewLogReader(bytes.NewReader(b), int64(len(b)), 4096)
		n := 0
		for r.Next() {
			n++
			if n > len(b)/UnitSize+1 {
				t.Fatal("no progress")
			}
			// Each entry is DecodeEntry's of its bytes (Next decodes a
			// unit it accepts in place).
			pos := r.Offset() - 4096
			if want, _ := DecodeEntry(b[pos:min(pos+UnitSize, int64(len(b)))], r.Offset()); r.Entry() != want || *r.Current() != want {
				t.Fatalf("at %d: Next %+v (in place %+v), DecodeEntry %+v", pos, r.Entry(), *r.Current(), want)
			}
		}
		mustCorrupt(t, r.Err())
		if r.End() < 0 || r.End() > int64(len(b)) || r.End()%UnitSize != 0 {
			t.Fatalf("End %d out of the file of %d bytes", r.End(), len(b))
		}
	})
}

func FuzzDecodeSlot(f *testing.F) {
	w := fixtureBytes(f, "timerwheel")
	_ = ReadWheel(readerAt(w), int64(len(w)), func(i int, s Slot) error {
		if i%5 == 0 {
			f.Add(w[i*SlotSize : (i+1)*SlotSize])
		}
		return nil
	})
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := DecodeSlot(b, 0)
		mustCorrupt(t, err)
		if err == nil && !bytes.Equal(AppendSlot(nil, s), b[:SlotSize]) {
			t.Fatal("slot does not round-trip")
		}
		_ = SlotIndex(s.TimeMs(DefaultPrecisionMs), DefaultPrecisionMs)
	})
}

func FuzzDecodeCheckpoint(f *testing.F) {
	f.Add(fixtureBytes(f, "config/timercheck"))
	f.Add(make([]byte, 40))
	f.Fuzz(func(t *testing.T, b []byte) {
		cp, err := DecodeCheckpoint(b, 0)
		mustCorrupt(t, err)
		if err == nil && len(b) >= CheckpointSize && !bytes.Equal(AppendCheckpoint(nil, cp), b[:CheckpointSize]) {
			t.Fatal("checkpoint does not round-trip")
		}
	})
}

func FuzzDecodeMetrics(f *testing.F) {
	m := fixtureBytes(f, "config/timermetrics")
	f.Add(m)
	f.Add(m[:len(m)/2])
	f.Add([]byte("{}"))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, err := DecodeMetrics(b)
		mustCorrupt(t, err)
	})
}
