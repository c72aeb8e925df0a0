package rabbitmq

import (
	"context"
	"encoding/hex"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/storectl/storectl/internal/testutil"
	rfmt "github.com/storectl/storectl/pkg/format/rabbitmq"
	"github.com/storectl/storectl/pkg/scan"
)

// oracleRec is one line of a scanner oracle (scan/*.rdq.jsonl).
type oracleRec struct {
	MsgID     string `json:"msg_id"`
	Offset    int64  `json:"offset"`
	TotalSize int64  `json:"total_size"`
}

const vhostHash = "628WB79CIFDYO9LJI6DKMI09L"

// scanKeep runs ScanVHost (the one streaming scan) and keeps a copy of
// each file its per-file callback is handed, records, gaps and hazards as
// the scan held them: v.Files are those copies. o.EachFile, if set, is
// still called.
func scanKeep(t testing.TB, root, dir string, o VHostOptions) *VHostScan {
	t.Helper()
	var kept []*FileScan
	each := o.EachFile
	o.EachFile = func(v *VHostScan, f *FileScan) error {
		c := *f
		c.Hazards = slices.Clone(f.Hazards) // release moves long victim lists out of f's
		kept = append(kept, &c)
		if each != nil {
			return each(v, f)
		}
		return nil
	}
	v, err := ScanVHost(context.Background(), root, dir, o)
	if err != nil {
		t.Fatal(err)
	}
	if len(kept) != len(v.Files) {
		t.Fatalf("%d files handed over, %d scanned", len(kept), len(v.Files))
	}
	v.Files = kept
	return v
}

// scanned is a ScanVHost result with the emitted records.
type scanned struct {
	v    *VHostScan
	recs []RecordJSON
	root string
}

func scanDataset(t *testing.T, kind, name, node string) scanned {
	t.Helper()
	root := testutil.Untar(t, testutil.Testdata(kind, "datasets", name+".tar.gz"))
	return scanVHostDir(t, root, filepath.Join(root, node, "msg_stores", "vhosts", vhostHash), "")
}

func scanVHostDir(t *testing.T, root, dir, ver string) scanned {
	t.Helper()
	before := testutil.TreeHash(t, dir)
	var recs []RecordJSON
	v := scanKeep(t, root, dir, VHostOptions{BrokerVersion: ver,
		Options: scan.Options{Records: func(r any) error { recs = append(recs, r.(RecordJSON)); return nil }}})
	testutil.SameTree(t, before, testutil.TreeHash(t, dir))
	return scanned{v, recs, root}
}

func (s scanned) file(num int64) *FileScan {
	for _, f := range s.v.Files {
		if f.Number == num && !f.Transient {
			return f
		}
	}
	return nil
}

func codes(fs []scan.Finding, code string) []scan.Finding {
	var out []scan.Finding
	for _, f := range fs {
		if f.Code == code {
			out = append(out, f)
		}
	}
	return out
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }

func readFile(t testing.TB, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustHex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// editIndex rewrites the msg_store_index.ets at path with edit's entries,
// keeping the dump's own info tuple, and returns the bytes written. edit
// gets the current entries.
func editIndex(t *testing.T, path string, edit func([]rfmt.MsgLocation) []rfmt.MsgLocation) []byte {
	t.Helper()
	return editDump(t, path, rfmt.ReadMsgStoreIndex, rfmt.EncodeMsgStoreIndex, edit)
}

// editSummary is editIndex for file_summary.ets.
func editSummary(t *testing.T, path string, edit func([]rfmt.FileSummary) []rfmt.FileSummary) []byte {
	t.Helper()
	return editDump(t, path, rfmt.ReadFileSummary, rfmt.EncodeFileSummary, edit)
}

// editDump reads the dump at path with read, re-encodes edit's objects
// with encode and the dump's own info tuple, writes and returns them.
func editDump[T any](t *testing.T, path string, read func([]byte) ([]T, error),
	encode func([]T, rfmt.ETSEncodeOptions) ([]byte, error), edit func([]T) []T) []byte {
	t.Helper()
	b := readFile(t, path)
	ets, err := rfmt.ReadETSFile(b)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := read(b)
	if err != nil {
		t.Fatal(err)
	}
	enc, err := encode(edit(objs), rfmt.ETSEncodeOptions{Info: ets.Info})
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, path, enc)
	return enc
}
