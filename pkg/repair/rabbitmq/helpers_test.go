package rabbitmq

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/storectl/storectl/internal/testutil"
	"github.com/storectl/storectl/pkg/repair"
	"github.com/storectl/storectl/pkg/scan"
	rscan "github.com/storectl/storectl/pkg/scan/rabbitmq"
)

// jsonLines decodes every line of a jsonl file into fn's argument.
func jsonLines[T any](t *testing.T, path string, fn func(T)) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		if len(strings.TrimSpace(sc.Text())) == 0 {
			continue
		}
		var v T
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		fn(v)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
}

// untarNode unpacks a dataset and returns the dir holding the node dir.
func untarNode(t *testing.T, tarball string) string {
	t.Helper()
	return testutil.Untar(t, tarball)
}

// vhostOf returns the data dir (node dir) and the only vhost dir.
func vhostOf(t *testing.T, dir string) (root, vhost string) {
	t.Helper()
	tg, err := scan.Detect(dir, scan.RabbitMQ)
	if err != nil {
		t.Fatal(err)
	}
	if len(tg.VHostDirs) != 1 {
		t.Fatalf("%s: %d vhosts, want 1", dir, len(tg.VHostDirs))
	}
	return tg.Root, tg.VHostDirs[0]
}

// currentRDQ returns the highest-numbered .rdq of a vhost's persistent store.
func currentRDQ(t *testing.T, vhost string) string {
	t.Helper()
	dir := filepath.Join(vhost, "msg_store_persistent")
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	best, bestN := "", int64(-1)
	for _, e := range ents {
		n, err := strconv.ParseInt(strings.TrimSuffix(e.Name(), ".rdq"), 10, 64)
		if err == nil && strings.HasSuffix(e.Name(), ".rdq") && n > bestN {
			best, bestN = e.Name(), n
		}
	}
	if best == "" {
		t.Fatalf("%s: no .rdq", dir)
	}
	return filepath.Join(dir, best)
}

// plan runs PlanTruncate on dir and checks every action carries a reason
// and a loss note.
func plan(t *testing.T, dir string) (*repair.Plan, *TruncateReport) {
	t.Helper()
	p, rep, err := PlanTruncate(context.Background(), rscan.Config{Root: dir})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range p.Actions {
		if a.Reason == "" || a.Lost.Note == "" {
			t.Errorf("action %s (%s %s) lacks a reason or loss note", a.ID, a.Op, a.Path)
		}
	}
	return p, rep
}

// apply applies p with its backup in a fresh temp dir.
func apply(t *testing.T, p *repair.Plan, faults repair.Faults) (*repair.ApplyReport, string, error) {
	t.Helper()
	bdir := filepath.Join(t.TempDir(), "backup")
	rep, err := repair.Apply(context.Background(), p, repair.ApplyOptions{BackupDir: bdir, Faults: faults})
	return rep, bdir, err
}

// scanRecords runs rscan.ScanVHost (the one streaming scan) and returns its
// result with, in place of the released files, a copy of each file its
// per-file callback was handed: the records as the scan held them.
func scanRecords(t testing.TB, root, vhost string, o rscan.VHostOptions) *rscan.VHostScan {
	t.Helper()
	var kept []*rscan.FileScan
	o.EachFile = func(_ *rscan.VHostScan, f *rscan.FileScan) error {
		c := *f
		c.Hazards = slices.Clone(f.Hazards)
		kept = append(kept, &c)
		return nil
	}
	v, err := rscan.ScanVHost(context.Background(), root, vhost, o)
	if err != nil {
		t.Fatal(err)
	}
	if len(kept) != len(v.Files) {
		t.Fatalf("%d files handed over, %d scanned", len(kept), len(v.Files))
	}
	v.Files = kept
	return v
}

// fixedTime is the mtime of test-made files, so every copy of a test store
// has the same precondition and one plan serves them all.
var fixedTime = time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)

// tornCleanStore unpacks a clean-shutdown dataset and appends the first
// half of the current file's first record to it: a torn tail after a
// clean shutdown. It returns the unpack dir, the current file, its
// original size, the torn record's store msg id and the appended bytes.
func tornCleanStore(t *testing.T, tarball string) (dir, rdq string, size int64, id string, torn []byte) {
	t.Helper()
	dir = untarNode(t, tarball)
	root, vhost := vhostOf(t, dir)
	rdq = currentRDQ(t, vhost)
	v := scanRecords(t, root, vhost, rscan.VHostOptions{})
	var first *rscan.Record
	for _, f := range v.Files {
		if filepath.Join(root, f.Path) == rdq && len(f.Records) > 0 {
			first = f.Records[0]
		}
	}
	if first == nil {
		t.Fatalf("%s: no record in the current file", rdq)
	}
	b, err := os.ReadFile(rdq)
	if err != nil {
		t.Fatal(err)
	}
	torn = append([]byte(nil), b[first.Offset:first.Offset+first.TotalSize/2]...)
	appendTorn(t, rdq, torn)
	return dir, rdq, int64(len(b)), first.ID(), torn
}

// appendTorn appends torn to the file and gives it fixedTime as mtime.
func appendTorn(t *testing.T, rdq string, torn []byte) {
	t.Helper()
	f, err := os.OpenFile(rdq, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(torn); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(rdq, fixedTime, fixedTime); err != nil {
		t.Fatal(err)
	}
}
