package rabbitmq

// Attacks on the clean-index digest (clean_digest.go): stores built so
// that the digests might agree while the exact join would report
// something. Each one checks that the scan with the digest reports
// exactly what the exact join does (leanKeep), and that Scan without a
// record callback (the CLI's scan: the digest) reports what Scan with one
// (the exact join from the start) does. want says
// whether the digests should agree: cases the digest cannot vouch for must
// be scanned again; cases it can vouch for must not be.

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/storectl/storectl/internal/fileview"
	rfmt "github.com/storectl/storectl/pkg/format/rabbitmq"
	"github.com/storectl/storectl/pkg/scan"
)

// scanFindings runs Scan on one vhost dir, with a record callback (the
// exact index join) or without one (the scan can then use the digest),
// and returns its findings and layout as JSON.
func scanFindings(t *testing.T, records bool, root, dir string) string {
	t.Helper()
	var recs []any
	rp := &recs
	if !records {
		rp = nil
	}
	res := scanWith(t, root, dir, rp)
	b, _ := json.Marshal([]any{res.Findings, res.Layout})
	return string(b)
}

// fileRecords walks the .rdq at p.
func fileRecords(t *testing.T, p string) []*Record {
	t.Helper()
	fs := &FileScan{}
	walk(readFile(t, p), fs, nil)
	return fs.Records
}

// storeFile is the path of a persistent store file of the vhost dir.
func storeFile(dir, name string) string {
	return filepath.Join(dir, "msg_store_persistent", name)
}

// indexOf rewrites the vhost's msg_store_index.ets with edit.
func indexOf(t *testing.T, dir string, edit func([]rfmt.MsgLocation) []rfmt.MsgLocation) {
	t.Helper()
	editIndex(t, storeFile(dir, "msg_store_index.ets"), edit)
}

// unrefRecords returns the generated store's unreferenced records in file
// 0 and 1 (UnrefEvery leaves some).
func unrefRecords(t *testing.T, dir string, refs map[[16]byte]string) []*Record {
	t.Helper()
	var out []*Record
	for _, n := range []int64{0, 1} {
		for _, r := range fileRecords(t, storeFile(dir, itoa(n)+".rdq")) {
			if _, ok := refs[r.MsgID]; !ok {
				r.File = n
				out = append(out, r)
			}
		}
	}
	if len(out) < 3 {
		t.Fatalf("%d unreferenced records in files 0 and 1", len(out))
	}
	return out
}

// firstRef returns the first referenced record of file n and its index in
// the file's records.
func firstRef(t *testing.T, dir string, n int64, refs map[[16]byte]string) (*Record, int) {
	t.Helper()
	for i, r := range fileRecords(t, storeFile(dir, itoa(n)+".rdq")) {
		if _, ok := refs[r.MsgID]; ok {
			r.File = n
			return r, i
		}
	}
	t.Fatalf("no referenced record in %d.rdq", n)
	return nil, 0
}

// entryOf returns the index of id's entry in l.
func entryOf(t *testing.T, l []rfmt.MsgLocation, id [16]byte) int {
	t.Helper()
	for i := range l {
		if l[i].MsgID == id {
			return i
		}
	}
	t.Fatalf("no entry for %x", id)
	return -1
}

type digestAttack struct {
	// damage edits the generated store (dir: its vhost dir).
	damage func(t *testing.T, dir string, refs map[[16]byte]string)
	agree  bool // whether the digests must agree (no second scan)
}

