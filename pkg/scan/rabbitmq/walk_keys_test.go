package rabbitmq

import (
	"math/rand/v2"
	"os"
	"testing"

	gen "github.com/storectl/storectl/internal/gen/rabbitmq"
)

// checkWalkKeys fails t unless walkKeys finds the records walk makes: the
// same ids at the same offsets, in file order, numbered from 0.
func checkWalkKeys(t *testing.T, b []byte) int {
	t.Helper()
	fs := &FileScan{Number: -1}
	walk(b, fs, nil)
	keys := newFileKeys()
	defer keys.free()
	walkKeys(b, 7, keys, nil)
	if len(keys.s) != len(fs.Records) {
		t.Fatalf("walkKeys: %d keys, walk %d records", len(keys.s), len(fs.Records))
	}
	for k, r := range fs.Records {
		want := recKey{id: r.MsgID, file: 7, k: int32(k), off: uint32(r.Offset)}
		if keys.s[k] != want {
			t.Fatalf("key %d: %+v, want %+v", k, keys.s[k], want)
		}
	}
	return len(keys.s)
}

// TestWalkKeys: on generated files with zero holes, unreferenced records
// and random damage (stale frames, broken markers), walkKeys and walk
// agree.
func TestWalkKeys(t *testing.T) {
	dir := t.TempDir()
	sum, err := gen.Generate(dir, gen.Config{Seed: 11, Kind: gen.BasicMessage, TotalBytes: 2 << 20, FileLimit: 256 << 10,
		HoleEvery: 3, HoleMax: 32, UnrefEvery: 4})
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(7, 8))
	total := 0
	for _, p := range sum.Files {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		total += checkWalkKeys(t, b)
		for range 20 {
			d := append([]byte(nil), b...)
			for range r.IntN(50) {
				d[r.IntN(len(d))] = []byte{0, 0xFF, byte(r.Uint32())}[r.IntN(3)]
			}
			checkWalkKeys(t, d)
		}
	}
	if total == 0 {
		t.Fatal("vacuous: no records")
	}
}

// FuzzWalkKeys: for any bytes walkKeys and walk find the same records.
func FuzzWalkKeys(f *testing.F) {
	addRDQSeeds(f)
	f.Fuzz(func(t *testing.T, b []byte) { checkWalkKeys(t, b) })
}
