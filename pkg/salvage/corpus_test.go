package salvage

// The salvage tests run on the misread corpus of internal/gen/rabbitmq
// and check --select at-risk with its spec generation-2 scanner
// (gen.Gen2Spec).

import (
	"os"
	"slices"
	"testing"

	gen "github.com/storectl/storectl/internal/gen/rabbitmq"
	"github.com/storectl/storectl/internal/testutil"
)

const vhostHash = gen.VHostHash

// corpus is gen.MisreadCorpus without gen.CaseSkipFrame (a harden case).
func corpus(t *testing.T) []gen.CorpusCase {
	return slices.DeleteFunc(gen.MisreadCorpus(t, testutil.Testdata()),
		func(k gen.CorpusCase) bool { return k.Name == gen.CaseSkipFrame })
}

func mustRead(t testing.TB, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
