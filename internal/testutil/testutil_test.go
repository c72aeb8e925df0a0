package testutil

import (
	"os"
	"path/filepath"
	"testing"
)

func TestUntarFixture(t *testing.T) {
	dir := Untar(t, Testdata("rocketmq", "rmq533-a-clean.tar.gz"))
	if _, err := os.Stat(filepath.Join(dir, "store", "commitlog")); err != nil {
		t.Fatalf("no commitlog dir after untar: %v", err)
	}
	h := TreeHash(t, dir)
	if len(h) == 0 {
		t.Fatal("empty tree")
	}
	SameTree(t, h, TreeHash(t, dir))
}
