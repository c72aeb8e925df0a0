package dledger

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/storectl/storectl/internal/fileview"
	fdl "github.com/storectl/storectl/pkg/format/dledger"
	rmq "github.com/storectl/storectl/pkg/format/rocketmq"
	"github.com/storectl/storectl/pkg/scan"
)

// resultJSON is what a scan says, without its timing.
func resultJSON(t *testing.T, store string, jobs int) string {
	t.Helper()
	res, err := Scan(context.Background(), Config{Root: store, KeepEntries: true}, scan.Options{Jobs: jobs})
	if err != nil {
		t.Fatal(err)
	}
	rc := res.Extra["dledger"].(*Recovery)
	b, err := json.Marshal([]any{res.Findings, res.Files, res.BytesScanned, res.Errors, res.Incomplete, rc, rc.EntryList})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// entryAt returns the file position of the first entry at or after
// from in a data file b.
func entryAt(b []byte, from int64) int64 {
	off := int64(0)
	for off < from {
		off += int64(binary.BigEndian.Uint32(b[off+4:]))
	}
	return off
}

// TestSegmentsSameAsOneWalk: cut into segments (of 4, 16 and 64 KiB, so
// a 256 KiB data file is 4-64 segments) and walked by 3 goroutines, the
// scan says exactly what one walk of each file on one goroutine says, on
// the clean, killed and damaged fixtures and on copies damaged where a
// cut falls: a bad size and a bad pos just before a cut (the walk stops
// and resyncs), a copy of a header inside a body just past a cut (a cut
// that is not an entry's start), a torn last file.
func TestSegmentsSameAsOneWalk(t *testing.T) {
	defer func(n int64) { segmentSize = n }(segmentSize)
	const file1 = "dledger-n0/data/00000000000000262144"
	damage := map[string]func(t *testing.T, store string){
		"clean": func(*testing.T, string) {},
		"bad-size-before-cut": func(t *testing.T, store string) {
			b, _ := os.ReadFile(filepath.Join(store, file1))
			off := entryAt(b, 16<<10-600)
			patch(t, filepath.Join(store, file1), off+4, binary.BigEndian.AppendUint32(nil, 100))
		},
		"bad-pos-before-cut": func(t *testing.T, store string) {
			b, _ := os.ReadFile(filepath.Join(store, file1))
			off := entryAt(b, 64<<10-300)
			patch(t, filepath.Join(store, file1), off+24, binary.BigEndian.AppendUint64(nil, 3))
		},
		"fake-header-past-cut": func(t *testing.T, store string) {
			// An entry's body gets, 8 bytes past a cut, a header that
			// passes Header.Check there (its pos is its own offset).
			p := filepath.Join(store, file1)
			b, _ := os.ReadFile(p)
			for _, cut := range []int64{4 << 10, 16 << 10, 64 << 10} {
				at := cut + 8
				e := entryAt(b, at) // the entry after it
				if e-at < fdl.BodyOffset+1 {
					at = entryAt(b, e+1) - fdl.BodyOffset - 8
				}
				h := fdl.Header{Magic: fdl.Magic1, Size: fdl.BodyOffset + 4, BodyLen: 4, Pos: 262144 + at}
				patch(t, p, at, fdl.AppendHeader(nil, h))
			}
		},
		"torn-last-file": func(t *testing.T, store string) {
			m, _ := filepath.Glob(filepath.Join(store, "dledger-n0/data/*"))
			if err := os.Truncate(m[len(m)-1], 100_001); err != nil {
				t.Fatal(err)
			}
		},
	}
	for _, ds := range []string{"dl1-clean", "dl2-kill", "dl3-hdr"} {
		for name, fn := range damage {
			t.Run(ds+"/"+name, func(t *testing.T) {
				store := private(t, ds)
				fn(t, store)
				want := resultJSON(t, store, 1)
				for _, n := range []int64{4 << 10, 16 << 10, 64 << 10} {
					segmentSize = n
					if got := resultJSON(t, store, 3); got != want {
						t.Errorf("segments of %d bytes:\n got %s\nwant %s", n, got, want)
					}
				}
				segmentSize = 4 << 20
			})
		}
	}
}

// TestSegmentShrinks: a data file that shrinks under a segment's mapping
// is a read error with the file and the offset that faulted, no panic;
// the entries before the lost bytes are those of the file.
func TestSegmentShrinks(t *testing.T) {
	store := private(t, "dl1-clean")
	path := filepath.Join(store, "dledger-n0/data/00000000000000000000")
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	s := &scanner{cfg: Config{MaxMessageSize: rmq.DefaultMaxRecordSize},
		data: []dataFile{{name: filepath.Base(path), rel: "data/0", path: path, size: st.Size()}}}
	p := &pipe{s: s, ctx: context.Background()}
	v, err := fileview.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if !v.Mapped() {
		t.Skip("the file can't be mapped here")
	}
	const keep = 100 << 10
	if err := os.Truncate(path, keep); err != nil {
		t.Fatal(err)
	}
	w := &walker{file: 0, v: v, m: new(rmq.Message), names: &topicNames{m: map[string]string{}}}
	defer w.closeView()
	seg := &segment{file: 0, start: 0, stop: -1, last: true, ch: make(chan []item, 1000)}
	p.runSegment(w, seg)
	var items []item
	for b := range seg.ch {
		items = append(items, b...)
	}
	last := items[len(items)-1]
	var fe *fileview.FaultError
	if last.kind != itemErr || !errors.As(last.err(), &fe) {
		t.Fatalf("last item %+v, want a fault", last)
	}
	if fe.Path != path || fe.Offset < keep || fe.Offset >= keep+4096 || !seg.tail {
		t.Errorf("fault at %s@%d (tail %v), want %s in the page at %d", fe.Path, fe.Offset, seg.tail, path, keep)
	}
	n := 0
	for _, it := range items[:len(items)-1] {
		if it.kind != itemEntry || it.err() != nil || it.h.pos+int64(it.h.size) > keep+4096 {
			t.Fatalf("item %+v before the fault", it)
		}
		n++
	}
	if n < 50 {
		t.Errorf("%d entries before the fault", n)
	}
}
