package rocketmq

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/storectl/storectl/internal/testutil"
	"github.com/storectl/storectl/pkg/scan"
)

// fuzzVerify runs Verify on an unpacked clean fixture with the file rel
// replaced by the fuzz input: it must neither panic nor fail to look
// (damage is data, reported as findings), and give the same result with
// the consume queue claims as with lookups only.
func fuzzVerify(f *testing.F, rel string) {
	root := filepath.Join(testutil.Untar(f, testutil.Testdata("rocketmq", "rmq533-a-clean.tar.gz")), "store")
	p := filepath.Join(root, filepath.FromSlash(rel))
	orig, err := os.ReadFile(p)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(orig)
	f.Add(orig[:len(orig)/2])
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		res, err := Verify(context.Background(), VerifyConfig{Config: Config{Root: root}}, scan.Options{})
		if err != nil || res.Incomplete {
			t.Fatalf("verify could not look: %v %v", err, res.Errors)
		}
		// The consume queue units claimed in the walk give what the
		// lookups give (verify_cqclaim.go).
		cqClaimsOff = true
		lookups, err := Verify(context.Background(), VerifyConfig{Config: Config{Root: root}}, scan.Options{})
		cqClaimsOff = false
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(res.Findings, lookups.Findings) || !reflect.DeepEqual(res.Errors, lookups.Errors) ||
			!reflect.DeepEqual(res.Layout, lookups.Layout) {
			t.Fatalf("claims and lookups differ; first finding difference: %s", firstDiff(lookups.Findings, res.Findings))
		}
	})
}

// FuzzVerifyCQFile feeds arbitrary bytes as one consume queue file.
func FuzzVerifyCQFile(f *testing.F) { fuzzVerify(f, "consumequeue/TopicA/0/00000000000000001000") }

// FuzzVerifyIndexFile feeds arbitrary bytes as one index file.
func FuzzVerifyIndexFile(f *testing.F) {
	root := filepath.Join(testutil.Untar(f, testutil.Testdata("rocketmq", "rmq533-a-clean.tar.gz")), "store")
	ents, err := os.ReadDir(filepath.Join(root, "index"))
	if err != nil || len(ents) == 0 {
		f.Fatal(err)
	}
	fuzzVerify(f, "index/"+ents[len(ents)-1].Name())
}
