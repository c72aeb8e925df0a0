package rocketmq

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/storectl/storectl/internal/testutil"
	"github.com/storectl/storectl/pkg/scan"
)

// verifyDataset unpacks a fixture and runs Verify on it, checking that
// verify changed nothing on disk.
func verifyDataset(t *testing.T, ds string, damage func(root string)) (string, *scan.Result) {
	t.Helper()
	dir := testutil.Untar(t, testutil.Testdata("rocketmq", ds+".tar.gz"))
	root := filepath.Join(dir, "store")
	if damage != nil {
		damage(root)
	}
	before := testutil.TreeHash(t, root)
	res, err := Verify(context.Background(), VerifyConfig{Config: Config{Root: root}}, scan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Incomplete {
		t.Fatalf("incomplete: %v", res.Errors)
	}
	testutil.SameTree(t, before, testutil.TreeHash(t, root))
	return root, res
}

func TestVerifyDump(t *testing.T) {
	for _, ds := range datasets {
		_, res := verifyDataset(t, ds, nil)
		for _, f := range res.Findings {
			t.Logf("%s %s %s@%d %s %s/%s %s", ds, f.Severity, f.Path, f.Offset, f.Code, f.Expected, f.Actual, f.Message)
		}
		t.Logf("%s layout %v", ds, res.Layout)
	}
}
