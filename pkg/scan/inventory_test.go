package scan

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/storectl/storectl/internal/testutil"
)

// The fixtures the inventory tests share, unpacked once per package run.
var (
	fixOnce sync.Once
	fixDir  string
	fixErr  error
)

// fixtures unpacks Q3 (RabbitMQ 4.0.5: classic queue, quorum queue,
// stream), the 3.10.8 crash node, RocketMQ 5.3.3 t1 (timer store) and
// dl1 (DLedger) into one temp dir shared by the package's tests.
func fixtures(t *testing.T) string {
	t.Helper()
	fixOnce.Do(func() {
		fixDir, fixErr = os.MkdirTemp("", "storectl-inventory-")
		if fixErr != nil {
			return
		}
		for sub, tgz := range map[string]string{
			"Q3":   testutil.Testdata("rabbitmq-4.0-qq-stream", "datasets", "Q3.tar.gz"),
			"r310": testutil.Testdata("rabbitmq", "datasets", "crash.tar.gz"),
			"t1":   testutil.Testdata("rocketmq-5x", "rmq533-t1-clean.tar.gz"),
			"dl1":  testutil.Testdata("rocketmq-5x", "rmq533-dl1-clean.tar.gz"),
		} {
			if fixErr = testutil.UntarTo(tgz, filepath.Join(fixDir, sub)); fixErr != nil {
				return
			}
		}
	})
	if fixErr != nil {
		t.Fatal(fixErr)
	}
	return fixDir
}

func TestMain(m *testing.M) {
	code := m.Run()
	if fixDir != "" {
		os.RemoveAll(fixDir)
	}
	os.Exit(code)
}

// treeFile is one non-directory entry of a tree, found by a walk of the
// test's own.
type treeFile struct {
	rel  string // relative to the target's root
	size int64  // regular files only; 0 for symlinks, FIFOs, ...
}

