package rabbitmq

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	gen "github.com/storectl/storectl/internal/gen/rabbitmq"
	"github.com/storectl/storectl/internal/testutil"
	"github.com/storectl/storectl/pkg/repair"
	"github.com/storectl/storectl/pkg/scan"
	rscan "github.com/storectl/storectl/pkg/scan/rabbitmq"
)

// oracleFile is a file for the 3.10 scanner oracle: the bytes before and
// after hardening.
type oracleFile struct {
	name          string
	before, after []byte
	real          map[int64]bool // offsets of the corpus records
	// wantAll: generation 1 was in scope and nothing was left unfixed, so
	// the real 3.10 scanner must find every record after hardening.
	wantAll bool
}

// TestHardenCorpus: on every file of the misread corpus, for a 4.0.2
// broker and for "every version", the dry run changes nothing; the plan
// rewrites only gap bytes and names the victims each hole protects;
// after --apply the generation-2 scanner written from the spec
// (gen.Gen2Spec) finds every real record at its offset, every record's bytes
// are unchanged, the scan finds no misread that bites the version, and
// the real 3.10 scanner (rdq_oracle.escript) finds every record it found
// before; undo restores the tree byte for byte.
func TestHardenCorpus(t *testing.T) {
	var oracle []oracleFile
	holes, dummies := 0, 0
	fills := map[string]int{}
	for _, ver := range []string{"4.0.2", ""} {
		for _, k := range gen.MisreadCorpus(t, testutil.Testdata()) {
			name := k.Name + "@" + ver
			root := t.TempDir()
			vdir, at := gen.WriteCorpusNode(t, root, k.Parts)
			rdq := filepath.Join(vdir, "msg_store_persistent", "0.rdq")
			orig := hdRead(t, rdq)
			before := testutil.TreeHash(t, root)
			p, rep, err := PlanHarden(context.Background(), rscan.Config{Root: root, VHostDirs: []string{vdir}, BrokerVersion: ver})
			if err != nil {
				t.Fatal(err)
			}
			testutil.SameTree(t, before, testutil.TreeHash(t, root))
			protected := map[string]bool{}
			unfixed := map[string]bool{}
			for _, u := range rep.Unfixed {
				unfixed[u.Code+"@"+hdItoa(u.Offset)] = true
			}
			for _, h := range rep.Holes {
				// Only generation 1 (in scope with no version) cannot be
				// helped, and only in a gap too short for any frame.
				if h.Fill == FillNone && (ver != "" || h.Length >= MinSkipFrame || !unfixed[rscan.CodeGen1Stop+"@"+hdItoa(h.Offset)]) {
					t.Errorf("%s: hole %+v left unhardened (unfixed %v)", name, h, rep.Unfixed)
				}
				fills[h.Fill]++
				if h.ProtectsCount != len(h.all) || len(h.Protects) != min(len(h.all), rscan.InlineVictims) {
					t.Errorf("%s: hole at %d: protects %d named, count %d, %d in all", name, h.Offset, len(h.Protects), h.ProtectsCount, len(h.all))
				}
				for _, id := range h.all {
					protected[id] = true
				}
			}
			for off, r := range at {
				if r.Victim && !protected[hex.EncodeToString(r.Frame[8:24])+"@"+hdItoa(off)] {
					t.Errorf("%s: no hole protects the victim at %d (%+v)", name, off, rep.Holes)
				}
				for _, a := range p.Actions {
					if a.Offset < off+int64(len(r.Frame)) && off < a.Offset+a.Length {
						t.Errorf("%s: action %s [%d,+%d) overlaps the record at %d", name, a.ID, a.Offset, a.Length, off)
					}
				}
			}
			if (k.Victims == 0) != (len(p.Actions) == 0) && ver != "" {
				t.Errorf("%s: %d victims but %d actions", name, k.Victims, len(p.Actions))
			}
			if len(p.Actions) == 0 {
				continue
			}
			bdir := filepath.Join(t.TempDir(), "backup")
			if _, err := repair.Apply(context.Background(), p, repair.ApplyOptions{BackupDir: bdir}); err != nil {
				t.Fatal(err)
			}
			after := hdRead(t, rdq)
			holes += len(rep.Holes)
			for _, h := range rep.Holes {
				if h.Fill == FillDummy {
					dummies++
				}
			}
			if len(after) != len(orig) {
				t.Fatalf("%s: size %d -> %d", name, len(orig), len(after))
			}
			spec, err := gen.Gen2Spec(after)
			if err != nil {
				t.Fatal(err)
			}
			found := map[int64]int64{}
			for _, r := range spec {
				found[r.Offset] = r.Total
			}
			for off, r := range at {
				if !bytes.Equal(after[off:off+int64(len(r.Frame))], r.Frame) {
					t.Errorf("%s: record at %d changed", name, off)
				}
				if found[off] != int64(len(r.Frame)) {
					t.Errorf("%s: the spec generation-2 scanner misses the record at %d after harden", name, off)
				}
			}
			v, err := rscan.ScanVHost(context.Background(), root, vdir, rscan.VHostOptions{BrokerVersion: ver})
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range v.Findings {
				if hazardCodes[f.Code] && f.Severity != scan.Info && !unfixed[f.Code+"@"+hdItoa(f.Offset)] {
					t.Errorf("%s: after harden, not in the report's unfixed list: %s", name, f.Message)
				}
			}
			real := map[int64]bool{}
			for off := range at {
				real[off] = true
			}
			oracle = append(oracle, oracleFile{strings.NewReplacer("@", "_").Replace(name), orig, after, real, ver == "" && len(rep.Unfixed) == 0})
			if _, err := repair.Undo(context.Background(), bdir, repair.UndoOptions{Apply: true}); err != nil {
				t.Fatal(err)
			}
			testutil.SameTree(t, before, testutil.TreeHash(t, root))
		}
	}
	if holes == 0 || dummies == 0 || fills[FillSkip] == 0 || fills[FillFF] == 0 {
		t.Fatalf("%d holes hardened, %d with dummy records; fills %v", holes, dummies, fills)
	}
	t.Logf("%d holes hardened (%d dummy records), %d files; fills %v", holes, dummies, len(oracle), fills)
	checkOracle310(t, oracle)
}

