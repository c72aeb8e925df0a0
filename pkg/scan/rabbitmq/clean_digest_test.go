package rabbitmq

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	gen "github.com/storectl/storectl/internal/gen/rabbitmq"
	"github.com/storectl/storectl/internal/testutil"
	rfmt "github.com/storectl/storectl/pkg/format/rabbitmq"
	"github.com/storectl/storectl/pkg/scan"
)

// leanKeep runs the scan of a vhost, with the exact index join from
// the start when exact is set, and returns its findings (as JSON) and
// whether the scan kept the digest (true) or joined entry by entry.
func leanKeep(t *testing.T, root, dir string, exact bool) (findings string, digest bool) {
	t.Helper()
	v, s, err := scanVHostKeep(context.Background(), root, dir,
		VHostOptions{Options: scan.Options{Jobs: 2}, exactIndex: exact})
	if err != nil {
		t.Fatal(err)
	}
	defer s.free()
	if s.lidx == nil {
		t.Fatal("no index held: the store has msg_store_index.ets")
	}
	b, _ := json.Marshal(v.Findings)
	return string(b), s.cdig != nil
}

// genClean writes a small generated store with the clean-shutdown files.
func genClean(t *testing.T) (root string, sum *gen.Summary) {
	t.Helper()
	root = t.TempDir()
	sum, err := gen.Generate(root, gen.Config{Seed: 5, Kind: gen.MC, TotalBytes: 2 << 20, FileLimit: 256 << 10,
		HoleEvery: 9, UnrefEvery: 7, CleanShutdown: true, KeepRecords: true})
	if err != nil {
		t.Fatal(err)
	}
	return root, sum
}

// TestCleanDigestAgrees: on stores whose msg_store_index.ets is right (the
// real 3.10 and 4.0 brokers' clean stops, and a generated clean store) the
// scan keeps only the digest, and reports what the exact join does.
func TestCleanDigestAgrees(t *testing.T) {
	type store struct{ root, dir string }
	stores := map[string]func() store{
		"generated": func() store { r, s := genClean(t); return store{r, s.VHostDir} },
		"rabbitmq/clean-shutdown": func() store {
			r, d := unpack(t, "clean-shutdown")
			return store{r, d}
		},
		"rabbitmq-4.0/clean-shutdown": func() store {
			r := testutil.Untar(t, testutil.Testdata("rabbitmq-4.0", "datasets", "clean-shutdown.tar.gz"))
			return store{r, vhostOf(r, "rmq40@localhost")}
		},
	}
	for name, mk := range stores {
		t.Run(name, func(t *testing.T) {
			st := mk()
			want, _ := leanKeep(t, st.root, st.dir, true)
			got, digest := leanKeep(t, st.root, st.dir, false)
			if !digest {
				t.Error("the digests disagreed on a store whose index is right: it was scanned twice")
			}
			if got != want {
				t.Errorf("findings differ from the exact join's:\nexact  %.1500s\ndigest %.1500s", want, got)
			}
		})
	}
}

