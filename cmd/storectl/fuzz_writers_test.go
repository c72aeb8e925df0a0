package main

import (
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/storectl/storectl/internal/testutil"
)

// writerFixtures are the stores FuzzWriters mutates, with the writers run
// on each.
var writerFixtures = []struct {
	tarball, data string
	cmds          [][]string
}{
	{"rocketmq/rmq533-c-stale.tar.gz", "store", [][]string{{"truncate"}, {"rebuild-index", "--cq-file-size", "1000"}}},
	{"rabbitmq-4.0/datasets/crash.tar.gz", rabbit40, [][]string{{"truncate"}, {"harden", "--broker-version", "3.10.8"}, {"rebuild-index"}}},
}

// oddNames are what FuzzWriters renames store files and dirs to: escape
// sequences, a newline that would forge a table row, bytes that are not
// UTF-8, a bidi override.
var oddNames = []string{
	"\x1b[31mRED\x1b[0m\nFAKE: clean (exit 0)\x1b]0;pwned\a",
	"\x1b[2J",
	"name\xff\xfe",
	"\u202etxt.exe",
}

// FuzzWriters runs a writer of the CLI (truncate, rebuild-index, harden;
// dry run or --apply --yes) as a child process on a fixture mutated as the
// input says: up to 4 mutations, 4 bytes each (kind, file, offset): a bit
// flip, a file replaced by a symlink to a copy outside the data dir or to
// another store file, by a FIFO, renamed (or its dir renamed) to an odd
// name, or truncated. It asserts:
//   - no panic, an exit code of the contract (0-5), the summary line last;
//   - no byte outside the data dir and the backup dir changes (the copy a
//     symlink points at included), and no lock or stage file is left
//     beside the data dir;
//   - without --apply, nothing inside the data dir changes (bytes, modes,
//     mtimes, links);
//   - an apply that wrote a backup (whatever its exit code) is undone by
//     a plain undo --apply --yes to the mutated tree, byte for byte; one
//     that wrote none changed nothing.
//
// The seed corpus (testdata/fuzz/FuzzWriters and the f.Add seeds) runs
// in make test; `go test -fuzz FuzzWriters ./cmd/storectl` explores more.
func FuzzWriters(f *testing.F) {
	// first byte: fixture and command and --apply; then mutations
	f.Add([]byte{0x00})                         // truncate dry run, unmutated
	f.Add([]byte{0x80, 0, 3, 0x10, 0x00})       // truncate --apply after a bit flip in a commitlog file
	f.Add([]byte{0x81, 1, 5, 0, 0})             // rebuild-index --apply, a store file a symlink out of the data dir
	f.Add([]byte{0x02, 3, 9, 0, 0})             // rabbit truncate dry run, a FIFO in the store
	f.Add([]byte{0x83, 4, 12, 0, 0})            // harden --apply, a renamed queue dir with escapes
	f.Add([]byte{0x84, 5, 20, 0x40, 0x00})      // rabbit rebuild-index --apply on a cut file
	f.Add([]byte{0x03, 2, 1, 0, 0, 0, 7, 1, 2}) // harden dry run, a symlink inside, a bit flip
	tmpl := f.TempDir()
	var files [][]string // regular files of each fixture, relative to its data dir, sorted
	for i, fx := range writerFixtures {
		dst := filepath.Join(tmpl, strconv.Itoa(i))
		if err := testutil.UntarTo(testutil.Testdata(fx.tarball), dst); err != nil {
			f.Fatal(err)
		}
		var fs []string
		root := filepath.Join(dst, fx.data)
		if err := filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
			if err == nil && fi.Mode().IsRegular() {
				rel, _ := filepath.Rel(root, p)
				fs = append(fs, rel)
			}
			return err
		}); err != nil {
			f.Fatal(err)
		}
		sort.Strings(fs)
		files = append(files, fs)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) == 0 || len(in) > 1+4*4 {
			return
		}
		var n int // which writer: counted over the fixtures' commands
		for _, fx := range writerFixtures {
			n += len(fx.cmds)
		}
		pick := int(in[0]&0x7f) % n
		apply := in[0]&0x80 != 0
		fi := 0
		for pick >= len(writerFixtures[fi].cmds) {
			pick -= len(writerFixtures[fi].cmds)
			fi++
		}
		fx := writerFixtures[fi]
		root := memTempDir(t)
		work := filepath.Join(root, "w")
		outside := filepath.Join(root, "outside")
		for _, d := range []string{work, outside} {
			if err := os.Mkdir(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		copyTree(t, filepath.Join(tmpl, strconv.Itoa(fi), fx.data), filepath.Join(work, fx.data))
		data := filepath.Join(work, fx.data)
		bk := filepath.Join(root, "bk")
		mutate(t, data, outside, files[fi], in[1:])

		beforeData := stateTree(t, data)
		beforeOut := stateTree(t, root)
		args := append([]string(nil), fx.cmds[pick]...)
		if apply {
			args = append(args, "--apply", "--yes", "--backup-dir", bk)
		}
		args = append(args, "-o", "jsonl", data)
		code, out, errOut := sub{}.run(t, args...)
		if strings.Contains(errOut, "panic:") || strings.Contains(errOut, "goroutine ") {
			t.Fatalf("storectl %q panicked (exit %d):\n%s", args, code, errOut)
		}
		if code < 0 || code > 5 {
			t.Fatalf("storectl %q: exit %d, not a code of the contract\n%s%s", args, code, out, errOut)
		}
		summaryOf(t, code, out)
		t.Logf("%q after mutations %x: exit %d", args, in[1:], code)
		afterOut := stateTree(t, root)
		for k, v := range beforeOut {
			if strings.HasPrefix(k, "w/") || strings.HasPrefix(k, "bk") {
				continue
			}
			if afterOut[k] != v {
				t.Fatalf("storectl %q changed %s outside the data dir and the backup dir\n%s", args, k, out)
			}
		}
		for k := range afterOut {
			if _, ok := beforeOut[k]; !ok && !strings.HasPrefix(k, "bk") && !strings.HasPrefix(k, filepath.Join("w", fx.data)) {
				t.Fatalf("storectl %q left %s beside the data dir\n%s", args, k, out)
			}
		}
		afterData := stateTree(t, data)
		if !apply {
			if !equalTrees(beforeData, afterData) {
				t.Fatalf("dry run %q changed the data dir:\n%s", args, treeDiff(beforeData, afterData))
			}
			return
		}
		if _, err := os.Stat(filepath.Join(bk, "manifest.json")); err != nil {
			if !equalTrees(beforeData, afterData) {
				t.Fatalf("%q changed the data dir without a backup manifest (exit %d):\n%s", args, code, treeDiff(beforeData, afterData))
			}
			return
		}
		ucode, uout, uerr := sub{}.run(t, "undo", "--apply", "--yes", "-o", "jsonl", bk)
		summaryOf(t, ucode, uout)
		if ucode != exitOK {
			t.Fatalf("undo after %q: exit %d\n%s%s", args, ucode, uout, uerr)
		}
		if undone := stateTree(t, data); !equalTrees(beforeData, undone) {
			t.Fatalf("undo after %q does not give the data dir back:\n%s", args, treeDiff(beforeData, undone))
		}
		t.Logf("undone byte for byte")
	})
}