// hazardCodes are the scanner-hazard findings harden removes.
var hazardCodes = map[string]bool{rscan.CodeZeroHoleMisread: true, rscan.CodeOffByNine: true,
	rscan.CodeGen1Stop: true, rscan.CodeScannerCrash: true}

func hdItoa(v int64) string { return strconv.FormatInt(v, 10) }

// oracleLine is one record of rdq_oracle.escript.
type oracleLine struct {
	MsgID     string `json:"msg_id"`
	Offset    int64  `json:"offset"`
	TotalSize int64  `json:"total_size"`
}

// checkOracle310 runs the installed RabbitMQ's rabbit_msg_file:scan/4
// (3.10 on this machine and in CI) on every file before and after
// hardening, in one VM: it must find every record it found before.
func checkOracle310(t *testing.T, files []oracleFile) {
	t.Helper()
	script := testutil.Testdata("rabbitmq-oracle", "rdq_oracle.escript")
	testutil.RequireEscript(t)
	testutil.RequireRabbitMQ(t)
	dir := filepath.Join(t.TempDir(), "x")
	out := filepath.Join(t.TempDir(), "out")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	args := []string{script, "--out-dir", out}
	for _, f := range files {
		for tag, b := range map[string][]byte{"before": f.before, "after": f.after} {
			p := filepath.Join(dir, f.name+"-"+tag+".rdq")
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
			args = append(args, p)
		}
	}
	cmd := exec.Command("escript", args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("oracle: %v\n%s", err, stderr.String())
	}
	read := func(name string) map[string]oracleLine {
		f, err := os.Open(filepath.Join(out, "x-"+name+".rdq.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		m := map[string]oracleLine{}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			var l oracleLine
			if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
				t.Fatal(err)
			}
			m[l.MsgID+"@"+hdItoa(l.Offset)] = l
		}
		return m
	}
	kept, gained, bogus, all := 0, 0, 0, 0
	for _, f := range files {
		b, a := read(f.name+"-before"), read(f.name+"-after")
		for k, l := range b {
			if !f.real[l.Offset] {
				bogus++ // a misread frame of the original, not a record
				continue
			}
			if al, ok := a[k]; !ok || al.TotalSize != l.TotalSize {
				t.Errorf("%s: the 3.10 scanner found %s before harden but not after", f.name, k)
			}
			kept++
		}
		gained += len(a) - len(b)
		if f.wantAll {
			at := map[int64]bool{}
			for _, l := range a {
				at[l.Offset] = true
			}
			for off := range f.real {
				if !at[off] {
					t.Errorf("%s: generation 1 in scope, nothing unfixed, yet the 3.10 scanner misses the record at %d after harden", f.name, off)
				}
				all++
			}
		}
	}
	if kept == 0 {
		t.Fatal("the 3.10 scanner found no record in any file")
	}
	if all == 0 {
		t.Error("no file where the 3.10 scanner must find every record after harden")
	}
	t.Logf("3.10 scanner oracle: %d real records found before are found after; %d bogus frames it took before ignored; %d more frames after; %d records of fully hardened files all found", kept, bogus, gained, all)
}
