package dledger

import (
	"bytes"
	"fmt"
	"testing"
)

// memSlicer is a Slicer over memory.
type memSlicer struct{ *bytes.Reader }

func (m memSlicer) Slice(off int64, n int) ([]byte, error) {
	b := make([]byte, n)
	k, err := m.ReadAt(b, off)
	return b[:k], err
}

// TestReaderSlicerSame: over a Slicer the Reader finds the same entries,
// end and error as over pread, on a file with a torn last entry, one with
// a bad header and one ending in a BLANK, and its bodies stay valid after
// Next (InPlace).
func TestReaderSlicerSame(t *testing.T) {
	var clean []byte
	mid := 0
	for i := range 3000 {
		if i == 1500 {
			mid = len(clean)
		}
		clean = AppendEntry(clean, Header{Magic: Magic1, Index: int64(i), Pos: int64(len(clean))}, bytes.Repeat([]byte{byte(i)}, 100+i%700))
	}
	torn := clean[:len(clean)-10]
	bad := bytes.Clone(clean)
	bad[mid+PosOffset+7] ^= 0xff // entry 1500's pos
	blank := AppendBlank(bytes.Clone(clean), 4096)
	walk := func(r *Reader) string {
		var out []byte
		var bodies [][]byte
		for r.Next() {
			h := r.Header()
			out = fmt.Appendf(out, "%d@%d:%d ", h.Index, h.Pos, len(r.Body()))
			bodies = append(bodies, r.Body())
		}
		if r.InPlace() {
			for i, b := range bodies {
				if len(b) != 100+i%700 || (len(b) > 0 && b[0] != byte(i)) {
					t.Fatalf("body %d changed after Next", i)
				}
			}
		}
		end, pos := r.End()
		return fmt.Sprintf("%s| %s %d %v", out, end, pos, r.Err())
	}
	for name, b := range map[string][]byte{"clean": clean, "torn": torn, "bad": bad, "blank": blank} {
		want := walk(NewReader(bytes.NewReader(b), int64(len(b)), 0, 0))
		r := NewReader(memSlicer{bytes.NewReader(b)}, int64(len(b)), 0, 0)
		if !r.InPlace() {
			t.Fatal("not in place over a Slicer")
		}
		if got := walk(r); got != want {
			t.Errorf("%s: over a Slicer\n%s\nover pread\n%s", name, got, want)
		}
	}
}

// TestReaderAhead: after each Next, Ahead is the file's bytes from the
// next entry's start (the offset Next goes on from) to its window's end,
// over a Slicer and over pread, and nil past the last entry.
func TestReaderAhead(t *testing.T) {
	var file []byte
	for i := range 2000 {
		file = AppendEntry(file, Header{Magic: Magic1, Index: int64(i), Pos: int64(len(file))}, bytes.Repeat([]byte{byte(i)}, 100+i%900))
	}
	for _, r := range []*Reader{NewReader(bytes.NewReader(file), int64(len(file)), 0, 0), NewReader(memSlicer{bytes.NewReader(file)}, int64(len(file)), 0, 0)} {
		n, reached := 0, 0
		for r.Next() {
			at := r.Offset()
			a := r.Ahead()
			if at == int64(len(file)) {
				if a != nil {
					t.Fatalf("entry %d, the last: Ahead has %d bytes", n, len(a))
				}
				break
			}
			if len(a) == 0 || !bytes.Equal(a, file[at:at+int64(len(a))]) {
				t.Fatalf("entry %d: Ahead (%d bytes) is not the file from %d", n, len(a), at)
			}
			reached = max(reached, int(at)+len(a))
			n++
		}
		if n != 1999 || reached != len(file) {
			t.Fatalf("in place %v: %d entries checked, Ahead reached %d of %d", r.InPlace(), n, reached, len(file))
		}
	}
}
