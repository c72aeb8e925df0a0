package quorum_test

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"

	"github.com/storectl/storectl/internal/testutil"
	"github.com/storectl/storectl/pkg/scan"
	"github.com/storectl/storectl/pkg/scan/quorum"
)

// scanAll is verify's scan of node, incomplete or not.
func scanAll(t *testing.T, node string) *quorum.Result {
	t.Helper()
	res, err := quorum.Scan(context.Background(), quorum.Config{Root: node, Replay: true}, scan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { res.Close() })
	return res
}

// unreadFamily: the codes that say a file was not read, or what waits on
// one.
func unreadFamily(code string) bool {
	return strings.HasSuffix(code, ".unreadable") || strings.HasSuffix(code, "-unknown")
}

// concluded is the warnings and errors of res other than the unread
// family, as code@path.
func concluded(res *quorum.Result) []string {
	var out []string
	for _, f := range res.Findings {
		if (f.Severity == scan.Warning || f.Severity == scan.Error) && !unreadFamily(f.Code) {
			out = append(out, f.Code+"@"+f.Path)
		}
	}
	sort.Strings(out)
	return out
}

// dirInPlace replaces the file at node/rel with a directory.
func dirInPlace(t *testing.T, node, rel string) {
	t.Helper()
	p := filepath.Join(node, rel)
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(p, 0o755); err != nil {
		t.Fatal(err)
	}
}

// wantUnread checks that res is incomplete and names rel unreadable.
func wantUnread(t *testing.T, res *quorum.Result, code, rel string) {
	t.Helper()
	found := false
	for _, f := range findings(res, code) {
		found = found || f.Path == rel
	}
	if !res.Incomplete || !found {
		t.Fatalf("incomplete %v, %s %+v: want incomplete and %s named", res.Incomplete, code, findings(res, code), rel)
	}
}

// TestSystemDETSUnread: a directory under the name of names.dets or
// meta.dets (quorum/ and coordination/) is that file, unreadable (exit
// 3), not a replica dir: Q1 gave orphan-replica "replica dir meta.dets
// ... is not registered in names.dets" and config-bad "config lstat
// .../meta.dets/config". An unread names.dets makes every replica's
// registration unknown (registration-unknown, waiting on it): a replica
// the undamaged names.dets does not register (renamed, as in
// TestDamageOrphanReplica) is no orphan-replica then. Everything else
// concluded is what the undamaged copy gives.
func TestSystemDETSUnread(t *testing.T) {
	ds := qqDatasets(t)[0]
	base := testutil.CopyTree(t, ds.node)
	sys := filepath.Join(base, "quorum/rmq40@localhost")
	const orphan = "2F_QQ3ORPHAN0000001"
	if err := os.Rename(filepath.Join(sys, "2F_QQ3NI8QY1UQJC94"), filepath.Join(sys, orphan)); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(sys, orphan, "config")
	b, _ := os.ReadFile(cfg)
	if err := os.WriteFile(cfg, []byte(strings.ReplaceAll(string(b), "2F_QQ3NI8QY1UQJC94", orphan)), 0o644); err != nil {
		t.Fatal(err)
	}
	undamaged := verifyDir(t, base)
	want := concluded(undamaged)
	if len(findings(undamaged, quorum.CodeOrphanReplica)) != 1 {
		t.Fatalf("undamaged: no orphan-replica: %v", want)
	}
	for _, c := range []struct{ system, file string }{
		{quorum.SystemQuorum, "names.dets"}, {quorum.SystemQuorum, "meta.dets"},
		{quorum.SystemCoordination, "names.dets"}, {quorum.SystemCoordination, "meta.dets"},
	} {
		t.Run(c.system+"/"+c.file, func(t *testing.T) {
			node := testutil.CopyTree(t, base)
			rel := c.system + "/rmq40@localhost/" + c.file
			dirInPlace(t, node, rel)
			res := scanAll(t, node)
			wantUnread(t, res, quorum.Code(c.system, quorum.CodeUnreadable), rel)
			for _, s := range res.Systems {
				for _, r := range s.Replicas {
					if r.UID == c.file {
						t.Fatalf("%s taken for a replica dir", rel)
					}
				}
			}
			w := want
			if c.system == quorum.SystemQuorum && c.file == "names.dets" {
				w = nil
				for _, k := range want {
					if !strings.HasPrefix(k, quorum.CodeOrphanReplica+"@") {
						w = append(w, k)
					}
				}
				ru := findings(res, quorum.CodeRegistrationUnknown)
				if len(ru) != 1 || ru[0].Path != rel || len(ru[0].Details["replicas"].([]string)) != len(res.Systems[0].Replicas) ||
					ru[0].Details["waits_on"].([]string)[0] != rel {
					t.Fatalf("registration-unknown: %+v", ru)
				}
			}
			if got := concluded(res); strings.Join(got, "\n") != strings.Join(w, "\n") {
				t.Fatalf("concluded with %s unread:\n%s\nundamaged:\n%s", rel, strings.Join(got, "\n"), strings.Join(w, "\n"))
			}
		})
	}
}

