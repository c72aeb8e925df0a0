package testutil

import (
	"crypto/sha256"
	"encoding/hex"
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

// TestReadTarMatchesUntar: the in-memory read holds exactly the files
// Untar writes, with the same bytes.
func TestReadTarMatchesUntar(t *testing.T) {
	tb := Testdata("rocketmq", "rmq533-a-clean.tar.gz")
	files := ReadTar(t, tb)
	disk := TreeHash(t, Untar(t, tb))
	if len(files) != len(disk) || len(files) == 0 {
		t.Fatalf("ReadTar has %d files, Untar %d", len(files), len(disk))
	}
	mem := map[string]string{}
	for name, b := range files {
		sum := sha256.Sum256(b)
		mem[name] = hex.EncodeToString(sum[:])
	}
	SameTree(t, disk, mem)
}