func TestCleanDigestAttacks(t *testing.T) {
	ref0 := func(r *Record) rfmt.MsgLocation {
		return rfmt.MsgLocation{MsgID: r.MsgID, RefCount: 0, File: r.File, Offset: r.Offset, TotalSize: r.TotalSize}
	}
	attacks := map[string]digestAttack{
		// A ref-count-0 entry (held, joined exactly) for an id that also
		// has its right positive entry: the exact lookup takes the dump's
		// last entry for the id, so the digest must step aside.
		"ref 0 entry besides a referenced id's own": {func(t *testing.T, dir string, refs map[[16]byte]string) {
			indexOf(t, dir, func(l []rfmt.MsgLocation) []rfmt.MsgLocation {
				e := l[3]
				e.RefCount = 0
				return append(l, e)
			})
		}, false},
		// The same at another place, after the right entry: the exact
		// lookup takes it, so the first copy's index_match is "mismatch".
		"ref 0 entry elsewhere after a referenced id's own": {func(t *testing.T, dir string, refs map[[16]byte]string) {
			indexOf(t, dir, func(l []rfmt.MsgLocation) []rfmt.MsgLocation {
				e := l[3]
				e.RefCount, e.Offset = 0, e.Offset+1
				return append(l, e)
			})
		}, false},
		"ref 0 entry elsewhere before a referenced id's own": {func(t *testing.T, dir string, refs map[[16]byte]string) {
			indexOf(t, dir, func(l []rfmt.MsgLocation) []rfmt.MsgLocation {
				e := l[3]
				e.RefCount, e.Offset = 0, e.Offset+1
				return append([]rfmt.MsgLocation{e}, l...)
			})
		}, false},
		"referenced id's only entry has ref 0": {func(t *testing.T, dir string, refs map[[16]byte]string) {
			indexOf(t, dir, func(l []rfmt.MsgLocation) []rfmt.MsgLocation { l[3].RefCount = 0; return l })
		}, false},
		"referenced id's only entry has ref -1": {func(t *testing.T, dir string, refs map[[16]byte]string) {
			indexOf(t, dir, func(l []rfmt.MsgLocation) []rfmt.MsgLocation { l[3].RefCount = -1; return l })
		}, false},
		"referenced id's entry has a huge ref count": {func(t *testing.T, dir string, refs map[[16]byte]string) {
			indexOf(t, dir, func(l []rfmt.MsgLocation) []rfmt.MsgLocation { l[3].RefCount = math.MaxInt64; return l })
		}, false},
		// The real brokers' case: ref-0 entries for consumed messages, at
		// their places; and ref-0 entries at wrong places, into no file,
		// a non-numbered file number, wide values, an id no file holds.
		"ref 0 entries for unreferenced records, right and wrong": {func(t *testing.T, dir string, refs map[[16]byte]string) {
			un := unrefRecords(t, dir, refs)
			indexOf(t, dir, func(l []rfmt.MsgLocation) []rfmt.MsgLocation {
				for _, r := range un {
					l = append(l, ref0(r))
				}
				bad := []rfmt.MsgLocation{ref0(un[0]), ref0(un[1]), ref0(un[2]), ref0(un[0]), ref0(un[1])}
				bad[0].Offset++
				bad[1].File = -1
				bad[2].File = 1 << 40
				bad[3].TotalSize = 1 << 35
				bad[4].RefCount = -3
				ghost := ref0(un[2])
				ghost.MsgID = [16]byte{0xfe, 0xed}
				return append(append(l, bad...), ghost)
			})
		}, true},
		// A positive entry for an unreferenced record, at its place: the
		// dump digest has an element the scan's cannot.
		"positive entry for an unreferenced record": {func(t *testing.T, dir string, refs map[[16]byte]string) {
			un := unrefRecords(t, dir, refs)
			indexOf(t, dir, func(l []rfmt.MsgLocation) []rfmt.MsgLocation {
				e := ref0(un[0])
				e.RefCount = 1
				return append(l, e)
			})
		}, false},
		// A ref-0 entry whose place holds a referenced first copy.
		"ref 0 entry at a referenced record's place": {func(t *testing.T, dir string, refs map[[16]byte]string) {
			un := unrefRecords(t, dir, refs)
			r, _ := firstRef(t, dir, 0, refs)
			indexOf(t, dir, func(l []rfmt.MsgLocation) []rfmt.MsgLocation {
				e := ref0(un[0])
				e.File, e.Offset = r.File, r.Offset
				return append(l, e)
			})
		}, true},
		// Every record of 0.rdq again in a file whose name is no number:
		// duplicates only (classified last), the first copies untouched.
		"non-numbered copy of a file": {func(t *testing.T, dir string, refs map[[16]byte]string) {
			writeFile(t, storeFile(dir, "copy.rdq"), readFile(t, storeFile(dir, "0.rdq")))
		}, true},
		// A number too long to be one (19 digits): non-numbered too.
		"19-digit name copy of a file": {func(t *testing.T, dir string, refs map[[16]byte]string) {
			writeFile(t, storeFile(dir, "0000000000000000000.rdq"), readFile(t, storeFile(dir, "0.rdq")))
		}, true},
		// The first copies of 1.rdq's ids only in a non-numbered file,
		// entries unchanged.
		"first copies in a non-numbered file": {func(t *testing.T, dir string, refs map[[16]byte]string) {
			if err := os.Rename(storeFile(dir, "1.rdq"), storeFile(dir, "one.rdq")); err != nil {
				t.Fatal(err)
			}
		}, false},
		// The same, with entries saying file -1 (where the exact scan join
		// matches non-numbered files' records).
		"first copies in a non-numbered file, entries file -1": {func(t *testing.T, dir string, refs map[[16]byte]string) {
			if err := os.Rename(storeFile(dir, "1.rdq"), storeFile(dir, "one.rdq")); err != nil {
				t.Fatal(err)
			}
			indexOf(t, dir, func(l []rfmt.MsgLocation) []rfmt.MsgLocation {
				for i := range l {
					if l[i].File == 1 {
						l[i].File = -1
					}
				}
				return l
			})
		}, false},
		// A second file numbered 1, empty, sorted after the real one: it
		// overrides nothing, but the digest cannot tell.
		"same number, later file empty": {func(t *testing.T, dir string, refs map[[16]byte]string) {
			writeFile(t, storeFile(dir, "01.rdq"), nil)
			if err := os.Rename(storeFile(dir, "1.rdq"), storeFile(dir, "001.rdq")); err != nil {
				t.Fatal(err)
			}
		}, false},
		// A second file numbered 1 that fails (over MaxFileSize, sparse),
		// sorted after the real one and before it: never classified, and
		// with no records it overrides no place.
		"same number, later file unreadable": {func(t *testing.T, dir string, refs map[[16]byte]string) {
			if err := os.Rename(storeFile(dir, "1.rdq"), storeFile(dir, "001.rdq")); err != nil {
				t.Fatal(err)
			}
			sparse(t, storeFile(dir, "01.rdq"))
		}, true},
		"same number, earlier file unreadable": {func(t *testing.T, dir string, refs map[[16]byte]string) {
			sparse(t, storeFile(dir, "01.rdq"))
		}, true},
		// File numbers beyond 32 bits: the last file renamed, its entries
		// and summary following it.
		"wide file number": {func(t *testing.T, dir string, refs map[[16]byte]string) {
			last := lastNumber(t, dir)
			const wide = 1<<40 + 3
			if err := os.Rename(storeFile(dir, itoa(last)+".rdq"), storeFile(dir, itoa(wide)+".rdq")); err != nil {
				t.Fatal(err)
			}
			indexOf(t, dir, func(l []rfmt.MsgLocation) []rfmt.MsgLocation {
				for i := range l {
					if l[i].File == last {
						l[i].File = wide
					}
				}
				return l
			})
		}, true},
		// A wide file number whose low 32 bits are a real file's: the
		// entries must not be taken as that file's.
		"entry file number aliasing a real one in 32 bits": {func(t *testing.T, dir string, refs map[[16]byte]string) {
			indexOf(t, dir, func(l []rfmt.MsgLocation) []rfmt.MsgLocation {
				for i := range l {
					if l[i].File == 1 {
						l[i].File = 1<<32 + 1
					}
				}
				return l
			})
		}, false},
		// A referenced id's first copy is a bad body (the frame is taken,
		// its body is no term): the entry still holds it.
		"referenced first copy with a bad body": {func(t *testing.T, dir string, refs map[[16]byte]string) {
			p := storeFile(dir, "0.rdq")
			recs := fileRecords(t, p)
			if _, ok := refs[recs[0].MsgID]; !ok || recs[0].Offset != 0 {
				t.Skip("0.rdq does not start with a referenced record")
			}
			b := readFile(t, p)
			b[rfmt.RDQHeaderLen] = 0
			writeFile(t, p, b)
			if r := fileRecords(t, p)[0]; !r.BadBody || r.MsgID != recs[0].MsgID {
				t.Fatal("the damaged frame is not a bad-body record of the same id")
			}
		}, true},
		// A referenced record again at the end of the last file: a later
		// duplicate in a numbered file, entries unchanged.
		"later duplicate of a referenced record": {func(t *testing.T, dir string, refs map[[16]byte]string) {
			appendCopy(t, dir, refs)
		}, true},
		// The same, with the id's entry moved to the duplicate: the exact
		// join holds the entry's place, but the first copy mismatches.
		"entry points at the later duplicate": {func(t *testing.T, dir string, refs map[[16]byte]string) {
			r, last, off := appendCopy(t, dir, refs)
			indexOf(t, dir, func(l []rfmt.MsgLocation) []rfmt.MsgLocation {
				i := entryOf(t, l, r.MsgID)
				l[i].File, l[i].Offset = last, off
				return l
			})
		}, false},
		// Copies of referenced records in the transient store: never first
		// copies, never joined.
		"referenced records in the transient store too": {func(t *testing.T, dir string, refs map[[16]byte]string) {
			tdir := filepath.Join(dir, "msg_store_transient")
			if err := os.MkdirAll(tdir, 0o755); err != nil {
				t.Fatal(err)
			}
			writeFile(t, filepath.Join(tdir, "0.rdq"), readFile(t, storeFile(dir, "0.rdq")))
		}, true},
		"referenced records only in the transient store": {func(t *testing.T, dir string, refs map[[16]byte]string) {
			tdir := filepath.Join(dir, "msg_store_transient")
			if err := os.MkdirAll(tdir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(storeFile(dir, "1.rdq"), filepath.Join(tdir, "1.rdq")); err != nil {
				t.Fatal(err)
			}
		}, false},
		// The dump cut in the middle of an object: the entries before the
		// cut (verify's reading refuses the dump whole).
		"dump cut short": {func(t *testing.T, dir string, refs map[[16]byte]string) {
			p := storeFile(dir, "msg_store_index.ets")
			b := readFile(t, p)
			writeFile(t, p, b[:len(b)/2+3])
		}, false},
		// Entries swapped in place (file and offset exchanged between two
		// referenced ids of the same size would agree; of different sizes
		// must not).
		"two entries' places swapped": {func(t *testing.T, dir string, refs map[[16]byte]string) {
			indexOf(t, dir, func(l []rfmt.MsgLocation) []rfmt.MsgLocation {
				l[3].File, l[5].File = l[5].File, l[3].File
				l[3].Offset, l[5].Offset = l[5].Offset, l[3].Offset
				return l
			})
		}, false},
		// Entries in another order: a multiset, not a sequence.
		"entries reversed": {func(t *testing.T, dir string, refs map[[16]byte]string) {
			indexOf(t, dir, func(l []rfmt.MsgLocation) []rfmt.MsgLocation {
				for i, j := 0, len(l)-1; i < j; i, j = i+1, j-1 {
					l[i], l[j] = l[j], l[i]
				}
				return l
			})
		}, true},
	}
	for name, a := range attacks {
		t.Run(name, func(t *testing.T) {
			root, sum := genClean(t)
			dir := sum.VHostDir
			a.damage(t, dir, sum.Refs)
			want, _ := leanKeep(t, root, dir, true)
			got, digest := leanKeep(t, root, dir, false)
			if got != want {
				t.Errorf("digest %v: findings differ from the exact join's:\nexact  %.2000s\ndigest %.2000s", digest, want, got)
			}
			if digest != a.agree {
				t.Errorf("digests agreed: %v, want %v", digest, a.agree)
			}
			if e, d := scanFindings(t, true, root, dir), scanFindings(t, false, root, dir); e != d {
				t.Errorf("Scan without a record callback differs from Scan with one:\nwith    %.2000s\nwithout %.2000s", e, d)
			}
		})
	}
}

// sparse writes a file at p just over MaxFileSize (no blocks): the scan
// fails it before reading a byte.
func sparse(t *testing.T, p string) {
	t.Helper()
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(MaxFileSize + 1); err != nil {
		t.Fatal(err)
	}
}

// lastNumber is the highest .rdq number of the vhost's persistent store.
func lastNumber(t *testing.T, dir string) int64 {
	t.Helper()
	files, err := listRDQ(filepath.Join(dir, "msg_store_persistent"))
	if err != nil || len(files) < 3 {
		t.Fatalf("%d files: %v", len(files), err)
	}
	return files[len(files)-1].num
}

// appendCopy appends the first referenced record of 0.rdq to the last
// file and returns it, the last file's number and the copy's offset.
func appendCopy(t *testing.T, dir string, refs map[[16]byte]string) (*Record, int64, int64) {
	t.Helper()
	r, _ := firstRef(t, dir, 0, refs)
	frame := readFile(t, storeFile(dir, "0.rdq"))[r.Offset : r.Offset+r.TotalSize]
	last := lastNumber(t, dir)
	p := storeFile(dir, itoa(last)+".rdq")
	b := readFile(t, p)
	off := int64(len(b))
	writeFile(t, p, append(b, frame...))
	return r, last, off
}

// TestCleanDigestPartialFileSameNumber: a file that fails part way (a
// fault while it is walked: it shrank under the scan) keeps the records
// walked so far, and the exact join takes them: a later file with an
// earlier file's number overrides the places it has a record at, which
// gives the entry there a finding. The file is never classified, so the
// digests alone would still agree: the number seen twice must make the
// digest step aside. (No store on disk fails this way on its own: the
// failed file is handed to the ordered phase directly.)
func TestCleanDigestPartialFileSameNumber(t *testing.T) {
	root, sum := genClean(t)
	dir := sum.VHostDir
	r, _ := firstRef(t, dir, 1, sum.Refs)
	other := *r
	other.MsgID = [16]byte{0xab, 0xcd}
	failed := func() *fileJob {
		return &fileJob{fs: &FileScan{Path: "01.rdq", Number: 1, Err: fileview.ErrFault, Records: []*Record{&other}}}
	}
	for _, exact := range []bool{true, false} {
		v, s, err := scanVHostKeep(context.Background(), root, dir,
			VHostOptions{Options: scan.Options{Jobs: 2}, exactIndex: exact})
		if err != nil {
			t.Fatal(err)
		}
		before := len(s.lidx.findings(v))
		s.ordered(failed(), false)
		if exact {
			if after := len(s.lidx.findings(v)); after != before+1 {
				t.Errorf("exact join: %d index findings after the failed file, %d before: want one more", after, before)
			}
		} else if s.cdig == nil {
			t.Error("the digests disagreed on the undamaged store")
		} else if s.cdig.agrees(s.seen, s.lidx) {
			t.Error("the digests agree after a failed file with records overrode a place")
		}
		s.free()
	}
}