// TestLogFileUnread: a directory in place of a replica's first segment
// or of the snapshot it recovers from leaves what the log holds unknown,
// not gone. Q2's qq4 with 00000001.segment unread gave no-snapshot-base
// "the log starts at index 2048 and no valid snapshot or checkpoint
// covers the entries before it"; Q1's qq1 with its snapshot.dat unread
// gave snapshot-bad "does not decode (... is a directory)", log-gap
// "index 1 is in no WAL or segment" and no-snapshot-base. Now the file is
// unreadable (exit 3), the queue's next start unknown, a log-unknown or
// snapshot-unknown warning waits on it, and everything else concluded is
// what the undamaged copy gives.
func TestLogFileUnread(t *testing.T) {
	qq := qqDatasets(t)
	for _, c := range []struct {
		name  string
		ds    dataset
		glob  string // the file, relative to the node dir
		code  string // the unknown finding
		queue string
	}{
		{"first segment", qq[1], "quorum/rmq40@localhost/2F_QQ4ZGQKO1W4CDKH/00000001.segment", quorum.CodeLogUnknown, "qq4"},
		{"snapshot", qq[0], "quorum/rmq40@localhost/2F_QQ109LB4B9AV3QD/snapshots/*/snapshot.dat", quorum.CodeSnapshotUnknown, "qq1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			want := concluded(verifyDir(t, c.ds.node))
			node := testutil.CopyTree(t, c.ds.node)
			m, _ := filepath.Glob(filepath.Join(node, c.glob))
			if len(m) != 1 {
				t.Fatalf("%s: %v", c.glob, m)
			}
			rel, _ := filepath.Rel(node, m[0])
			rel = filepath.ToSlash(rel)
			dirInPlace(t, node, rel)
			res := scanAll(t, node)
			wantUnread(t, res, quorum.CodeUnreadable, rel)
			if got := concluded(res); strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Fatalf("concluded with %s unread:\n%s\nundamaged:\n%s", rel, strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			q := queueLine(t, res, c.queue)
			un := findings(res, c.code)
			if len(un) != 1 || un[0].Path != q.Dir || un[0].Severity != scan.Warning {
				t.Fatalf("%s: %+v", c.code, un)
			}
			if w, _ := un[0].Details["waits_on"].([]string); len(w) != 1 || w[0] != rel {
				t.Fatalf("%s waits_on %v, want [%s]", c.code, un[0].Details["waits_on"], rel)
			}
			if q.NextStart.State != quorum.StartNotRead || !strings.Contains(q.NextStart.Reason, rel) {
				t.Fatalf("%s: %+v", c.queue, q.NextStart)
			}
		})
	}
}

