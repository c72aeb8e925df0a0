package rocketmq

import (
	"context"
	"testing"

	genrmq "github.com/storectl/storectl/internal/gen/rocketmq"
	"github.com/storectl/storectl/pkg/scan"
)

// BenchmarkVerifyPropCRC verifies (one job) a generated 128 MiB store whose
// records all carry the 5.2+ __CRC32# property: a whole-record CRC each.
func BenchmarkVerifyPropCRC(b *testing.B) {
	root := b.TempDir()
	if _, err := genrmq.Generate(root, genrmq.Config{MappedFileSize: 64 << 20, TotalBytes: 128 << 20, Seed: 3, PropCRC: true}); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(128 << 20)
	b.ResetTimer()
	for range b.N {
		if _, err := Verify(context.Background(), VerifyConfig{Config: Config{Root: root}}, scan.Options{Jobs: 1}); err != nil {
			b.Fatal(err)
		}
	}
}
