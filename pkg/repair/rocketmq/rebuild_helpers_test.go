package rocketmq

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/storectl/storectl/internal/testutil"
	"github.com/storectl/storectl/pkg/repair"
)

// rbFixture unpacks testdata/rocketmq/<name>.tar.gz and returns the store dir.
func rbFixture(t *testing.T, name string) string {
	t.Helper()
	dir := testutil.Untar(t, testutil.Testdata("rocketmq", name+".tar.gz"))
	return filepath.Join(dir, "store")
}

// rbFiles returns rel path -> content of every regular file under root/sub.
func rbFiles(t *testing.T, root, sub string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := filepath.WalkDir(filepath.Join(root, sub), func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		out[filepath.ToSlash(rel)] = b
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// rbTestPlan runs PlanRebuildIndex with the fixtures' broker geometry where
// the caller asks for it, keeping the stage, and removes the stage at the
// end of the test.
func rbTestPlan(t *testing.T, cfg RebuildConfig) (*repair.Plan, *RebuildReport) {
	t.Helper()
	cfg.KeepStage = true
	p, rep, err := PlanRebuildIndex(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rep.RemoveStage() })
	return p, rep
}

// rbApply verifies the stage and applies p with repair.Apply alone (it
// creates missing dirs) and a backup dir beside the store; it returns the
// backup dir.
func rbApply(t *testing.T, cfg RebuildConfig, p *repair.Plan, rep *RebuildReport) string {
	t.Helper()
	chk, err := VerifyStaged(context.Background(), cfg, rep)
	if err != nil {
		t.Fatal(err)
	}
	if !chk.OK() {
		t.Fatalf("staged files fail verification: %v", chk.Problems)
	}
	t.Logf("staged check: %d units, %d index entries cross-checked against the commitlog; Verify on the view: %d findings, none on CQ/index", chk.UnitsChecked, chk.EntriesChecked, chk.VerifyFindings)
	bdir := filepath.Join(t.TempDir(), "backup")
	if _, err := repair.Apply(context.Background(), p, repair.ApplyOptions{BackupDir: bdir}); err != nil {
		t.Fatal(err)
	}
	return bdir
}

// rbNoStageLeft fails if a staging dir is left beside the store.
func rbNoStageLeft(t *testing.T, store string) {
	t.Helper()
	ents, err := os.ReadDir(filepath.Dir(store))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if strings.Contains(e.Name(), "storectl-stage") {
			t.Fatalf("staging dir %s left behind", e.Name())
		}
	}
}