// mutate applies the mutations m (4 bytes each: kind, file, offset hi,
// offset lo) to the store under data; files are its regular files.
// outside is a dir beside the data dir that symlinks may point into.
func mutate(t *testing.T, data, outside string, files []string, m []byte) {
	t.Helper()
	gone := map[string]bool{} // files no longer regular (or renamed away)
	for i := 0; i+4 <= len(m); i += 4 {
		rel := files[int(m[i+1])%len(files)]
		if gone[rel] {
			continue
		}
		p := filepath.Join(data, rel)
		st, err := os.Stat(p)
		if err != nil {
			continue // under a dir an earlier mutation renamed
		}
		off := (int64(m[i+2])<<8 | int64(m[i+3])) * 64
		switch m[i] % 6 {
		case 0: // bit flip
			if st.Size() == 0 {
				continue
			}
			off %= st.Size()
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			b[off] ^= 1 << (m[i+3] % 8)
			if err := os.WriteFile(p, b, st.Mode()); err != nil {
				t.Fatal(err)
			}
			continue
		case 1: // a symlink to a copy outside the data dir
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			target := filepath.Join(outside, strconv.Itoa(i))
			if err := os.WriteFile(target, b, st.Mode()); err != nil {
				t.Fatal(err)
			}
			must(t, os.Remove(p))
			must(t, os.Symlink(target, p))
		case 2: // a symlink to another store file
			other := files[(int(m[i+1])+1+int(m[i+3]))%len(files)]
			if other == rel {
				continue
			}
			must(t, os.Remove(p))
			must(t, os.Symlink(filepath.Join(data, other), p))
		case 3: // a FIFO nobody writes to
			must(t, os.Remove(p))
			must(t, syscall.Mkfifo(p, 0o644))
		case 4: // an odd name for the file, or for its dir
			odd := oddNames[int(m[i+3])%len(oddNames)]
			from := p
			if m[i+2]&1 == 1 && filepath.Dir(rel) != "." {
				from = filepath.Dir(p)
			}
			if err := os.Rename(from, filepath.Join(filepath.Dir(from), filepath.Base(from)+odd)); err != nil {
				t.Fatal(err)
			}
			if from != p { // every file under the dir moved
				for _, f := range files {
					if strings.HasPrefix(f, filepath.Dir(rel)+string(filepath.Separator)) {
						gone[f] = true
					}
				}
			}
		case 5: // cut the file short
			must(t, os.Truncate(p, off%(st.Size()+1)))
			continue
		}
		gone[rel] = true
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
