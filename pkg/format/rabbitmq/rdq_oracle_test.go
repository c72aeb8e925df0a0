package rabbitmq

import (
	"encoding/hex"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/storectl/storectl/internal/testutil"
)

// rdqOracleRecord is one line of a scanner oracle (scan/*.rdq.jsonl).
type rdqOracleRecord struct {
	MsgID     string `json:"msg_id"`
	Offset    int64  `json:"offset"`
	TotalSize int64  `json:"total_size"`
}

func rdqFromScan(recs []ScanRecord) []rdqOracleRecord {
	out := make([]rdqOracleRecord, 0, len(recs))
	for _, r := range recs {
		out = append(out, rdqOracleRecord{hex.EncodeToString(r.MsgID[:]), r.Offset, r.TotalSize})
	}
	return out
}

// rdqCompare fails unless got equals the oracle record for record; it
// returns the number of records compared.
func rdqCompare(t *testing.T, name string, got, want []rdqOracleRecord) int {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d records, oracle has %d", name, len(got), len(want))
		return 0
	}
	for i := range got {
		if got[i] != want[i] {
			t.Errorf("%s: record %d = %+v, oracle %+v", name, i, got[i], want[i])
		}
	}
	return len(got)
}

// rdqStoreFiles lists the .rdq files of one store dir of an unpacked
// dataset, sorted numerically.
func rdqStoreFiles(t testing.TB, storeDir string) []string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(storeDir, "*.rdq"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no .rdq in %s: %v", storeDir, err)
	}
	num := func(p string) int {
		n, _ := strconv.Atoi(strings.TrimSuffix(filepath.Base(p), ".rdq"))
		return n
	}
	sort.Slice(paths, func(i, j int) bool { return num(paths[i]) < num(paths[j]) })
	return paths
}

// rdqVhostDir is the vhost "/" directory inside an unpacked dataset.
func rdqVhostDir(root, node string) string {
	return filepath.Join(root, node, "msg_stores", "vhosts", "628WB79CIFDYO9LJI6DKMI09L")
}

// rdqDataset unpacks a fixture tarball into a per-test temp dir.
func rdqDataset(t *testing.T, elem ...string) string {
	t.Helper()
	return testutil.Untar(t, testutil.Testdata(elem...))
}
