package ra_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/storectl/storectl/pkg/format"
	"github.com/storectl/storectl/pkg/format/etf"
	"github.com/storectl/storectl/pkg/format/ra"
)

// fixtureBytes returns the first n bytes of each file matching pattern
// under the Q1 node dir (fuzz seeds).
func fixtureBytes(f *testing.F, pattern string, n int) [][]byte {
	f.Helper()
	set := qqSets(f)[0]
	paths, _ := filepath.Glob(filepath.Join(set.node, pattern))
	if len(paths) == 0 {
		f.Fatalf("no fixture files for %s", pattern)
	}
	var out [][]byte
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		out = append(out, b[:min(n, len(b))])
	}
	return out
}

func isCorrupt(t *testing.T, err error) {
	t.Helper()
	var ce *format.CorruptError
	if err != nil && !errors.As(err, &ce) {
		t.Fatalf("not a CorruptError: %v", err)
	}
}

func FuzzWALReader(f *testing.F) {
	for _, b := range fixtureBytes(f, "*/*/*.wal", 8192) {
		f.Add(b)
	}
	f.Add([]byte("RAWA\x01"))
	f.Fuzz(func(t *testing.T, b []byte) {
		r := ra.NewWALReader(bytes.NewReader(b), int64(len(b)))
		prev := int64(ra.WALHeaderLen)
		for r.Next() {
			rec := r.Record()
			if rec.Offset != prev || rec.End() > int64(len(b)) || rec.End() <= rec.Offset {
				t.Fatalf("record %+v after %d in %d bytes", rec, prev, len(b))
			}
			prev = rec.End()
			rec.ChecksumOK()
			r.IsLast()
			if e, err := ra.DecodeEntry(rec.Data, 0); err == nil && e.Kind == ra.EntryUser {
				c := ra.DecodeFifoCommand(e.Command, e.ReplyMode)
				if c.Msg != nil {
					_, err := ra.DecodeEnqueueMessage(c.Msg)
					isCorrupt(t, err)
				}
			} else {
				isCorrupt(t, err)
			}
		}
		isCorrupt(t, r.Err())
		if reason, off := r.End(); reason != "" && off != prev {
			t.Fatalf("end %s at %d, last record ended at %d", reason, off, prev)
		}
	})
}

func FuzzSegment(f *testing.F) {
	for _, b := range fixtureBytes(f, "*/*/*/*.segment", 70000) {
		f.Add(b[:ra.SegmentHeaderLen+5*ra.SegmentSlotV2])
	}
	f.Add([]byte("RASG\x00\x01\x00\x02" + string(make([]byte, 60))))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := ra.OpenSegment(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			isCorrupt(t, err)
			return
		}
		for _, p := range s.Index.LivePositions() {
			sl := s.Index.Slots[p]
			d, err := s.Data(sl)
			if err != nil {
				isCorrupt(t, err)
				continue
			}
			if len(d) != int(sl.Length) {
				t.Fatalf("data %d for length %d", len(d), sl.Length)
			}
			sl.CRCOK(d)
		}
	})
}

func FuzzSnapshot(f *testing.F) {
	for _, b := range fixtureBytes(f, "*/*/*/snapshots/*/snapshot.dat", 1<<20) {
		f.Add(b[:min(len(b), 4096)])
	}
	f.Add([]byte("RASN\x01\x00\x00\x00\x00\x00\x00\x00\x02\x83\x6a\x83\x6a"))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, err := ra.DecodeSnapshot(b)
		isCorrupt(t, err)
	})
}

func FuzzConfig(f *testing.F) {
	for _, b := range fixtureBytes(f, "*/*/*/config", 1<<16) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		_, err := ra.ParseConfig(b)
		isCorrupt(t, err)
	})
}

// FuzzFifoState: the rabbit_fifo state decoder on snapshot states (the
// fixtures' snapshots, cut at every seed length) never panics and fails
// with a CorruptError.
func FuzzFifoState(f *testing.F) {
	for _, b := range fixtureBytes(f, "*/*/*/snapshots/*/snapshot.dat", 1<<20) {
		s, err := ra.DecodeSnapshot(b)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(s.State[:min(len(s.State), 20000)])
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		term, _, err := etf.DecodeTerm(b)
		if err != nil {
			return
		}
		_, err = ra.DecodeFifoState(term, 0)
		isCorrupt(t, err)
	})
}

// FuzzPeekCommand: reading the head of a damaged entry never panics.
func FuzzPeekCommand(f *testing.F) {
	for _, b := range fixtureBytes(f, "*/*/*.wal", 4096) {
		f.Add(b[ra.WALHeaderLen+47:])
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		ra.PeekCommand(b)
	})
}

// FuzzEntry: a log entry's data (seeds: the entries of the fixtures'
// segments, 4.0.5 and 3.10.8) through the entry, rabbit_fifo command and
// message decoders never panics and fails with a CorruptError; an entry
// that decodes to an enqueue decodes to the same message twice.
func FuzzEntry(f *testing.F) {
	seeds := fixtureBytes(f, "*/*/*/*.segment", 1<<20)
	for _, set := range qq310Sets(f)[:1] {
		paths, _ := filepath.Glob(filepath.Join(set.node, "*/*/*/*.segment"))
		for _, p := range paths[:min(2, len(paths))] {
			b, err := os.ReadFile(p)
			if err != nil {
				f.Fatal(err)
			}
			seeds = append(seeds, b)
		}
	}
	for _, b := range seeds {
		s, err := ra.OpenSegment(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			f.Fatal(err)
		}
		for i, sl := range s.Index.Slots {
			if i%97 != 0 && i != len(s.Index.Slots)-1 {
				continue
			}
			if d, err := s.Data(sl); err == nil {
				f.Add(append([]byte(nil), d...))
			}
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := ra.DecodeEntry(b, 0)
		if err != nil {
			isCorrupt(t, err)
			ra.PeekCommand(b)
			return
		}
		if e.Kind != ra.EntryUser {
			return
		}
		c := ra.DecodeFifoCommand(e.Command, e.ReplyMode)
		if c.Msg == nil {
			return
		}
		m1, err1 := ra.DecodeEnqueueMessage(c.Msg)
		isCorrupt(t, err1)
		m2, err2 := ra.DecodeEnqueueMessage(c.Msg)
		if (err1 == nil) != (err2 == nil) || m1.PayloadSHA256 != m2.PayloadSHA256 || m1.PayloadSize != m2.PayloadSize {
			t.Fatalf("two decodes differ: %v / %v", err1, err2)
		}
	})
}

// FuzzNames: WAL, segment and snapshot dir names parse only when ra's
// own formatting of the parsed number gives the name back.
func FuzzNames(f *testing.F) {
	for _, s := range []string{"00000021.wal", "0000000000000021.segment", "00000001.segment", "123456789.wal",
		"0000000000000001_0000000000002EE7", "0000000000000001_0000000000002ee7", "x.wal", "-0000001.wal"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		for _, ext := range []string{"wal", "segment"} {
			if n, ok := ra.ParseFileName(name, ext); ok && ra.FileName(n.N, n.Width, ext) != name {
				t.Fatalf("%q parsed as %+v, formats as %q", name, n, ra.FileName(n.N, n.Width, ext))
			}
		}
		if term, idx, ok := ra.ParseSnapshotDirName(name); ok && !strings.EqualFold(ra.SnapshotDirName(term, idx), name) {
			t.Fatalf("%q parsed as %d_%d", name, term, idx)
		}
	})
}
