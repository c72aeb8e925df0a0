package rocketmq

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/storectl/storectl/internal/testutil"
)

// TestUnreadCheckpointAbnormalStart: after an unclean shutdown the file
// recoverAbnormally starts at depends on the checkpoint's min timestamp.
// With the checkpoint a directory (unreadable), a stop before the last
// file gives only a lower bound (the broker may start after it), and an
// intact store's end, in the last file, stays known (every start walks
// to it).
func TestUnreadCheckpointAbnormalStart(t *testing.T) {
	for _, c := range []struct {
		name  string
		early bool // zero file 1 from a record in its middle
	}{{"intact", false}, {"stop in file 1", true}} {
		t.Run(c.name, func(t *testing.T) {
			root := filepath.Join(testutil.Untar(t, testutil.Testdata("rocketmq", "rmq533-b-abnormal.tar.gz")), "store")
			if c.early {
				zeroFrom(t, root, 262144, midRecord(t, "rmq533-b-abnormal", 262144))
			}
			cp := filepath.Join(root, "checkpoint")
			if err := os.Remove(cp); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(cp, 0o755); err != nil {
				t.Fatal(err)
			}
			res := scanRoot(t, root, 2)
			u, unknown := res.Extra[ExtraRecoveryEndUnknown].(map[string]any)
			switch {
			case c.early && (!unknown || u["waits_on"] != "checkpoint" || res.RecoveryEnd != nil):
				t.Fatalf("stop before the last file: recovery end %s, unknown %v", fmtEnd(res.RecoveryEnd), u)
			case !c.early && (unknown || res.RecoveryEnd == nil):
				t.Fatalf("intact: recovery end %s, unknown %v", fmtEnd(res.RecoveryEnd), u)
			}
			for _, f := range res.Findings {
				if f.Code == CodeBeyondRecovery {
					t.Errorf("%s at %s with the start unknown", f.Code, f.Path)
				}
			}
		})
	}
}
