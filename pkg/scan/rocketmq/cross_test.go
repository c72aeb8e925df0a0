package rocketmq

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"testing"

	gen "github.com/storectl/storectl/internal/gen/rocketmq"
	"github.com/storectl/storectl/internal/testutil"
	rmq "github.com/storectl/storectl/pkg/format/rocketmq"
	"github.com/storectl/storectl/pkg/scan"
)

// referenceCross is the cross-file checks done the plain way: every valid
// record of the files the recovery walks, in order, against everything
// before it, with all state in memory. It shares nothing with cross.go
// but the finding texts' shape (code, path, offset, expected, actual).
func referenceCross(t *testing.T, root string, slack int64) []string {
	t.Helper()
	names, err := os.ReadDir(filepath.Join(root, "commitlog"))
	if err != nil {
		t.Fatal(err)
	}
	next := map[string]int64{}
	var maxTS int64
	var out []string
	for i, e := range names {
		base, err := rmq.ParseFileName(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(root, "commitlog", e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		rel := "commitlog/" + e.Name()
		r := rmq.NewReader(bytes.NewReader(b), int64(len(b)), base, 0)
		for r.Next() {
			m := r.Message()
			if m.Dispatched() {
				k := fmt.Sprintf("%s/%d", m.Topic, m.QueueID)
				want, seen := next[k]
				if seen && m.QueueOffset < want {
					out = append(out, fmt.Sprintf("%s %s@%d %d %d", CodeQueueRegress, rel, r.Offset(), want, m.QueueOffset))
				}
				if n := m.QueueOffset + m.InnerNum(); !seen && n > 0 || seen && n > want {
					next[k] = n
				}
			}
			if maxTS-m.StoreTimestamp > slack {
				out = append(out, fmt.Sprintf("%s %s@%d >= %d %d", CodeTimestampRegress, rel, r.Offset(), maxTS-slack, m.StoreTimestamp))
			}
			maxTS = max(maxTS, m.StoreTimestamp)
		}
		if r.End() != rmq.EndBlank || i == len(names)-1 {
			break // recovery stops in this file
		}
	}
	sort.Strings(out)
	return out
}

func crossFindings(res *scan.Result) []string {
	var out []string
	for _, f := range res.Findings {
		switch f.Code {
		case CodeQueueRegress:
			out = append(out, fmt.Sprintf("%s %s@%d %s %s", f.Code, f.Path, f.Offset, f.Expected, f.Actual))
		case CodeTimestampRegress:
			out = append(out, fmt.Sprintf("%s %s@%d %s %s", f.Code, f.Path, f.Offset, f.Expected, f.Actual))
		}
	}
	sort.Strings(out)
	return out
}

// TestCrossChecksMatchReference: the per-file cross checks, merged in file
// order (and rechecked where a file's assumption did not hold), give
// exactly the findings of the plain in-memory walk, with one job and with
// several, on every RocketMQ fixture and on generated stores whose files
// were made to disagree with what came before them: a queue going back at
// the start of a file, one going back in the middle, a store time going
// back an hour at the start of a file and one inside a file.
func TestCrossChecksMatchReference(t *testing.T) {
	roots := fixtureStoreRoots(t)
	clean := t.TempDir()
	if _, err := gen.Generate(clean, gen.Config{MappedFileSize: 1 << 20, TotalBytes: 6 << 20, Seed: 7, BodyMin: 10, BodyMax: 900, MaxBody: 900}); err != nil {
		t.Fatal(err)
	}
	damaged := t.TempDir()
	if _, err := gen.Generate(damaged, gen.Config{MappedFileSize: 1 << 20, TotalBytes: 6 << 20, Seed: 7, BodyMin: 10, BodyMax: 900, MaxBody: 900}); err != nil {
		t.Fatal(err)
	}
	damage(t, damaged)
	roots = append(roots, clean, damaged)
	rechecked := 0
	for _, root := range roots {
		want := referenceCross(t, root, DefaultTimestampSlack.Milliseconds())
		for _, jobs := range []int{1, 3} {
			res, err := ScanCommitLog(context.Background(), Config{Root: root}, scan.Options{Jobs: jobs})
			if err != nil || res.Incomplete {
				t.Fatalf("%s: %v %v", root, err, res.Errors)
			}
			if got := crossFindings(res); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("%s, %d jobs:\n got %v\nwant %v", root, jobs, got, want)
			}
		}
		if root == damaged {
			rechecked = len(want)
		}
	}
	if rechecked < 4 {
		t.Fatalf("the damaged store has %d cross-file findings, want at least 4", rechecked)
	}
}

// damage rewrites, in a generated store of at least 5 commitlog files,
// fields no CRC covers: the queue offset of the first dispatched record of
// file 2 (back to 0) and of a record in the middle of file 3, and the
// store time of the first record of file 4 and of a middle record of file
// 1 (an hour back).
func damage(t *testing.T, root string) {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(root, "commitlog", "*"))
	if len(files) < 5 {
		t.Fatalf("%d commitlog files", len(files))
	}
	sort.Strings(files)
	edit := func(file string, pick func(i int, m *rmq.Message) bool, do func(rec []byte, m *rmq.Message)) {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		base, _ := rmq.ParseFileName(filepath.Base(file))
		r := rmq.NewReader(bytes.NewReader(b), int64(len(b)), base, 0)
		for i := 0; r.Next(); i++ {
			m := r.Message()
			if !m.BornHostV6() && pick(i, m) {
				do(b[r.Offset():], m)
				if err := os.WriteFile(file, b, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
		}
		t.Fatalf("%s: no record to damage", file)
	}
	queueBack := func(rec []byte, m *rmq.Message) { binary.BigEndian.PutUint64(rec[20:], 0) }
	timeBack := func(rec []byte, m *rmq.Message) {
		binary.BigEndian.PutUint64(rec[56:], uint64(m.StoreTimestamp-3_600_000))
	}
	edit(files[2], func(i int, m *rmq.Message) bool { return m.Dispatched() && m.QueueOffset > 0 }, queueBack)
	edit(files[3], func(i int, m *rmq.Message) bool { return i > 200 && m.Dispatched() && m.QueueOffset > 0 }, queueBack)
	edit(files[4], func(i int, m *rmq.Message) bool { return true }, timeBack)
	edit(files[1], func(i int, m *rmq.Message) bool { return i > 100 }, timeBack)
}

// fixtureStoreRoots unpacks every RocketMQ fixture and returns the store
// root of each.
func fixtureStoreRoots(t *testing.T) []string {
	t.Helper()
	var roots []string
	tarballs, _ := filepath.Glob(testutil.Testdata("rocketmq", "*.tar.gz"))
	for _, tb := range tarballs {
		roots = append(roots, filepath.Join(testutil.Untar(t, tb), "store"))
	}
	if len(roots) == 0 {
		t.Fatal("no RocketMQ fixtures in testdata/rocketmq")
	}
	return roots
}
