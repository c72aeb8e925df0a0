package repair

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"
)

// TestSnapshotRangeHashes: every range hash is the SHA-256 of exactly
// that range's bytes, with and without the whole-file hash (which a range
// covering the whole file reuses), for whole, leading, trailing and inner
// ranges.
func TestSnapshotRangeHashes(t *testing.T) {
	root := t.TempDir()
	content := make([]byte, 3<<16+5)
	for i := range content {
		content[i] = byte(i*7 + i>>8)
	}
	if err := os.WriteFile(filepath.Join(root, "f"), content, 0o644); err != nil {
		t.Fatal(err)
	}
	size := int64(len(content))
	sum := func(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }
	ranges := []Range{{0, size}, {0, size - 1}, {1, size - 1}, {100, 1000}, {0, size}}
	for _, skip := range []bool{false, true} {
		st, err := SnapshotWith(root, "f", SnapshotOptions{SkipWholeFile: skip}, ranges...)
		if err != nil {
			t.Fatal(err)
		}
		if want := map[bool]string{false: sum(content), true: ""}[skip]; st.SHA256 != want {
			t.Errorf("skip %v: whole sha256 %q, want %q", skip, st.SHA256, want)
		}
		if len(st.Ranges) != len(ranges) {
			t.Fatalf("skip %v: %d range hashes, want %d", skip, len(st.Ranges), len(ranges))
		}
		for i, r := range ranges {
			got := st.Ranges[i]
			if got.Offset != r.Offset || got.Length != r.Length || got.SHA256 != sum(content[r.Offset:r.End()]) {
				t.Errorf("skip %v: range %d+%d: got %+v, want sha256 %s", skip, r.Offset, r.Length, got, sum(content[r.Offset:r.End()]))
			}
		}
	}
}
