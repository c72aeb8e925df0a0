package rabbitmq

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/storectl/storectl/internal/testutil"
	rfmt "github.com/storectl/storectl/pkg/format/rabbitmq"
	"github.com/storectl/storectl/pkg/repair"
	rscan "github.com/storectl/storectl/pkg/scan/rabbitmq"
)

// liveRecord is a referenced record of the real broker's oracle.
type liveRecord struct {
	file   string // N.rdq
	offset int64
	total  int64
}

// oracleLive reads the 4.0.5 oracle of a dataset: the records the real
// scan_file_for_valid_messages/1 found (scan/msg_store_persistent-N.rdq.jsonl)
// whose msg id a .qi references as a shared-store message (qi-refs.tsv);
// the first copy of an id in file order counts.
func oracleLive(t *testing.T, dataset string) []liveRecord {
	t.Helper()
	res := testutil.Testdata("rabbitmq-4.0", "results", dataset)
	f, err := os.Open(filepath.Join(res, "qi-refs.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	refs := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if c := strings.Fields(sc.Text()); len(c) == 4 {
			refs[c[3]] = true
		}
	}
	if len(refs) == 0 {
		t.Fatalf("%s: no references in qi-refs.tsv", dataset)
	}
	names, err := filepath.Glob(filepath.Join(res, "scan", "msg_store_persistent-*.rdq.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var out []liveRecord
	seen := map[string]bool{}
	for _, p := range names {
		file := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(p), "msg_store_persistent-"), ".jsonl")
		jsonLines(t, p, func(l oracleLine) {
			if refs[l.MsgID] && !seen[l.MsgID] {
				seen[l.MsgID] = true
				out = append(out, liveRecord{file, l.Offset, l.TotalSize})
			}
		})
	}
	if len(seen) != len(refs) {
		t.Fatalf("%s: the oracle locates %d of %d referenced msg ids", dataset, len(seen), len(refs))
	}
	return out
}

// TestHardenFixedPoint4: on the real RabbitMQ 4.0.5 datasets (compaction
// holes), read by a 3.10.8 broker and by "every version", ONE harden plan
// is enough: after one apply the generation-1 model (ScanGen1) and the
// generation-2 model (ScanData) find every referenced record of the real
// broker's oracle at its offset, no record byte changed, a fresh ScanVHost
// reports no scanner hazard at all and the report leaves nothing unfixed;
// undo restores the tree byte for byte.
func TestHardenFixedPoint4(t *testing.T) {
	for _, ds := range []string{"crash", "clean-shutdown"} {
		live := oracleLive(t, ds)
		dir := untarNode(t, testutil.Testdata("rabbitmq-4.0", "datasets", ds+".tar.gz"))
		root, vdir := vhostOf(t, dir)
		store := filepath.Join(vdir, "msg_store_persistent")
		before := testutil.TreeHash(t, root)
		orig := map[string][]byte{}
		for _, r := range live {
			if orig[r.file] == nil {
				orig[r.file] = hdRead(t, filepath.Join(store, r.file))
			}
		}
		for _, ver := range []string{"3.10.8", ""} {
			name := ds + "@" + ver
			p, rep, err := PlanHarden(context.Background(), rscan.Config{Root: root, VHostDirs: []string{vdir}, BrokerVersion: ver})
			if err != nil {
				t.Fatal(err)
			}
			if len(rep.Unfixed) > 0 {
				t.Errorf("%s: unfixed hazards: %+v", name, rep.Unfixed)
			}
			if len(p.Actions) == 0 {
				t.Fatalf("%s: nothing planned", name)
			}
			bdir := filepath.Join(t.TempDir(), "backup")
			if _, err := repair.Apply(context.Background(), p, repair.ApplyOptions{BackupDir: bdir}); err != nil {
				t.Fatal(err)
			}
			after := map[string][]byte{}
			models := map[string][2][]rfmt.ScanRecord{}
			missed := 0
			for _, r := range live {
				b := after[r.file]
				if b == nil {
					b = hdRead(t, filepath.Join(store, r.file))
					after[r.file] = b
					if len(b) != len(orig[r.file]) {
						t.Fatalf("%s: %s changed size %d -> %d", name, r.file, len(orig[r.file]), len(b))
					}
					g1, err := rfmt.ScanGen1(b)
					if err != nil {
						t.Errorf("%s: %s: generation-1 model crashes: %v", name, r.file, err)
					}
					models[r.file] = [2][]rfmt.ScanRecord{g1.Records, rfmt.ScanData(b, rfmt.ScanOptions{})}
				}
				if !bytes.Equal(b[r.offset:r.offset+r.total], orig[r.file][r.offset:r.offset+r.total]) {
					t.Errorf("%s: the record at %s@%d changed", name, r.file, r.offset)
				}
				if m := models[r.file]; !hasRecord(m[0], r) || !hasRecord(m[1], r) {
					t.Errorf("%s: a scanner model misses the referenced record at %s@%d after one apply", name, r.file, r.offset)
					missed++
				}
			}
			v, err := rscan.ScanVHost(context.Background(), root, vdir, rscan.VHostOptions{BrokerVersion: ver})
			if err != nil {
				t.Fatal(err)
			}
			hazards := 0
			for _, f := range v.Findings {
				if hazardCodes[f.Code] {
					t.Errorf("%s: after one apply: %s %s: %s", name, f.Severity, f.Code, f.Message)
					hazards++
				}
			}
			t.Logf("%s: %d actions, %d holes; %d referenced records checked in %d files, %d missed; %d hazards left",
				name, len(p.Actions), len(rep.Holes), len(live), len(after), missed, hazards)
			if _, err := repair.Undo(context.Background(), bdir, repair.UndoOptions{Apply: true}); err != nil {
				t.Fatal(err)
			}
			testutil.SameTree(t, before, testutil.TreeHash(t, root))
		}
	}
}

func hasRecord(got []rfmt.ScanRecord, r liveRecord) bool {
	for _, g := range got {
		if g.Offset == r.offset && g.TotalSize == r.total {
			return true
		}
	}
	return false
}
