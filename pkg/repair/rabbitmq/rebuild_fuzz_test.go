package rabbitmq

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/storectl/storectl/internal/testutil"
	rfmt "github.com/storectl/storectl/pkg/format/rabbitmq"
	rscan "github.com/storectl/storectl/pkg/scan/rabbitmq"
)

// FuzzRebuildExisting feeds arbitrary bytes as the saved
// msg_store_index.ets and file_summary.ets through everything the rebuild
// does with them: decoding, style and atom detection, ordering, the set
// comparison and re-encoding with the saved info item. Nothing may panic;
// an undecodable dump must be reported unreadable, never equal. Seeds: the
// brokers' own dumps (from the fixtures' tarballs) and truncations.
func FuzzRebuildExisting(f *testing.F) {
	for _, fx := range rbFixtures {
		dir := testutil.Untar(f, testutil.Testdata(fx, "datasets", "clean-shutdown.tar.gz"))
		m, _ := filepath.Glob(filepath.Join(dir, "*", "msg_stores", "vhosts", "*", rbStoreDir))
		for _, store := range m {
			idx, err1 := os.ReadFile(filepath.Join(store, rbIndexFile))
			sum, err2 := os.ReadFile(filepath.Join(store, rbSummaryFile))
			if err1 != nil || err2 != nil {
				f.Fatal(err1, err2)
			}
			f.Add(idx, sum)
			f.Add(idx[:len(idx)/2], sum[:len(sum)-1])
		}
	}
	f.Add([]byte{}, []byte{1, 2, 3, 4, 0x63, 0x58, 0x4D, 0x0B})
	locs := []rfmt.MsgLocation{{MsgID: [16]byte{1}, RefCount: 1, File: 3, Offset: 0, TotalSize: 100},
		{MsgID: [16]byte{2}, RefCount: 0, File: 3, Offset: 100, TotalSize: 50}}
	sums := []rfmt.FileSummary{{File: 3, ValidTotalSize: 100, FileSize: 150}}
	v := &rscan.VHostScan{Layout: map[string]any{"terms": map[string]int{"mc": 1}}}
	f.Fuzz(func(t *testing.T, idx, sum []byte) {
		exIdx, exSum := rbParseExisting(idx, rbIndexFile), rbParseExisting(sum, rbSummaryFile)
		oldLocs, oldSums := rbTyped(&exIdx, &exSum)
		rbLegacyStyle(exSum, oldSums, "", v)
		rbAtoms(exIdx, exSum)
		rbNode("/x/rabbit@h", exIdx, exSum)
		ordered := rbOrderLike(locs, oldLocs)
		var ti, ts rbTable
		rbCompareIndex(&ti, exIdx, oldLocs, ordered)
		rbCompareSummary(&ts, exSum, oldSums, sums)
		for _, c := range []struct {
			ex  rbExisting
			tab rbTable
		}{{exIdx, ti}, {exSum, ts}} {
			if c.ex.err != nil && c.tab.existing != "unreadable" {
				t.Fatalf("undecodable dump (%v) reported %q", c.ex.err, c.tab.existing)
			}
			if c.ex.file != nil && c.ex.err == nil {
				o := rfmt.ETSEncodeOptions{Info: c.ex.file.Info}
				rfmt.EncodeMsgStoreIndex(ordered, o)
				rfmt.EncodeFileSummary(sums, o)
			}
		}
	})
}