// TestCleanDigestFallsBack: each way an index can be wrong makes the
// digests disagree (or is a case they cannot speak for), and the scan then
// joins entry by entry: the findings are the exact join's, and verify's
// name the damage.
func TestCleanDigestFallsBack(t *testing.T) {
	edit := func(f func([]rfmt.MsgLocation) []rfmt.MsgLocation) func(*testing.T, string) {
		return func(t *testing.T, dir string) {
			editIndex(t, filepath.Join(dir, "msg_store_persistent", "msg_store_index.ets"), f)
		}
	}
	cases := map[string]func(*testing.T, string){
		"ref count": edit(func(l []rfmt.MsgLocation) []rfmt.MsgLocation { l[3].RefCount++; return l }),
		"offset":    edit(func(l []rfmt.MsgLocation) []rfmt.MsgLocation { l[3].Offset++; return l }),
		"size":      edit(func(l []rfmt.MsgLocation) []rfmt.MsgLocation { l[3].TotalSize--; return l }),
		"file":      edit(func(l []rfmt.MsgLocation) []rfmt.MsgLocation { l[3].File = 9999; return l }),
		"removed":   edit(func(l []rfmt.MsgLocation) []rfmt.MsgLocation { return append(l[:3], l[4:]...) }),
		"duplicated": edit(func(l []rfmt.MsgLocation) []rfmt.MsgLocation {
			return append(l, l[3])
		}),
		"swapped ids": edit(func(l []rfmt.MsgLocation) []rfmt.MsgLocation {
			l[3].MsgID, l[4].MsgID = l[4].MsgID, l[3].MsgID
			return l
		}),
		// A second file with a number already used: the exact join lets
		// the later one override places, so the digest steps aside.
		"file number twice": func(t *testing.T, dir string) {
			store := filepath.Join(dir, "msg_store_persistent")
			writeFile(t, filepath.Join(store, "01.rdq"), readFile(t, filepath.Join(store, "0.rdq")))
			if err := os.Rename(filepath.Join(store, "01.rdq"), filepath.Join(store, "001.rdq")); err != nil {
				t.Fatal(err)
			}
		},
		// A file gone with its entries: its referenced ids have neither a
		// record nor an entry, which only the id table's check sees.
		"file and entries gone": func(t *testing.T, dir string) {
			store := filepath.Join(dir, "msg_store_persistent")
			if err := os.Remove(filepath.Join(store, "1.rdq")); err != nil {
				t.Fatal(err)
			}
			edit(func(l []rfmt.MsgLocation) []rfmt.MsgLocation {
				out := l[:0]
				for _, e := range l {
					if e.File != 1 {
						out = append(out, e)
					}
				}
				return out
			})(t, dir)
		},
	}
	for name, damage := range cases {
		t.Run(name, func(t *testing.T) {
			root, sum := genClean(t)
			damage(t, sum.VHostDir)
			want, _ := leanKeep(t, root, sum.VHostDir, true)
			got, digest := leanKeep(t, root, sum.VHostDir, false)
			if digest {
				t.Error("the digests agreed on a damaged index")
			}
			if got != want {
				t.Errorf("findings differ from the exact join's:\nexact  %.1500s\ndigest %.1500s", want, got)
			}
			// verify (digest, then the exact join) names the damage.
			fs := verifyWith(t, root, sum.VHostDir, "").Findings
			// Harmless to the broker: an entry twice (its ets table keeps
			// one), a file number twice (it opens one of the files).
			harmless := name == "duplicated" || name == "file number twice"
			if n := len(codes(fs, CodeIndexMismatch)) + len(codes(fs, CodeMessageMissing)); n == 0 && !harmless {
				t.Errorf("no index or missing-message finding: %s", summarize(fs))
			}
		})
	}
}

// TestSetDigest: the digest of a multiset does not depend on the order of
// its elements, and equal elements do not cancel.
func TestSetDigest(t *testing.T) {
	c := newCleanDigest()
	ids := [][16]byte{{1}, {2}, {3}}
	var a, b, twice, once setDigest
	for i := range ids {
		c.add(&a, ids[i], 1, int64(i), 10, 1)
		c.add(&b, ids[len(ids)-1-i], 1, int64(len(ids)-1-i), 10, 1)
	}
	if a != b {
		t.Error("the same elements in another order digest differently")
	}
	c.add(&twice, ids[0], 1, 0, 10, 1)
	c.add(&twice, ids[0], 1, 0, 10, 1)
	c.add(&once, ids[0], 1, 0, 10, 1)
	if twice.a == 0 || twice.a == once.a || twice.b == once.b {
		t.Error("an element added twice digests like none or one")
	}
	var other setDigest
	c.add(&other, ids[0], 1, 0, 10, 2) // one field differs
	if other == once {
		t.Error("elements that differ in one field digest the same")
	}
}
