package rabbitmq

// TestHardenCorpus runs on the misread corpus of internal/gen/rabbitmq
// (gen.MisreadCorpus) and checks with its spec generation-2 scanner
// (gen.Gen2Spec).

import (
	"os"
	"testing"
)

func hdRead(t testing.TB, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
