package rocketmq

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"testing"

	"github.com/storectl/storectl/internal/testutil"
	rmq "github.com/storectl/storectl/pkg/format/rocketmq"
	"github.com/storectl/storectl/pkg/repair"
	scanrmq "github.com/storectl/storectl/pkg/scan/rocketmq"
)

// trOracleLine is the union of the oracle jsonl line kinds the truncate
// tests read (testdata/rocketmq/README.md, "Oracle files").
type trOracleLine struct {
	Kind         string          `json:"kind"`
	Phase        string          `json:"phase"`
	MaxPhyOffset int64           `json:"max_phy_offset"`
	Topic        string          `json:"topic"`
	QueueID      int             `json:"queue_id"`
	Entries      [][]int64       `json:"entries"`
	Files        json.RawMessage `json:"files"` // shape differs per kind
	File         string          `json:"file"`
	Pos          int64           `json:"pos"`
	TotalSize    int64           `json:"total_size"`
	EndPhyOffset int64           `json:"end_phy_offset"`
	MsgID        string          `json:"msg_id"`
	PhyOffset    int64           `json:"phy_offset"`
}

// trOracle reads every line of testdata/rocketmq/<name>.
func trOracle(t *testing.T, name string) []trOracleLine {
	t.Helper()
	f, err := os.Open(testutil.Testdata("rocketmq", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []trOracleLine
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var l trOracleLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		out = append(out, l)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// trRecovered returns the real recovery's max phy offset and its consume
// queues ("topic/qid" -> entries) after load.
func trRecovered(t *testing.T, name string) (int64, map[string][][]int64) {
	t.Helper()
	end := int64(-1)
	cqs := map[string][][]int64{}
	for _, l := range trOracle(t, name) {
		if l.Phase != "after_load" {
			continue
		}
		switch l.Kind {
		case "commitlog":
			end = l.MaxPhyOffset
		case "consume_queue":
			cqs[l.Topic+"/"+strconv.Itoa(l.QueueID)] = l.Entries
		}
	}
	if end < 0 || len(cqs) == 0 {
		t.Fatalf("%s: no after_load commitlog / consume_queue lines", name)
	}
	return end, cqs
}

// trRawCQ returns the decode oracle's raw consume queue dumps.
func trRawCQ(t *testing.T, name string) map[string][][]int64 {
	t.Helper()
	cqs := map[string][][]int64{}
	for _, l := range trOracle(t, name) {
		if l.Kind == "raw_consume_queue" {
			cqs[l.Topic+"/"+strconv.Itoa(l.QueueID)] = l.Entries
		}
	}
	return cqs
}

// trReadCQs reads every consume queue of a store the way the decode
// oracle dumps it: units [index, phy, size, tags] up to the first unit
// with size <= 0, over the files in name order.
func trReadCQs(t *testing.T, store string) map[string][][]int64 {
	t.Helper()
	out := map[string][][]int64{}
	topics, err := os.ReadDir(filepath.Join(store, "consumequeue"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tp := range topics {
		qs, err := os.ReadDir(filepath.Join(store, "consumequeue", tp.Name()))
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range qs {
			dir := filepath.Join(store, "consumequeue", tp.Name(), q.Name())
			files, err := os.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			sort.Slice(files, func(i, j int) bool { return files[i].Name() < files[j].Name() })
			var entries [][]int64
		walk:
			for _, f := range files {
				b, err := os.ReadFile(filepath.Join(dir, f.Name()))
				if err != nil {
					t.Fatal(err)
				}
				for off := 0; off+rmq.CQUnitSize <= len(b); off += rmq.CQUnitSize {
					u, _ := rmq.DecodeCQUnit(b[off:], int64(off))
					if u.Size <= 0 {
						break walk
					}
					entries = append(entries, []int64{int64(len(entries)), u.CommitLogOffset, int64(u.Size), u.TagsCode})
				}
			}
			out[tp.Name()+"/"+q.Name()] = entries
		}
	}
	return out
}

// trSameCQs compares consume queue dumps queue by queue and unit by unit;
// it returns the number of units compared.
func trSameCQs(t *testing.T, want, got map[string][][]int64) int {
	t.Helper()
	n := 0
	for q, w := range want {
		g := got[q]
		if len(g) != len(w) {
			t.Errorf("%s: %d units, want %d", q, len(g), len(w))
			continue
		}
		for i := range w {
			n++
			for j := range w[i] {
				if g[i][j] != w[i][j] {
					t.Errorf("%s unit %d: %v, want %v", q, i, g[i], w[i])
					break
				}
			}
		}
	}
	return n
}

// trStore unpacks a RocketMQ fixture and returns its store dir.
func trStore(t *testing.T, ds string) string {
	t.Helper()
	return filepath.Join(testutil.Untar(t, testutil.Testdata("rocketmq", ds+".tar.gz")), "store")
}

// trPlan plans a truncate of store and checks the plan's hygiene: every
// action has a reason and a loss note.
func trPlan(t *testing.T, store string) (*repair.Plan, *TruncateReport) {
	t.Helper()
	p, rep, err := PlanTruncate(context.Background(), scanrmq.Config{Root: store})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range p.Actions {
		if a.Reason == "" || a.Lost.Note == "" {
			t.Errorf("action %s (%s %s) lacks a reason or a loss note: %+v", a.ID, a.Op, a.Path, a)
		}
	}
	return p, rep
}

// trApply applies p with its backup beside the data dir and returns the
// backup dir.
func trApply(t *testing.T, p *repair.Plan, faults repair.Faults) (*repair.ApplyReport, string, error) {
	t.Helper()
	bdir := filepath.Join(t.TempDir(), "backup")
	rep, err := repair.Apply(context.Background(), p, repair.ApplyOptions{BackupDir: bdir, Faults: faults})
	return rep, bdir, err
}

// trSizes maps every file under dir to its size.
func trSizes(t *testing.T, dir string) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		st, err := os.Stat(p)
		if err == nil {
			rel, _ := filepath.Rel(dir, p)
			out[rel] = st.Size()
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// trTotalSize reads the TOTALSIZE field at pos of a commitlog file.
func trTotalSize(b []byte, pos int64) int64 {
	return int64(int32(binary.BigEndian.Uint32(b[pos:])))
}