// TestDamageBelowUnreadSnapshot: an entry at or below the index of a
// snapshot that could not be read may be one ra never reads: its failed
// CRC is no crash-loop. Q1's qq1 with an entry below its snapshot's index
// 0x2EE7 flipped gives a segment-crc warning ("ra does not read it"); with
// the snapshot.dat a dir as well it was an error "the queue crash-loops at
// the next start" and the entry was listed as damaged. Now it is the
// warning, waiting on the snapshot.
func TestDamageBelowUnreadSnapshot(t *testing.T) {
	ds := qqDatasets(t)[0]
	const uid = "2F_QQ109LB4B9AV3QD"
	var e *oracleRec
	for _, r := range testutil.ReadJSONL[oracleRec](t, filepath.Join(ds.results, "oracle", "quorum", uid, "00000006.segment.jsonl.gz")) {
		if r.Kind == "segment_entry" && r.Length > 100 && r.Index < 0x2EE7 {
			e = &r
			break
		}
	}
	if e == nil {
		t.Fatal("no entry below the snapshot in 00000006.segment")
	}
	seg := "quorum/rmq40@localhost/" + uid + "/00000006.segment"
	snaps, _ := filepath.Glob(filepath.Join(ds.node, "quorum/rmq40@localhost", uid, "snapshots", "*", "snapshot.dat"))
	if len(snaps) != 1 {
		t.Fatalf("snapshots: %v", snaps)
	}
	snapRel, _ := filepath.Rel(ds.node, snaps[0])
	snapRel = filepath.ToSlash(snapRel)
	for _, unread := range []bool{false, true} {
		node := testutil.CopyTree(t, ds.node)
		flip(t, filepath.Join(node, seg), e.Offset+e.Length-20)
		if unread {
			dirInPlace(t, node, snapRel)
		}
		res := scanAll(t, node)
		fs := findings(res, quorum.CodeSegmentCRC)
		if len(fs) != 1 || fs[0].Path != seg || fs[0].Severity != scan.Warning || fs[0].Details["index"] != e.Index {
			t.Fatalf("snapshot unread %v: segment-crc %+v", unread, fs)
		}
		q := queueLine(t, res, "qq1")
		if len(q.Damaged) != 0 || q.NextStart.State == quorum.StartCrashLoop || len(findings(res, quorum.CodeQueueDown)) != 0 {
			t.Fatalf("snapshot unread %v: qq1 %+v damaged %+v", unread, q.NextStart, q.Damaged)
		}
		if w, _ := fs[0].Details["waits_on"].([]string); unread && (len(w) != 1 || w[0] != snapRel) {
			t.Fatalf("waits_on %v, want [%s]", fs[0].Details["waits_on"], snapRel)
		}
	}
}

