package rocketmq

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/storectl/storectl/internal/fileview"
	gen "github.com/storectl/storectl/internal/gen/rocketmq"
	"github.com/storectl/storectl/internal/testutil"
	rmq "github.com/storectl/storectl/pkg/format/rocketmq"
	"github.com/storectl/storectl/pkg/scan"
)

// scanBothWays scans root reading the files in place (their mappings)
// and reading them through the Reader's buffer, and fails the test unless
// both give the same result.
func scanBothWays(t *testing.T, what, root string) *scan.Result {
	t.Helper()
	run := func(inPlace bool) (*scan.Result, []byte) {
		defer func(old bool) { readInPlace = old }(readInPlace)
		readInPlace = inPlace
		res, err := ScanCommitLog(context.Background(), Config{Root: root}, scan.Options{Jobs: 2})
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(res)
		return res, b
	}
	res, mapped := run(true)
	_, read := run(false)
	if !bytes.Equal(mapped, read) {
		t.Errorf("%s: in place and read differ:\nin place %s\nread     %s", what, mapped, read)
	}
	return res
}

// TestInPlaceSameResult: the scan that reads the commitlog from its
// mappings finds what the one that reads it finds, on the fixtures (clean,
// stale, torn) and on generated stores damaged in the ways the damage
// tests damage them; and it does read in place where a file maps.
func TestInPlaceSameResult(t *testing.T) {
	f, err := fileview.Open(filepath.Join(fixtureCommitLog(t), "00000000000000000000"))
	if err != nil {
		t.Fatal(err)
	}
	_, sliced := fileReaderAt(context.Background(), f, true).(rmq.Slicer)
	_, read := fileReaderAt(context.Background(), f, false).(rmq.Slicer)
	f.Close()
	if !sliced || read {
		t.Fatalf("a mapped file's reader slices: %v, without inPlace: %v", sliced, read)
	}
	tars, _ := filepath.Glob(testutil.Testdata("rocketmq", "*.tar.gz"))
	for _, tp := range tars {
		root := filepath.Join(testutil.Untar(t, tp), "store")
		scanBothWays(t, filepath.Base(tp), root)
	}
	for _, c := range []struct {
		name string
		fn   func(b []byte, pos int64, size int64) []byte
	}{
		{"short", func(b []byte, pos, size int64) []byte { return b[:pos+size/2] }},
		{"zeroed-tail", func(b []byte, pos, size int64) []byte { clear(b[pos+size/2:]); return b }},
		{"garbage", func(b []byte, pos, size int64) []byte {
			for i := pos; i < min(pos+3000, int64(len(b))); i++ {
				b[i] = byte(i*131 + 7)
			}
			return b
		}},
		{"flipped-body", func(b []byte, pos, size int64) []byte { b[pos+96] ^= 1; return b }}, // the first body byte
	} {
		root, _, spans := genStore(t, false)
		at := spans[len(spans)/2]
		if c.name == "short" {
			at = spans[len(spans)-1]
		}
		patch(t, root, at.phy, func(b []byte, pos int64) []byte { return c.fn(b, pos, at.size) })
		res := scanBothWays(t, c.name, root)
		if len(warnings(res)) == 0 {
			t.Errorf("%s: no finding: the damage was not seen (%v)", c.name, codes(res))
		}
	}
}

// fixtureCommitLog is the commitlog dir of the clean fixture.
func fixtureCommitLog(t *testing.T) string {
	t.Helper()
	return filepath.Join(testutil.Untar(t, testutil.Testdata("rocketmq", "rmq533-a-clean.tar.gz")), "store", "commitlog")
}

// TestInPlaceShrink: a commitlog file that shrinks while the scan reads it
// from its mapping (the tap cuts it after its first record) makes the
// scan fail that file with an error naming it and the offset that
// faulted, not crash.
func TestInPlaceShrink(t *testing.T) {
	root, _, spans := genStore(t, false)
	name := rmq.FormatFileName(0)
	cut := false
	tap := func(i int, base int64) func(*rmq.Message, int64) {
		if i != 0 {
			return nil
		}
		return func(m *rmq.Message, phy int64) {
			if !cut {
				cut = true
				if err := os.Truncate(filepath.Join(root, "commitlog", name), spans[0].size+8); err != nil {
					t.Error(err)
				}
			}
		}
	}
	res, err := ScanCommitLog(context.Background(), Config{Root: root, Tap: tap}, scan.Options{Jobs: 1})
	if err != nil {
		t.Fatal(err)
	}
	if !cut {
		t.Fatal("the tap never ran")
	}
	found := false
	for _, e := range res.Errors {
		found = found || strings.Contains(e, "commitlog/"+name) && strings.Contains(e, "offset ") && strings.Contains(e, "memory fault")
	}
	if !res.Incomplete || !found {
		t.Fatalf("incomplete %v, errors %q: want a memory fault naming commitlog/%s and its offset", res.Incomplete, res.Errors, name)
	}
	t.Logf("errors: %q", res.Errors)
}

// TestVerifyInPlaceSameResult: Verify, whose collectors let the walk read
// the commitlog from its mappings (Config.hooksInPlace), finds what it
// finds reading the files, on every fixture and on a generated store
// with index files damaged in the commitlog (a flipped body byte, a
// garbage run, a file cut short).
func TestVerifyInPlaceSameResult(t *testing.T) {
	run := func(root string, inPlace bool) []byte {
		defer func(old bool) { readInPlace = old }(readInPlace)
		readInPlace = inPlace
		res, err := Verify(context.Background(), VerifyConfig{Config: Config{Root: root}}, scan.Options{Jobs: 2})
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(res)
		return b
	}
	check := func(what, root string) {
		if mapped, read := run(root, true), run(root, false); !bytes.Equal(mapped, read) {
			t.Errorf("%s: verify in place and read differ:\nin place %s\nread     %s", what, mapped, read)
		}
	}
	for _, root := range fixtureStoreRoots(t) {
		check(root, root)
	}
	for _, c := range []struct {
		name string
		fn   func(b []byte, pos int64) []byte
	}{
		{"flipped-body", func(b []byte, pos int64) []byte { b[pos+96] ^= 1; return b }},
		{"garbage", func(b []byte, pos int64) []byte {
			for i := pos; i < min(pos+3000, int64(len(b))); i++ {
				b[i] = byte(i*131 + 7)
			}
			return b
		}},
		{"short", func(b []byte, pos int64) []byte { return b[:pos+10] }},
	} {
		root := t.TempDir()
		if _, err := gen.Generate(root, gen.Config{MappedFileSize: genMapped, TotalBytes: 3 << 20, Seed: 9, CQFileSize: 100 * 20,
			Index: true, IndexSlots: 1000, IndexEntries: 4000}); err != nil {
			t.Fatal(err)
		}
		var spans []span
		if _, err := ScanCommitLog(context.Background(), Config{Root: root, OnMessage: func(m *rmq.Message, phy int64) error {
			spans = append(spans, span{phy, int64(m.TotalSize)})
			return nil
		}}, scan.Options{}); err != nil {
			t.Fatal(err)
		}
		patch(t, root, spans[len(spans)/3].phy, c.fn)
		check(c.name, root)
	}
}