func walkTree(t *testing.T, tg Target) []treeFile {
	t.Helper()
	var out []treeFile
	start := tg.Path
	err := filepath.Walk(start, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if fi.IsDir() {
			return nil
		}
		r, err := filepath.Rel(tg.Root, p)
		if err != nil {
			return err
		}
		var size int64
		if fi.Mode().IsRegular() {
			size = fi.Size()
		}
		out = append(out, treeFile{filepath.ToSlash(r), size})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// within reports whether the file rel lies in the component path cp.
func within(rel, cp string) bool {
	if cp == "." {
		return true
	}
	return rel == cp || strings.HasPrefix(rel, cp+"/")
}

// checkInvariants holds for every tree, every command and whatever the
// registry says is read: every byte of the tree is in exactly one
// component, each component's path holds its files, and each component
// that was not checked has exactly one coverage.unchecked finding naming
// it and its bytes, a warning exactly when it holds messages; a checked
// component has none.
func checkInvariants(t *testing.T, tg Target, command string) *Inventory {
	t.Helper()
	inv := TakeInventory(tg)
	inv.Check(command)
	if len(inv.Errors) > 0 {
		t.Fatalf("inventory errors: %v", inv.Errors)
	}
	type key struct{ name, path string }
	want := map[key]*Component{}
	var files int
	var bytes int64
	for _, f := range walkTree(t, tg) {
		p := Classify(tg, f.rel)
		if _, ok := Components[p.Name]; !ok {
			t.Fatalf("%s: component %q is not in the registry", f.rel, p.Name)
		}
		if !within(f.rel, p.Path) && !strings.HasPrefix(f.rel, "../") {
			t.Errorf("%s: put in %s at %q, which does not hold it", f.rel, p.Name, p.Path)
		}
		c := want[key{p.Name, p.Path}]
		if c == nil {
			c = &Component{Name: p.Name, Path: p.Path}
			want[key{p.Name, p.Path}] = c
		}
		c.Files++
		c.Bytes += f.size
		files++
		bytes += f.size
	}
	var gotFiles int
	var gotBytes int64
	seen := map[key]bool{}
	for _, c := range inv.Components {
		k := key{c.Name, c.Path}
		if seen[k] {
			t.Errorf("component %s at %s listed twice", c.Name, c.Path)
		}
		seen[k] = true
		w := want[k]
		if w == nil || w.Files != c.Files || w.Bytes != c.Bytes {
			t.Errorf("component %s at %s: %d files, %d bytes; the tree has %+v", c.Name, c.Path, c.Files, c.Bytes, w)
		}
		gotFiles += c.Files
		gotBytes += c.Bytes
		spec := Components[c.Name]
		if c.HoldsMessages && !spec.Messages {
			t.Errorf("%s holds messages but its kind cannot", c.Name)
		}
		if c.Checked != (spec.ReadBy != "" && Reads(command, spec.ReadBy)) {
			t.Errorf("%s: checked %v under %s, registry says read by %q", c.Name, c.Checked, command, spec.ReadBy)
		}
	}
	if gotFiles != files || gotBytes != bytes || len(seen) != len(want) {
		t.Fatalf("components hold %d files, %d bytes in %d components; the tree has %d files, %d bytes in %d",
			gotFiles, gotBytes, len(seen), files, bytes, len(want))
	}
	fs := inv.Findings()
	for _, c := range inv.Components {
		var mine []Finding
		for _, f := range fs {
			if f.Details["component"] == c.Name && f.Path == c.Path {
				mine = append(mine, f)
			}
		}
		if c.Checked {
			if len(mine) != 0 {
				t.Errorf("checked component %s at %s has coverage findings %+v", c.Name, c.Path, mine)
			}
			continue
		}
		if len(mine) != 1 {
			t.Fatalf("unchecked component %s at %s has %d coverage findings, want 1", c.Name, c.Path, len(mine))
		}
		f := mine[0]
		wantSev := Info
		if c.HoldsMessages {
			wantSev = Warning
		}
		if f.Code != UncheckedCode(tg.Store) || f.Severity != wantSev || f.Length != c.Bytes ||
			!strings.Contains(f.Message, strconv.FormatInt(c.Bytes, 10)) {
			t.Errorf("unchecked %s: finding %+v, want %s %s naming %d bytes", c.Name, f, UncheckedCode(tg.Store), wantSev, c.Bytes)
		}
	}
	if len(fs) != countUnchecked(inv) {
		t.Errorf("%d coverage findings for %d unchecked components", len(fs), countUnchecked(inv))
	}
	return inv
}

func countUnchecked(inv *Inventory) int {
	n := 0
	for _, c := range inv.Components {
		if !c.Checked {
			n++
		}
	}
	return n
}

func mustDetect(t *testing.T, p string) Target {
	t.Helper()
	tg, err := Detect(p, "")
	if err != nil {
		t.Fatal(err)
	}
	return tg
}

// TestInventoryInvariants runs the invariants over real data dirs, every
// path into them detection accepts, and every command that reports
// coverage.
func TestInventoryInvariants(t *testing.T) {
	d := fixtures(t)
	q3 := filepath.Join(d, "Q3", "rmq40@localhost")
	vhost := filepath.Join(q3, "msg_stores", "vhosts", "628WB79CIFDYO9LJI6DKMI09L")
	t1 := filepath.Join(d, "t1", "store")
	targets := map[string]Target{
		"Q3 base":        mustDetect(t, filepath.Join(d, "Q3")),
		"Q3 node":        mustDetect(t, q3),
		"Q3 vhost":       mustDetect(t, vhost),
		"Q3 store dir":   mustDetect(t, filepath.Join(vhost, "msg_store_persistent")),
		"Q3 rdq":         mustDetect(t, filepath.Join(vhost, "msg_store_persistent", "0.rdq")),
		"3.10.8 node":    mustDetect(t, filepath.Join(d, "r310", "rmqfix@localhost")),
		"t1 store":       mustDetect(t, t1),
		"t1 commitlog":   mustDetect(t, filepath.Join(t1, "commitlog")),
		"t1 commitlog 0": mustDetect(t, filepath.Join(t1, "commitlog", "00000000000000000000")),
		"dl1 (no commitlog/)": {Store: RocketMQ, Kind: TargetRocketStore, Root: filepath.Join(d, "dl1", "store"),
			Path: filepath.Join(d, "dl1", "store")},
		"hostile rabbitmq": hostileTree(t, RabbitMQ),
		"hostile rocketmq": hostileTree(t, RocketMQ),
	}
	for name, tg := range targets {
		for _, cmd := range []string{"scan", "verify", "salvage", "truncate"} {
			t.Run(name+"/"+cmd, func(t *testing.T) { checkInvariants(t, tg, cmd) })
		}
	}
}

// hostileTree is a data dir with what a real one may also hold: stray
// files, a symlink, a FIFO, an empty file, RocksDB files in the consume
// queue dir, DLedger and compaction dirs, names with spaces.
func hostileTree(t *testing.T, store string) Target {
	t.Helper()
	root := t.TempDir()
	put := func(rel string, n int) {
		p := filepath.Join(root, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, make([]byte, n), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var files []string
	if store == RabbitMQ {
		files = []string{"msg_stores/vhosts/V/msg_store_persistent/0.rdq", "msg_stores/vhosts/V/msg_store_persistent/clean.dot",
			"msg_stores/vhosts/V/queues/Q/0.qi", "msg_stores/vhosts/V/queues/Q/.queue_name", "msg_stores/vhosts/V/.vhost",
			"msg_stores/vhosts/V/recovery.dets", "quorum/n/00000001.wal", "quorum/n/UID/00000001.segment", "quorum/n/meta.dets",
			"stream/__s_1/00000000000000000000.segment", "stream/__s_1/00000000000000000000.index", "coordination/n/00000001.wal",
			"rabbit_queue.DCD", "LATEST.LOG", "core.1234", "backup copy/old.rdq", "msg_stores/vhosts/V/notes.txt", "khepri/x"}
	} else {
		files = []string{"commitlog/00000000000000000000", "commitlog/README", "consumequeue/T/0/00000000000000000000",
			"consumequeue/CURRENT", "consumequeue/MANIFEST-000005", "consumequeue/000007.sst", "consumequeue/OPTIONS-000009",
			"index/20240101000000000", "checkpoint", "abort", "lock", "config/topics.json", "config/consumerOffset.json",
			"config/consumerOffset.json.bak", "config/timercheck", "config/timermetrics", "timerlog/00000000000000000000",
			"timerwheel", "dledger-n0/data/00000000000000000000", "dledger-n0/index/00000000000000000000",
			"dledger-n0/checkpoint", "dledger-n0/currterm", "compaction/position-checkpoint",
			"compaction/compactionLog/T/0/00000000000000000000", "heapdump.hprof", "tmp dir/x y"}
	}
	for i, f := range files {
		put(f, 3+i*7)
	}
	put("empty", 0)
	if err := os.Symlink("/etc/passwd", filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(root, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, "empty-dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	kind := TargetRabbitNode
	if store == RocketMQ {
		kind = TargetRocketStore
	}
	return Target{Store: store, Kind: kind, Root: root, Path: root}
}

// readFilesTSV reads a fixture's files.tsv ("size\t./path" per file, the
// capture's own listing).
func readFilesTSV(t *testing.T, p string) map[string]int64 {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]int64{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		size, rel, ok := strings.Cut(sc.Text(), "\t")
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(size, 10, 64)
		if err != nil {
			t.Fatalf("%s: %q", p, sc.Text())
		}
		out[strings.TrimPrefix(rel, "./")] = n
	}
	return out
}

func component(inv *Inventory, name, p string) *Component {
	for i := range inv.Components {
		if c := &inv.Components[i]; c.Name == name && c.Path == p {
			return c
		}
	}
	return nil
}

// expectUnread checks a message-holding component against bytes from an
// independent listing: unchecked with one warning while no scanner reads
// it, checked with none once one does.
func expectUnread(t *testing.T, inv *Inventory, command, name, p string, wantBytes int64, wantFiles int) {
	t.Helper()
	c := component(inv, name, p)
	if c == nil {
		t.Fatalf("no %s component at %s in %+v", name, p, inv.Components)
	}
	if c.Bytes != wantBytes || c.Files != wantFiles || !c.HoldsMessages {
		t.Fatalf("%s: %d files, %d bytes, holds messages %v; the listing has %d files, %d bytes", name, c.Files, c.Bytes, c.HoldsMessages, wantFiles, wantBytes)
	}
	var warn []Finding
	for _, f := range inv.Findings() {
		if f.Severity == Warning && f.Details["component"] == name {
			warn = append(warn, f)
		}
	}
	read := Components[name].ReadBy != "" && Reads(command, Components[name].ReadBy)
	switch {
	case !read && (c.Checked || len(warn) != 1 || !strings.Contains(warn[0].Message, fmt.Sprint(wantBytes))):
		t.Fatalf("%s is read by no scanner of %s: want unchecked and one warning naming %d bytes, got checked %v, %+v", name, command, wantBytes, c.Checked, warn)
	case read && (!c.Checked || len(warn) != 0):
		t.Fatalf("%s is read by %s under %s: want checked and no warning, got checked %v, %+v", name, Components[name].ReadBy, command, c.Checked, warn)
	}
}

// TestInventoryQ3 is the case: a 4.0.5 node with a classic queue,
// a quorum queue and a stream. quorum/ and stream/ hold messages and
// their bytes are the capture's own listing (files.tsv), DETS files
// aside (metadata).
func TestInventoryQ3(t *testing.T) {
	d := fixtures(t)
	node := filepath.Join(d, "Q3", "rmq40@localhost")
	listing := readFilesTSV(t, testutil.Testdata("rabbitmq-4.0-qq-stream", "results", "Q3", "files.tsv"))
	sum := func(prefix string) (int64, int) {
		var b int64
		n := 0
		for rel, size := range listing {
			if strings.HasPrefix(rel, prefix) && !strings.HasSuffix(rel, ".dets") {
				b += size
				n++
			}
		}
		return b, n
	}
	for _, cmd := range []string{"scan", "verify", "salvage"} {
		inv := checkInvariants(t, mustDetect(t, node), cmd)
		qb, qn := sum("quorum/")
		sb, sn := sum("stream/")
		expectUnread(t, inv, cmd, RabbitQuorum, "quorum", qb, qn)
		expectUnread(t, inv, cmd, RabbitStream, "stream", sb, sn)
		var total int64
		for _, c := range inv.Components {
			total += c.Bytes
		}
		var want int64
		for _, size := range listing {
			want += size
		}
		if total != want {
			t.Fatalf("%s: components hold %d bytes, the capture's listing %d", cmd, total, want)
		}
		for _, c := range inv.Components {
			if c.Name == RabbitMsgStore || c.Name == RabbitQueueIndex {
				if !c.Checked {
					t.Fatalf("%s: classic component %s at %s not checked", cmd, c.Name, c.Path)
				}
			}
			if c.Name == RabbitMetadata && c.Checked {
				t.Fatalf("mnesia/DETS metadata claimed checked")
			}
		}
	}
}

// TestInventoryT1 is the RocketMQ 5.3.3 timer store: timerlog/ holds the
// schedule of 198 timer messages; it is checked by the commands that run
// the timer scanner and unread (a warning) by the others.
func TestInventoryT1(t *testing.T) {
	d := fixtures(t)
	root := filepath.Join(d, "t1", "store")
	var tb int64
	n := 0
	_ = filepath.WalkDir(filepath.Join(root, "timerlog"), func(p string, e fs.DirEntry, err error) error {
		if err == nil && e.Type().IsRegular() {
			fi, _ := e.Info()
			tb += fi.Size()
			n++
		}
		return err
	})
	if n == 0 {
		t.Fatal("t1 has no timerlog files")
	}
	for _, cmd := range []string{"scan", "verify", "salvage"} {
		inv := checkInvariants(t, mustDetect(t, root), cmd)
		if Reads(cmd, ScannerRocketTimer) {
			if c := component(inv, RocketTimerLog, "timerlog"); c == nil || !c.Checked || c.Bytes != tb || c.Files != n {
				t.Fatalf("%s: timerlog not checked: %+v", cmd, c)
			}
		} else {
			expectUnread(t, inv, cmd, RocketTimerLog, "timerlog", tb, n)
		}
		if c := component(inv, RocketTimerWheel, "timerwheel"); c == nil || c.HoldsMessages {
			t.Fatalf("timerwheel: %+v", c)
		}
		if c := component(inv, RocketCommitLog, "commitlog"); c == nil || !c.Checked {
			t.Fatalf("commitlog not checked: %+v", c)
		}
	}
}

// TestInventoryEmptyRaWAL: every 3.8+ node has quorum/ and coordination/
// with a WAL holding only its 5-byte header; that holds no messages, so it
// is info, not a warning that would fail every nightly run.
func TestInventoryEmptyRaWAL(t *testing.T) {
	d := fixtures(t)
	inv := checkInvariants(t, mustDetect(t, filepath.Join(d, "r310", "rmqfix@localhost")), "verify")
	c := component(inv, RabbitQuorum, "quorum")
	if c == nil || c.HoldsMessages {
		t.Fatalf("quorum/ with a header-only WAL: %+v", c)
	}
	for _, f := range inv.Findings() {
		if f.Severity != Info {
			t.Fatalf("3.10.8 node without quorum queues or streams: %+v", f)
		}
	}
}

// TestInventoryUnlistable: a directory that cannot be listed is an
// inventory error (the run is incomplete), never silently skipped.
func TestInventoryUnlistable(t *testing.T) {
	if os.Getuid() == 0 {
		t.Skip("root lists every directory; cmd/storectl tests this as nobody")
	}
	tg := hostileTree(t, RabbitMQ)
	dir := filepath.Join(tg.Root, "stream")
	if err := os.Chmod(dir, 0); err != nil {
		t.Fatal(err)
	}
	defer os.Chmod(dir, 0o755)
	inv := TakeInventory(tg)
	if len(inv.Errors) != 1 || !strings.Contains(inv.Errors[0], path.Join("stream")) {
		t.Fatalf("errors %v", inv.Errors)
	}
}

// TestDetectNotDataFile: a file of a data dir that is not a store data
// file (a consume queue, an index file, a queue index, a timer log, a
// stream segment, an ra WAL) is not mistaken for a commitlog or .rdq: the
// error says what it is and names verify of its data dir.
func TestDetectNotDataFile(t *testing.T) {
	d := fixtures(t)
	t1 := filepath.Join(d, "t1", "store")
	q3 := filepath.Join(d, "Q3", "rmq40@localhost")
	vhost := filepath.Join(q3, "msg_stores", "vhosts", "628WB79CIFDYO9LJI6DKMI09L")
	one := func(glob string) string {
		m, _ := filepath.Glob(glob)
		if len(m) == 0 {
			t.Fatalf("no file matches %s", glob)
		}
		return m[0]
	}
	for _, c := range []struct{ file, what, root string }{
		{filepath.Join(t1, "consumequeue", "TopicA", "0", "00000000000000000000"), "consume queue", t1},
		{one(filepath.Join(t1, "index", "2*")), "index file", t1},
		{filepath.Join(t1, "timerlog", "00000000000000000000"), "timer log", t1},
		{filepath.Join(t1, "timerwheel"), "timerwheel", t1},
		{filepath.Join(d, "dl1", "store", "dledger-n0", "data", "00000000000000000000"), "DLedger entry", filepath.Join(d, "dl1", "store")},
		{one(filepath.Join(vhost, "queues", "*", "0.qi")), "queue index", vhost},
		{one(filepath.Join(vhost, "queues", "*", "0.qs")), "queue index", vhost},
		{one(filepath.Join(q3, "quorum", "*", "*.wal")), "ra (quorum)", q3},
	} {
		tg, err := Detect(c.file, "")
		if err == nil && tg.Kind != TargetRocketLogFile && tg.Kind != TargetRabbitRDQFile {
			continue // a scanner reads this kind of file on its own now
		}
		var nd *NotDataFileError
		if !errors.As(err, &nd) || !errors.Is(err, ErrNotStore) {
			t.Fatalf("%s: %v, want a NotDataFileError", c.file, err)
		}
		if !strings.Contains(nd.What, c.what) || nd.DataDir != c.root || !strings.Contains(err.Error(), "storectl verify "+c.root) {
			t.Fatalf("%s: %q (data dir %q), want %q naming verify %s", c.file, err, nd.DataDir, c.what, c.root)
		}
	}
	// Data files keep their targets.
	for _, f := range []string{filepath.Join(t1, "commitlog", "00000000000000000000"), filepath.Join(vhost, "msg_store_persistent", "0.rdq")} {
		if _, err := Detect(f, ""); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
	}
}