// TestClusterReplicaUnread: a replica some of whose files could not be
// read ends at an index only known from below, so the comparison of a
// cluster's replicas neither chooses it nor calls it behind. C1 with
// node a's WAL a dir called a's replicas replica-behind b's (their
// newest entries are in that WAL); now each of a's is replica-unknown
// waiting on the WAL, and the others are compared as with a not given:
// c behind b.
func TestClusterReplicaUnread(t *testing.T) {
	d := testutil.SharedUntar(t, testutil.Testdata("rabbitmq-3.10-qq", "datasets", "C1.tar.gz"))
	const wal = "quorum/rmq310a@localhost/00000006.wal"
	var nodes, notA []quorum.NodeScan
	for _, n := range c1Nodes {
		dir := filepath.Join(d, n)
		if n == "rmq310a@localhost" {
			dir = testutil.CopyTree(t, dir)
			dirInPlace(t, dir, wal)
			res := scanAll(t, dir)
			wantUnread(t, res, quorum.CodeUnreadable, wal)
			nodes = append(nodes, quorum.NodeScan{DataDir: dir, Result: res})
			continue
		}
		ns := quorum.NodeScan{DataDir: dir, Result: verifyDir(t, dir)}
		nodes, notA = append(nodes, ns), append(notA, ns)
	}
	var got, want []string
	unknown := 0
	for _, f := range quorum.ClusterFindings(quorum.CompareReplicas(nodes), nodes[1].DataDir) {
		if f.Code == quorum.CodeReplicaUnknown {
			unknown++
			if w, _ := f.Details["waits_on"].([]string); f.Details["node"] != "rmq310a@localhost" || len(w) != 1 || w[0] != wal {
				t.Fatalf("replica-unknown: %+v", f)
			}
			continue
		}
		got = append(got, f.Code+"@"+f.Path)
	}
	for _, f := range quorum.ClusterFindings(quorum.CompareReplicas(notA), nodes[1].DataDir) {
		want = append(want, f.Code+"@"+f.Path)
	}
	sort.Strings(got)
	sort.Strings(want)
	if unknown != 3 {
		t.Errorf("%d replica-unknown findings, want one for each of a's 3 replicas", unknown)
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") || len(want) == 0 {
		t.Fatalf("with a's WAL unread:\n%s\nwithout a:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestSystemDirNotADir: a FIFO in the place of a node's ra system dir
// (quorum/<node>) is that dir, unreadable (exit 3), never opened: Q1 with
// quorum/rmq40@localhost a FIFO was "problems found" (exit 1), the quorum
// system not detected, its queues not mentioned. Detection (scan.Detect)
// and the scanner's own search (FindSystems) both give it; the
// coordination system is read as usual.
func TestSystemDirNotADir(t *testing.T) {
	ds := qqDatasets(t)[0]
	node := testutil.CopyTree(t, ds.node)
	const rel = "quorum/rmq40@localhost"
	if err := os.RemoveAll(filepath.Join(node, rel)); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(node, rel), 0o644); err != nil {
		t.Fatal(err)
	}
	tg, err := scan.Detect(node, "")
	if err != nil {
		t.Fatal(err)
	}
	var systems []quorum.SystemDir
	for _, d := range tg.RaDirs {
		sys := quorum.SystemQuorum
		if filepath.Base(filepath.Dir(d)) == quorum.SystemCoordination {
			sys = quorum.SystemCoordination
		}
		systems = append(systems, quorum.SystemDir{System: sys, Path: d, Node: filepath.Base(d)})
	}
	for name, cfg := range map[string]quorum.Config{
		"detect":      {Root: node, Replay: true, Systems: systems},
		"FindSystems": {Root: node, Replay: true},
	} {
		res, err := quorum.Scan(context.Background(), cfg, scan.Options{})
		if err != nil {
			t.Fatal(err)
		}
		wantUnread(t, res, quorum.CodeUnreadable, rel)
		coord := false
		for _, s := range res.Systems {
			coord = coord || s.System == quorum.SystemCoordination && len(s.Replicas) > 0
		}
		if !coord {
			t.Fatalf("%s: the coordination system was not read", name)
		}
		res.Close()
	}
}

// TestConfigUnreadIsNotNoConfig: a replica whose config is a dir is not
// "no-config" (Q1's qq2 said next_start no-config, "the replica's config
// file is missing or does not parse"): its next start is unknown, the
// reason naming the config; the config deleted is still no-config.
func TestConfigUnreadIsNotNoConfig(t *testing.T) {
	ds := qqDatasets(t)[0]
	const rel = "quorum/rmq40@localhost/2F_QQ2Q5L9DBJGSLBP/config"
	for _, how := range []string{"directory", "deleted"} {
		node := testutil.CopyTree(t, ds.node)
		if how == "directory" {
			dirInPlace(t, node, rel)
		} else if err := os.Remove(filepath.Join(node, rel)); err != nil {
			t.Fatal(err)
		}
		res := scanAll(t, node)
		var q *quorum.Queue
		for i := range res.Queues {
			if res.Queues[i].UID == "2F_QQ2Q5L9DBJGSLBP" {
				q = &res.Queues[i]
			}
		}
		if q == nil {
			t.Fatalf("%s: no queue line for 2F_QQ2Q5L9DBJGSLBP", how)
		}
		switch {
		case how == "directory" && (q.NextStart.State != quorum.StartNotRead || !strings.Contains(q.NextStart.Reason, rel) || q.NextStart.Exact):
			t.Fatalf("config a dir: %+v", q.NextStart)
		case how == "directory":
			wantUnread(t, res, quorum.CodeUnreadable, rel)
		case q.NextStart.State != quorum.StartNoConfig:
			t.Fatalf("config deleted: %+v", q.NextStart)
		}
	}
}
